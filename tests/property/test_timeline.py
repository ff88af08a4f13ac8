"""Timeline neighbours agree with a brute-force reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synapsedb.index.timeline import Timelines, neighbours


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), min_size=1, max_size=60),
    st.integers(0, 2**32 - 1),
    st.integers(1, 3),
    st.booleans(),
)
def test_neighbours_match_reference(
    events: list[tuple[int, int]], seed: int, window: int, query_between: bool
) -> None:
    tl = Timelines()
    entity = np.array([e for e, _ in events], np.int32)
    ts = [t for _, t in events]
    for row, (e, t) in enumerate(events):
        tl.add(e, row, t)
        if query_between and row % 7 == 3:  # exercise the incremental cache mid-stream
            tl.ordered(e)
    rng = np.random.default_rng(seed)
    n = len(events)
    allowed = rng.random(n) < 0.7
    rows = np.unique(rng.integers(0, n, max(1, n // 3))).astype(np.int64)
    got = neighbours(tl, entity, allowed, rows, window)
    for i, r in enumerate(rows.tolist()):
        line = sorted(
            (x for x in range(n) if entity[x] == entity[r] and allowed[x]),
            key=lambda x: (ts[x], x),
        )
        expect = []
        for d in (d for d in range(-window, window + 1) if d):
            if r in line and 0 <= line.index(r) + d < len(line):
                expect.append(line[line.index(r) + d])
            else:
                expect.append(-1)
        assert got[i].tolist() == expect
