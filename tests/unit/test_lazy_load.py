"""Loading namespaces on first need (engine/lazy.py, setting ``load``): an open reads the stored
names only; each namespace loads at its first use, exactly once, and a background thread loads
the rest. Where a test needs a namespace to stay unloaded until it is used, the background
thread is held off (``Loader.start`` replaced by a no-op for that test)."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import ManualClock, Settings, StorageError, ValidationError
from synapsedb.engine.lazy import Loader
from synapsedb.storage.sqlite import SQLiteStorage
from synapsedb.times import to_datetime


def _open(path: Path, clock: ManualClock, **options: Any) -> synapsedb.Database:
    return synapsedb.open(
        path,
        clock=clock,
        durability="os",
        background_maintenance=False,
        embedder=None,
        llm=None,
        **options,
    )


def _populate(path: Path, clock: ManualClock, names: tuple[str, ...] = ("a", "b")) -> None:
    with _open(path, clock) as db:
        for name in names:
            ns = db.namespace(name)
            m = ns.write("u", {"content": f"{name} parcel note", "embedding": [1.0, 0.0, 0.5]})
            ns.update(m.id, {"content": f"{name} parcel note, updated"})
            ns.write("v", {"content": f"{name} other", "embedding": [0.0, 1.0, 0.5]})
            ns.set("u", "order", 1)
            ns.append("u", "called about the parcel")
            res = ns.query("parcel", embedding=[1.0, 0.0, 0.5])
            ns.record_answer("a1", [res.query_id])
            clock.advance(1)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> None:
    """No background loading: namespaces load at first need only."""
    monkeypatch.setattr(Loader, "start", lambda self: None)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """Every load_namespaces call's names, in order."""
    calls: list[list[Any]] = []
    real = SQLiteStorage.load_namespaces

    def counted(self: SQLiteStorage, names: Any) -> Any:
        calls.append(list(names))
        return real(self, names)

    monkeypatch.setattr(SQLiteStorage, "load_namespaces", counted)
    return calls


def _loaded(calls: list[list[Any]]) -> list[Any]:
    return [ns for names in calls for ns in names]


def _dump(db: synapsedb.Database, name: str) -> dict[str, Any]:
    """What a namespace serves, as plain values (times included; a memory id as the order
    it is first seen in, so that the ids of new memories need not match)."""
    ns = db.namespace(name)
    mems = ns.memories("u") + ns.memories("v")
    ids: dict[str, str] = {}

    def label(mid: str) -> str:
        return ids.setdefault(mid, f"#{len(ids)}")

    return {
        "memories": [(label(m.id), m.version, m.content, m.recorded_at) for m in mems],
        "history": [[(v.version, v.content) for v in ns.history(m.id)] for m in mems],
        "facts": [(f.key, f.value, f.version) for f in ns.facts("u")],
        "events": [(e.id, e.content) for e in ns.events("u")],
        "query": [
            (label(h.id), round(h.score, 6))
            for h in ns.query("parcel", embedding=[1.0, 0.0, 0.5], k=5).hits
        ],
    }


OPS: dict[str, Callable[[synapsedb.Namespace], Any]] = {
    "get fact": lambda ns: ns.get("u", "order").value,
    "memories": lambda ns: [m.content for m in ns.memories("u")],
    "history": lambda ns: [v.version for v in ns.history(ns.memories("u")[0].id)],
    "events": lambda ns: [e.content for e in ns.events("u")],
    "facts": lambda ns: [f.key for f in ns.facts("u")],
    "query": lambda ns: [h.content for h in ns.query("parcel", embedding=[1, 0, 0.5], k=1).hits],
    "keyword query": lambda ns: [h.entity for h in ns.query("parcel", k=1, mode="keyword").hits],
    "write": lambda ns: ns.write("u", "more").version,
    "update": lambda ns: ns.update(ns.memories("v")[0].id, {"content": "v2"}).version,
    "delete memory": lambda ns: ns.delete(ns.memories("v")[0].id) is not None,
    "set": lambda ns: ns.set("u", "order", 2, if_version=1).version,
    "delete fact": lambda ns: ns.delete("u", "order") is not None,
    "append": lambda ns: ns.append("u", "again").content,
    "forget": lambda ns: ns.forget(entity="v").memories,
    "configure": lambda ns: ns.configure(max_hot=10).max_hot,
    "maintain": lambda ns: ns.maintain().namespace,
    "record answer": lambda ns: (
        ns.record_answer("a2", [ns.query("parcel", embedding=[1, 0, 0.5]).query_id]) is not None
    ),
    "import refused": lambda ns: ns.import_records(
        [{"kind": "namespace", "format": 1, "created_us": 1}]
    ),
    "export": lambda ns: sorted(r["kind"] for r in ns.export()),
}


