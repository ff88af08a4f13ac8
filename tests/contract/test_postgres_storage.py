"""What is particular to the PostgreSQL backend, beyond the contract: the erasure waits for
snapshots and VACUUMs, a lost connection is replaced, several storages (processes) share one
schema, migrations race safely, and bad configuration is refused with a clear error."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest

from synapsedb.errors import StorageError, ValidationError
from synapsedb.storage.base import Batch, Purge
from synapsedb.storage.postgres_schema import MIGRATIONS

from .conftest import PostgresBackend
from .rows import memory, namespace


@pytest.fixture
def pg(postgres_dsn: str) -> Any:
    backend = PostgresBackend(postgres_dsn)
    yield backend
    backend.close_all()


def test_an_erasure_waits_for_open_snapshots_then_vacuums(pg: PostgresBackend) -> None:
    storage = pg.open(erasure_wait_ms=0)
    storage.commit(
        Batch(
            namespaces=[namespace("n")],
            memories=[memory("n", "m", entity="zed", content="zed secret")],
        )
    )
    held = storage.load("n")  # a load not yet read: its snapshot still sees the old rows
    storage.commit(Batch(purges=[Purge("n", "zed", "alias:1")]))
    assert storage.erasure_pending
    assert "zed" not in pg.stored_text()  # gone from the tables at once
    assert not storage.finish_erasure(0)  # the dead row versions cannot be vacuumed yet
    for stream in (
        held.namespaces,
        held.tiers,
        held.access,
        held.memories,
        held.facts,
        held.events,
        held.answers,
    ):
        list(stream)
    assert storage.finish_erasure(1_000)
    assert not storage.erasure_pending
    vacuumed = pg.sql(
        "SELECT relname FROM pg_stat_user_tables WHERE schemaname = %s AND last_vacuum IS NOT NULL",
        (pg.schema,),
    )
    assert {"memory_versions", "events", "queries"} <= {r[0] for r in vacuumed}


def test_a_load_dropped_unread_releases_its_snapshot(pg: PostgresBackend) -> None:
    storage = pg.open()
    storage.commit(Batch(namespaces=[namespace("n")], memories=[memory("n", "m")]))
    rows = storage.load()
    next(rows.memories)
    del rows  # streams dropped half read: the session closes its connection

    def sessions() -> int:
        found = pg.sql(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL "
            "AND pid <> pg_backend_pid() AND state = 'idle in transaction'"
        )
        return int(found[0][0])

    assert sessions() == 0


def test_a_lost_connection_is_replaced(pg: PostgresBackend) -> None:
    storage = pg.open()
    storage.commit(Batch(namespaces=[namespace("n")], memories=[memory("n", "a")]))
    storage.read_memory_chain("n", "a")
    # the server ends every connection of this schema's storage (a restart, a failover)
    pg.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE pid <> pg_backend_pid() AND datname = current_database() "
        "AND backend_type = 'client backend'"
    )
    storage.commit(Batch(memories=[memory("n", "b")]))  # rolled back by the loss: sent again
    assert [r.id for r in storage.read_memory_chains("n", ["a", "b"])] == ["a", "b"]


def test_two_storages_share_one_schema(pg: PostgresBackend) -> None:
    one, two = pg.open(), pg.open()
    one.commit(Batch(namespaces=[namespace("n")], memories=[memory("n", "from-one")]))
    two.commit(Batch(memories=[memory("n", "from-two", sys_us=2_000)]))
    assert [r.id for r in one.load("n").memories] == ["from-one", "from-two"]
    assert [r.id for r in two.read_memory_chains("n", ["from-one"])] == ["from-one"]


def test_concurrent_opens_migrate_once(pg: PostgresBackend) -> None:
    opened: list[Any] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(pg.open())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [s.schema_version for s in opened] == [len(MIGRATIONS)] * 4
    assert pg.sql("SELECT count(*) FROM schema_migrations") == [(len(MIGRATIONS),)]


@pytest.mark.parametrize("schema", ["Public", "1abc", "a-b", "x" * 64, "a;drop", ""])
def test_a_bad_schema_name_is_refused(postgres_dsn: str, schema: str) -> None:
    from synapsedb.storage.postgres import PostgresStorage

    with pytest.raises(ValidationError, match="schema") as info:
        PostgresStorage(postgres_dsn, schema=schema)
    assert info.value.details["field"] == "schema"


def test_an_unreachable_server_is_a_storage_error_without_the_password(tmp_path: Any) -> None:
    from synapsedb.storage.postgres import PostgresStorage

    dsn = f"postgresql://u:hunter2@/db?host={tmp_path}&connect_timeout=1"
    with pytest.raises(StorageError, match="cannot open PostgreSQL storage") as info:
        PostgresStorage(dsn, connect_timeout_s=1)
    assert "hunter2" not in str(info.value) and "hunter2" not in str(info.value.details)
    assert str(tmp_path) in info.value.details["where"]


def test_without_psycopg_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from synapsedb.storage.postgres import PostgresStorage

    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(StorageError, match=r"synapsedb\[postgres\]"):
        PostgresStorage("postgresql:///nowhere")


def test_synapsedb_imports_without_psycopg() -> None:
    import subprocess

    code = "import sys, synapsedb, synapsedb.storage; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_open_storage_chooses_the_backend_by_location(postgres_dsn: str, tmp_path: Any) -> None:
    from synapsedb.storage import SQLiteStorage, is_postgres_url, open_storage
    from synapsedb.storage.postgres import PostgresStorage

    sqlite = open_storage(tmp_path, durability="os")
    assert isinstance(sqlite, SQLiteStorage)
    sqlite.close()
    assert is_postgres_url(postgres_dsn) and not is_postgres_url(str(tmp_path))
    joiner = "&" if "?" in postgres_dsn else "?"
    pg = open_storage(f"{postgres_dsn}{joiner}schema=from_url", query_log_max_rows=5)
    try:
        assert isinstance(pg, PostgresStorage) and pg.schema == "from_url"
        assert pg.schema_version == len(MIGRATIONS)
    finally:
        pg.close()
    with pytest.raises(ValidationError, match="mysql://"):
        open_storage("mysql://host/db")
    with pytest.raises(ValidationError, match="more than once"):
        open_storage(f"{postgres_dsn}{joiner}schema=a&schema=b")
    with pytest.raises(ValidationError, match="durability"):
        open_storage(tmp_path, durability="never")


def test_two_storages_on_one_schema_follow_each_other(pg: PostgresBackend) -> None:
    """SharedStorage: what one commits, the other reads by marks (in commit order, with the
    namespaces row of each namespace named); its own latest commit it does not read back;
    in-place changes come as reloads of the other origin only."""
    from synapsedb.storage.base import SharedStorage

    a, b = pg.open(), pg.open()
    assert isinstance(a, SharedStorage) and a.origin != b.origin
    marks = b.follow_marks()
    a.commit(Batch(namespaces=[namespace("acme")], memories=[memory("acme", "m1", 1, 1_000)]))
    a.commit(Batch(memories=[memory("acme", "m1", 2, 2_000)], configs=[('{"max_hot": 3}', "acme")]))
    seen = b.changes_since(marks)
    assert [(r[1], r[2]) for r in seen.memories] == [("m1", 1), ("m1", 2)]
    assert seen.last_us == 2_000 and seen.reloads == []
    assert [r[0] for r in seen.namespaces] == ["acme"] and seen.namespaces[0][4] == '{"max_hot": 3}'
    assert b.changes_since(seen.marks).memories == []
    b.commit(
        Batch(
            memories=[memory("acme", "m1", 3, 3_000)],
            tiers=[("acme", "m1", 3_000, "cold", 0.1, "test")],
        )
    )
    mine = b.changes_since(seen.marks)  # its own commit: the caller applied it already
    assert mine.memories == [] and mine.reloads == []
    theirs = a.changes_since(a.follow_marks())
    assert theirs.memories == []  # marks taken now: nothing after them
    other = pg.open().changes_since(seen.marks)  # a third process: b's tier move is a reload
    assert other.reloads == ["acme"] and [r[2] for r in other.memories] == [3]


def test_an_erasure_inside_the_commit_lock_vacuums_once_it_is_released(pg: PostgresBackend) -> None:
    """A process waiting for the commit lock holds a snapshot from before the purge; VACUUM
    inside the lock would wait for it while it waits for the lock. So the erasure finishes
    when the lock is released, and is then not pending."""
    a, b = pg.open(erasure_wait_ms=2_000), pg.open()
    a.commit(
        Batch(
            namespaces=[namespace("n")],
            memories=[memory("n", "m", entity="zed", content="zed secret")],
        )
    )
    entered, release = threading.Event(), threading.Event()

    def wait_for_the_lock() -> None:
        with b.exclusive():
            entered.set()
            release.wait(10)

    with a.exclusive():
        waiter = threading.Thread(target=wait_for_the_lock)
        waiter.start()
        while not pg.sql("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"):
            time.sleep(0.01)  # b is waiting for the lock a holds
        a.commit(Batch(purges=[Purge("n", "zed", "alias:1")]))
        assert a.erasure_pending  # not yet: b's snapshot still sees the rows
    assert entered.wait(10)
    assert not a.erasure_pending  # vacuumed as the lock was released
    release.set()
    waiter.join(10)
