"""The whole engine on PostgresStorage: write, query, as_of, history, facts, streams, lineage,
forget purge (checked in the tables) and reopen.

``Database`` builds its storage itself (``SQLiteStorage(path, ...)`` in engine/database.py) and
takes none from its caller yet; until it does, this test swaps the class that module constructs
for one that opens PostgreSQL, which is exactly the seam an injected storage will use.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import ManualClock
from synapsedb.engine import database as engine_database

from .conftest import PostgresBackend

SECRET = "4111-1111-1111-1111"


@pytest.fixture
def pg(postgres_dsn: str) -> Iterator[PostgresBackend]:
    backend = PostgresBackend(postgres_dsn)
    yield backend
    backend.close_all()


@pytest.fixture
def open_db(pg: PostgresBackend, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    if "storage" in inspect.signature(engine_database.Database.__init__).parameters:
        pytest.fail("Database takes a storage now: inject pg.open(...) here instead of patching")

    def postgres_storage(_directory: Any, *, durability: str, **options: Any) -> Any:
        assert durability in ("fsync", "os")  # PostgreSQL: synchronous_commit on either way
        return pg.open(**options)

    monkeypatch.setattr(engine_database, "SQLiteStorage", postgres_storage)

    def open_(clock: ManualClock) -> synapsedb.Database:
        return synapsedb.open(tmp_path / "d", clock=clock, llm=None, background_maintenance=False)

    return open_


def test_the_engine_runs_on_postgres(open_db: Any, pg: PostgresBackend) -> None:
    clock = ManualClock()
    with open_db(clock) as db:
        mem = db.namespace("acme", agent="intake")
        m1 = mem.write("user:1", {"content": f"Card ending {SECRET} on file"})
        before_update = clock.now_us() / 1e6
        clock.advance(5)
        mem.update(m1.id, {"content": f"Card {SECRET} replaced"})
        mem.set("user:1", "card", {"number": SECRET})
        mem.append("user:1", {"content": f"Called about {SECRET}"})
        mem.write("user:2", "Unrelated customer prefers email")
        res = mem.query("card replaced", agent="knowledge")
        assert res.hits and res.hits[0].entity == "user:1"
        mem.record_answer("ans-1", [res.query_id], agent="resolution")
        assert [m.content for m in mem.memories("user:1", as_of=before_update)] == [
            f"Card ending {SECRET} on file"
        ]
        assert [v.version for v in mem.history(m1.id)] == [1, 2]
        assert SECRET in pg.stored_text()
    # reopen: the engine rebuilds its state from PostgreSQL
    with open_db(clock) as db:
        mem = db.namespace("acme")
        assert mem.get(m1.id).content == f"Card {SECRET} replaced"
        assert mem.get("user:1", "card").value == {"number": SECRET}
        assert mem.lineage("ans-1").answer_id == "ans-1"
        clock.advance(5)
        out = mem.forget(entity="user:1", purge=True, agent="dpo")
        assert out.purged and (out.memories, out.versions, out.facts, out.events) == (
            2,
            3,
            1,
            1,
        )  # the event has a searchable twin
        assert not db.erasure_pending
        assert mem.memories("user:1") == [] and mem.facts("user:1") == []
        assert [v.erased for v in mem.history(m1.id)] == [True, True]
    stored = pg.stored_text()
    assert SECRET not in stored and "user:1" not in stored
    assert "Unrelated customer prefers email" in stored
    with open_db(clock) as db:
        mem = db.namespace("acme")
        assert [m.entity for m in mem.memories("user:2")] == ["user:2"]
        assert all(h.entity != "user:1" for h in mem.query("card on file"))
