"""Numeric columns for wide metadata ranges.

A range over a metadata path reads the posting lists of every distinct value inside it: cheap
for ``{"step": {"$gte": 10, "$lte": 20}}``, but ``{"bucket": {"$lt": 500}}`` over 1,000
distinct values joins 500 lists. For such ranges the catalog keeps, per path, a float64 column
of the path's numeric scalar per row (NaN where the row has none), and the range becomes one
comparison per bound over the column. It holds exactly what the ``"v"`` postings hold: it is
built from them, then extended from the metadata of rows added since (a row's metadata never
changes once it has a row). A path holding an integer that float64 cannot represent exactly
(past 2**53) has no column: its ranges keep using the postings.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

if TYPE_CHECKING:
    from .catalog import Catalog

__all__ = ["EXACT_FLOAT", "exact_in_float", "num_column"]

EXACT_FLOAT = 2**53
REBUILD_AFTER = 4096  # more new rows than this: rebuild from the postings, not row by row


def exact_in_float(value: Any) -> bool:
    """Whether ``value`` (a number, not a bool) compares the same as a float64."""
    return not isinstance(value, int) or -EXACT_FLOAT <= value <= EXACT_FLOAT


def num_column(cat: Catalog, path: tuple[str, ...]) -> np.ndarray | None:
    """The column of ``path`` covering at least the catalog's first ``cat.n`` rows (read
    ``[:n]`` for the ``n`` the query snapshotted before calling), or None if the path holds a
    number float64 cannot represent exactly."""
    n = cat.n
    cached = cat.num_cols.get(path)
    if cached is not None and cached[1] is None:
        return None
    if cached is None or n - cached[0] > REBUILD_AFTER:
        built = _from_postings(cat, path)
        cat.num_cols[path] = built
        if built[1] is None:
            return None
        cached = built
        if cached[0] >= n:
            return cached[1]
    done, col = cached
    assert col is not None
    if done >= n:
        return col
    if col.shape[0] < n:
        grown = np.full(max(n, int(col.shape[0] * 1.5)), np.nan)
        grown[:done] = col[:done]
        col = grown
    for r in range(done, n):
        value = _scalar_at(cat.recs[r].meta_json, path)
        if value is not None and not exact_in_float(value):
            cat.num_cols[path] = (n, None)
            return None
        col[r] = np.nan if value is None else value
    cat.num_cols[path] = (n, col)
    return col


def _from_postings(cat: Catalog, path: tuple[str, ...]) -> tuple[int, np.ndarray | None]:
    """The column of the rows published now, from the path's postings, read while no writer
    is changing the catalog (its seqlock epoch even and unchanged across the read)."""
    while True:
        epoch = cat.epoch
        if epoch & 1:
            time.sleep(0)
            continue
        n = cat.n
        col = np.full(max(n, 1), np.nan)
        bucket = cat.postings(path, "v")
        bound = np.int32(min(n, 2**31 - 1))
        exact = True
        for key, rows in list(bucket.items()):
            if key[0] != "num":
                continue
            if not exact_in_float(key[1]):
                exact = False
                break
            idx = np.frombuffer(rows, dtype=np.int32)
            col[idx[: int(idx.searchsorted(bound))]] = key[1]
        if cat.epoch == epoch:
            return (n, col if exact else None)


def _scalar_at(meta_json: str, path: tuple[str, ...]) -> int | float | None:
    """The number at ``path`` in a row's metadata when it is a scalar number (not a bool, not
    inside an array), as the ``"v"`` postings see it; else None."""
    if meta_json == "{}":
        return None
    node: Any = orjson.loads(meta_json)
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return node
