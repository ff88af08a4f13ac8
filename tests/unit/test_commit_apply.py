"""Acknowledged == durable == visible, even when something fails after the commit (issue 10,
item 4).

An exception while applying a committed batch to memory used to report the durable writes as
failed (clients retried and duplicated them), leave a fact's in-memory version behind the disk
(every later compare-and-set on it failed) and fail every other op of the group commit, other
tenants' included. The failures are injected here by wrapping engine methods for one call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import ManualClock, SynapseError
from synapsedb.engine.ops import SetFact
from synapsedb.engine.state import NamespaceState
from synapsedb.engine.writer import Writer
from synapsedb.index.catalog import Catalog
from synapsedb.storage.sqlite import SQLiteStorage


def _open(path: Path) -> synapsedb.Database:
    return synapsedb.open(
        path, clock=ManualClock(), durability="os", background_maintenance=False, embedder=None
    )


def _fail_once(monkeypatch: pytest.MonkeyPatch, cls: type, name: str, when: Any = None) -> None:
    """Make ``cls.name`` raise RuntimeError on its next call (for which ``when`` holds)."""
    original = getattr(cls, name)
    armed = [True]

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if armed[0] and (when is None or when(self, *args)):
            armed[0] = False
            raise RuntimeError(f"injected failure in {cls.__name__}.{name}")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, wrapper)


def test_a_fact_write_whose_apply_fails_succeeds_and_stays_in_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "d"
    with _open(path) as db:
        mem = db.namespace("n")
        mem.set("u", "k", 1)
        _fail_once(monkeypatch, NamespaceState, "add_fact")
        with caplog.at_level(logging.ERROR, logger="synapsedb.writer"):
            fact = mem.set("u", "k", 2, if_version=1)  # durable: reported as done
        assert fact.version == 2
        assert "applying a committed batch failed" in caplog.text
        assert mem.get("u", "k").value == 2  # visible
        assert mem.set("u", "k", 3, if_version=2).version == 3  # memory did not fall behind
    with _open(path) as db:
        assert [f.value for f in db.namespace("n").history("u", "k")] == [1, 2, 3]


def test_a_memory_write_whose_apply_fails_succeeds_and_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d"
    with _open(path) as db:
        mem = db.namespace("n")
        mem.write("u", "first parcel note")
        _fail_once(monkeypatch, Catalog, "add_many")
        m = mem.write("u", "second parcel note")
        assert mem.get(m.id).content == "second parcel note"
        assert {h.id for h in mem.query("parcel", mode="keyword").hits} >= {m.id}
        assert mem.update(m.id, {"content": "third"}, if_version=1).version == 2
    with _open(path) as db:
        assert [v.content for v in db.namespace("n").history(m.id)] == [
            "second parcel note",
            "third",
        ]


@pytest.fixture
def grouped(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., list[Any]]]:
    """Run calls so that they share one group commit: the first commit is held until every
    call's op is queued behind it."""
    hold = threading.Event()
    commit = SQLiteStorage.commit
    submit = Writer.submit
    queued: list[int] = []

    def held_commit(self: SQLiteStorage, batch: Any) -> None:
        hold.wait(10)
        commit(self, batch)

    def counted_submit(self: Writer, op: Any) -> Any:
        queued.append(1)
        return submit(self, op)

    def run(first: Callable[[], Any], *calls: Callable[[], Any]) -> list[Any]:
        monkeypatch.setattr(SQLiteStorage, "commit", held_commit)
        monkeypatch.setattr(Writer, "submit", counted_submit)
        results: list[Any] = [None] * (len(calls) + 1)

        def call(i: int, fn: Callable[[], Any]) -> None:
            try:
                results[i] = fn()
            except Exception as exc:
                results[i] = exc

        threads = [threading.Thread(target=call, args=(0, first))]
        threads[0].start()
        while not queued:  # the first call leads and waits in its commit
            time.sleep(0.001)
        threads += [threading.Thread(target=call, args=(i + 1, fn)) for i, fn in enumerate(calls)]
        for t in threads[1:]:
            t.start()
        while len(queued) < len(threads):
            time.sleep(0.001)
        time.sleep(0.05)  # from submit() to the queue: a few bytecodes
        hold.set()
        for t in threads:
            t.join(10)
        monkeypatch.setattr(SQLiteStorage, "commit", commit)
        return results

    yield run
    hold.set()


