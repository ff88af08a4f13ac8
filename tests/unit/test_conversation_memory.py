"""Seed 004's memory classes, what each does beyond the shared behaviour (which
tests/api/test_conversation_backends.py runs against every backend): the in-process windows,
SummaryMemory (extractive and with a model behind a real socket), SynapseMemory's targets and
its SqliteMemory name, VectorMemory."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.scripted_upstream import Reply, ScriptedUpstream

import synapsedb
from synapsedb import Database
from synapsedb.config import LLMSettings
from synapsedb.conversation.memory import (
    BaseMemory,
    InMemoryConversation,
    SummaryMemory,
    Turn,
    WindowMemory,
)
from synapsedb.conversation.sessions import Sessions
from synapsedb.conversation.synapse_memory import SqliteMemory, SynapseMemory, VectorMemory
from synapsedb.errors import ValidationError
from synapsedb.llm import AsyncChatClient, ChatClient


async def _say(memory: BaseMemory, *turns: tuple[str, str]) -> None:
    for role, content in turns:
        await memory.add(role, content)


def _contents(turns: list[dict[str, str]]) -> list[str]:
    return [t["content"] for t in turns]


# -- the in-process classes ----------------------------------------------------------------------


def test_in_memory_conversation_keeps_the_newest_100_by_default() -> None:
    memory = InMemoryConversation()
    asyncio.run(_say(memory, *[("user", f"m{i}") for i in range(105)]))
    got = asyncio.run(memory.get())
    assert len(got) == 100 and got[0]["content"] == "m5" and got[-1]["content"] == "m104"


def test_window_memory_returns_the_last_window_size() -> None:
    memory = WindowMemory(window_size=3)
    asyncio.run(_say(memory, ("system", "s"), ("user", "a"), ("assistant", "b"), ("user", "c")))
    assert memory.to_messages() == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    assert WindowMemory().window_size == 10


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", None, 10**9])
def test_window_and_max_messages_are_checked(bad: Any) -> None:
    with pytest.raises(ValidationError) as err:
        WindowMemory(window_size=bad)
    assert err.value.details["field"] == "window_size"
    with pytest.raises(ValidationError) as err:
        InMemoryConversation(max_messages=bad)
    assert err.value.details["field"] == "max_messages"


def test_to_string_labels_every_role() -> None:
    memory = InMemoryConversation()
    assert memory.to_string() == ""
    asyncio.run(
        _say(
            memory,
            ("system", "Be brief."),
            ("user", "2+2?"),
            ("assistant", "calc"),
            ("tool", "4"),
            ("assistant", "4."),
        )
    )
    assert (
        memory.to_string()
        == "System: Be brief.\nUser: 2+2?\nAssistant: calc\nTool: 4\nAssistant: 4."
    )


def test_a_user_written_memory_class_gets_the_whole_interface() -> None:
    """BaseMemory is the seed's extension point: four methods make a working memory."""

    class ListMemory(BaseMemory):
        def __init__(self) -> None:
            super().__init__(max_messages=2)
            self.rows: list[Turn] = []

        async def _add(self, turn: Turn) -> None:
            self.rows = [*self.rows, turn][-2:]

        async def _get(self) -> list[Turn]:
            return list(self.rows)

        async def _clear(self) -> None:
            self.rows = []

        def _get_sync(self) -> list[Turn]:
            return list(self.rows)

    memory = ListMemory()
    asyncio.run(_say(memory, ("user", "a"), ("assistant", "b"), ("user", "c")))
    assert memory.to_string() == "Assistant: b\nUser: c"
    with pytest.raises(ValidationError, match=r"message\.role"):
        asyncio.run(memory.add("bot", "x"))
    with pytest.raises(TypeError):
        BaseMemory()  # type: ignore[abstract]


# -- SummaryMemory -------------------------------------------------------------------------------

STORY = [
    ("user", "My dog is called Rex and he is a beagle."),
    ("assistant", "Rex sounds lovely."),
    ("user", "I live in Lisbon and work as a nurse at Santa Maria hospital."),
    ("assistant", "Noted: nurse in Lisbon."),
    ("user", "My sister Ana visits every March."),
    ("assistant", "That is nice."),
    ("user", "What breed is my dog?"),
]