@pytest.mark.parametrize("op", list(OPS))
def test_every_operation_on_a_namespace_not_loaded_yet(
    tmp_path: Path, held: None, loads: list[list[Any]], op: str
) -> None:
    """Each kind of call, the first on its namespace after a lazy open, answers as it does
    after an eager open; it loads that namespace (once) and no other."""
    clock = ManualClock()
    _populate(tmp_path / "lazy", clock)
    shutil.copytree(tmp_path / "lazy", tmp_path / "eager")
    outcomes = []
    for load in ("lazy", "eager"):
        with _open(tmp_path / load, clock, load=load) as db:
            if load == "lazy":
                assert db.core.loading_pending == 2 and loads == []
            try:
                outcomes.append(OPS[op](db.namespace("a")))
            except synapsedb.SynapseError as exc:
                outcomes.append(type(exc))
            if load == "lazy":
                assert _loaded(loads) in ([], ["a"])  # export reads storage, not the state
                assert db.core.loading_pending == (2 if op == "export" else 1)
                after = _dump(db, "a")
                assert _loaded(loads) == ["a"]
            else:
                assert after == _dump(db, "a")  # the same state after the same op
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] is not None


def test_listings_and_the_clock_before_anything_loads(tmp_path: Path, held: None) -> None:
    clock = ManualClock()
    _populate(tmp_path / "d", clock, names=("b", "a", "c"))
    with _open(tmp_path / "d", clock) as db:
        latest = db.last_commit_us
    clock.advance(-3600)  # the clock stepped back: the commit clock still starts after the rows
    with _open(tmp_path / "d", clock) as db:
        assert db.core.loading_pending == 3
        assert db.namespaces() == ["a", "b", "c"]  # from the stored names: nothing loaded
        assert db.last_commit_us == latest and db.core.loading_pending == 3
        fact = db.namespace("c").set("u", "late", 1)
        assert fact.version == 1 and fact.recorded_at == to_datetime(latest)  # not before
        # what a metrics scrape and /readyz ask: the namespaces loaded so far, at once
        assert db.tier_counts(load=False) == {"c": (3, 0)}
        assert db.unavailable_namespaces(load=False) == {} and db.loading_pending == 2
        assert db.tier_counts() == {"a": (3, 0), "b": (3, 0), "c": (3, 0)}  # loads them all
        assert db.core.loading_pending == 0 and db.loading_pending == 0


