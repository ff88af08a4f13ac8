"""Several SynapseDB processes on one PostgreSQL schema: what one acknowledges, the others
serve (memories, facts, events, queries, history, erasure), and writes from both stay exact
(versions, compare-and-set, stream ids). Each Database here has its own data directory and
its own PostgresStorage (connections, listener, origin), as a separate process would; one
test runs two real ``synapsedb serve`` processes.

Visibility is awaited (``eventually``) with a generous deadline, never timed: the lag is
measured in bench/, not asserted here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

import synapsedb
from synapsedb import VersionConflictError

from .conftest import PostgresBackend

T = TypeVar("T")


def eventually(read: Callable[[], T], ok: Callable[[T], bool], deadline_s: float = 10.0) -> T:
    """``read()`` until ``ok`` holds of its value (fails after ``deadline_s``)."""
    end = time.monotonic() + deadline_s
    while True:
        value = read()
        if ok(value):
            return value
        if time.monotonic() > end:
            pytest.fail(f"not seen within {deadline_s} s: last value {value!r}")
        time.sleep(0.005)


@pytest.fixture
def url(postgres_dsn: str) -> str:
    pg = PostgresBackend(postgres_dsn)
    return f"{pg.dsn}{'&' if '?' in pg.dsn else '?'}schema={pg.schema}"


@pytest.fixture
def pair(url: str, tmp_path: Path) -> Iterator[tuple[synapsedb.Database, synapsedb.Database]]:
    def open_(name: str) -> synapsedb.Database:
        return synapsedb.open(
            tmp_path / name, storage=url, llm=None, embedder=None, background_maintenance=False
        )

    a = open_("a")
    b = open_("b")
    yield a, b
    a.close()
    b.close()


def test_a_write_on_one_is_served_by_the_other(pair: Any) -> None:
    a, b = pair
    ma, mb = a.namespace("acme", agent="intake"), b.namespace("acme")
    m = ma.write("user:1", {"content": "Refund requested for order 1458", "embedding": [1.0, 0.0]})
    got = eventually(lambda: mb.memories("user:1"), lambda ms: len(ms) == 1)
    assert got[0].id == m.id and got[0].content == m.content and got[0].agent == "intake"
    ma.set("user:1", "plan", {"tier": "gold"})
    assert eventually(lambda: mb.facts("user:1"), bool)[0].value == {"tier": "gold"}
    ma.append("user:1", "Called about the refund")
    events = eventually(lambda: mb.events("user:1"), bool)
    assert [e.content for e in events] == ["Called about the refund"]
    hits = eventually(lambda: mb.query("refund order", k=5).hits, lambda h: len(h) == 2)
    assert {h.entity for h in hits} == {"user:1"}
    assert b.namespaces() == ["acme"]


def test_versions_and_compare_and_set_stay_exact_across_processes(pair: Any) -> None:
    a, b = pair
    ma, mb = a.namespace("acme"), b.namespace("acme")
    m = ma.write("u", "first")
    eventually(lambda: mb.memories("u"), bool)
    assert mb.update(m.id, {"content": "second"}, if_version=1).version == 2
    # A plans under the commit lock after catching up: it sees version 2, whether or not its
    # listener got there first
    with pytest.raises(VersionConflictError):
        ma.update(m.id, {"content": "lost update"}, if_version=1)
    assert ma.update(m.id, {"content": "third"}).version == 3
    history = eventually(lambda: mb.history(m.id), lambda h: len(h) == 3)
    assert [v.content for v in history] == ["first", "second", "third"]
    assert ma.set("u", "k", 1).version == 1
    assert mb.set("u", "k", 2).version == 2  # B caught up before planning
    assert eventually(lambda: ma.get("u", "k").value, lambda v: v == 2) == 2


def test_concurrent_writers_on_both_share_one_stream(pair: Any) -> None:
    errors: list[BaseException] = []

    def append(db: synapsedb.Database, who: str) -> None:
        ns = db.namespace("acme")
        try:
            for i in range(25):
                ns.append("user:1", {"content": f"{who} {i}"}, searchable=False)
                ns.write(f"user:{who}", f"{who} note {i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=append, args=(db, who)) for db, who in zip(pair, "ab", strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for db in pair:
        ns = db.namespace("acme")
        events = eventually(lambda ns=ns: ns.events("user:1", limit=100), lambda e: len(e) == 50)
        ids = [e.id for e in events]
        assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
        assert len(set(ids)) == 50
        for who in "ab":
            eventually(lambda ns=ns, w=who: ns.memories(f"user:{w}"), lambda m: len(m) == 25)


def test_an_erasure_on_one_is_gone_from_the_other(pair: Any) -> None:
    a, b = pair
    ma, mb = a.namespace("acme"), b.namespace("acme")
    ma.write("user:1", "Card 4111-1111-1111-1111 on file")
    ma.write("user:2", "Prefers email")
    ma.set("user:1", "card", "4111")
    eventually(lambda: mb.memories("user:1"), bool)
    eventually(lambda: mb.facts("user:1"), bool)
    out = mb.forget(entity="user:1", purge=True)
    assert out.purged and out.memories == 1
    eventually(lambda: ma.memories("user:1") + ma.facts("user:1"), lambda left: left == [])
    assert all(h.entity != "user:1" for h in ma.query("card on file", k=5).hits)
    assert [m.entity for m in ma.memories("user:2")] == ["user:2"]
    assert a.subject_of("user:1") == b.subject_of("user:1")  # one secret for the schema


def test_two_serve_processes_on_one_schema(url: str, tmp_path: Path) -> None:
    """``synapsedb serve --storage postgresql://...`` twice: written through one server, read
    through the other."""
    servers = [_serve(url, tmp_path / name) for name in ("a", "b")]
    try:
        (a, _), (b, _) = servers
        r = httpx.post(
            f"{a}/v1/namespaces/acme/memories",
            json={"entity": "user:1", "content": "Refund requested"},
        )
        assert r.status_code == 201, r.text
        httpx.put(
            f"{a}/v1/namespaces/acme/facts",
            json={"entity": "user:1", "key": "plan", "value": "gold"},
        ).raise_for_status()
        httpx.post(
            f"{a}/v1/namespaces/acme/events", json={"entity": "user:1", "event": "Called"}
        ).raise_for_status()
        got = eventually(
            lambda: httpx.get(f"{b}/v1/namespaces/acme/memories", params={"entity": "user:1"}),
            lambda resp: resp.status_code == 200 and len(resp.json()) == 2,
        ).json()
        assert {m["content"] for m in got} == {"Refund requested", "Called"}
        fact = httpx.get(
            f"{b}/v1/namespaces/acme/facts", params={"entity": "user:1", "key": "plan"}
        )
        assert fact.json()["value"] == "gold"
        events = httpx.get(f"{b}/v1/namespaces/acme/events", params={"stream": "user:1"}).json()
        assert [e["content"] for e in events] == ["Called"]
    finally:
        for _, proc in servers:
            proc.terminate()
        for _, proc in servers:
            proc.wait(20)


def _serve(url: str, data: Path) -> tuple[str, subprocess.Popen[bytes]]:
    from tests.support.live_server import free_port

    port = free_port()
    env = {**os.environ, "SYNAPSEDB_EMBEDDER": "none", "SYNAPSEDB_LLM_BASE_URL": ""}
    log = data.with_suffix(".log")
    with log.open("wb") as out:  # the child has its own copy of the descriptor
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "synapsedb",
                "serve",
                "--data",
                str(data),
                "--storage",
                url,
                "--port",
                str(port),
                "--auth",
                "none",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"synapsedb serve exited: {log.read_text()}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return base, proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.terminate()
    proc.wait(20)
    pytest.fail(f"synapsedb serve did not start within 60 s: {log.read_text()}")


def test_the_change_observers_of_one_see_the_writes_of_the_other(pair: Any) -> None:
    """What the change feed and SSE followers of a server are fed (observers.change), and
    the erase signal that makes the feed drop a namespace an erasure elsewhere rewrote."""
    a, b = pair
    seen: list[tuple[str, str]] = []
    erased: list[str] = []
    b.observers.change.append(lambda ns, entries: seen.extend((ns, e.action) for e in entries))
    b.observers.erase.append(lambda ns, _entity: erased.append(ns))
    ma = a.namespace("acme")
    ma.write("user:1", "hello")
    ma.set("user:1", "k", 1)
    ma.append("user:1", "called", searchable=False)
    eventually(lambda: list(seen), lambda s: len(s) == 3)
    assert [action for _, action in seen] == ["write", "set", "append"]
    assert {ns for ns, _ in seen} == {"acme"}
    ma.forget(entity="user:1", purge=True)
    assert eventually(lambda: list(erased), lambda e: "acme" in e)


def test_a_configuration_and_a_vector_space_set_on_one_hold_on_the_other(pair: Any) -> None:
    a, b = pair
    ma, mb = a.namespace("acme"), b.namespace("acme")
    ma.configure(max_hot=3)
    assert eventually(lambda: mb.config.max_hot, lambda v: v == 3) == 3
    m = ma.write("u", {"content": "north", "embedding": [1.0, 0.0, 0.0]})
    ma.write("u", {"content": "east", "embedding": [0.0, 1.0, 0.0]})
    hits = eventually(lambda: mb.query(embedding=[1.0, 0.1, 0.0], k=1).hits, bool)
    assert hits[0].id == m.id
    mb.configure(max_hot=5)  # and back
    assert eventually(lambda: ma.config.max_hot, lambda v: v == 5) == 5