def test_summary_memory_folds_the_oldest_into_one_extractive_summary() -> None:
    memory = SummaryMemory(InMemoryConversation(), llm=None, max_messages=6)
    assert memory.keep == 3
    asyncio.run(_say(memory, *STORY))
    got = asyncio.run(memory.get())
    assert len(got) == 4  # the summary + the 3 newest
    summary = got[0]
    assert summary["role"] == "system"
    assert summary["content"].startswith("Summary of the earlier conversation (extractive")
    assert "Rex" in summary["content"] and "Lisbon" in summary["content"]
    assert _contents(got[1:]) == [c for _, c in STORY[-3:]]
    assert "Rex" in memory.summary and memory.to_messages() == got


def test_summary_memory_with_a_model_folds_incrementally(caplog: pytest.LogCaptureFixture) -> None:
    """The second fold sends the first summary and only the newer turns; a model that fails is
    replaced by the extractive summary and no turn is lost."""
    with ScriptedUpstream() as up:
        up.push(
            Reply.text("Alice's dog Rex is a beagle; she is a nurse in Lisbon."),
            Reply.error(500, "down"),
        )

        async def run() -> list[dict[str, str]]:
            settings = LLMSettings(base_url=up.base_url, model="m", max_retries=0, timeout_s=5)
            async with AsyncChatClient(settings) as llm:
                memory = SummaryMemory(
                    InMemoryConversation(),
                    llm,
                    max_messages=4,
                    keep=1,
                    summary_prompt="Summarise in {max_words} words.",
                )
                await _say(memory, *STORY[:5])  # 5 > 4: the first 4 are folded
                first = await memory.get()
                assert first[0]["content"] == (
                    "Summary of the earlier conversation: Alice's "
                    "dog Rex is a beagle; she is a nurse in Lisbon."
                )
                await _say(memory, *STORY[5:], ("assistant", "A beagle."), ("user", "Thanks"))
                return await memory.get()

        with caplog.at_level(logging.WARNING, "synapsedb.conversation"):
            got = asyncio.run(run())
        first, second = up.requests
    assert first.messages[0]["content"] == "Summarise in 225 words."
    assert "My dog is called Rex" in first.messages[1]["content"]
    sent = second.messages[1]["content"]
    assert "Alice's dog Rex is a beagle" in sent  # the previous summary stands for the old turns
    assert "My dog is called Rex" not in sent and "My sister Ana" in sent  # only the new ones
    assert "A beagle" not in sent  # kept verbatim (keep=1)
    assert "extractively" in caplog.text
    assert got[0]["content"].startswith("Summary of the earlier conversation (extractive")
    assert "Rex" in got[0]["content"] and "Ana" in got[0]["content"]
    assert _contents(got[1:]) == ["A beagle.", "Thanks"]


def test_summary_memory_calls_a_blocking_client_too() -> None:
    with ScriptedUpstream() as up:
        up.push(Reply.text("Rex is a beagle."))
        with ChatClient(LLMSettings(base_url=up.base_url, model="m", max_retries=0)) as llm:
            memory = SummaryMemory(InMemoryConversation(), llm, max_messages=2, keep=0)
            asyncio.run(_say(memory, *STORY[:3]))
    assert memory.to_messages() == [
        {"role": "system", "content": "Summary of the earlier conversation: Rex is a beagle."}
    ]


def test_summary_memory_never_folds_system_instructions() -> None:
    memory = SummaryMemory(InMemoryConversation(), max_messages=4, keep=1)
    asyncio.run(_say(memory, ("system", "Answer in French."), *STORY[:6]))
    got = memory.to_messages()
    assert got[0] == {"role": "system", "content": "Answer in French."}
    assert got[1]["content"].startswith("Summary of the earlier conversation")
    assert len(got) == 3 and got[2]["content"] == STORY[5][1]


def test_summary_memory_carries_on_over_a_reopened_backend(tmp_path: Path) -> None:
    path = tmp_path / "chats"
    memory = SummaryMemory(SynapseMemory(path, "alice"), max_messages=4, keep=1)
    asyncio.run(_say(memory, *STORY[:5]))
    before = memory.summary
    memory.close()
    again = SummaryMemory(SynapseMemory(path, "alice"), max_messages=4, keep=1)
    assert again.summary == before and "Rex" in before
    asyncio.run(_say(again, *STORY[5:], ("assistant", "A beagle."), ("user", "And Ana?")))
    got = again.to_messages()
    assert sum(t["content"].startswith("Summary of the earlier") for t in got) == 1
    assert "Rex" in got[0]["content"] and "Ana" in got[0]["content"]
    asyncio.run(again.clear())
    assert again.to_messages() == [] and again.summary == ""
    again.close()


