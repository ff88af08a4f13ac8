"""Restart: everything committed comes back identically; concurrency is grouped and correct."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

import synapsedb
from synapsedb import ManualClock


def test_reopen_restores_every_kind_of_state(tmp_path: Path) -> None:
    clock = ManualClock()
    with synapsedb.open(tmp_path / "d", clock=clock) as db:
        mem = db.namespace("acme", agent="intake")
        m = mem.write("u", {"content": "v1", "embedding": [0.5, 0.25], "metadata": {"a": [1]}})
        t1 = clock.now_us() / 1e6
        clock.advance(1)
        mem.update(m.id, {"content": "v2"})
        gone = mem.write("u", "to delete")
        mem.delete(gone.id)
        mem.set("u", "k", {"x": 1})
        mem.set("u", "k", {"x": 2})
        ev = mem.append("u", {"content": "happened", "data": {"n": 1}})
        before = (mem.stats(), mem.history(m.id), mem.history("u", "k"), mem.events("u"))
    with synapsedb.open(tmp_path / "d", clock=clock) as db:
        mem = db.namespace("acme")
        assert (mem.stats(), mem.history(m.id), mem.history("u", "k"), mem.events("u")) == before
        assert mem.get(m.id, as_of=t1).content == "v1"
        got = mem.get(m.id).embedding
        assert got is not None and np.array_equal(got, np.array([0.5, 0.25], dtype=np.float32))
        nxt = mem.append("u", "after restart")
        assert nxt.id > ev.id or int(nxt.id.split("-")[0]) >= int(ev.id.split("-")[0])


def test_system_time_never_goes_back_across_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    with synapsedb.open(tmp_path / "d", clock=clock) as db:
        first = db.namespace("n").write("e", "a")
    clock.set(clock.now_us() - 3_600_000_000)  # the machine's clock jumped back an hour
    with synapsedb.open(tmp_path / "d", clock=clock) as db:
        mem = db.namespace("n")
        second = mem.update(first.id, {"content": "b"})
        assert second.recorded_at >= first.recorded_at
        assert mem.get(first.id).content == "b"  # visible although the clock is behind


def test_concurrent_writers_all_land_with_consistent_versions(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d") as db:
        mem = db.namespace("n")
        shared = mem.write("e", "counter 0")
        errors: list[BaseException] = []

        def worker(w: int) -> None:
            try:
                for i in range(50):
                    mem.write(f"user:{w}", f"w{w} i{i}")
                    mem.update(shared.id, {"content": f"by {w}"})
                    mem.set("e", f"k{w}", i)
            except BaseException as exc:  # pragma: no cover - surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        versions = [v.version for v in mem.history(shared.id)]
        assert versions == list(range(1, 8 * 50 + 2))
        assert mem.stats().memories == 1 + 8 * 50
        assert all(mem.get("e", f"k{w}").value == 49 for w in range(8))
