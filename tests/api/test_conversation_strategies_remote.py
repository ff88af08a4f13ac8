"""Strategies over a real server (uvicorn on loopback): Window, TokenBuffer, Summary,
SummaryBuffer and Vector give through ``synapsedb.connect`` (and their async twins through
``synapsedb.connect_async``) what they give on an embedded namespace (issue 12)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import ManualClock
from synapsedb.conversation import AsyncSessions, Message, Sessions
from synapsedb.conversation.strategies import (
    AsyncSummary,
    AsyncSummaryBuffer,
    AsyncTokenBuffer,
    AsyncVector,
    AsyncWindow,
    Summary,
    SummaryBuffer,
    TokenBuffer,
    Vector,
    Window,
)
from synapsedb.conversation.summary import Summarizer
from synapsedb.server import create_app
from tests.support.live_server import serve

START = 1_760_000_000_000_000
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "track_parcel", "arguments": '{"order": 1458}'},
}


def _open(path: Path) -> synapsedb.Database:
    return synapsedb.open(
        path,
        clock=ManualClock(START),
        durability="os",
        embedder=None,
        background_maintenance=False,
        llm=None,
    )


def fill(sessions: Sessions) -> None:
    sessions.append("s", Message.system("You are a courteous support agent."))
    for i in range(30):
        sessions.append("s", ("user", f"Parcel {1000 + i} went to city {i}, not Munich."))
        sessions.append("s", ("assistant", f"I rerouted parcel {1000 + i}."))
    sessions.append("s", ("user", "Where is parcel 1007 now?"))
    sessions.append("s", Message.assistant(tool_calls=[CALL]))
    sessions.append("s", Message.tool('{"city": "Munich"}', "call_1"))


def shape(msgs: list[Message]) -> list[tuple[Any, ...]]:
    return [
        (
            m.role,
            m.content,
            m.tool_calls,
            m.metadata and m.metadata.get("summary", {}).get("version"),
        )
        for m in msgs
    ]


def sync_answers(ns: Any) -> list[Any]:
    store = Sessions(ns, searchable=True)
    fill(store)
    out = [
        shape(Window(store, k=3).load("s")),
        shape(TokenBuffer(store, max_tokens=200).load("s")),
        shape(Summary(store, Summarizer(max_tokens=60), keep=4).load("s")),
        shape(SummaryBuffer(store, Summarizer(max_tokens=60), max_tokens=140).load("s")),
        shape(Vector(store, k=2).load("s")),
    ]
    Summary(store, Summarizer()).clear("s")
    out.append(
        [None if f.deleted else f.value["version"] for f in ns.history("session:s", "summary")]
    )
    out.append(shape(Window(store, k=3).load("s")))
    return out


async def async_answers(ns: Any) -> list[Any]:
    store = AsyncSessions(ns, searchable=True)
    appends: list[Any] = []
    fill(_Recorder(appends))  # type: ignore[arg-type]
    for sid, m in appends:
        await store.append(sid, m)
    out = [
        shape(await AsyncWindow(store, k=3).load("s")),
        shape(await AsyncTokenBuffer(store, max_tokens=200).load("s")),
        shape(await AsyncSummary(store, Summarizer(max_tokens=60), keep=4).load("s")),
        shape(await AsyncSummaryBuffer(store, Summarizer(max_tokens=60), max_tokens=140).load("s")),
        shape(await AsyncVector(store, k=2).load("s")),
    ]
    await AsyncSummary(store, Summarizer()).clear("s")
    out.append(
        [
            None if f.deleted else f.value["version"]
            for f in await ns.history("session:s", "summary")
        ]
    )
    out.append(shape(await AsyncWindow(store, k=3).load("s")))
    return out


class _Recorder:
    """Collects the appends ``fill`` makes, to replay them through an async store."""

    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def append(self, session_id: str, message: Any) -> None:
        self.calls.append((session_id, message))


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    db = _open(tmp_path / "served")
    try:
        with serve(create_app(db)) as served:
            yield served
    finally:
        db.close()


def test_strategies_answer_the_same_embedded_and_over_http(tmp_path: Path, url: str) -> None:
    local = _open(tmp_path / "local")
    try:
        embedded = sync_answers(local.namespace("support"))
    finally:
        local.close()
    remote = synapsedb.connect(url)
    try:
        over_http = sync_answers(remote.namespace("support"))
    finally:
        remote.close()
    assert over_http == embedded
    assert embedded[5] == [1, 2, None]  # Summary's fold, SummaryBuffer's, the clear's tombstone
    assert embedded[6] == []
    assert [r for r, *_ in embedded[0]] == ["system", "user", "assistant", "tool"]

    async def run() -> list[Any]:
        client = synapsedb.connect_async(url)
        try:
            return await async_answers(client.namespace("async-support"))
        finally:
            await client.close()

    assert asyncio.run(run()) == embedded