def test_summary_memory_argument_checks() -> None:
    with pytest.raises(ValidationError, match="would drop the oldest") as err:
        SummaryMemory(WindowMemory(window_size=20), max_messages=20)
    assert err.value.details["field"] == "backend"
    with pytest.raises(ValidationError) as err:
        SummaryMemory([], max_messages=20)  # type: ignore[arg-type]
    assert err.value.details["field"] == "backend"
    for keep in [-1, 20, True]:
        with pytest.raises(ValidationError) as err:
            SummaryMemory(InMemoryConversation(), max_messages=20, keep=keep)
        assert err.value.details["field"] == "keep"
    with pytest.raises(ValidationError) as err:
        SummaryMemory(InMemoryConversation(), llm=object())
    assert err.value.details["field"] == "llm"


# -- SynapseMemory and SqliteMemory --------------------------------------------------------------


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = synapsedb.open(tmp_path / "db", durability="os", llm=None, embedder=None)
    yield db
    db.close()


def test_synapse_memory_is_a_session_of_the_namespace(database: Database) -> None:
    """What SynapseMemory writes is the session Sessions, the strategies and ns.events read;
    clear hides it from later reads and history keeps it."""
    memory = SynapseMemory(database, "user-1", namespace="support")
    asyncio.run(_say(memory, ("user", "Hi"), ("assistant", "Hello")))
    ns = database.namespace("support")
    assert [(m.role, m.content) for m in Sessions(ns).load("user-1")] == [
        ("user", "Hi"),
        ("assistant", "Hello"),
    ]
    asyncio.run(memory.clear())
    assert Sessions(ns).load("user-1") == [] and asyncio.run(memory.get()) == []
    assert [e.content for e in ns.events("session:user-1")] == ["Hi", "Hello"]


def test_synapse_memory_takes_a_database_a_namespace_or_a_path(
    database: Database, tmp_path: Path
) -> None:
    ns = database.namespace("default")
    by_db, by_ns = SynapseMemory(database, "s"), SynapseMemory(ns, "s")
    asyncio.run(by_db.add("user", "one"))
    assert _contents(asyncio.run(by_ns.get())) == ["one"]
    by_db.close()
    by_ns.close()
    assert not database.closed  # a database passed in stays open
    for bad in [42, None, "", object(), "redis://localhost:6379", "postgresql://h/db"]:
        with pytest.raises(ValidationError) as err:
            SynapseMemory(bad)
        assert err.value.details["field"] == "target"
    remote_async = synapsedb.connect_async("http://127.0.0.1:9").namespace("default")
    with pytest.raises(ValidationError, match="async"):
        SynapseMemory(remote_async)
    with pytest.raises(ValidationError, match="async"):
        SynapseMemory(synapsedb.connect_async("http://127.0.0.1:9"))
    with pytest.raises(ValidationError) as err:
        SynapseMemory(tmp_path / "x", max_messages=10_001)
    assert err.value.details["field"] == "max_messages"
    with pytest.raises(ValidationError) as err:
        VectorMemory(database, max_results=10_001)
    assert err.value.details["field"] == "max_results"


def test_sqlite_memory_keeps_the_seed_signature_and_shares_one_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    alice, bob = SqliteMemory(session_id="alice"), SqliteMemory("memory.db", "bob", 2)
    assert isinstance(alice, SynapseMemory) and (tmp_path / "memory.db").is_dir()
    asyncio.run(_say(alice, ("user", "a1"), ("user", "a2"), ("user", "a3")))
    asyncio.run(_say(bob, ("user", "b1"), ("user", "b2"), ("user", "b3")))
    assert _contents(alice.to_messages()) == ["a1", "a2", "a3"]
    assert _contents(asyncio.run(bob.get())) == ["b2", "b3"]
    alice.close()
    assert _contents(asyncio.run(bob.get())) == ["b2", "b3"]  # still open for bob
    bob.close()
    with synapsedb.open(tmp_path / "memory.db", llm=None) as db:  # closed by the last one
        assert [m.content for m in Sessions(db.namespace("default")).load("alice")] == [
            "a1",
            "a2",
            "a3",
        ]


def test_sqlite_memory_refuses_a_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(b"SQLite format 3\x00")
    with pytest.raises(ValidationError, match="is a file") as err:
        SqliteMemory(path)
    assert err.value.details["field"] == "target"


