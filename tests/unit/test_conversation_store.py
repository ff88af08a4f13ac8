"""Conversation stores (issue 12, seed 003): Message, InMemoryStore, Sessions/AsyncSessions on
an embedded namespace. The same behaviour over a real server: tests/api/test_conversation_remote.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import Database, ManualClock, Namespace, ValidationError, VersionConflictError
from synapsedb.conversation import (
    AsyncMemoryStore,
    AsyncSessions,
    InMemoryStore,
    MemoryStore,
    Message,
    Sessions,
    session_plans,
)

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "track_parcel", "arguments": '{"order": 1458}'},
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db(tmp_path: Path, clock: ManualClock) -> Iterator[Database]:
    database = synapsedb.open(
        tmp_path / "d",
        clock=clock,
        durability="os",
        embedder=None,
        background_maintenance=False,
        llm=None,
    )
    yield database
    database.close()


@pytest.fixture
def ns(db: Database) -> Namespace:
    return db.namespace("chat")


class Spy:
    """A namespace that records the calls made to it; ``fail`` makes chosen calls raise once."""

    def __init__(self, ns: Any) -> None:
        self.ns, self.calls, self.fail = ns, [], {}  # type: list[tuple[str, dict[str, Any]]]

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.ns, name)

        def run(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            if name in self.fail:
                raise self.fail.pop(name)
            return method(*args, **kwargs)

        return run


def _plain(msgs: list[Message]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.to_dict().items() if k not in ("id", "ts")} for m in msgs]


# -- Message ---------------------------------------------------------------------------------


def test_message_forms_and_round_trip() -> None:
    m = Message.assistant(tool_calls=[CALL], name="bot-1", metadata={"model": "x"})
    assert Message.of(m) is m
    assert Message.of(m.to_dict()) == m
    assert Message.of(("user", "hi")) == Message.user("hi")
    # OpenAI's response shape: null content beside tool calls, empty extras
    got = Message.of(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [CALL],
            "refusal": None,
            "annotations": [],
        }
    )
    assert got.content == "" and got.tool_calls == [CALL]
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    assert Message.of(parts).content == "a\nb"
    assert Message.tool("", "call_1").to_openai() == {
        "role": "tool",
        "content": "",
        "tool_call_id": "call_1",
    }
    stored = Message.user("hi").stored(
        "1-0", Message.of({"role": "user", "content": "x", "ts": "2025-01-02T03:04:05Z"}).ts
    )  # type: ignore[arg-type]
    assert stored.to_dict()["ts"] == "2025-01-02T03:04:05+00:00"
    assert Message.of(stored.to_dict()) == stored


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        (
            ("bot", "x"),
            "messages[3].role",
            "expected one of system, user, assistant, tool, got 'bot'",
        ),
        ({"role": "user", "content": " "}, "messages[3].content", "must not be empty"),
        (
            {"role": "user", "content": "x" * (256 * 1024 + 1)},
            "messages[3].content",
            "limit of 262144",
        ),
        ({"role": "user", "content": "x", "name": "a b"}, "messages[3].name", "1-64 characters"),
        (
            {"role": "user", "content": "x", "tool_calls": [CALL]},
            "messages[3].tool_calls",
            "only assistant",
        ),
        (
            {"role": "assistant", "content": "x", "tool_calls": ["f"]},
            "messages[3].tool_calls[0]",
            "object",
        ),
        (
            {"role": "user", "content": "x", "tool_call_id": "c"},
            "messages[3].tool_call_id",
            "only tool",
        ),
        (
            {"role": "user", "content": "x", "metadata": {"n": float("nan")}},
            "messages[3].metadata.n",
            "JSON",
        ),
        (
            {"role": "user", "content": "x", "colour": "red"},
            "messages[3].colour",
            "unknown message field",
        ),
        ({"content": "x"}, "messages[3].role", "required"),
        (
            {"role": "user", "content": [{"type": "image_url"}]},
            "messages[3].content[0]",
            "text parts",
        ),
        (42, "messages[3]", "expected a Message"),
    ],
)
def test_message_errors_name_the_field(value: Any, field: str, words: str) -> None:
    with pytest.raises(ValidationError) as err:
        Message.of(value, "messages[3]")
    assert err.value.field == field and words in err.value.message, err.value.message


def test_a_message_built_directly_is_checked() -> None:
    with pytest.raises(ValidationError) as err:
        Message("user", "")
    assert err.value.field == "message.content"
    assert Message.assistant("", tool_calls=[CALL]).content == ""


# -- InMemoryStore ---------------------------------------------------------------------------


def test_in_memory_store_isolates_sessions_and_clears() -> None:
    store = InMemoryStore()
    assert isinstance(store, MemoryStore)
    store.append("s1", Message.user("Hello"))
    store.append("s1", ("assistant", "Hi there!"))
    store.append("s2", ("user", "other"))
    assert [m.content for m in store.load("s1")] == ["Hello", "Hi there!"]
    assert [m.content for m in store.load("s1", last=1)] == ["Hi there!"]
    assert store.load("s3") == [] and store.sessions() == ["s1", "s2"]
    store.clear("s1")
    assert store.load("s1") == [] and store.load("s2")[0].content == "other"
    assert store.append("s1", ("user", "again")).id == "s1#3"  # ids are not reused


def test_in_memory_store_is_safe_across_threads() -> None:
    store = InMemoryStore()

    def work(t: int) -> None:
        for i in range(200):
            store.append("s", ("user", f"{t}-{i}"))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    msgs = store.load("s")
    assert len(msgs) == 800 and len({m.id for m in msgs}) == 800


# -- Sessions: messages ----------------------------------------------------------------------


def test_sessions_keep_every_field_and_isolate_sessions(ns: Namespace) -> None:
    s = Sessions(ns)
    assert isinstance(s, MemoryStore) and isinstance(AsyncSessions(ns), AsyncMemoryStore)
    sent = [
        Message.system("Be brief."),
        Message.user("Where is my parcel?", name="ana"),
        Message.assistant(tool_calls=[CALL], metadata={"model": "m1"}),
        Message.tool('{"city": "Hamburg"}', "call_1"),
        Message.assistant("In Hamburg."),
    ]
    stored = [s.append("support-1", m) for m in sent]
    assert [m.id for m in stored] == [m.id for m in s.load("support-1")]
    assert s.load("support-1") == stored
    assert _plain(stored) == [m.to_dict() for m in sent]
    s.append("support-2", {"role": "user", "content": "other"})
    assert [m.content for m in s.load("support-2")] == ["other"]
    assert s.load("nobody") == []
    # the tool-call-only message: the event shows a rendering, the message its ""
    ev = ns.events("session:support-1")[2]
    assert ev.content == "[tool calls: track_parcel]" and ev.data is not None
    assert ev.data["content"] == "" and ev.data["role"] == "assistant"
    assert ev.entity == "session:support-1" and ev.memory_id is None  # not searchable


def test_append_many_checks_everything_first(ns: Namespace) -> None:
    s = Sessions(ns)
    with pytest.raises(ValidationError) as err:
        s.append_many("s", [("user", "a"), ("bot", "b")])
    assert err.value.field == "messages[1].role"
    assert ns.events("session:s") == []
    got = s.append_many("s", [("user", "a"), ("assistant", "b")])
    assert [m.content for m in s.load("s")] == ["a", "b"] and s.load("s") == got


def test_clear_is_a_write_and_history_still_shows_the_messages(
    ns: Namespace, clock: ManualClock
) -> None:
    s = Sessions(ns)
    s.append("s", ("user", "my address is 5 Elm St"))
    s.append("s", ("assistant", "noted"))
    before = clock.now_us() / 1e6
    clock.advance(1)
    s.clear("s")
    assert s.load("s") == [] and s.load("s", last=5) == []
    old = s.load("s", as_of=before)
    assert [m.content for m in old] == ["my address is 5 Elm St", "noted"]
    assert len(ns.events("session:s")) == 2  # nothing erased
    state = ns.history("session:s", "state")
    assert state[-1].value["cleared_through"] == old[-1].id
    clock.advance(1)
    s.append("s", ("user", "new topic"))
    assert [m.content for m in s.load("s")] == ["new topic"]
    assert [m.content for m in s.load("s", last=10)] == ["new topic"]
    s.clear("empty")  # nothing to clear: nothing written
    assert ns.facts("session:empty") == []


def test_load_last_reads_the_tail_after_the_clear(ns: Namespace) -> None:
    s = Sessions(ns)
    for i in range(30):
        s.append("s", ("user", f"m{i}"))
    s.clear("s")
    for i in range(30, 40):
        s.append("s", ("user", f"m{i}"))
    spy = Spy(ns)
    got = Sessions(spy).load("s", last=4)
    assert [m.content for m in got] == ["m36", "m37", "m38", "m39"]
    events = [kw for name, kw in spy.calls if name == "events"]
    cleared = ns.get("session:s", "state").value["cleared_through"]
    assert events == [{"order": "desc", "limit": 4, "after": cleared, "as_of": None}]
    assert [m.content for m in s.load("s", last=50)] == [f"m{i}" for i in range(30, 40)]
    assert s.load("s", last=0) == []


def test_load_pages_through_a_long_session(ns: Namespace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_plans, "MAX_LAST", 3)
    s = Sessions(ns)
    for i in range(10):
        s.append("s", ("user", f"m{i}"))
    spy = Spy(ns)
    assert [m.content for m in Sessions(spy).load("s")] == [f"m{i}" for i in range(10)]
    assert sum(1 for name, _ in spy.calls if name == "events") == 4  # 3 + 3 + 3 + 1


def test_the_state_is_changed_by_compare_and_set(ns: Namespace) -> None:
    s = Sessions(ns)
    s.append("s", ("user", "a"))
    s.configure("s", ttl=60)
    spy = Spy(ns)
    spy.fail["set"] = VersionConflictError("raced", entity="session:s", key="state")
    Sessions(spy).clear("s")  # the conflict thrown into the plan: re-read and set again
    assert [name for name, _ in spy.calls].count("set") == 2
    value = ns.get("session:s", "state").value
    assert value["ttl"] == 60 and value["cleared_through"] == ns.events("session:s")[0].id


# -- TTL -------------------------------------------------------------------------------------


def test_ttl_slides_and_an_expired_session_reads_as_empty(
    ns: Namespace, clock: ManualClock
) -> None:
    s = Sessions(ns, ttl=60, clock=clock)
    s.append("a", ("user", "first"))
    clock.advance(50)
    s.append("a", ("user", "second"))  # renews
    s.append("b", ("user", "other"))
    clock.advance(50)
    assert [m.content for m in s.load("a")] == ["first", "second"]
    assert s.sessions() == ["a", "b"] and not s.info("a").expired
    clock.advance(11)
    assert s.load("a") == [] and s.load("a", last=1) == [] and s.sessions() == []
    info = s.info("a")
    assert info.expired and info.count == 0 and info.ttl == 60
    assert (
        info.expires_at is not None and info.expires_at.timestamp() == clock.now_us() / 1e6 - 1
    )  # second + 60
    # used again: it starts afresh (the pause hides what came before it)
    s.append("a", ("user", "back again"))
    assert [m.content for m in s.load("a")] == ["back again"]
    assert [m.content for m in s.load("a", last=5)] == ["back again"]
    assert s.info("a").count == 1 and s.sessions() == ["a"]
    # as_of: as it read then
    assert [m.content for m in s.load("a", as_of=clock.now_us() / 1e6 - 11)] == ["first", "second"]
    assert s.load("a", as_of=clock.now_us() / 1e6 - 0.5) == []  # expired then


def test_a_session_ttl_overrides_the_store_ttl(ns: Namespace, clock: ManualClock) -> None:
    s = Sessions(ns, ttl=60, clock=clock)
    s.append("keep", ("user", "kept"))
    s.append("short", ("user", "short-lived"))
    s.append("long", ("user", "long-lived"))
    s.configure("keep", ttl=None)
    s.configure("short", ttl=5)
    s.configure("long", ttl=3600)
    clock.advance(10)
    assert s.load("short") == [] and s.info("short").ttl == 5
    clock.advance(100)
    assert s.sessions() == ["keep", "long"] and s.info("keep").ttl is None
    with pytest.raises(ValidationError) as err:
        s.configure("x", ttl=0)
    assert err.value.field == "ttl"


def test_purge_expired_erases_expired_sessions_only(ns: Namespace, clock: ManualClock) -> None:
    s = Sessions(ns, ttl=60, clock=clock)
    s.append("old", ("user", "old secret"))
    s.append("cleared", ("user", "cleared secret"))
    s.clear("cleared")
    clock.advance(100)
    s.append("new", ("user", "fresh"))
    assert sorted(s.purge_expired()) == ["cleared", "old"]
    assert ns.events("session:old") == [] and ns.events("session:cleared") == []
    assert [m.content for m in s.load("new")] == ["fresh"]
    assert s.purge_expired() == []
    assert Sessions(ns).purge_expired() == []  # no ttl: nothing expires


# -- purge -----------------------------------------------------------------------------------


def test_purge_erases_every_message_whatever_entity_it_is_about(
    ns: Namespace, clock: ManualClock
) -> None:
    s = Sessions(ns, searchable=True)
    s.append("s", ("user", "my card number is 4111"), entity="user:7")
    s.append("s", ("assistant", "I will not store card numbers"))
    s.configure("s", ttl=600)
    ns.write("user:7", "prefers email")  # about the user, outside the session: kept
    before = clock.now_us() / 1e6
    clock.advance(1)
    assert len(ns.query("card number", mode="keyword").hits) == 2
    out = s.purge("s")
    assert out.purged and out.events == 2 and out.facts == 1 and out.memories >= 1
    assert s.load("s") == [] and s.load("s", as_of=before) == []
    assert ns.events("session:s") == [] and ns.events("session:s", as_of=before) == []
    assert ns.query("card number", mode="keyword").hits == []
    assert ns.facts("session:s") == [] and "session:s" not in ns.streams()
    assert [m.content for m in ns.memories("user:7")] == ["prefers email"]
    s.append("s", ("user", "a new start"))  # the id can be used again
    assert [m.content for m in s.load("s")] == ["a new start"]


# -- searchable messages ---------------------------------------------------------------------


def test_searchable_turns_are_reached_by_query_and_search(ns: Namespace) -> None:
    s = Sessions(ns, searchable=True)
    s.append("s", ("user", "My parcel went to Hamburg instead of Munich"))
    for i in range(20):
        s.append("s", ("user", f"small talk number {i}"))
    s.append("s", Message.assistant(tool_calls=[CALL]))  # no text: not searchable
    s.append("s", ("user", "never to be found"), searchable=False)
    s.append("other", ("user", "Hamburg weather"))
    hits = ns.query("parcel Hamburg", mode="keyword", k=3).hits
    assert hits[0].content.startswith("My parcel") and hits[0].type == "event"
    assert hits[0].metadata["role"] == "user" and hits[0].metadata["session"] == "s"
    found = s.search("s", "Hamburg parcel", k=2)
    assert found[0].content.startswith("My parcel") and found[0].id == s.load("s")[0].id
    assert all(m.content != "Hamburg weather" for m in found)  # only this session's
    assert ns.query("never found", mode="keyword").hits == []
    s.clear("s")
    assert s.search("s", "Hamburg parcel") == []  # cleared: not this session's any more
    assert Sessions(ns).append("q", ("user", "plain")).id  # default: not searchable
    assert ns.query("plain", mode="keyword").hits == []


def test_search_can_leave_the_query_message_out(ns: Namespace) -> None:
    s = Sessions(ns, searchable=True)
    dog = s.append("s", ("user", "My dog is called Rex"))
    s.append("s", ("assistant", "Nice name"))
    question = s.append("s", ("user", "What is my dog called?"))
    assert question.id in [m.id for m in s.search("s", question.content, k=3)]
    spy = Spy(ns)
    got = Sessions(spy).search("s", question.content, k=3, exclude=[question.id])
    assert dog.id in [m.id for m in got] and question.id not in [m.id for m in got]
    (query,) = [kw for name, kw in spy.calls if name == "query"]
    assert query["filter"] == {"stream": "session:s", "event_id": {"$nin": [question.id]}}
    with pytest.raises(ValidationError) as err:
        s.search("s", "dog", exclude=["x"] * 1025)
    assert err.value.field == "exclude" and err.value.details["limit"] == 1024


def test_messages_about_a_user_are_reached_by_user_scoped_reads(ns: Namespace) -> None:
    s = Sessions(ns, searchable=True, entity="user:42")
    s.append("s", ("user", "I am allergic to peanuts"))
    s.append("s", ("assistant", "Noted"), entity="session:s")
    evs = ns.events("session:s")
    assert [e.entity for e in evs] == ["user:42", "session:s"]
    hits = ns.query("peanuts", entity="user:42", mode="keyword").hits
    assert [h.content for h in hits] == ["I am allergic to peanuts"]


def test_turns_stored_by_remember_read_as_messages(ns: Namespace) -> None:
    ns.remember(
        [
            {"role": "developer", "content": "be kind"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "name": "bot"},
        ],
        entity="user:1",
        session="s",
    )
    got = Sessions(ns).load("s")
    assert [(m.role, m.content, m.name) for m in got] == [
        ("system", "be kind", None),
        ("user", "hi", None),
        ("assistant", "hello", "bot"),
    ]


# -- info and listing ------------------------------------------------------------------------


def test_info_counts_cheaply_and_says_when_it_is_a_lower_bound(
    ns: Namespace, clock: ManualClock
) -> None:
    s = Sessions(ns)
    for i in range(5):
        s.append("s", ("user", f"m{i}"))
        clock.advance(1)
    info = s.info("s")
    assert (info.count, info.count_exact, info.cleared_at, info.summary_version) == (
        5,
        True,
        None,
        None,
    )
    assert info.first_at is not None and info.last_at is not None
    assert (info.last_at - info.first_at).total_seconds() == 4
    capped = s.info("s", count_limit=3)
    assert (capped.count, capped.count_exact) == (3, False)
    assert capped.first_at is None and capped.last_at == info.last_at
    s.clear("s")
    cleared = s.info("s")
    assert cleared.count == 0 and cleared.cleared_at is not None and cleared.first_at is None
    ns.set("session:s", "summary", {"text": "...", "version": 3})
    assert s.info("s").summary_version == 3
    with pytest.raises(ValidationError) as err:
        s.info("s", count_limit=10_001)
    assert err.value.field == "count_limit" and err.value.details["limit"] == 10_000


def test_sessions_lists_the_non_empty_sessions(ns: Namespace, clock: ManualClock) -> None:
    s = Sessions(ns)
    for sid in ("b", "a", "c"):
        s.append(sid, ("user", "x"))
    ns.append("ticket:1", "not a session")
    t = clock.now_us() / 1e6
    clock.advance(1)
    s.clear("c")
    assert s.sessions() == ["a", "b"] and s.sessions(as_of=t) == ["a", "b", "c"]


# -- errors ----------------------------------------------------------------------------------


def test_errors_name_the_field_and_the_limit(ns: Namespace) -> None:
    s = Sessions(ns)
    cases: list[tuple[Any, str, int | None]] = [
        (lambda: s.append("", ("user", "x")), "session_id", None),
        (lambda: s.append("x" * 201, ("user", "x")), "session_id", 200),
        (lambda: s.append("a\nb", ("user", "x")), "session_id", None),
        (lambda: s.load("s", last=-1), "last", None),
        (lambda: s.load("s", last=10_001), "last", 10_000),
        (lambda: s.load("s", as_of="yesterday-ish"), "as_of", None),
        (lambda: s.append("s", ("user", "x" * 300_000)), "message.content", 256 * 1024),
        (
            lambda: s.append("s", Message.user("x", metadata={"blob": "y" * 70_000})),
            "message",
            64 * 1024,
        ),
        (lambda: s.append("s", ("user", "x"), searchable="yes"), "searchable", None),
        (lambda: Sessions(ns, ttl=-1), "ttl", None),
        (lambda: Sessions(ns, ttl=1e12), "ttl", 100 * 365 * 86_400),
        (lambda: s.search("s", "x", k=0), "k", 10_000),
    ]
    for run, field, limit in cases:
        with pytest.raises(ValidationError) as err:
            run()
        assert err.value.field == field, (field, err.value.message)
        assert err.value.details.get("limit") == limit, (field, err.value.message)
        assert field.split(".")[0] in err.value.message
    assert ns.events("session:s") == []  # nothing written


# -- async -----------------------------------------------------------------------------------


def test_async_sessions_over_an_embedded_namespace(ns: Namespace, clock: ManualClock) -> None:
    async def run() -> tuple[list[Message], list[Message], list[str]]:
        s = AsyncSessions(ns, clock=clock)
        await s.append("s", ("user", "hello"))
        await s.append_many("s", [("assistant", "hi"), ("user", "bye")])
        full = await s.load("s")
        t = clock.now_us() / 1e6
        clock.advance(1)
        await s.clear("s")
        assert await s.load("s") == [] and (await s.info("s")).cleared_through == full[-1].id
        old = await s.load("s", last=2, as_of=t)
        listed = await s.sessions(as_of=t)
        assert (await s.purge("s")).events == 3
        assert await s.load("s", as_of=t) == []
        return full, old, listed

    full, old, listed = asyncio.run(run())
    assert [m.content for m in full] == ["hello", "hi", "bye"]
    assert old == full[1:] and listed == ["s"]


# -- docs ------------------------------------------------------------------------------------


def test_the_sessions_section_of_the_docs_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/conversation.md's ``## Sessions`` examples run as written, and every public
    Sessions method is in its table."""
    import inspect
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "conversation.md").read_text()
    section = text.split("## Sessions", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, "docs/conversation.md", "exec"), {"__name__": "docs"})
    for name, _ in inspect.getmembers(Sessions, inspect.isfunction):
        if not name.startswith("_"):
            assert f"`{name}(" in section, name


def test_human_and_ai_are_the_store_designs_names_for_user_and_assistant() -> None:
    from synapsedb.conversation import InMemoryStore, Message

    store = InMemoryStore()
    store.append("session-1", Message.human("Hello"))
    store.append("session-1", Message.ai("Hi there!"))
    loaded = store.load("session-1")
    assert [(m.role, m.content) for m in loaded] == [("user", "Hello"), ("assistant", "Hi there!")]
    assert Message.human("x", name="ada") == Message.user("x", name="ada")
    assert (
        Message.ai(
            tool_calls=[
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]
        ).role
        == "assistant"
    )
