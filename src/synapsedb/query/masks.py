"""Vectorized filter evaluation: a parsed filter becomes a boolean mask over catalog rows.

Same semantics as :func:`synapsedb.query.filters.matches` (the property tests hold them equal),
computed from columns and metadata postings instead of one record at a time.

Positions (``$near``, ``$within``) have no column: the array-element postings of the path give
the rows with, in every dimension, some element inside the filter's bounding box (a superset),
and only those rows' metadata is read to check the exact condition.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import orjson

from ..index.catalog import Catalog, Codes, meta_key
from ..index.numcol import exact_in_float, num_column
from .filters import And, Box, Cond, Near, Node, Not, Or, compare, lookup, value_kind

__all__ = ["filter_mask"]

IdRows = Callable[[str], Iterable[int]]
_RANGE = ("$gt", "$gte", "$lt", "$lte")
_COMPARE = {"$gt": np.greater, "$gte": np.greater_equal, "$lt": np.less, "$lte": np.less_equal}
WIDE = 32  # a range over more distinct values than this compares a numeric column


def filter_mask(node: Node, cat: Catalog, n: int, id_rows: IdRows) -> np.ndarray:
    if isinstance(node, And):
        return _and(node, cat, n, id_rows)
    if isinstance(node, Or):
        mask = filter_mask(node.parts[0], cat, n, id_rows)
        for part in node.parts[1:]:
            mask |= filter_mask(part, cat, n, id_rows)
        return mask
    if isinstance(node, Not):
        return ~filter_mask(node.part, cat, n, id_rows)
    if isinstance(node.field, tuple):
        return _meta(node, cat, n)
    return _builtin(node, cat, n, id_rows)


def _is_meta_range(node: Node) -> bool:
    return (
        isinstance(node, Cond)
        and isinstance(node.field, tuple)
        and node.op in _RANGE
        and not isinstance(node.value, Near | Box)
    )


def _and(node: And, cat: Catalog, n: int, id_rows: IdRows) -> np.ndarray:
    """The parts' masks ANDed; range conditions on one metadata path become one interval of
    that path's ordered values (``{"step": {"$gte": 10, "$lte": 20}}`` reads 11 values)."""
    ranges: dict[tuple[str, ...], list[Cond]] = {}
    others: list[Node] = []
    for part in node.parts:
        if _is_meta_range(part):
            assert isinstance(part, Cond) and isinstance(part.field, tuple)
            ranges.setdefault(part.field, []).append(part)
        else:
            others.append(part)
    masks = (
        *(_meta_interval(conds, cat, n) for conds in ranges.values()),
        *(filter_mask(part, cat, n, id_rows) for part in others),
    )
    mask = masks[0]
    for more in masks[1:]:
        mask &= more
    return mask


def _meta_interval(conds: list[Cond], cat: Catalog, n: int) -> np.ndarray:
    """Rows whose scalar value at the conditions' path satisfies every one of them (each
    ``$gt $gte $lt $lte``; comparisons hold between numbers or between strings only)."""
    assert isinstance(conds[0].field, tuple)
    path = conds[0].field[1:]
    kinds = {value_kind(c.value) for c in conds}
    kind = kinds.pop()
    if kinds or kind not in ("num", "str"):
        return np.zeros(n, bool)
    values, keys = cat.ordered_keys(path, "v", kind)
    lo, hi = 0, len(values)
    for c in conds:
        if c.op == "$gt":
            lo = max(lo, bisect_right(values, c.value))
        elif c.op == "$gte":
            lo = max(lo, bisect_left(values, c.value))
        elif c.op == "$lt":
            hi = min(hi, bisect_left(values, c.value))
        else:  # $lte
            hi = min(hi, bisect_right(values, c.value))
    if lo >= hi:
        return np.zeros(n, bool)
    if hi - lo > WIDE and kind == "num" and all(exact_in_float(c.value) for c in conds):
        col = num_column(cat, path)
        if col is not None:  # one comparison per bound instead of hi - lo posting lists
            with np.errstate(invalid="ignore"):
                col_n = col[:n]
                mask = _COMPARE[conds[0].op](col_n, conds[0].value)
                for c in conds[1:]:
                    mask &= _COMPARE[c.op](col_n, c.value)
            return mask
    return cat.rows_mask(_rows_for_keys(cat.postings(path, "v"), keys[lo:hi]), n)


def _codes_where(codes: Codes, pred: Callable[[str], bool]) -> list[int]:
    return [c for c, name in enumerate(list(codes.names)) if pred(name)]


def _categorical(col: np.ndarray, codes: Codes, node: Cond, missing: int | None) -> np.ndarray:
    op, want = node.op, node.value
    if op == "$exists":
        present = np.ones(col.shape[0], bool) if missing is None else col != missing
        return present if want else ~present
    if op in ("$eq", "$ne"):
        c = codes.codes.get(want)
        eq = col == c if c is not None else np.zeros(col.shape[0], bool)
        return eq if op == "$eq" else ~eq
    if op in ("$in", "$nin"):
        cs = [codes.codes[w] for w in want if w in codes.codes]
        hit = np.isin(col, cs)
        return hit if op == "$in" else ~hit
    # $contains and range operators: decided on the (small) vocabulary of names
    cs = _codes_where(codes, lambda name: compare(op, name, want))
    return np.isin(col, cs)


