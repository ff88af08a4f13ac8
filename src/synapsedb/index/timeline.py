"""Per-entity timelines: each entity's rows in (event time, write order) order.

Ranking uses them to find a memory's neighbours: the memories just before and after it about
the same entity (for conversations, the turns around a matching turn). Writes append to compact
arrays in the serialized commit path; the sorted numpy view is built lazily by readers and
extended cheaply while event times keep increasing.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from .postings import extend, grow

__all__ = ["Timelines", "neighbours"]


class _Line:
    __slots__ = ("cache", "rows", "ts")

    def __init__(self) -> None:
        self.ts = array("q")
        self.rows = array("i")
        # (rows ordered by (ts, row), how many rows it covers, its last ts): one tuple, so a
        # reader always sees a consistent triple
        self.cache: tuple[np.ndarray, int, int] = (np.zeros(0, np.int64), 0, 0)


class Timelines:
    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: dict[int, _Line] = {}

    def add(self, entity: int, row: int, ts_us: int) -> None:
        line = self.lines.get(entity)
        if line is None:
            line = self.lines[entity] = _Line()
        # ts first: a reader's rows are never longer than its ts; never resize what a reader
        # is copying (see synapsedb.index.postings)
        line.ts = grow(line.ts, ts_us)
        line.rows = grow(line.rows, row)

    def add_many(self, entities: list[int], rows: Sequence[int], ts: list[int]) -> None:
        """``add`` for each (entity, row, ts), in one pass per entity."""
        if not entities:
            return
        first = entities[0]
        groups: dict[int, tuple[list[int], list[int]]]
        if entities.count(first) == len(entities):  # one entity (the usual batch)
            groups = {first: (list(rows), ts)}
        else:
            groups = {}
            for e, r, t in zip(entities, rows, ts, strict=True):
                acc = groups.get(e)
                if acc is None:
                    groups[e] = ([r], [t])
                else:
                    acc[0].append(r)
                    acc[1].append(t)
        for e, (e_rows, e_ts) in groups.items():
            line = self.lines.get(e)
            if line is None:
                line = self.lines[e] = _Line()
            line.ts = extend(line.ts, e_ts)  # ts first (see add)
            line.rows = extend(line.rows, e_rows)

    def ordered(self, entity: int) -> np.ndarray:
        """The entity's rows ordered by (event time, row)."""
        line = self.lines.get(entity)
        if line is None:
            return np.zeros(0, np.int64)
        cached, done, last = line.cache
        if done == len(line.rows):  # rows only grow: the cache covers them all (no copy)
            return cached
        rows = np.array(line.rows, dtype=np.int64)
        m = rows.shape[0]
        ts = np.array(line.ts[:m], dtype=np.int64)
        fresh = ts[done:]
        if (done == 0 or fresh[0] >= last) and bool(np.all(fresh[1:] >= fresh[:-1])):
            out = np.concatenate([cached, rows[done:]])  # still in order: extend
            last = int(fresh[-1])
        else:  # an event-time back-fill: sort again
            order = np.lexsort((rows, ts))
            out, last = rows[order], int(ts[order[-1]])
        line.cache = (out, m, last)
        return out


def neighbours(
    timelines: Timelines,
    entity_col: np.ndarray,
    allowed: np.ndarray,
    rows: np.ndarray,
    window: int,
) -> np.ndarray:
    """For each of ``rows``, the rows at offsets -window..-1, +1..+window in its entity's
    timeline of *allowed* rows; -1 past the timeline's ends. Shape (len(rows), 2 * window).

    All entities at once: their timelines are concatenated into one array with a segment id per
    entity, so the work is a few array operations whatever the number of entities.
    """
    out = np.full((rows.shape[0], 2 * window), -1, np.int64)
    if rows.shape[0] == 0 or window == 0:
        return out
    n = allowed.shape[0]
    lines = [timelines.ordered(e) for e in np.unique(entity_col[rows]).tolist()]
    line = np.concatenate(lines)
    seg = np.repeat(np.arange(len(lines)), [x.shape[0] for x in lines])
    keep = line < n
    keep[keep] = allowed[line[keep]]
    line, seg = line[keep], seg[keep]
    m = line.shape[0]
    if m == 0:
        return out
    by_row = np.argsort(line, kind="stable")
    p = by_row[np.minimum(np.searchsorted(line[by_row], rows), m - 1)]
    found = line[p] == rows
    for j, d in enumerate(d for d in range(-window, window + 1) if d):
        q = p + d
        ok = found & (q >= 0) & (q < m)
        ok[ok] = seg[q[ok]] == seg[p[ok]]
        out[ok, j] = line[q[ok]]
    return out
