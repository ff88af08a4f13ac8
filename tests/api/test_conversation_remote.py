"""Sessions over a real server (uvicorn on loopback) through ``synapsedb.connect`` and
``synapsedb.connect_async``: the same answers as on an embedded namespace (issue 12)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import ManualClock, SynapseError
from synapsedb.conversation import AsyncSessions, Message, Sessions
from synapsedb.server import create_app
from tests.support.live_server import serve

START = 1_760_000_000_000_000
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "track_parcel", "arguments": '{"order": 1458}'},
}


def _open(path: Path, clock: ManualClock) -> synapsedb.Database:
    return synapsedb.open(
        path, clock=clock, durability="os", embedder=None, background_maintenance=False, llm=None
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, ManualClock]]:
    """A real server on loopback over a database with a manual clock (shared with the test:
    Sessions judge TTLs by it, as the server's own notion of now)."""
    clock = ManualClock(START)
    db = _open(tmp_path / "served", clock)
    try:
        with serve(create_app(db)) as url:
            yield url, clock
    finally:
        db.close()


def _error(run: Callable[[], Any]) -> tuple[str, Any, Any]:
    try:
        run()
    except SynapseError as exc:
        return type(exc).__name__, exc.details.get("field"), exc.details.get("limit")
    raise AssertionError("no error")


def scenario(ns: Any, clock: ManualClock) -> list[Any]:
    """Every Sessions operation; what each returns, as plain data."""
    out: list[Any] = []
    s = Sessions(ns, searchable=True, ttl=3600, clock=clock)
    sent = [
        Message.system("Be brief."),
        Message.user("My parcel went to Hamburg", name="ana"),
        Message.assistant(tool_calls=[CALL], metadata={"model": "m1"}),
        Message.tool('{"city": "Hamburg"}', "call_1"),
        Message.assistant("It is in Hamburg."),
    ]
    out.append([s.append("s1", m).to_dict() for m in sent])
    clock.advance(1)
    out.append([m.to_dict() for m in s.append_many("s2", [("user", "hi"), ("assistant", "hello")])])
    out.append([m.to_dict() for m in s.load("s1")])
    out.append([m.to_dict() for m in s.load("s1", last=2)])
    out.append([m.to_dict() for m in s.search("s1", "parcel Hamburg", k=1)])
    out.append(len(ns.query("parcel Hamburg", mode="keyword").hits))
    out.append(s.info("s1", count_limit=3))
    out.append(s.sessions())
    before = clock.now_us() / 1e6
    clock.advance(1)
    s.clear("s1")
    out.append([m.to_dict() for m in s.load("s1")])
    out.append([m.to_dict() for m in s.load("s1", as_of=before)])
    out.append(len(ns.events("session:s1")))
    out.append(s.info("s1"))
    s.configure("s2", ttl=10)
    clock.advance(20)
    out.append((s.load("s2"), s.sessions(), s.info("s2").expired))
    out.append(s.purge_expired())
    out.append(ns.events("session:s2"))
    purged = s.purge("s1")
    out.append((purged.purged, purged.events, purged.facts, purged.memories))
    out.append((s.load("s1", as_of=before), ns.events("session:s1", as_of=before)))
    out.append(_error(lambda: s.append("s", ("user", "x" * 300_000))))
    out.append(_error(lambda: s.append("s", ("bot", "x"))))
    out.append(_error(lambda: s.load("s", last=10_001)))
    out.append(_error(lambda: s.append("", ("user", "x"))))
    return out


def test_sessions_over_http_answer_as_embedded(
    tmp_path: Path, server: tuple[str, ManualClock]
) -> None:
    url, served_clock = server
    local_clock = ManualClock(START)
    with _open(tmp_path / "local", local_clock) as local, synapsedb.connect(url) as remote:
        embedded = scenario(local.namespace("chat"), local_clock)
        over_http = scenario(remote.namespace("chat"), served_clock)
    assert over_http == embedded
    # and the scenario says what it should
    sent, _, loaded, tail, found = embedded[:5]
    assert loaded == sent and tail == sent[-2:] and found == [sent[1]]
    assert loaded[2]["content"] == "" and loaded[2]["tool_calls"] == [CALL]
    assert embedded[5] == 3  # the user turn, the tool result and the answer name Hamburg
    info = embedded[6]
    assert (info.count, info.count_exact, info.first_at, info.last_at is not None) == (
        3,
        False,
        None,
        True,
    )
    assert embedded[7] == ["s1", "s2"]
    assert embedded[8] == [] and embedded[9] == sent and embedded[10] == 5
    assert embedded[11].cleared_through == sent[-1]["id"] and embedded[11].count == 0
    assert embedded[12] == ([], [], True)  # s1 cleared, s2 expired (its own ttl of 10 s)
    assert embedded[13] == ["s2"] and embedded[14] == []
    assert embedded[15][:3] == (True, 5, 1)
    assert embedded[16] == ([], [])
    assert embedded[17:] == [
        ("ValidationError", "message.content", 256 * 1024),
        ("ValidationError", "message.role", None),
        ("ValidationError", "last", 10_000),
        ("ValidationError", "session_id", None),
    ]


def test_async_sessions_over_http(server: tuple[str, ManualClock]) -> None:
    url, clock = server

    async def run() -> None:
        db = synapsedb.connect_async(url)
        try:
            ns = db.namespace("chat")
            s = AsyncSessions(ns, searchable=True, clock=clock)
            first = await s.append("a", ("user", "I moved to Lisbon last spring"))
            await s.append_many("a", [("assistant", "Noted"), ("user", "and I have a cat")])
            await s.append("b", ("user", "other session"))
            got = await s.load("a")
            assert [m.content for m in got] == [
                "I moved to Lisbon last spring",
                "Noted",
                "and I have a cat",
            ]
            assert got[0] == first
            assert [m.content for m in await s.load("a", last=1)] == ["and I have a cat"]
            found = await s.search("a", "Lisbon", k=1)
            assert [m.id for m in found] == [first.id]
            hits = (await ns.query("Lisbon", mode="keyword")).hits
            assert [h.metadata["session"] for h in hits] == ["a"]
            before = clock.now_us() / 1e6
            clock.advance(1)
            await s.clear("a")
            assert await s.load("a") == [] and await s.load("a", as_of=before) == got
            assert await s.sessions() == ["b"]
            info = await s.info("a")
            assert info.count == 0 and info.cleared_through == got[-1].id
            await s.configure("b", ttl=5)
            clock.advance(10)
            assert await s.load("b") == [] and await s.purge_expired() == ["b"]
            out = await s.purge("a")
            assert out.events == 3 and await s.load("a", as_of=before) == []
            assert (await ns.query("Lisbon", mode="keyword")).hits == []
        finally:
            await db.close()

    asyncio.run(run())
