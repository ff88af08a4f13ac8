"""The residency budget (engine/residency.py, setting ``memory_budget_mb``): the namespaces in
memory are counted at their estimated size; over the budget the least recently used idle ones
are unloaded, and their next use loads them again with everything they held."""

from __future__ import annotations

import gc
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import synapsedb
from synapsedb import Settings, ValidationError
from synapsedb.engine import residency
from synapsedb.engine.lazy import Loader
from synapsedb.engine.residency import LOW_WATER, WARM_LIMIT

DIM = 64


def _open(path: Path, **options: Any) -> synapsedb.Database:
    """The database alone: no memory loop, whose first pass visits every namespace."""
    return synapsedb.Database(path, durability="os", background_maintenance=False,
                              embedder=None, **options)  # fmt: skip


def _fill(db: synapsedb.Database, name: str, n: int, seed: int = 0, dim: int = DIM) -> None:
    vecs = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    db.namespace(name).write_many([
        {"entity": f"user:{i % 7}", "content": f"note {i} about order {seed * 1000 + i}",
         "embedding": vecs[i], "metadata": {"bucket": i % 10}} for i in range(n)
    ])  # fmt: skip


@pytest.fixture(autouse=True)
def counted_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget counts the estimate only (what else this test process allocates is not the
    namespaces'); test_the_process_memory_counts_when_it_is_more measures it."""
    monkeypatch.setattr(residency, "process_bytes", lambda: 0)


@pytest.fixture
def no_idle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A namespace counts as idle at once (instead of after a second of no use)."""
    monkeypatch.setattr(residency, "IDLE_S", 0.0)


@pytest.mark.parametrize(("memories", "dim"), [(10, 384), (100, 384), (1000, 384), (100, 16)])
def test_the_estimate_is_within_a_factor_of_two_of_what_a_namespace_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memories: int, dim: int
) -> None:
    """What the budget counts, against what loading the namespace (and a first query, which
    builds its keyword index) really allocates, measured with tracemalloc."""
    with _open(tmp_path) as db:
        for i in range(4):
            _fill(db, f"t{i}", memories, seed=i, dim=dim)
    monkeypatch.setattr(Loader, "start", lambda self: None)  # only what the loop below loads
    with _open(tmp_path) as db:
        assert db.core.loading_pending == 4
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            for i in range(4):
                db.namespace(f"t{i}").query("order", embedding=[1.0] * dim, k=3)
            gc.collect()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        measured = (after - before) / 4
        counted = sum(db.core.states.resident(f"t{i}").resident_bytes() for i in range(4)) / 4
    assert measured / 2 <= counted <= measured * 2, (counted, measured)


def test_over_the_budget_the_least_recently_used_are_unloaded_and_load_again(
    tmp_path: Path, no_idle_wait: None
) -> None:
    with _open(tmp_path, memory_budget_mb=1) as db:
        core = db.core
        assert core.residency is not None and core.residency.budget == 1 << 20
        for i in range(24):  # about 100 KB each: several times the budget
            _fill(db, f"t{i}", 100, seed=i)
        core.residency.shrink()
        assert core.residency.total <= core.residency.budget
        resident = {ns for ns in (f"t{i}" for i in range(24)) if core.states.resident(ns)}
        assert 0 < len(resident) < 24
        assert "t23" in resident and "t0" not in resident  # the latest used stay
        assert core.residency.unloads >= 24 - len(resident)
        for i in range(24):  # every one answers with all it holds, loaded again if need be
            mem = db.namespace(f"t{i}")
            assert len(mem.memories("user:3")) == len([j for j in range(100) if j % 7 == 3])
            hits = mem.query(embedding=[1.0] * DIM, k=5, filter={"bucket": 4}).hits
            assert len(hits) == 5 and all(h.metadata["bucket"] == 4 for h in hits)
        assert set(db.namespaces()) == {f"t{i}" for i in range(24)}
    with _open(tmp_path) as db:  # and all of it is stored
        assert sum(len(db.namespace(f"t{i}").memories(f"user:{e}"))
                   for i in range(24) for e in range(7)) == 2400  # fmt: skip


def test_a_namespace_used_lately_is_not_unloaded(tmp_path: Path) -> None:
    with _open(tmp_path, memory_budget_mb=1) as db:
        for i in range(16):
            _fill(db, f"t{i}", 100, seed=i)
        res = db.core.residency
        assert res is not None and res.total > res.budget
        assert res.victims() == []  # all used within the last second
        assert res.victims(now=float("inf"))  # later, the oldest go


def test_the_most_recently_used_namespace_stays_even_over_the_budget(
    tmp_path: Path, no_idle_wait: None
) -> None:
    """One namespace larger than the budget (a small machine's only tenant) is not unloaded
    after each use only to load again at the next."""
    with _open(tmp_path, memory_budget_mb=1) as db:
        _fill(db, "small", 10)
        _fill(db, "big", 2000, seed=1)
        res = db.core.residency
        assert res is not None and (res.size_of("big") or 0) > res.budget
        res.shrink()  # (the residency thread may have done it already)
        assert db.core.states.resident("small") is None
        assert db.core.states.resident("big") is not None and res.victims(now=float("inf")) == []
        assert res.shrink() == 0 and res.unloads == 1
        db.namespace("small").memories("user:1")  # loaded again, now the latest used
        res.shrink()
        assert db.core.states.resident("big") is None
        assert db.core.states.resident("small") is not None


def test_unloading_keeps_the_access_counts_and_everything_written(
    tmp_path: Path, no_idle_wait: None
) -> None:
    with _open(tmp_path, memory_budget_mb=1) as db:
        mem = db.namespace("kept")
        _fill(db, "kept", 50)
        m = mem.write("user:1", {"content": "Prefers email", "embedding": [0.5] * DIM})
        mem.update(m.id, {"content": "Prefers email, not calls"})
        mem.set("user:1", "plan", {"tier": "gold"})
        mem.append("user:1", "Called about the invoice")
        for _ in range(3):
            mem.get(m.id)  # three accesses (what tiering ranks by)
        hits_before = mem.query(embedding=[0.5] * DIM, k=3).hits
        counts = dict(db.core.states.resident("kept").access)
        for i in range(30):  # push "kept" out
            _fill(db, f"t{i}", 100, seed=i)
        db.core.residency.shrink()
        assert db.core.states.resident("kept") is None
        assert "kept" in db.core.states.pending
        assert [v.content for v in mem.history(m.id)] == ["Prefers email",
                                                          "Prefers email, not calls"]  # fmt: skip
        assert dict(db.core.states.resident("kept").access) == counts
        assert mem.get("user:1", "plan").value == {"tier": "gold"}
        assert [e.content for e in mem.events("user:1")] == ["Called about the invoice"]
        assert [h.id for h in mem.query(embedding=[0.5] * DIM, k=3).hits] == [
            h.id for h in hits_before
        ]
        assert mem.write("user:1", "Another note").version == 1  # writes go on after a reload
        assert mem.update(m.id, {"content": "Prefers letters"}).version == 3


def test_writers_and_unloading_at_once_lose_nothing(tmp_path: Path, no_idle_wait: None) -> None:
    """Eight threads write to 40 namespaces while the budget keeps unloading them: every
    version is there, once, numbered without a gap."""
    with _open(tmp_path, memory_budget_mb=1) as db:
        for i in range(40):
            _fill(db, f"t{i}", 60, seed=i)
        errors: list[BaseException] = []

        def writer(t: int) -> None:
            try:
                for r in range(25):
                    ns = db.namespace(f"t{(t * 7 + r) % 40}")
                    m = ns.write(f"user:w{t}", {"content": f"w{t} r{r}", "embedding": [1.0] * DIM})
                    ns.update(m.id, {"content": f"w{t} r{r} again"})
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for _ in range(20):
            db.core.residency.shrink()
        for th in threads:
            th.join()
        assert errors == []
        assert db.core.residency.unloads > 0
        written = [m for i in range(40) for t in range(8)
                   for m in db.namespace(f"t{i}").memories(f"user:w{t}")]  # fmt: skip
        assert len(written) == 8 * 25
        assert all(m.version == 2 and m.content.endswith("again") for m in written)


def test_the_warm_up_after_an_open_stops_short_of_the_budget(tmp_path: Path) -> None:
    with _open(tmp_path) as db:
        for i in range(40):
            _fill(db, f"t{i}", 100, seed=i)
    with _open(tmp_path, memory_budget_mb=2) as db:
        res = db.core.residency
        assert res is not None
        db.core._loader.wait(30)  # the background thread stops (at the limit)
        assert db.core._loader._thread is not None
        db.core._loader._thread.join(30)
        assert not db.core._loader._thread.is_alive()
        assert 0 < res.resident < 40 and res.total >= WARM_LIMIT * res.budget * 0.5
        assert res.total <= res.budget and res.unloads == 0
        assert db.core.loading_pending == 40 - res.resident
        # what lists or maintains them all still reaches every one
        assert len(db.namespaces()) == 40
        assert len(db.maintain()) == 40


def test_the_budget_setting() -> None:
    assert Settings().memory_budget_mb == 0
    half = Settings().memory_budget_bytes()
    assert half > 0 and half == Settings(memory_budget_mb=0).memory_budget_bytes()
    assert Settings(memory_budget_mb=4096).memory_budget_bytes() == 4 << 30
    with pytest.raises(ValidationError) as err:
        Settings(memory_budget_mb=-1)
    assert err.value.field == "memory_budget_mb"
    assert Settings.from_env({"SYNAPSEDB_MEMORY_BUDGET_MB": "512"}).memory_budget_mb == 512
    assert 0 < LOW_WATER < 1 and 0 < WARM_LIMIT < LOW_WATER


def test_a_namespace_held_by_a_follower_stays(tmp_path: Path, no_idle_wait: None) -> None:
    """A change feed's follower waits holding its namespace (server/feed.py), so the writes of
    other processes keep reaching it."""
    with _open(tmp_path, memory_budget_mb=1) as db:
        _fill(db, "followed", 100)
        with db.core.holding("followed"):
            for i in range(24):
                _fill(db, f"t{i}", 100, seed=i)
            db.core.residency.shrink()
            assert db.core.states.resident("followed") is not None
            assert "followed" not in db.core.residency.victims(now=float("inf"))
        assert db.core.residency.idle("followed")
        for i in range(24):
            _fill(db, f"u{i}", 100, seed=i)
        db.core.residency.shrink()
        assert db.core.states.resident("followed") is None


def test_an_unloaded_namespace_is_freed_without_waiting_for_the_garbage_collector(
    tmp_path: Path, no_idle_wait: None
) -> None:
    """A state's catalog and records refer to each other: once nothing reads an unloaded
    state, it is taken apart so that reference counting frees it (a full collection in a
    process of millions of objects comes gigabytes later)."""
    with _open(tmp_path, memory_budget_mb=1) as db:
        res = db.core.residency
        assert res is not None
        _fill(db, "t0", 100)
        held = db.core.states.resident("t0")  # a reader still holding one
        for i in range(1, 12):
            _fill(db, f"t{i}", 100, seed=i)
            db.namespace(f"t{i}").query("order", k=3)  # (a keyword index too)
        gc.collect()
        gc.disable()
        try:
            res.shrink()
            assert res.unloads > 0 and db.core.states.resident("t0") is None
            assert res.bury() == 0  # within the grace period: nothing yet
            assert res.bury(now=float("inf")) >= 1
            assert len(held.catalog.recs) == 100  # the one still held is left whole
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            kinds = {type(o).__name__ for o in gc.garbage}
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        assert "Catalog" not in kinds and "MemRec" not in kinds
        assert len(db.namespace("t1").memories("user:1")) > 0  # and it loads again


def test_the_process_memory_counts_when_it_is_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory the allocator keeps in pieces it cannot give back counts against the budget:
    what the process holds beyond its start, when that is more than the estimate."""
    measured = [100 << 20]
    monkeypatch.setattr(residency, "process_bytes", lambda: measured[0])
    with _open(tmp_path, memory_budget_mb=4) as db:
        res = db.core.residency
        assert res is not None
        for i in range(8):
            _fill(db, f"t{i}", 100, seed=i)
        assert res.total < res.budget and res.victims(now=float("inf")) == []
        measured[0] += int(5.4 * 2**20)  # the process grew more than counted, over the budget
        assert res.used() == measured[0] - (101 << 20) > res.budget > res.total  # (headroom)
        names = res.victims(now=float("inf"))
        assert names and names[0] == "t0" and len(names) < 8  # the least recently used first
        freed = sum(res.size_of(ns) or 0 for ns in names)
        assert freed >= res.used() - LOW_WATER * res.budget
        # unloaded states not taken apart yet are on their way out: not counted twice
        res._freeing = 1 << 20
        assert res.used() == measured[0] - (102 << 20)
        res._freeing = 0
