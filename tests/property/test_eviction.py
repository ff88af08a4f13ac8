"""Eviction never loses a memory: whatever moves between tiers stays readable and queryable."""

from __future__ import annotations

import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import synapsedb

steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 3), st.floats(0, 1), st.booleans()),
        st.tuples(st.just("update"), st.integers(0, 40)),
        st.tuples(st.just("delete"), st.integers(0, 40)),
        st.tuples(st.just("read"), st.integers(0, 40)),
        st.tuples(st.just("maintain"), st.integers(1, 12)),
        st.tuples(st.just("restart")),
    ),
    min_size=5,
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(steps)
def test_eviction_never_loses_a_memory(plan: list[tuple[Any, ...]]) -> None:
    clock = synapsedb.ManualClock()
    with tempfile.TemporaryDirectory() as d:
        db = synapsedb.open(
            d, clock=clock, durability="os", embedder=None, background_maintenance=False
        )
        try:
            model: dict[str, str] = {}  # live memory id -> content
            pinned: set[str] = set()
            order: list[str] = []
            n = 0
            for step in plan:
                mem = db.namespace("p")
                clock.advance(1)
                kind = step[0]
                if kind == "write":
                    n += 1
                    m = mem.write(
                        f"user:{step[1]}",
                        {"content": f"memo {n} parcel", "salience": step[2], "pinned": step[3]},
                    )
                    model[m.id] = m.content
                    order.append(m.id)
                    if step[3]:
                        pinned.add(m.id)
                elif kind in ("update", "delete", "read") and order:
                    mid = order[step[1] % len(order)]
                    if mid not in model:
                        continue
                    if kind == "update":
                        model[mid] = mem.update(
                            mid, {"content": f"memo {mid} revised parcel"}
                        ).content
                    elif kind == "delete":
                        mem.delete(mid)
                        del model[mid]
                        pinned.discard(mid)
                    else:
                        assert mem.get(mid).content == model[mid]
                elif kind == "maintain":
                    mem.configure(max_hot=step[1], promote_after=2)
                    mem.maintain()
                elif kind == "restart":
                    db.close()
                    db = synapsedb.open(
                        d, clock=clock, durability="os", embedder=None, background_maintenance=False
                    )
                    mem = db.namespace("p")
                state = db._state("p")
                for mid, content in model.items():  # nothing is ever lost
                    assert mem.get(mid).content == content
                if state is not None:
                    assert not pinned & set(state.cold)  # pinned memories are never demoted
                    assert set(state.cold) <= set(model) | {m for m in order if m not in model}
            mem = db.namespace("p")
            found = mem.query("parcel", tiers=("hot", "cold"), k=1000, dedup=False)
            assert {h.id for h in found} == set(model)
            assert mem.stats().memories == len(model)
        finally:
            db.close()