def _builtin(node: Cond, cat: Catalog, n: int, id_rows: IdRows) -> np.ndarray:
    assert isinstance(node.field, str)  # built-in names are strings; metadata paths are tuples
    name, op, want = node.field, node.op, node.value
    if name == "entity":
        return _categorical(cat.entity[:n], cat.entities, node, None)
    if name == "type":
        return _categorical(cat.type[:n], cat.types, node, None)
    if name == "agent":
        return _categorical(cat.agent[:n], cat.agents, node, -1)
    if name == "id":
        if op == "$exists":
            return np.full(n, bool(want))
        if op in ("$eq", "$ne", "$in", "$nin"):
            wanted = (want,) if op in ("$eq", "$ne") else want
            hit = cat.rows_mask(np.array([r for mid in wanted for r in id_rows(mid)], np.int64), n)
            return hit if op in ("$eq", "$in") else ~hit
        return np.fromiter(
            (compare(op, cat.recs[r].id, want) for r in range(n)), dtype=bool, count=n
        )
    col: np.ndarray = {"ts": cat.ts_us, "salience": cat.salience, "pinned": cat.pinned}[name][:n]
    if op == "$exists":
        return np.full(n, bool(want))
    if op == "$eq":
        return col == want
    if op == "$ne":
        return col != want
    if op in ("$in", "$nin"):
        hit = np.isin(col, list(want))
        return hit if op == "$in" else ~hit
    if name == "pinned":  # no ordering on booleans
        return np.zeros(n, bool)
    return {"$gt": np.greater, "$gte": np.greater_equal, "$lt": np.less, "$lte": np.less_equal}[op](
        col, want
    )


def _rows_for_keys(bucket: dict[Any, Any], keys: Iterable[Any]) -> np.ndarray | array[int]:
    """The rows holding any of ``keys``: one key's posting list itself (ascending, read in
    place by ``rows_mask``), or several copied together from the compact postings."""
    parts = [rows for key in keys if (rows := bucket.get(key))]
    if not parts:
        return np.zeros(0, np.int64)
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([np.frombuffer(p, dtype=np.int32) for p in parts]).astype(np.int64)


def _meta(node: Cond, cat: Catalog, n: int) -> np.ndarray:
    assert isinstance(node.field, tuple)
    path = node.field[1:]
    op, want = node.op, node.value
    if op == "$exists":
        present = cat.rows_mask(cat.postings(path, "x").get(None, array("i")), n)
        return present if want else ~present
    if isinstance(want, Near | Box):
        return _geo(node, cat, n)
    values = cat.postings(path, "v")
    if op in ("$eq", "$ne", "$in", "$nin"):
        wanted = (want,) if op in ("$eq", "$ne") else want
        hit = cat.rows_mask(_rows_for_keys(values, (meta_key(w) for w in wanted)), n)
        return hit if op in ("$eq", "$in") else ~hit
    if op == "$contains":
        rows = _rows_for_keys(cat.postings(path, "e"), (meta_key(want),))
        if isinstance(want, str):
            keys = [k for k in list(values) if k[0] == "str" and want in k[1]]
            more = _rows_for_keys(values, keys)
            rows = np.concatenate([np.asarray(rows, np.int64), np.asarray(more, np.int64)])
        return cat.rows_mask(rows, n)
    return _meta_interval([node], cat, n)


def _geo(node: Cond, cat: Catalog, n: int) -> np.ndarray:
    """``$near``/``$within``: rows whose elements fall in the bounding box in every dimension,
    then the exact test on each such row's metadata."""
    assert isinstance(node.field, tuple)
    path, want = node.field[1:], node.value
    if isinstance(want, Near):  # widened by a hair: float rounding must not lose an edge row
        pad = [want.radius + 1e-9 * (abs(c) + want.radius + 1.0) for c in want.point]
        lo = tuple(c - p for c, p in zip(want.point, pad, strict=True))
        hi = tuple(c + p for c, p in zip(want.point, pad, strict=True))
    else:
        lo, hi = want.lo, want.hi
    elements = cat.postings(path, "e")
    keys = [k for k in list(elements) if k[0] == "num"]
    if not keys:
        return np.zeros(n, bool)
    nums = np.fromiter((k[1] for k in keys), dtype=np.float64, count=len(keys))
    cand = np.ones(n, bool)
    for a, b in zip(lo, hi, strict=True):
        inside = [keys[i] for i in np.flatnonzero((nums >= a) & (nums <= b)).tolist()]
        cand &= cat.rows_mask(_rows_for_keys(elements, inside), n)
        if not cand.any():
            return cand
    mask = np.zeros(n, bool)
    recs = cat.recs
    for r in np.flatnonzero(cand).tolist():
        actual = lookup(orjson.loads(recs[r].meta_json), path)
        mask[r] = compare(node.op, actual, want)
    return mask
