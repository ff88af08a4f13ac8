"""Sharded placement on PostgreSQL (engine/placement.py, storage/postgres_shards.py): several
processes on one schema, each owning a share of the namespaces. Each Database here has its own
data directory, storage connections and lease, as a separate process would; the refreshes a
placement thread runs every third of the lease are called directly where a test needs the
processes to agree now. tests/contract/test_shards_serve.py runs real ``synapsedb serve``
processes (kill -9, a process added)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import NotOwnerError
from synapsedb.engine.placement import assign
from synapsedb.storage.postgres_shards import SHARDS, shard_of

from .conftest import PostgresBackend


@pytest.fixture
def url(postgres_dsn: str) -> str:
    pg = PostgresBackend(postgres_dsn)
    return f"{pg.dsn}{'&' if '?' in pg.dsn else '?'}schema={pg.schema}"


class Cluster:
    def __init__(self, url: str, root: Path) -> None:
        self.url, self.root = url, root
        self.dbs: dict[str, synapsedb.Database] = {}

    def start(self, name: str) -> synapsedb.Database:
        db = synapsedb.Database(
            self.root / name, storage=self.url, embedder=None, durability="os",
            background_maintenance=False, placement="sharded", lease_s=30,
            advertise_url=f"http://{name}.test:7379",
        )  # fmt: skip
        self.dbs[name] = db
        return db

    def settle(self) -> None:
        """Every process looks again, twice (a share given is taken on the next look)."""
        for _ in range(2):
            for db in self.dbs.values():
                assert db.core.placement is not None
                db.core.placement.refresh()

    def owner(self, ns: str) -> synapsedb.Database:
        owners = [db for db in self.dbs.values() if db.core.owner_of(ns) is None]
        assert len(owners) == 1, ns
        return owners[0]

    def close(self) -> None:
        for db in self.dbs.values():
            db.close()


@pytest.fixture
def cluster(url: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(url, tmp_path)
    yield c
    c.close()


def _names(n: int) -> list[str]:
    return [f"tenant-{i}" for i in range(n)]


def test_rendezvous_spreads_the_shares_and_moves_few() -> None:
    three = assign(["http://a:1", "http://b:1", "http://c:1"])
    counts = Counter(three)
    assert sum(counts.values()) == SHARDS and all(60 <= n <= 110 for n in counts.values())
    four = assign(["http://a:1", "http://b:1", "http://c:1", "http://d:1"])
    moved = [s for s in range(SHARDS) if three[s] != four[s]]
    assert all(four[s] == "http://d:1" for s in moved)  # only to the newcomer
    assert 40 <= len(moved) <= 90  # about a quarter
    assert assign([]) == [None] * SHARDS
    assert assign(["http://b:1", "http://a:1"]) == assign(["http://a:1", "http://b:1"])


def test_three_processes_own_a_third_each_and_refuse_the_others(cluster: Cluster) -> None:
    a, b, c = (cluster.start(n) for n in "abc")
    cluster.settle()
    owned = {n: len(db.core.placement.owned) for n, db in cluster.dbs.items()}  # type: ignore[union-attr]
    assert sum(owned.values()) == SHARDS and min(owned.values()) >= 50, owned
    for ns in _names(30):
        owner = cluster.owner(ns)
        owner.namespace(ns).write("user:1", {"content": f"note of {ns}", "embedding": [1.0, 0.0]})
        for db in (a, b, c):
            if db is owner:
                continue
            assert db.core.owner_of(ns) == owner.core.settings.advertise_url
            with pytest.raises(NotOwnerError) as err:
                db.namespace(ns).memories("user:1")
            assert err.value.owner == owner.core.settings.advertise_url
            with pytest.raises(NotOwnerError):
                db.namespace(ns).write("user:1", "not here")
        # a process holds only the namespaces it owns
        assert [db for db in (a, b, c) if db.core.states.resident(ns)] == [owner]
    assert a.namespaces() == b.namespaces() == sorted(_names(30))  # every process's


def test_a_commit_of_a_share_taken_away_writes_nothing(cluster: Cluster, url: str) -> None:
    a, b = cluster.start("a"), cluster.start("b")
    cluster.settle()
    ns = next(ns for ns in _names(50) if a.core.owner_of(ns) is None)
    mem = a.namespace(ns)
    mem.write("user:1", "before the move")
    # b takes the share while a still believes it owns it (a paused process, say)
    pg = _tables(b)
    pg.sql("UPDATE shards SET owner = %s, incarnation = %s WHERE shard = %s",
           (b.core.settings.advertise_url, b.core.placement.incarnation, shard_of(ns)))  # type: ignore[union-attr]  # fmt: skip
    with pytest.raises(NotOwnerError):
        mem.write("user:1", "after the move")
    rows = pg.sql("SELECT content FROM memory_versions WHERE ns = %s ORDER BY rowid", (ns,))
    assert rows == [("before the move",)]
    a.core.placement.refresh()  # type: ignore[union-attr]
    # a saw it lost the share: it holds nothing of it any more
    assert a.core.owner_of(ns) == b.core.settings.advertise_url
    assert a.core.states.resident(ns) is None and ns not in a.core.states.pending
    cluster.settle()  # rendezvous gives it back to a, which loads it afresh
    assert cluster.owner(ns) is a and b.core.states.resident(ns) is None
    assert [m.content for m in mem.memories("user:1")] == ["before the move"]
    mem.write("user:1", "after the move")


def test_a_dead_process_s_share_moves_and_nothing_committed_is_lost(
    cluster: Cluster,
) -> None:
    a, b, c = (cluster.start(n) for n in "abc")
    cluster.settle()
    names = _names(40)
    for ns in names:
        m = cluster.owner(ns).namespace(ns)
        m.write("user:1", {"id": f"m-{ns}", "content": f"note of {ns}"})
        m.set("user:1", "plan", ns)
    of_a = [ns for ns in names if a.core.owner_of(ns) is None]
    assert of_a
    # a dies: no more renewals (its thread stopped, nothing given up), its lease runs out
    a.core.placement._stop.set()  # type: ignore[union-attr]
    pg = _tables(a)
    pg.sql("UPDATE members SET lease_until = now() - interval '1 second' WHERE address = %s",
           (a.core.settings.advertise_url,))  # fmt: skip
    for db in (b, c):
        db.core.placement.refresh()  # type: ignore[union-attr]
    for ns in of_a:
        owner = b if b.core.owner_of(ns) is None else c
        assert owner.core.owner_of(ns) is None
        mem = owner.namespace(ns)
        assert mem.get(f"m-{ns}").content == f"note of {ns}"
        assert mem.get("user:1", "plan").value == ns
        assert mem.update(f"m-{ns}", {"content": "moved"}).version == 2  # versions go on
    with pytest.raises(NotOwnerError):  # the dead one's late write is refused
        a.namespace(of_a[0]).write("user:1", "too late")


def test_a_process_added_takes_a_share_from_each_and_a_clean_stop_gives_its_back(
    cluster: Cluster,
) -> None:
    for name in "abc":
        cluster.start(name)
    cluster.settle()
    before = {s: cluster.owner(ns) for s, ns in _one_name_per_shard().items()}
    d = cluster.start("d")
    cluster.settle()
    after = {s: cluster.owner(ns) for s, ns in _one_name_per_shard().items()}
    moved = [s for s in before if before[s] is not after[s]]
    assert all(after[s] is d for s in moved) and 40 <= len(moved) <= 90
    ns = next(ns for ns in _names(80) if d.core.owner_of(ns) is None)
    d.namespace(ns).write("user:1", "written on d")
    d.close()
    del cluster.dbs["d"]
    cluster.settle()  # no lease to wait for: d left
    assert [m.content for m in cluster.owner(ns).namespace(ns).memories("user:1")] == [
        "written on d"
    ]
    assert {s: cluster.owner(n) for s, n in _one_name_per_shard().items()} == before


def test_a_share_handed_over_is_served_by_the_newcomer_at_its_first_look(
    cluster: Cluster,
) -> None:
    """A process joins; an owner hands it a share at its own renewal; the newcomer serves that
    share's namespaces as soon as a request makes it look, not at its next renewal."""
    a = cluster.start("a")
    cluster.settle()
    ns = next(n for n in _names(80) if assign(["http://a.test:7379", "http://b.test:7379"])[
        shard_of(n)] == "http://b.test:7379")  # fmt: skip
    a.namespace(ns).write("user:1", "written on a")
    b = cluster.start("b")  # joins: owns nothing a holds yet
    assert b.core.owner_of(ns) == a.core.settings.advertise_url
    assert b.core.placement.unsettled  # type: ignore[union-attr]  # (so it looks often)
    a.core.placement.refresh()  # type: ignore[union-attr]  # a hands the share to b
    assert a.core.owner_of(ns) == b.core.settings.advertise_url
    assert b.core.owner_of(ns) == a.core.settings.advertise_url  # b has not looked yet
    b.core.placement.look()  # type: ignore[union-attr]  # (what a forwarded request does)
    assert b.core.owner_of(ns) is None
    assert not b.core.placement.unsettled  # type: ignore[union-attr]
    assert [m.content for m in b.namespace(ns).memories("user:1")] == ["written on a"]


