"""Every operation of the table, embedded, over the sync client and over the async client, gives
the same answer or the same error.

The steps below name the API method each one calls; the table (synapsedb.surface.OPERATIONS)
decides what must be covered: a row the clients can reach with no step here fails
``test_every_row_has_a_step``, so a new operation comes with its congruence case. Each side is
its own database with a manual clock at the same start (ids and times are then equal by
construction); the served ones run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.client import AsyncRemoteDatabase, RemoteDatabase
from synapsedb.client.calls import ROUTED
from synapsedb.server import create_app
from synapsedb.surface import BY_NAME, OPERATIONS
from tests.congruence.conftest import ServedStorage

START = 1_761_318_000_000_000  # 2025-10-24T15:00:00Z
# a random id (ids.py), and an erased name's keyed hash (each database has its own key)
RANDOM = re.compile(r"\b01[0-9A-HJKMNP-TV-Z]{24}\b|\b[0-9a-f]{32}\b")
Step = tuple[str, Callable[[Any], Any]]

# every call is made through the namespace a side gives (``ns.sessions``, ``ns.cache`` too)
STEPS: list[Step] = [
    (
        "write",
        lambda m: m.write(
            "user:1",
            {
                "id": "m1",
                "content": "Refund requested for order 1458",
                "ts": "2025-10-24T10:00:00Z",
                "salience": 0.9,
                "metadata": {"channel": "email"},
            },
        ),
    ),
    ("write", lambda m: m.write("user:1", {"content": ""})),
    ("write", lambda m: m.write("user:1", {"content": "x", "salience": float("nan")})),
    (
        "write_many",
        lambda m: m.write_many(
            [
                ("user:1", {"id": "m2", "content": "Parcel in Hamburg"}),
                {"entity": "user:2", "id": "m3", "content": "Prefers the phone"},
            ]
        ),
    ),
    ("write_many", lambda m: m.write_many([{"content": "no entity"}])),
    ("update", lambda m: m.update("m2", {"content": "Parcel in Munich"}, if_version=1)),
    ("update", lambda m: m.update("m2", {"content": "stale"}, if_version=1)),
    ("get", lambda m: m.get("m2")),
    ("get", lambda m: m.get("m2", as_of="2025-10-24T15:00:00Z")),
    ("get", lambda m: m.get("missing")),
    ("memories", lambda m: m.memories("user:1", limit=5)),
    ("memories", lambda m: m.memories(types=["fact"], limit=np.int64(5))),
    ("history", lambda m: m.history("m2")),
    ("accesses", lambda m: m.accesses(["m2", "m3", "missing"])),
    ("accesses", lambda m: m.accesses("m2")),
    ("set", lambda m: m.set("user:1", "order", {"id": 1458}, ttl=3600)),
    ("set", lambda m: m.set("user:1", "tier", None)),
    ("set", lambda m: m.set("user:1", "order", 1, if_version=7)),
    ("facts", lambda m: m.facts("user:1")),
    ("get", lambda m: m.get("user:1", "order")),
    ("history", lambda m: m.history("user:1", "order")),
    ("append", lambda m: m.append("user:1", "Refund confirmed", stream="s:1", searchable=False)),
    (
        "append",
        lambda m: m.append(
            "user:1", {"content": "Called back", "data": {"n": 1}}, stream="s:1", searchable=False
        ),
    ),
    ("events", lambda m: m.events("s:1", limit=10, order="desc")),
    ("events", lambda m: m.events("s:1", limit=[5])),
    ("query", lambda m: m.query("refund order 1458", mode="keyword", k=3)),
    ("query", lambda m: m.query("refund", k=np.int64(3))),
    ("query", lambda m: m.query("parcel", mode="keyword", include_ended=True, explain=True)),
    (
        "record_answer",
        lambda m: m.record_answer(
            "a1", [], text="It was refunded", cited=["m1"], entities=["user:1"]
        ),
    ),
    ("lineage", lambda m: m.lineage("a1")),
    ("lineage", lambda m: m.lineage("nope")),
    ("audit", lambda m: m.audit("user:1", limit=50)),
    ("snapshot", lambda m: m.snapshot("user:1")),
    (
        "remember",
        lambda m: m.remember(
            [{"role": "user", "content": "I moved to Lisbon"}],
            entity="user:1",
            session="s1",
            memories=[{"type": "fact", "content": "Lives in Lisbon"}],
            wait=True,
        ),
    ),
    ("recall", lambda m: m.recall("Where does the user live?", entity="user:1", threshold=0.0)),
    ("recall", lambda m: m.recall(3, entity="user:1")),
    ("delete", lambda m: m.delete("m3")),
    ("delete", lambda m: m.delete("user:1", "tier")),
    ("delete", lambda m: m.delete("user:1", "order", if_version=9)),
    ("config", lambda m: m.config),
    ("configure", lambda m: m.configure(max_hot=100, policy="evict")),
    ("configure", lambda m: m.configure(policy="drop")),
    ("maintain", lambda m: m.maintain(dry_run=True)),
    ("entities", lambda m: m.entities(prefix="user:", limit=5)),
    ("entities", lambda m: m.entities(limit=0)),
    ("streams", lambda m: m.streams()),
    ("stats", lambda m: m.stats()),
    (
        "sessions.append",
        lambda m: m.sessions.append("chat", {"role": "user", "content": "hi"}, searchable=True),
    ),
    ("sessions.append", lambda m: m.sessions.append("chat", {"role": "wizard", "content": "x"})),
    (
        "sessions.append_many",
        lambda m: m.sessions.append_many(
            "chat", [("assistant", "Hello! How can I help?"), ("user", "Where is my parcel?")]
        ),
    ),
    ("sessions.load", lambda m: m.sessions.load("chat")),
    ("sessions.load", lambda m: m.sessions.load("chat", strategy="window", k=2)),
    ("sessions.load", lambda m: m.sessions.load("chat", last=1, strategy="window")),
    ("sessions.info", lambda m: m.sessions.info("chat", ttl=60.0)),
    ("sessions.ids", lambda m: m.sessions.ids()),
    ("sessions.search", lambda m: m.sessions.search("chat", "parcel", k=1)),
    ("sessions.configure", lambda m: m.sessions.configure("chat", ttl=30.0)),
    ("sessions.clear", lambda m: m.sessions.clear("chat")),
    ("sessions.load", lambda m: m.sessions.load("chat", as_of="2025-10-24T15:00:00Z")),
    ("sessions.purge_expired", lambda m: m.sessions.purge_expired(ttl=1.0)),
    ("sessions.purge", lambda m: m.sessions.purge("chat")),
    (
        "cache.store",
        lambda m: m.cache.store("refund policy", {"docs": ["a.md"]}, scope="docs", tags=["policy"]),
    ),
    ("cache.store", lambda m: m.cache.store("k", 1, ttl=0)),
    ("cache.lookup", lambda m: m.cache.lookup("the refund policy", scope="docs")),
    ("cache.lookup", lambda m: m.cache.lookup("k", threshold=2)),
    ("cache.invalidate", lambda m: m.cache.invalidate(tag="policy")),
    ("cache.stats", lambda m: m.cache.stats()),
    ("cache.clear", lambda m: m.cache.clear()),
    ("forget", lambda m: m.forget("m1")),
    ("forget", lambda m: m.forget(entity="user:2", purge=True)),
    ("export", lambda m: m.export()),
    ("import_records", lambda m: m.import_records([])),
]

# rows no namespace method calls: the live feeds (test_client_feeds.py), the service's own
# routes and the memory proxy (OpenAI's clients call it: test_proxy*.py)
NOT_METHODS = {
    "follow",
    "changes",
    "healthz",
    "readyz",
    "metrics",
    "namespaces",
    "whoami",
    "proxy.chat_completions",
    "proxy.responses",
    "proxy.default_chat_completions",
    "proxy.default_responses",
}


def row_of(method: str, probe: dict[str, Any]) -> set[str]:
    """The rows a method's calls can reach."""
    if method not in ROUTED:
        return {method}
    return {ROUTED[method]({**probe, **extra}).name for extra in ({"key": None}, {"key": "k"})}