def test_synapse_memory_over_the_engine_limit_is_refused_by_the_engine(tmp_path: Path) -> None:
    """A store may hold less than a message's 256 KiB: the engine's max_content_bytes rules."""
    with synapsedb.open(
        tmp_path / "small", durability="os", llm=None, embedder=None, max_content_bytes=32 * 1024
    ) as small:
        memory = SynapseMemory(small)
        with pytest.raises(ValidationError) as err:
            asyncio.run(memory.add("user", "x" * 40_000))
        assert err.value.details["limit"] == 32_768
        assert memory.to_messages() == []


# -- VectorMemory --------------------------------------------------------------------------------


def test_vector_memory_defaults_to_a_private_database_deleted_on_close() -> None:
    memory = VectorMemory()
    assert memory.max_results == 5
    path = Path(memory.ns._db.path)
    assert path.is_dir() and path.name.startswith("synapsedb-vector-memory-")
    asyncio.run(_say(memory, ("user", "hello")))
    memory.close()
    assert not path.exists()


def test_vector_memory_returns_the_turns_relevant_to_the_last_user_message() -> None:
    """The relevant turn comes back although two newer turns sit between it and the question
    (the question's own message is kept out of the search: in the index it would lend its score
    to its neighbours); then the question itself, everything oldest first."""
    memory = VectorMemory(max_results=2)
    asyncio.run(
        _say(
            memory, ("system", "You are kind."), *STORY[:6], ("user", "What is the name of my dog?")
        )
    )
    got = asyncio.run(memory.get())
    assert got[0] == {"role": "system", "content": "You are kind."}
    assert got[-1] == {"role": "user", "content": "What is the name of my dog?"}
    found = _contents(got[1:-1])
    assert len(found) == 2 and "My dog is called Rex and he is a beagle." in found
    story = [c for _, c in STORY]
    assert found == sorted(found, key=story.index)  # chronological
    assert memory.to_messages() == got
    memory.close()


def test_vector_memory_over_a_namespace_without_an_embedder(database: Database) -> None:
    """BM25 alone still finds the turn; results come back oldest first."""
    memory = VectorMemory(database.namespace("kw"), max_results=3, session_id="s")
    asyncio.run(_say(memory, *STORY[:6]))
    assert _contents(memory.to_messages()) == _contents(asyncio.run(memory.get()))
    asyncio.run(memory.add("user", "Which hospital do I work at as a nurse?"))
    got = memory.to_messages()  # recomputed: the new user message changes what is relevant
    assert got[-1]["content"] == "Which hospital do I work at as a nurse?"
    assert "I live in Lisbon and work as a nurse at Santa Maria hospital." in _contents(got)
    asyncio.run(memory.clear())
    assert asyncio.run(memory.get()) == []
    memory.close()
    assert not database.closed


def test_vector_memory_before_any_user_message_returns_the_latest(database: Database) -> None:
    memory = VectorMemory(database, max_results=2)
    asyncio.run(_say(memory, ("system", "s"), ("assistant", "a"), ("assistant", "b")))
    assert _contents(asyncio.run(memory.get())) == ["a", "b"]


def test_memories_close_through_their_context_managers(tmp_path: Path) -> None:
    async def run() -> None:
        async with SynapseMemory(tmp_path / "d", "s") as memory:
            await memory.add("user", "x")
        with SynapseMemory(tmp_path / "d", "s") as again:
            assert _contents(await again.get()) == ["x"]

    asyncio.run(run())
    with synapsedb.open(tmp_path / "d", llm=None):  # the directory was let go
        pass
    assert os.listdir(tmp_path / "d")


# -- docs ----------------------------------------------------------------------------------------


def seed_004_section() -> str:
    text = (Path(__file__).resolve().parents[2] / "docs" / "conversation.md").read_text()
    return text.split("## SynapseKit's memory classes", 1)[1].split("\n## ", 1)[0]


def test_the_seed_004_section_of_the_docs_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its examples run as written (the Redis and PostgreSQL ones, against real servers, in
    tests/api/test_conversation_backends.py), and its table names every class."""
    import re

    section = seed_004_section()
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    local = [b for b in blocks if "RedisMemory(" not in b and "PostgresMemory(" not in b]
    assert len(blocks) == 3 and len(local) == 1
    monkeypatch.chdir(tmp_path)
    for code in local:
        exec(compile(code, "docs/conversation.md", "exec"), {"__name__": "docs"})
    for name in [
        "InMemoryConversation",
        "WindowMemory",
        "SynapseMemory",
        "SqliteMemory",
        "RedisMemory",
        "PostgresMemory",
        "SummaryMemory",
        "VectorMemory",
    ]:
        assert f"| `{name}(" in section, name
