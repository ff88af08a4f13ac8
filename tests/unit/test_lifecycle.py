from __future__ import annotations

from pathlib import Path

import pytest

import synapsedb
from synapsedb import ManualClock, Namespace, QuotaExceededError, ValidationError
from synapsedb.engine.lifecycle import salience


def fill(mem: Namespace, n: int, *, pinned_every: int = 0) -> list[str]:
    ids = []
    for i in range(n):
        m = mem.write(
            f"user:{i % 3}",
            {
                "content": f"note {i} about parcel delivery number {i}",
                "salience": (i % 10) / 10,
                "pinned": bool(pinned_every and i % pinned_every == 0),
            },
        )
        ids.append(m.id)
    return ids


def test_evict_demotes_lowest_salience_and_loses_nothing(mem: Namespace) -> None:
    ids = fill(mem, 30, pinned_every=10)
    mem.configure(max_hot=10)
    preview = mem.maintain(dry_run=True)
    assert len(preview.demoted) == 20 and mem.stats().cold_memories == 0
    demoted = {m for m, _score, _why in preview.demoted}
    assert all("over max_hot=10" in why for _m, _s, why in preview.demoted)
    pinned = {ids[0], ids[10], ids[20]}
    assert not demoted & pinned
    state = mem._db._state(mem.name)
    assert state is not None
    scores = salience(state, mem.config, mem._db._now_us())
    unpinned = sorted((s, m) for m, s in scores.items() if m not in pinned)
    assert demoted == {m for _s, m in unpinned[:20]}  # exactly the 20 lowest
    report = mem.maintain()
    assert {m for m, _s, _w in report.demoted} == demoted
    logged = [e for e in mem.audit(limit=10_000) if e.action == "demote"]
    assert {e.target.split(" ")[0] for e in logged} == demoted
    assert all("score" in e.target and "lowest salience" in e.target for e in logged)
    st = mem.stats()
    assert (st.memories, st.cold_memories) == (30, 20)
    for mid in ids:  # every memory stays readable
        assert mem.get(mid).id == mid
        assert len(mem.history(mid)) == 1
    assert len(mem.memories(limit=100)) == 30
    assert len(mem.memories("user:1", limit=100)) == 10
    both = mem.query("parcel delivery", tiers=("hot", "cold"), k=30)
    assert {h.id for h in both} == set(ids)
    assert {h.tier for h in both} == {"hot", "cold"}
    cold_only = mem.query("parcel delivery", tiers=("cold",), k=30)
    assert {h.id for h in cold_only} == demoted and {h.tier for h in cold_only} == {"cold"}
    fallback = mem.query("parcel delivery", k=15)  # hot has 10: cold fills the rest
    assert len(fallback) == 15 and [h.tier for h in fallback][-5:] == ["cold"] * 5


def test_promotion_after_accesses_and_on_write(mem: Namespace) -> None:
    ids = fill(mem, 12)
    mem.configure(max_hot=6, promote_after=3)
    cold = [m for m, _s, _w in mem.maintain().demoted]
    assert len(cold) == 6
    for _ in range(3):
        mem.get(cold[0])
    mem.configure(max_hot=None)  # room again: promotion is not undone by eviction
    report = mem.maintain()
    assert [m for m, _w in report.promoted] == [cold[0]]
    assert mem.stats().cold_memories == 5
    updated = mem.update(cold[1], {"content": "rewritten while cold"})  # a write promotes first
    assert updated.version == 2 and mem.stats().cold_memories == 4
    assert mem.query("rewritten while cold", k=1).hits[0].tier == "hot"
    assert len(ids) == 12


def test_the_cold_tier_survives_a_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    with synapsedb.open(
        tmp_path / "d", clock=clock, durability="os", background_maintenance=False
    ) as db:
        mem = db.namespace("n")
        ids = fill(mem, 8)
        mem.configure(max_hot=4)
        cold = {m for m, _s, _w in mem.maintain().demoted}
    with synapsedb.open(
        tmp_path / "d", clock=clock, durability="os", background_maintenance=False
    ) as db:
        mem = db.namespace("n")
        assert mem.config.max_hot == 4
        state = db._state("n")
        assert state is not None and set(state.cold) == cold and len(state.mems) == 4
        assert all(mem.get(m).id == m for m in ids)


def test_reject_policy_refuses_and_writes_nothing(mem: Namespace) -> None:
    mem.configure(max_hot=3, policy="reject")
    fill(mem, 3)
    with pytest.raises(QuotaExceededError) as err:
        mem.write("u", "one too many")
    assert err.value.details["field"] == "max_hot" and err.value.details["limit"] == 3
    with pytest.raises(QuotaExceededError):
        mem.write_many([("u", "a"), ("u", "b")])
    assert mem.stats().memories == 3
    mem.configure(max_hot=None, max_bytes=200)
    with pytest.raises(QuotaExceededError) as err:
        mem.write("u", "x" * 300)
    assert err.value.details["field"] == "max_bytes"


def test_write_rate_limit(mem: Namespace) -> None:
    mem.write("u", "first")
    mem.configure(max_writes_per_s=3)
    with pytest.raises(QuotaExceededError) as err:
        for i in range(10):
            mem.set("u", f"k{i}", i)
    assert err.value.details["retry_after"] > 0


def test_configure_validation(mem: Namespace) -> None:
    for changes, field in [
        ({"max_hot": 0}, "max_hot"),
        ({"policy": "drop"}, "policy"),
        ({"recency": -1}, "recency"),
        ({"half_life_days": 0}, "half_life_days"),
        ({"colour": "red"}, "colour"),
        ({"max_writes_per_s": "fast"}, "max_writes_per_s"),
    ]:
        with pytest.raises(ValidationError) as err:
            mem.configure(**changes)
        assert err.value.field == field
    assert mem.configure(max_hot=5, recency=0.5).max_hot == 5
    assert mem.config.recency == 0.5


def test_going_over_quota_triggers_eviction_in_the_background(tmp_path: Path) -> None:
    import time

    with synapsedb.open(tmp_path / "d", durability="os", embedder=None) as db:
        mem = db.namespace("n")
        mem.configure(max_hot=5)  # maintenance_interval_s is 60 s: this must not wait for it
        fill(mem, 12)
        deadline = time.monotonic() + 30
        while mem.stats().cold_memories < 7 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mem.stats().cold_memories == 7


def test_forgetting_an_entity_reaches_its_cold_memories(mem: Namespace) -> None:
    fill(mem, 9)  # entities user:0..2, 3 memories each
    mem.configure(max_hot=3)
    mem.maintain()
    assert mem.stats().cold_memories == 6
    out = mem.forget(entity="user:0")
    assert out.memories == 3 and mem.memories("user:0") == []
    purged = mem.forget(entity="user:1", purge=True)
    assert purged.memories == 3 and mem.memories("user:1") == []
    assert len(mem.memories("user:2")) == 3