def test_every_row_has_a_step() -> None:
    probe = {
        "target": "t",
        "entity": "e",
        "as_of": None,
        "message": ("user", "x"),
        "messages": [("user", "x")],
        "session_id": "s",
        "records": [],
    }
    reached = {row for name, _ in STEPS for row in row_of(name, probe)}
    rows = {op.name for op in OPERATIONS} - NOT_METHODS
    assert rows - reached == set(), "rows with no congruence step"
    assert reached <= set(BY_NAME)


def outcome(value: Any) -> Any:
    if isinstance(value, Iterator):  # export's records, in the order of their (random) ids
        return ("answer", sorted((normalize(v) for v in value), key=repr))
    if isinstance(value, synapsedb.SynapseError):
        return ("error", type(value), value.code, value.details.get("field"))
    return ("answer", normalize(value))


def normalize(value: Any) -> Any:
    """What differs by construction between two databases made equal: random ids (query
    ids, the memory loop's memory and job ids, in fields and in texts) and erased names."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: normalize(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, str):
        return RANDOM.sub("<random>", value)
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"$gt"} and isinstance(value["$gt"], float):
            return {"$gt": "<now>"}  # recall's "still valid" filter: the wall clock's now
        return {k: normalize(v) for k, v in value.items()}
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def run(ns: Any, clock: synapsedb.ManualClock) -> list[Any]:
    out = []
    for name, step in STEPS:
        clock.advance(1.0)
        try:
            out.append((name, outcome(step(ns))))
        except synapsedb.SynapseError as err:
            out.append((name, outcome(err)))
    return out


async def run_async(ns: Any, clock: synapsedb.ManualClock) -> list[Any]:
    out = []
    for name, step in STEPS:
        clock.advance(1.0)
        try:
            value = step(ns)
            if inspect.isawaitable(value):
                value = await value
            out.append((name, outcome(value)))
        except synapsedb.SynapseError as err:
            out.append((name, outcome(err)))
    return out


def _open(path: Path, clock: synapsedb.ManualClock, storage: Any = None) -> synapsedb.Database:
    return synapsedb.open(
        path, clock=clock, durability="os", background_maintenance=False, llm=None, storage=storage
    )


@pytest.fixture
def sides(tmp_path: Path, served_storage: ServedStorage) -> Iterator[dict[str, list[Any]]]:
    clocks = {side: synapsedb.ManualClock(START) for side in ("embedded", "sync", "async")}
    local = _open(tmp_path / "a", clocks["embedded"])
    served = _open(tmp_path / "b", clocks["sync"], served_storage())
    served_async = _open(tmp_path / "c", clocks["async"], served_storage())
    try:
        out = {"embedded": run(local.namespace("acme", agent="intake"), clocks["embedded"])}
        with TestClient(create_app(served)) as http:
            remote = RemoteDatabase("http://testserver", client=http, include="embedding")
            out["sync"] = run(remote.namespace("acme", agent="intake"), clocks["sync"])

        async def remote_async() -> list[Any]:
            transport = httpx.ASGITransport(app=create_app(served_async))
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
                db = AsyncRemoteDatabase("http://testserver", client=c, include="embedding")
                return await run_async(db.namespace("acme", agent="intake"), clocks["async"])

        out["async"] = asyncio.run(remote_async())
        yield out
    finally:
        served_async.close()
        served.close()
        local.close()


def test_the_same_answers_and_errors(sides: dict[str, list[Any]]) -> None:
    embedded = sides["embedded"]
    answered = sum(1 for _, (kind, *_) in embedded if kind == "answer")
    assert answered > len(STEPS) // 2  # most steps succeed: errors alone would prove little
    for side in ("sync", "async"):
        for i, (want, got) in enumerate(zip(embedded, sides[side], strict=True)):
            assert got == want, f"{side}, step {i} ({want[0]}): {_diff(want, got)}"


def _diff(want: Any, got: Any) -> str:
    """The first place two outcomes differ, for the failure message."""
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            if want.get(k) != got.get(k):
                return f"[{k!r}] " + _diff(want.get(k), got.get(k))
    if isinstance(want, list | tuple) and isinstance(got, list | tuple) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            if a != b:
                return f"[{i}] " + _diff(a, b)
    return f"{want!r:.300} != {got!r:.300}"