def test_an_apply_failure_does_not_spread_to_the_other_ops_of_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grouped: Callable[..., list[Any]]
) -> None:
    with _open(tmp_path / "d") as db:
        a, b = db.namespace("tenant-a"), db.namespace("tenant-b")
        a.set("u", "k", 0)
        b.set("u", "k", 0)
        sizes: list[int] = []
        db.observers.commit.append(lambda rows, _s: sizes.append(rows))
        _fail_once(
            monkeypatch,
            NamespaceState,
            "add_fact",
            lambda st, rec: (st.name, rec.key) == ("tenant-a", "k"),
        )
        results = grouped(
            lambda: a.set("u", "first", 1),
            lambda: a.set("u", "k", 1, if_version=1),
            lambda: b.set("u", "k", 1, if_version=1),
        )
        assert sizes == [1, 2]  # the last two calls shared one commit
        assert [type(r).__name__ for r in results] == ["Fact"] * 3, results
        assert a.get("u", "k").version == 2 and b.get("u", "k").version == 2
        assert a.get("u", "first").value == 1


def test_an_op_that_raises_while_planning_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grouped: Callable[..., list[Any]]
) -> None:
    with _open(tmp_path / "d") as db:
        a, b = db.namespace("tenant-a"), db.namespace("tenant-b")
        a.set("u", "k", 0)
        b.set("u", "k", 0)
        sizes: list[int] = []
        db.observers.commit.append(lambda rows, _s: sizes.append(rows))
        _fail_once(monkeypatch, SetFact, "plan", lambda op, tx: op.entity == "boom")
        results = grouped(
            lambda: a.set("u", "first", 1),
            lambda: b.set("u", "k", 1, if_version=1),
            lambda: a.set("boom", "k", 1),
            lambda: a.set("u", "k", 1, if_version=1),
        )
        assert sizes == [1, 2]  # the last three calls shared one commit (one failed)
        assert type(results[2]) is SynapseError and results[2].code == "internal", results
        assert [type(r).__name__ for i, r in enumerate(results) if i != 2] == ["Fact"] * 3
        assert a.get("u", "k").version == 2 and b.get("u", "k").version == 2
        assert a.facts("boom") == []


def test_a_bug_inside_the_storage_commit_rolls_back_and_fails_only_its_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value SQLite cannot bind (a bug: validation should have refused it) fails its own
    write with an internal error, writes nothing of it, and leaves no open transaction that
    would fail the next batch, another tenant's."""
    from synapsedb.storage import sqlite as sqlite_storage

    with _open(tmp_path / "d") as db:
        a, b = db.namespace("tenant-a"), db.namespace("tenant-b")
        a.set("u", "k", 0)
        real = sqlite_storage.SQLiteStorage.commit

        def poisoned(self: Any, batch: Any) -> None:
            if any(row[1] == "boom" for row in batch.facts):
                batch.facts.append((*batch.facts[0][:-1], 2**70))  # not an SQLite integer
            real(self, batch)

        monkeypatch.setattr(sqlite_storage.SQLiteStorage, "commit", poisoned)
        with pytest.raises(OverflowError):
            a.set("boom", "k", 1)
        assert b.set("u", "k", 1).version == 1  # the next batch commits
        assert a.facts("boom") == [] and a.get("u", "k").version == 1
    with _open(tmp_path / "d") as db:
        assert db.namespace("tenant-a").facts("boom") == []
        assert db.namespace("tenant-b").get("u", "k").value == 1
