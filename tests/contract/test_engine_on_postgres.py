"""The whole engine on PostgreSQL: write, query, as_of, history, facts, streams, lineage,
forget purge (checked in the tables) and reopen, opened the ways a user opens it:
``synapsedb.open(path, storage="postgresql://...")`` and an injected storage object.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import ManualClock
from synapsedb.errors import ValidationError

from .conftest import PostgresBackend

SECRET = "4111-1111-1111-1111"


def url_of(pg: PostgresBackend) -> str:
    return f"{pg.dsn}{'&' if '?' in pg.dsn else '?'}schema={pg.schema}"


@pytest.fixture
def pg(postgres_dsn: str) -> Iterator[PostgresBackend]:
    backend = PostgresBackend(postgres_dsn)
    yield backend
    backend.close_all()


@pytest.fixture(params=["url", "injected"])
def open_db(request: pytest.FixtureRequest, pg: PostgresBackend, tmp_path: Path) -> Any:
    """Opens the engine on ``pg``'s schema: by URL, or with a storage object passed in (the
    database closes it)."""

    def open_(clock: ManualClock) -> synapsedb.Database:
        if request.param == "url":
            storage: Any = url_of(pg)
        else:
            from synapsedb.storage.postgres import PostgresStorage

            storage = PostgresStorage(pg.dsn, schema=pg.schema)
        return synapsedb.open(
            tmp_path / "d", storage=storage, clock=clock, llm=None, background_maintenance=False
        )

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


def test_the_data_directory_holds_no_rows_and_no_secret(
    pg: PostgresBackend, tmp_path: Path
) -> None:
    with synapsedb.open(tmp_path / "d", storage=url_of(pg), llm=None) as db:
        db.namespace("acme").write("user:1", "hello")
    names = {p.name for p in (tmp_path / "d").iterdir()}
    assert names <= {"LOCK", "indexes"}, names  # no synapse.db, no SECRET
    assert pg.sql("SELECT count(*) FROM memory_versions") == [(1,)]


def test_a_postgres_url_as_the_path_is_refused_with_the_fix(pg: PostgresBackend) -> None:
    with pytest.raises(ValidationError, match="storage='postgresql://") as err:
        synapsedb.open(url_of(pg), llm=None)
    assert err.value.field == "path"


def test_a_storage_that_is_not_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="no load") as err:
        synapsedb.open(tmp_path / "d", storage=object(), llm=None)
    assert err.value.field == "storage"
    with pytest.raises(ValidationError, match="mysql://") as err:
        synapsedb.open(tmp_path / "d", storage="mysql://db/x", llm=None)
    assert err.value.field == "storage"


def test_processes_on_one_schema_share_the_secret(pg: PostgresBackend, tmp_path: Path) -> None:
    """Purge aliases are keyed hashes: two data directories on one schema must make the same."""
    with synapsedb.open(tmp_path / "a", storage=url_of(pg), llm=None) as a:
        alias = a.subject_of("user:1")
    with synapsedb.open(tmp_path / "b", storage=url_of(pg), llm=None) as b:
        assert b.subject_of("user:1") == alias
    (stored,) = pg.sql("SELECT value FROM secret")
    assert len(bytes(stored[0])) == 32


def test_a_bad_row_is_repaired_with_psql_on_the_schema(pg: PostgresBackend, tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", storage=url_of(pg), llm=None) as db:
        db.namespace("bad").set("u", "k", 1)
        db.namespace("good").set("u", "k", 1)
    pg.sql("UPDATE fact_versions SET value = 'nope' WHERE ns = 'bad'")
    with synapsedb.open(tmp_path / "d", storage=url_of(pg), llm=None) as db:
        shown = db.unavailable_namespaces()["bad"]
        assert db.namespace("good").get("u", "k").value == 1
    assert "psql " in shown and f"SET search_path = {pg.schema}; DELETE FROM fact_versions" in shown
    assert "password" not in shown


@pytest.mark.parametrize(
    ("storage", "said"),
    [
        ("mysql://db/x", "error [validation]: storage: mysql:// is not a storage"),
        (
            "postgresql://nobody@127.0.0.1:9/x?connect_timeout=2",
            "error [storage]: cannot open PostgreSQL storage database x on 127.0.0.1:9",
        ),
    ],
)
def test_serve_with_a_storage_it_cannot_use_says_so(
    tmp_path: Path, storage: str, said: str
) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "synapsedb",
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--storage",
            storage,
            "--port",
            "9",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYNAPSEDB_EMBEDDER": "none"},
    )
    assert out.returncode == 2, out.stderr
    # one line for the operator (the JSON log records the cause before it)
    assert any(line.startswith(said) for line in out.stderr.splitlines()), out.stderr
