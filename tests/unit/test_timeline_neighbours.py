"""The neighbours of rows in their entity's timeline of allowed rows: the fast path (a window
around each row in the combined timelines) against the exact one (whole timelines), over
random timelines with back-filled event times, filters of every density, rows added after the
combined view was built, and rows past a query's snapshot."""

from __future__ import annotations

import random

import numpy as np
import pytest

from synapsedb.index.timeline import Timelines, _neighbours_exact, context, distinct, neighbours


def build(seed: int, n: int, entities: int) -> tuple[Timelines, np.ndarray]:
    rnd = random.Random(seed)
    lines = Timelines()
    entity = np.zeros(n, np.int64)
    ts = 0
    for row in range(n):
        e = rnd.randrange(entities)
        entity[row] = e
        ts += rnd.randint(0, 3)
        when = ts if rnd.random() > 0.1 else rnd.randint(0, ts)  # some back-filled
        lines.add(e, row, when)
    return lines, entity


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("density", [1.0, 0.9, 0.5, 0.1, 0.02])
def test_fast_neighbours_equal_the_exact_ones(seed: int, density: float) -> None:
    rnd = np.random.default_rng(seed)
    n = int(rnd.integers(50, 2000))
    lines, entity = build(seed, n, int(rnd.integers(1, 30)))
    snapshot = n - int(rnd.integers(0, 20))  # a query that sees only the first rows
    allowed = rnd.random(snapshot) < density
    rows = np.unique(rnd.integers(0, n, 60))  # some not allowed, some past the snapshot
    for window in (1, 2, 3):
        fast = neighbours(lines, entity, allowed, rows, window)
        exact = _neighbours_exact(lines, entity, allowed, rows, window)
        assert fast.tolist() == exact.tolist()


def test_rows_added_after_the_combined_view_are_found() -> None:
    lines, entity = build(3, 300, 4)
    allowed = np.ones(300, bool)
    neighbours(lines, entity, allowed, np.arange(10), 2)  # builds the combined view
    more = np.concatenate([entity, [1, 1, 2]])
    for row in (300, 301, 302):
        lines.add(int(more[row]), row, 10**9 + row)
    allowed = np.ones(303, bool)
    rows = np.array([5, 300, 301, 302])
    assert (
        neighbours(lines, more, allowed, rows, 2).tolist()
        == _neighbours_exact(lines, more, allowed, rows, 2).tolist()
    )
    assert neighbours(lines, more, allowed, np.array([301]), 1).tolist()[0][1] == -1  # the last


def test_no_rows_or_no_window() -> None:
    lines, entity = build(1, 20, 2)
    allowed = np.ones(20, bool)
    assert neighbours(lines, entity, allowed, np.zeros(0, np.int64), 2).shape == (0, 4)
    assert neighbours(lines, entity, allowed, np.arange(3), 0).shape == (3, 0)
    empty = Timelines()
    assert neighbours(empty, entity, allowed, np.arange(3), 1).tolist() == [[-1, -1]] * 3


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("density", [1.0, 0.6, 0.05])
def test_context_equals_neighbours_of_neighbours(seed: int, density: float) -> None:
    """What the hybrid ranking needs (rows near the candidates, their neighbours, and every
    row whose score is read) from one call, against the two-call definition."""
    rnd = np.random.default_rng(100 + seed)
    n = int(rnd.integers(30, 1500))
    lines, entity = build(seed, n, int(rnd.integers(1, 12)))
    allowed = rnd.random(n) < density
    cand = distinct(np.flatnonzero(allowed)[rnd.integers(0, max(1, int(allowed.sum())), 40)])
    for window in (1, 2, 3):
        rows, nb, near = context(lines, entity, allowed, cand, window)
        first = neighbours(lines, entity, allowed, cand, window)
        want_rows = np.unique(np.concatenate([cand, first[first >= 0]]))
        want_nb = neighbours(lines, entity, allowed, want_rows, window)
        want_near = np.unique(np.concatenate([want_rows, want_nb[want_nb >= 0]]))
        assert rows.tolist() == want_rows.tolist()
        assert nb.tolist() == want_nb.tolist()
        assert near.tolist() == want_near.tolist()


def test_distinct_is_unique() -> None:
    rnd = np.random.default_rng(5)
    for size in (0, 1, 2, 50, 3000):
        values = rnd.integers(0, 40, size)
        assert distinct(values).tolist() == np.unique(values).tolist()


@pytest.mark.parametrize("seed", range(5))
def test_interleaved_adds_and_lookups_match_the_exact_ones(seed: int) -> None:
    """Rows keep arriving (in order and back-filled, to big and small timelines) between
    lookups: a lookup in a timeline changed since the shared view was built is answered the
    exact way, or the view is rebuilt, and the answers never differ."""
    rnd = random.Random(seed)
    lines = Timelines()
    entity: list[int] = []
    ts = 0
    for step in range(60):
        for _ in range(rnd.choice([1, 1, 3, 40])):
            e = 0 if rnd.random() < 0.5 else rnd.randrange(1, 25)  # one big timeline
            ts += rnd.randint(0, 2)
            lines.add(e, len(entity), ts if rnd.random() > 0.1 else rnd.randint(0, ts))
            entity.append(e)
        col = np.array(entity)
        n = len(entity)
        allowed = np.random.default_rng(step).random(n) < rnd.choice([1.0, 0.7])
        rows = np.unique(np.random.default_rng(seed * 100 + step).integers(0, n, 30))
        window = rnd.choice([1, 2])
        assert (
            neighbours(lines, col, allowed, rows, window).tolist()
            == _neighbours_exact(lines, col, allowed, rows, window).tolist()
        )
