"""The LlamaIndex adapters, each test on an embedded database and through a real HTTP server,
after the patterns of llama-index-core's own tests: its SimpleChatStore tests for
``BaseChatStore``; tests/memory/test_memory_custom_chat_store.py (``Memory`` over any
``AsyncDBChatStore``: put/get, ``from_defaults(chat_history=...)``, the waterfall archiving into
the store, concurrent puts, sync puts across event loops); tests/memory/blocks/test_vector.py
and test_memory_blocks_base.py for a block (empty gets and puts, messages without text, what a
put stores and a get returns, the block inside ``Memory``).

The model that extracts facts is ScriptedUpstream, a stand-in for a hosted LLM over a real
loopback socket (the one boundary faked)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock
from llama_index.core.memory import ChatMemoryBuffer, Memory
from llama_index.core.storage.chat_store.base_db import MessageStatus

import synapsedb
from synapsedb.conversation import Sessions
from synapsedb.errors import ValidationError
from synapsedb.integrations.llamaindex import (
    SynapseChatStore,
    SynapseDBChatStore,
    SynapseMemoryBlock,
)
from synapsedb.llm import ChatClient, LLMSettings
from synapsedb.server import create_app
from tests.support.live_server import serve
from tests.support.scripted_upstream import Request, ScriptedUpstream


def _open(path: Path, llm: Any = None) -> synapsedb.Database:
    return synapsedb.open(
        path, durability="os", llm=llm, embedder=None, background_maintenance=False
    )


class Target:
    """A database or a client on one, with what a test needs to reach both ways."""

    def __init__(self, handle: Any, db: synapsedb.Database, url: str | None) -> None:
        self.handle, self.db, self.url = handle, db, url

    def ns(self, name: str = "chat") -> Any:
        return self.handle.namespace(name)


def _targets(request: pytest.FixtureRequest, db: synapsedb.Database) -> Iterator[Target]:
    try:
        if request.param == "embedded":
            yield Target(db, db, None)
        else:
            with serve(create_app(db)) as url:
                client = synapsedb.connect(url)
                yield Target(client, db, url)
                client.close()
    finally:
        db.close()


@pytest.fixture(params=["embedded", "http"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    yield from _targets(request, _open(tmp_path / "d"))


def msg(role: str, text: str, **kwargs: Any) -> ChatMessage:
    return ChatMessage(role=role, content=None, blocks=[TextBlock(text=text)], **kwargs)


# -- BaseChatStore ------------------------------------------------------------------------------


def test_chat_store_crud_like_simple_chat_store(target: Target) -> None:
    store = SynapseChatStore(target.ns())
    m1, m2, m3 = msg("user", "first"), msg("assistant", "second"), msg("user", "third")
    assert store.get_messages("user1") == [] and store.get_keys() == []
    store.set_messages("user1", [m1, m2])
    store.add_message("user1", m3)
    store.add_message("user2", m1)
    assert store.get_messages("user1") == [m1, m2, m3]
    assert store.get_keys() == ["user1", "user2"]
    assert store.delete_message("user1", 1) == m2
    assert store.get_messages("user1") == [m1, m3]
    assert store.delete_message("user1", 5) is None
    assert store.delete_last_message("user1") == m3
    assert store.get_messages("user1") == [m1]
    assert store.delete_messages("user1") == [m1]
    assert store.get_messages("user1") == [] and store.delete_messages("user1") is None
    assert store.delete_last_message("user1") is None
    assert store.get_keys() == ["user2"]
    store.set_messages("user2", [m3])
    assert store.get_messages("user2") == [m3]


def test_chat_store_round_trips_roles_tool_calls_and_blocks(target: Target) -> None:
    store = SynapseChatStore(target.ns())
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'},
    }
    messages = [
        msg("developer", "Be brief."),
        msg("user", "Weather in Lisbon?", additional_kwargs={"trace": {"n": 1}}),
        ChatMessage(role="assistant", blocks=[], additional_kwargs={"tool_calls": [call]}),
        msg(
            "tool", '{"temp": 21}', additional_kwargs={"tool_call_id": "call_1", "name": "weather"}
        ),
        ChatMessage(
            role="user",
            blocks=[TextBlock(text="And this?"), ImageBlock(url="https://example.com/a.png")],
        ),
        ChatMessage(role="user", blocks=[ImageBlock(url="https://example.com/b.png")]),
        msg("chatbot", "Sunny, 21 degrees."),
    ]
    store.set_messages("k", messages)
    assert store.get_messages("k") == messages
    # other SynapseDB clients read an OpenAI-shaped session
    openai = [m.to_openai() for m in Sessions(target.ns()).load("k")]
    assert openai[0] == {"role": "system", "content": "Be brief."}
    assert openai[2] == {"role": "assistant", "content": "", "tool_calls": [call]}
    assert openai[3] == {"role": "tool", "content": '{"temp": 21}', "tool_call_id": "call_1"}
    assert openai[5]["content"] == "[image]"


def test_chat_store_feeds_chat_memory_buffer(target: Target) -> None:
    store = SynapseChatStore(target.ns())
    memory = ChatMemoryBuffer.from_defaults(
        chat_store=store, chat_store_key="user-42", token_limit=50
    )
    for i in range(10):
        memory.put(msg("user" if i % 2 == 0 else "assistant", f"turn {i} " + "word " * 5))
    assert len(store.get_messages("user-42")) == 10
    window = memory.get()
    assert 0 < len(window) < 10 and window[-1].content == "turn 9 " + "word " * 5
    memory.reset()
    assert store.get_messages("user-42") == []


@pytest.mark.asyncio
async def test_chat_store_async_methods(target: Target) -> None:
    remote = synapsedb.connect_async(target.url) if target.url else None
    stores = [
        SynapseChatStore(target.ns()),
        SynapseChatStore(async_namespace=remote.namespace("chat") if remote else target.ns()),
    ]
    try:
        for i, store in enumerate(stores):
            key = f"a{i}"
            await store.aset_messages(key, [msg("user", "one"), msg("assistant", "two")])
            await store.async_add_message(key, msg("user", "three"))
            assert [m.content for m in await store.aget_messages(key)] == ["one", "two", "three"]
            assert (await store.adelete_message(key, 0)).content == "one"  # type: ignore[union-attr]
            assert (await store.adelete_last_message(key)).content == "three"  # type: ignore[union-attr]
            assert key in await store.aget_keys()
            assert [m.content for m in await store.adelete_messages(key) or []] == ["two"]
            assert await store.aget_messages(key) == []
        with pytest.raises(ValidationError):
            stores[1].get_messages("a1")  # only an async namespace
    finally:
        if remote is not None:
            await remote.close()


def test_chat_store_rejects_bad_input(target: Target) -> None:
    store = SynapseChatStore(target.ns())
    store.add_message("k", msg("user", "kept"))
    hostile: Any = store
    cases: list[tuple[Any, str]] = [
        (
            lambda: store.set_messages("k", [msg("user", "ok"), msg("user", "   ")]),
            "messages[1].content",
        ),
        (lambda: hostile.set_messages("k", msg("user", "x")), "messages"),
        (lambda: hostile.set_messages("k", ["text"]), "messages[0]"),
        (lambda: store.add_message("", msg("user", "x")), "key"),
        (lambda: store.add_message("k~archived", msg("user", "x")), "key"),
        (
            lambda: store.add_message("k", msg("tool", "r", additional_kwargs={"x": object()})),
            "message",
        ),
        (lambda: hostile.delete_message("k", "0"), "idx"),
        (lambda: SynapseChatStore(), "namespace"),
    ]
    for call, field in cases:
        with pytest.raises(ValidationError) as err:
            call()
        assert str(err.value.details.get("field", "")).startswith(field), (field, err.value)
    assert [m.content for m in store.get_messages("k")] == ["kept"]


# -- AsyncDBChatStore under Memory (test_memory_custom_chat_store's patterns) -------------------


@pytest.mark.asyncio
async def test_memory_accepts_synapse_chat_store(target: Target) -> None:
    store = SynapseDBChatStore(target.ns())
    memory = Memory(token_limit=1000, session_id="test_user", sql_store=store)
    await memory.aput_messages([msg("user", "Message 1"), msg("assistant", "Response 1")])
    assert [m.content for m in await memory.aget()] == ["Message 1", "Response 1"]
    assert memory.sql_store is store
    assert await store.count_messages("test_user") == 2
    assert await store.get_keys() == ["test_user"]


@pytest.mark.asyncio
async def test_from_defaults_with_synapse_chat_store(target: Target) -> None:
    store = SynapseDBChatStore(target.ns())
    memory = await asyncio.to_thread(
        Memory.from_defaults,
        session_id="test_user",
        token_limit=1000,
        chat_history=[msg("user", "Seeded")],
        chat_store=store,
    )
    assert memory.sql_store is store
    assert [m.content for m in await memory.aget()] == ["Seeded"]


@pytest.mark.asyncio
async def test_waterfall_archives_into_synapse_chat_store(target: Target) -> None:
    store = SynapseDBChatStore(target.ns())
    memory = Memory(
        token_limit=1000,
        token_flush_size=700,
        chat_history_token_ratio=0.9,
        session_id="test_user",
        sql_store=store,
    )
    await memory.aput_messages(
        [msg("user", "x " * 500), msg("assistant", "y " * 500), msg("user", "z " * 500)]
    )
    messages = await memory.aget()
    assert len(messages) == 1 and "z " in (messages[0].content or "")
    archived = await store.get_messages("test_user", status=MessageStatus.ARCHIVED)
    assert [(m.content or "")[:2] for m in archived] == ["x ", "y "]
    everything = await store.get_messages("test_user", status=None)
    assert [(m.content or "")[:2] for m in everything] == ["x ", "y ", "z "]
    assert [
        (m.content or "")[:2]
        for m in await store.get_messages("test_user", status=None, offset=1, limit=1)
    ] == ["y "]
    await store.delete_messages("test_user", status=MessageStatus.ARCHIVED)
    assert await store.count_messages("test_user", status=None) == 1
    assert await store.get_keys() == ["test_user"]


@pytest.mark.asyncio
async def test_concurrent_operations_lose_no_message(target: Target) -> None:
    """llama-index-core's newer test_concurrent_aput_does_not_over_archive relies on a lock
    inside Memory that 0.14.25 does not have; what the store itself guarantees is that its
    rewrites (archive: read, clear, append) never interleave with its other operations, so a
    message added while the oldest are archived is never hidden."""
    remote = synapsedb.connect_async(target.url) if target.url else None
    stores = [
        SynapseDBChatStore(target.ns()),
        SynapseDBChatStore(async_namespace=remote.namespace("chat") if remote else target.ns()),
    ]
    try:
        for i, store in enumerate(stores):
            key = f"race{i}"
            await store.add_messages(key, [msg("user", f"seed{j}") for j in range(6)])
            await asyncio.gather(
                store.archive_oldest_messages(key, 2),
                store.add_message(key, msg("user", "newA")),
                store.archive_oldest_messages(key, 2),
                store.add_message(key, msg("user", "newB")),
            )
            archived = await store.get_messages(key, status=MessageStatus.ARCHIVED)
            active = await store.get_messages(key)
            assert len(archived) == 4 and len(active) == 4
            assert sorted(m.content or "" for m in archived + active) == sorted(
                [f"seed{j}" for j in range(6)] + ["newA", "newB"]
            )
    finally:
        if remote is not None:
            await remote.close()


def test_sync_put_works_across_event_loops(target: Target) -> None:
    memory = Memory(
        token_limit=1000, session_id="loop_user", sql_store=SynapseDBChatStore(target.ns())
    )
    memory.put(msg("user", "one"))
    memory.put(msg("user", "two"))
    assert [m.content for m in memory.get_all()] == ["one", "two"]


@pytest.mark.asyncio
async def test_db_chat_store_rejects_bad_input(target: Target) -> None:
    store = SynapseDBChatStore(target.ns())
    hostile: Any = store
    for coro, field in [
        (hostile.get_messages("k", limit=-1), "limit"),
        (hostile.add_messages("k", [msg("user", "x")], status="pending"), "status"),
        (hostile.delete_oldest_messages("k", -2), "n"),
    ]:
        with pytest.raises(ValidationError) as err:
            await coro
        assert err.value.details["field"] == field


# -- the memory block ----------------------------------------------------------------------------


def answer(request: Request) -> Any:
    """The stand-in model: one fact per extraction, the last user turn as said."""
    name = ((request.response_format or {}).get("json_schema") or {}).get("name")
    if name == "memories":
        turns = request.messages[-1]["content"].splitlines()[1:]
        said = [t.split(" user: ", 1)[1] for t in turns if " user: " in t]
        return {
            "memories": [
                {
                    "type": "fact",
                    "content": f"The user says: {said[-1]}",
                    "entity": None,
                    "confidence": 0.9,
                    "valid_from": None,
                    "source_turns": [1],
                }
            ]
        }
    if name == "decisions":
        return {"decisions": []}
    if name == "query":
        return {"query": "the user's favourite drink"}
    raise AssertionError(f"unexpected request for {name!r}")


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(responder=answer) as up:
        yield up


@pytest.fixture(params=["embedded", "http"])
def with_llm(
    request: pytest.FixtureRequest, tmp_path: Path, upstream: ScriptedUpstream
) -> Iterator[Target]:
    llm = ChatClient(LLMSettings(base_url=upstream.base_url, model="scripted", max_retries=0))
    try:
        yield from _targets(request, _open(tmp_path / "d", llm=llm))
    finally:
        llm.close()  # the database does not own a client it was given


@pytest.mark.asyncio
async def test_block_empty_gets_and_puts(target: Target) -> None:
    block = SynapseMemoryBlock(namespace=target.ns(), entity="user:1")
    assert await block.aget(messages=[]) == ""
    assert await block.aget() == ""
    await block.aput(messages=[])
    await block.aput(messages=[ChatMessage(role="user", content=None, blocks=[])])
    assert target.ns().events("session:2000-01-01") == []  # nothing was remembered anywhere
    assert target.ns().memories("user:1") == []
    assert await block.aget(messages=[msg("user", "what do you know about me?")]) == ""


@pytest.mark.asyncio
async def test_block_puts_facts_in_and_recalls_them(with_llm: Target) -> None:
    ns = with_llm.ns()
    block = SynapseMemoryBlock(namespace=ns, entity="user:7", wait=True)
    await block.aput(
        messages=[msg("user", "My favourite drink is mango lassi."), msg("assistant", "Noted!")],
        session_id="s1",
    )
    facts = [m.content for m in ns.memories("user:7", types=["fact"])]
    assert facts == ["The user says: My favourite drink is mango lassi."]
    turns = Sessions(ns).load("s1:remembered")
    assert [m.content for m in turns] == ["My favourite drink is mango lassi.", "Noted!"]
    assert Sessions(ns).load("s1") == []  # apart from the chat store's session
    got = await block.aget(messages=[msg("user", "What is my favourite drink, mango or tea?")])
    assert "mango lassi" in got and got.startswith("Memories about user:7")
    assert await block.aget(messages=[msg("user", "thanks!")]) == ""  # small talk: no query


@pytest.mark.asyncio
async def test_block_inside_memory_receives_flushed_turns(with_llm: Target) -> None:
    ns = with_llm.ns()
    block = SynapseMemoryBlock(namespace=ns, entity="user:8", wait=True, priority=1)
    memory = Memory(
        token_limit=1000,
        token_flush_size=700,
        chat_history_token_ratio=0.9,
        session_id="chat-8",
        sql_store=SynapseDBChatStore(ns),
        memory_blocks=[block],
    )
    await memory.aput_messages(
        [
            msg("user", "I drink mango lassi every day."),
            msg("assistant", "y " * 900),
            msg("user", "What is my favourite mango drink?"),
        ]
    )
    # the flushed turns went to the block: remembered, and a fact extracted from them
    assert [m.content[:20] for m in Sessions(ns).load("chat-8:remembered")] == [
        "I drink mango lassi ",
        "y y y y y y y y y y ",
    ]
    assert [m.content for m in ns.memories("user:8", types=["fact"])] == [
        "The user says: I drink mango lassi every day."
    ]
    got = await memory.aget()
    assert "<synapse_memories>" in (got[0].content or "") and "mango" in (got[0].content or "")


@pytest.mark.asyncio
async def test_block_async_namespace_and_bad_input(target: Target) -> None:
    remote = synapsedb.connect_async(target.url) if target.url else None
    try:
        ns = remote.namespace("chat") if remote else target.ns()
        block = SynapseMemoryBlock(async_namespace=ns, entity="user:9", session="s9")
        await block.aput(messages=[msg("user", "I live in Porto.")])
        assert [m.content for m in Sessions(target.ns()).load("s9")] == ["I live in Porto."]
        bad = SynapseMemoryBlock(async_namespace=ns, entity="", session="s9")
        with pytest.raises(ValidationError) as err:
            await bad.aput(messages=[msg("user", "x")])
        assert err.value.details["field"] == "entity"
        with pytest.raises(ValidationError):
            SynapseMemoryBlock(entity="user:9")
    finally:
        if remote is not None:
            await remote.close()