def test_two_threads_asking_at_once_load_a_namespace_once(
    tmp_path: Path, held: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one thread loads ``a`` (held inside its read), a second asking for ``a`` waits for
    that load, and a third loads ``b`` meanwhile without waiting."""
    clock = ManualClock()
    _populate(tmp_path / "d", clock)
    inside, release = threading.Event(), threading.Event()
    calls: list[list[Any]] = []
    real = SQLiteStorage.load_namespaces

    def slow(self: SQLiteStorage, names: Any) -> Any:
        calls.append(list(names))
        if "a" in names:
            inside.set()
            assert release.wait(10)
        return real(self, names)

    monkeypatch.setattr(SQLiteStorage, "load_namespaces", slow)
    with _open(tmp_path / "d", clock) as db:
        got: dict[str, Any] = {}

        def read(key: str, name: str) -> None:
            got[key] = db.namespace(name).get("u", "order").value

        first = threading.Thread(target=read, args=("first", "a"))
        first.start()
        assert inside.wait(10)
        second = threading.Thread(target=read, args=("second", "a"))
        second.start()
        read("other", "b")  # not blocked by the load of a
        assert got == {"other": 1} and calls == [["a"], ["b"]]
        release.set()
        first.join(10)
        second.join(10)
        assert got == {"other": 1, "first": 1, "second": 1}
        assert calls == [["a"], ["b"]]  # a was read once


def _damage(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path / "synapse.db", isolation_level=None)
    conn.executescript(f"BEGIN; {sql}; COMMIT;")
    conn.close()


def test_a_bad_row_found_when_its_namespace_loads(
    tmp_path: Path, held: None, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    _populate(tmp_path / "d", clock)
    _damage(tmp_path / "d", "UPDATE fact_versions SET value = 'nope' WHERE ns = 'b'")
    with (
        caplog.at_level(logging.ERROR, logger="synapsedb.database"),
        _open(tmp_path / "d", clock) as db,
    ):
        assert not [r for r in caplog.records if "'b'" in r.getMessage()]  # not loaded yet
        assert db.unavailable_namespaces(load=False) == {}  # not found yet, and not waited for
        assert db.namespace("a").get("u", "order").value == 1
        for call in (
            lambda: db.namespace("b").get("u", "order"),
            lambda: db.namespace("b").write("u", "more"),
        ):
            with pytest.raises(StorageError) as err:
                call()
            assert "'b' is unavailable" in err.value.message
            assert "fact_versions" in err.value.message
        [report] = [r.getMessage() for r in caplog.records if "'b'" in r.getMessage()]
        assert "table fact_versions" in report and "Repair:" in report
        assert list(db.unavailable_namespaces()) == ["b"]
        assert db.namespaces() == ["a"]


def test_close_while_the_background_thread_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock()
    names = tuple(f"n{i}" for i in range(40))
    with _open(tmp_path / "d", clock) as db:
        for name in names:
            db.namespace(name).set("u", "k", name)
    reading = threading.Event()
    real = SQLiteStorage.load_namespaces

    def slow(self: SQLiteStorage, batch: Any) -> Any:
        reading.set()
        threading.Event().wait(0.05)
        return real(self, batch)

    monkeypatch.setattr(SQLiteStorage, "load_namespaces", slow)
    db = _open(tmp_path / "d", clock)
    assert reading.wait(10)
    db.close()  # returns once the chunk being read is done
    assert not [t for t in threading.enumerate() if t.name == "synapsedb-loader"]
    with _open(tmp_path / "d", clock) as db:
        assert [db.namespace(n).get("u", "k").value for n in names] == list(names)


def test_the_background_thread_loads_everything(tmp_path: Path) -> None:
    clock = ManualClock()
    _populate(tmp_path / "d", clock, names=("a", "b", "c"))
    with _open(tmp_path / "d", clock) as db:
        assert db.wait_for_indexes(30)
        assert db.core.loading_pending == 0
        assert db.tier_counts() == {"a": (3, 0), "b": (3, 0), "c": (3, 0)}


def test_the_saved_vector_graph_is_taken_when_a_namespace_loads(tmp_path: Path, held: None) -> None:
    clock = ManualClock()
    options = {"hnsw_threshold": 30}
    with _open(tmp_path / "d", clock, **options) as db:
        ns = db.namespace("big")
        ns.write_many(
            [
                {"entity": "u", "content": f"note {i}", "embedding": [1.0, float(i), 0.5]}
                for i in range(40)
            ]
        )
        assert db.wait_for_indexes(30)
    assert (tmp_path / "d" / "indexes" / "big.hnsw").exists()
    with _open(tmp_path / "d", clock, **options) as db:
        state = db.core.state("big")  # its first need: loaded now, with the saved graph
        assert state is not None and state.hnsw is not None and state.hnsw.count == 40


def _everything(db: synapsedb.Database) -> dict[str, Any]:
    unavailable = db.unavailable_namespaces()  # (loads every namespace)
    return {
        "unavailable": unavailable,
        "namespaces": db.namespaces(),
        "tiers": db.tier_counts(),
        "served": {name: _dump(db, name) for name in db.namespaces()},
    }


def test_lazy_and_eager_serve_the_same(tmp_path: Path, held: None) -> None:
    clock = ManualClock()
    _populate(tmp_path / "d", clock, names=("a", "b", "c", "bad"))
    _damage(tmp_path / "d", "UPDATE memory_versions SET metadata = '[1]' WHERE ns = 'bad'")
    _damage(tmp_path / "d", "DELETE FROM namespaces WHERE name = 'c'")
    got, clocks = {}, {}
    for load in ("lazy", "eager"):
        with _open(tmp_path / "d", clock, load=load) as db:
            clocks[load] = db.last_commit_us
            got[load] = _everything(db)
    assert got["lazy"] == got["eager"]
    # the one difference: a lazy open's commit clock starts after every stored time, those of
    # unavailable namespaces too (an eager open left theirs out)
    assert clocks["lazy"] >= clocks["eager"]
    assert got["lazy"]["namespaces"] == ["a", "b"]
    assert sorted(got["lazy"]["unavailable"]) == ["bad", "c"]


def test_the_load_setting() -> None:
    assert Settings().load == "lazy"
    assert Settings.from_env({"SYNAPSEDB_LOAD": "eager"}).load == "eager"
    with pytest.raises(ValidationError) as err:
        Settings(load="sometimes")  # type: ignore[arg-type]
    assert err.value.field == "load" and "lazy, eager" in err.value.message


def test_readyz_and_metrics_answer_at_once_while_namespaces_load(
    tmp_path: Path, held: None
) -> None:
    """An operator's /readyz and a /metrics scrape right after an open say how many namespaces
    wait and count those loaded so far; neither loads the rest (on 10,000 namespaces that took
    38 s, on the event loop)."""
    from starlette.testclient import TestClient

    from synapsedb.server import create_app

    clock = ManualClock()
    _populate(tmp_path / "d", clock, names=("a", "b", "c"))
    with _open(tmp_path / "d", clock) as db, TestClient(create_app(db)) as c:
        db.namespace("b").get("u", "order")  # loads b only
        told = c.get("/readyz").json()
        assert told["status"] == "ready" and told["namespaces_loading"] == 2
        assert told["unavailable_namespaces"] == {}
        scraped = c.get("/metrics").text
        assert "synapsedb_namespaces_loading 2.0" in scraped
        assert 'synapsedb_memories{namespace="b",tier="hot"} 3.0' in scraped
        assert 'namespace="a"' not in scraped
        assert db.loading_pending == 2  # still: nothing above loaded them
