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
from .rowmemo import RowMemo, distinct

__all__ = ["Timelines", "context", "distinct", "neighbours"]


class _Line:
    __slots__ = ("cache", "rows", "ts")

    def __init__(self) -> None:
        self.ts = array("q")
        self.rows = array("i")
        # (rows ordered by (ts, row), how many rows it covers, its last ts): one tuple, so a
        # reader always sees a consistent triple
        self.cache: tuple[np.ndarray, int, int] = (np.zeros(0, np.int64), 0, 0)


class Timelines:
    __slots__ = ("_combined", "_touched", "changes", "lines")

    def __init__(self) -> None:
        self.lines: dict[int, _Line] = {}
        self.changes = 0  # counts adds; counted after the rows are in (see view)
        # per entity code, the count of changes at its timeline's last add (see view)
        self._touched = np.zeros(0, np.int64)
        # (changes when built, rows of every timeline end to end, segment of each, position of
        # each row in it): one tuple, so a reader always sees a consistent set
        self._combined: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None

    def _mark(self, entity: int) -> None:
        """Count a change to ``entity``'s timeline, after its rows are in."""
        self.changes += 1
        touched = self._touched
        if entity >= touched.shape[0]:  # a fresh array: a reader may hold the old one
            touched = np.zeros(max(entity + 1, 2 * touched.shape[0], 64), np.int64)
            touched[: self._touched.shape[0]] = self._touched
            touched[entity] = self.changes
            self._touched = touched
        else:
            touched[entity] = self.changes

    @classmethod
    def of_columns(cls, entity: np.ndarray, ts_us: np.ndarray) -> Timelines:
        """The timelines of rows ``0, 1, ...`` with these entity codes and event times, as
        adding them one by one in row order builds them."""
        out = cls()
        if entity.shape[0] == 0:
            return out
        order = np.argsort(entity, kind="stable")  # each entity's rows ascending
        ent = entity[order]
        starts = np.concatenate(([0], np.flatnonzero(ent[1:] != ent[:-1]) + 1))
        stops = np.concatenate((starts[1:], [ent.shape[0]]))
        for i in np.argsort(order[starts], kind="stable").tolist():  # by first row
            rows = order[starts[i] : stops[i]]
            line = out.lines[int(ent[starts[i]])] = _Line()
            line.ts.frombytes(ts_us[rows].astype(np.int64).tobytes())
            line.rows.frombytes(rows.astype(np.int32).tobytes())
            out._mark(int(ent[starts[i]]))
        return out

    def add(self, entity: int, row: int, ts_us: int) -> None:
        line = self.lines.get(entity)
        if line is None:
            line = self.lines[entity] = _Line()
        # ts first: a reader's rows are never longer than its ts; never resize what a reader
        # is copying (see synapsedb.index.postings)
        line.ts = grow(line.ts, ts_us)
        line.rows = grow(line.rows, row)
        self._mark(entity)

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
            self._mark(e)

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

    def view(self, entities: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every timeline end to end (each in order), the segment (timeline) of each entry,
        each row's position in it (-1 for a row it does not hold), and for each of
        ``entities`` whether the view holds that entity's timeline as it is now.

        The view is built by a reader and shared until rebuilt; it goes stale entity by entity
        as rows are added. It is rebuilt (one pass over every row) when the stale timelines
        asked about hold more than a quarter of the rows, so a busy namespace does not pay a
        rebuild per write, and a caller looks the stale ones up the exact way.

        Why a stale answer is never taken for a fresh one: the writer counts a change (and
        records it for its entity) after the change's rows are in, and a build reads the count
        before it reads any timeline; so every change up to a view's count is in the view, and
        an entity changed since has a later count. A query's rows are in the timelines before
        the catalog publishes them, so their changes are counted by the time it asks.
        """
        built = self._combined
        if built is None:
            built = self._build()
        fresh = self._fresh(entities, built[0])
        if not fresh.all():
            stale = distinct(entities[~fresh]).tolist()
            lines = self.lines
            cost = sum(len(lines[e].rows) for e in stale if e in lines)
            if 4 * cost > built[1].shape[0]:
                built = self._build()
                fresh = self._fresh(entities, built[0])
        return built[1], built[2], built[3], fresh

    def _fresh(self, entities: np.ndarray, built_at: int) -> np.ndarray:
        touched = self._touched
        fresh = np.zeros(entities.shape[0], bool)
        inside = entities < touched.shape[0]
        fresh[inside] = touched[entities[inside]] <= built_at
        return fresh

    def _build(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        changes = self.changes  # first: see view
        lines = [self.ordered(e) for e in list(self.lines)]
        if lines:
            line = np.concatenate(lines)
            seg = np.repeat(np.arange(len(lines), dtype=np.int64), [x.shape[0] for x in lines])
        else:
            line = seg = np.zeros(0, np.int64)
        pos = np.full(int(line.max()) + 1 if line.shape[0] else 0, -1, np.int64)
        pos[line] = np.arange(line.shape[0])
        for part in (line, seg, pos):
            part.setflags(write=False)
        built = self._combined = (changes, line, seg, pos)
        return built


# how far past the window a neighbour is looked for among the entries next to a row (rows
# filtered out are skipped); a row whose neighbours lie further is found the exact way
_REACH = 6


def neighbours(
    timelines: Timelines,
    entity_col: np.ndarray,
    allowed: np.ndarray,
    rows: np.ndarray,
    window: int,
) -> np.ndarray:
    """For each of ``rows``, the rows at offsets -window..-1, +1..+window in its entity's
    timeline of *allowed* rows; -1 past the timeline's ends. Shape (len(rows), 2 * window).

    Each row's neighbours are looked for among the ``window + _REACH`` entries on either side
    of it in :meth:`Timelines.view` (a few array operations on a small matrix); a row with too
    many of those filtered out, or whose timeline changed since the view was built, is found
    by :func:`_neighbours_exact`.
    """
    out = np.full((rows.shape[0], 2 * window), -1, np.int64)
    if rows.shape[0] == 0 or window == 0:
        return out
    n = allowed.shape[0]
    visible = rows < n
    visible[visible] = allowed[rows[visible]]
    line, seg, pos, fresh = timelines.view(entity_col[np.where(visible, rows, 0)])
    m = line.shape[0]
    p = np.full(rows.shape[0], -1, np.int64)
    inside = rows < pos.shape[0]
    p[inside] = pos[rows[inside]]
    valid = visible & fresh & (p >= 0)
    pc = np.maximum(p, 0)
    if m:
        valid &= line[pc] == rows
    exact = ~valid
    if m:
        reach = window + _REACH
        steps = np.arange(1, reach + 1)
        at = np.arange(rows.shape[0])
        for sign in (-1, 1):
            q = pc[:, None] + sign * steps[None, :]
            qc = np.clip(q, 0, m - 1)
            same = (q >= 0) & (q < m) & (seg[qc] == seg[pc][:, None])
            near = line[qc]
            ok = same & (near < n)
            ok[ok] = allowed[near[ok]]
            count = np.cumsum(ok, axis=1)
            for d in range(1, window + 1):
                nth = ok & (count == d)
                has = valid & nth.any(axis=1)
                col = window - d if sign < 0 else window + d - 1
                out[has, col] = near[at, nth.argmax(axis=1)][has]
            # fewer than `window` found and the timeline goes on: look further, exactly
            exact |= valid & (count[:, -1] < window) & same[:, -1]
    exact &= visible
    if exact.any():
        out[exact] = _neighbours_exact(timelines, entity_col, allowed, rows[exact], window)
    return out


def context(
    timelines: Timelines,
    entity_col: np.ndarray,
    allowed: np.ndarray,
    cand: np.ndarray,
    window: int,
    memo: RowMemo | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the candidate rows ``cand``: ``rows``, the candidates and their neighbours within
    ``window`` (distinct, ascending); ``nb``, the :func:`neighbours` of each of ``rows``; and
    ``near``, ``rows`` and all those neighbours (distinct, ascending). ``memo``: a
    :class:`RowMemo` of ``neighbours(..., 2 * window)`` over the same ``allowed``, kept
    between calls of one query (a candidate met again is not looked up again).

    One :func:`neighbours` call at twice the window does it: in a timeline (of allowed rows)
    the neighbour at offset d of the row at offset e from a candidate is the row at offset
    e + d from it, so every row and neighbour lies in the candidate's span of -2w..2w.
    """
    if window == 0 or cand.shape[0] == 0:
        return cand, np.full((cand.shape[0], 2 * window), -1, np.int64), cand
    if memo is None:
        wide = neighbours(timelines, entity_col, allowed, cand, 2 * window)
    else:
        wide = memo.get(cand)
    span = np.concatenate([wide[:, : 2 * window], cand[:, None], wide[:, 2 * window :]], axis=1)
    inner = span[:, window : 3 * window + 1].ravel()  # offsets -w..w of each candidate
    at = np.flatnonzero(inner >= 0)
    order = np.argsort(inner[at], kind="stable")
    ordered = inner[at][order]
    first = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    rows = ordered[first]
    c, e = np.divmod(at[order][first], 2 * window + 1)  # each row's candidate and offset
    offsets = np.array([d for d in range(-window, window + 1) if d])
    nb = span[c[:, None], (e + window)[:, None] + offsets[None, :]]
    return rows, nb, distinct(span[span >= 0])


def _neighbours_exact(
    timelines: Timelines,
    entity_col: np.ndarray,
    allowed: np.ndarray,
    rows: np.ndarray,
    window: int,
) -> np.ndarray:
    """:func:`neighbours` over whole timelines: those of the rows' entities are concatenated
    into one array with a segment id per entity (a few array operations whatever the number
    of entities), filtered by ``allowed``, and each row is found in it."""
    out = np.full((rows.shape[0], 2 * window), -1, np.int64)
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