def test_sharded_placement_needs_postgresql_and_an_address(tmp_path: Path, url: str) -> None:
    with pytest.raises(synapsedb.ValidationError) as err:
        synapsedb.Database(tmp_path / "x", embedder=None, placement="sharded",
                           advertise_url="http://x:1")  # fmt: skip
    assert err.value.field == "placement"
    with pytest.raises(synapsedb.ValidationError) as err:
        synapsedb.Database(tmp_path / "y", storage=url, embedder=None, placement="sharded")
    assert err.value.field == "advertise_url"
    one = synapsedb.Database(tmp_path / "z", storage=url, embedder=None, placement="sharded",
                             advertise_url="http://same:1")  # fmt: skip
    try:
        with pytest.raises(synapsedb.StorageError):  # a live process has that address
            synapsedb.Database(tmp_path / "w", storage=url, embedder=None,
                               placement="sharded", advertise_url="http://same:1")  # fmt: skip
    finally:
        one.close()


def test_a_schema_at_version_5_upgrades_keeps_its_rows_and_runs_sharded(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema written by the release before sharded placement (migrations 1-5, the last:
    answers name their entities) gets the membership tables (migration 6) at its next open,
    with every row kept."""
    from synapsedb.storage import postgres
    from synapsedb.storage.postgres_schema import MIGRATIONS

    pg = PostgresBackend(postgres_dsn)
    url = f"{pg.dsn}{'&' if '?' in pg.dsn else '?'}schema={pg.schema}"
    with monkeypatch.context() as m:
        m.setattr(postgres, "MIGRATIONS", MIGRATIONS[:5])
        old = synapsedb.Database(tmp_path / "old", storage=url, embedder=None,
                                 durability="os", background_maintenance=False)  # fmt: skip
        old.namespace("tenant-1").write("user:1", {"id": "m1", "content": "kept"})
        old.close()
    assert pg.sql("SELECT max(version) FROM schema_migrations") == [(5,)]
    assert pg.sql("SELECT to_regclass('shards')") == [(None,)]
    pg.sql("INSERT INTO answers (ns, id, sys_us, text, query_ids, cited, memories, entities) "
           "VALUES ('tenant-1', 'a1', 1, 'an answer', '[]', '[]', '[]', '[\"user:1\"]')")  # fmt: skip
    new = synapsedb.Database(tmp_path / "new", storage=url, embedder=None, durability="os",
                             background_maintenance=False, placement="sharded",
                             advertise_url="http://new.test:7379")  # fmt: skip
    try:
        assert pg.sql("SELECT max(version) FROM schema_migrations") == [(len(MIGRATIONS),)]
        assert pg.sql("SELECT count(*) FROM shards") == [(SHARDS,)]
        assert new.core.owner_of("tenant-1") is None  # the one live process owns everything
        assert new.namespace("tenant-1").get("m1").content == "kept"
        assert pg.sql("SELECT entities FROM answers WHERE id = 'a1'") == [('["user:1"]',)]
    finally:
        new.close()


def _tables(db: synapsedb.Database) -> PostgresBackend:
    """Raw SQL on the schema of ``db``."""
    storage: Any = db.core.storage
    pg = PostgresBackend(storage._dsn)
    pg.schema = storage.schema
    return pg


def _one_name_per_shard() -> dict[int, str]:
    out: dict[int, str] = {}
    i = 0
    while len(out) < SHARDS:
        name = f"probe-{uuid.UUID(int=i).hex[:8]}-{i}"
        out.setdefault(shard_of(name), name)
        i += 1
    return out
