"""Memory strategies (issue 12, seeds 003/004): Buffer, Window, TokenBuffer, Vector and their
compositions and async twins, over InMemoryStore and Sessions on an embedded namespace.
Summary and SummaryBuffer: tests/unit/test_conversation_summary.py."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import Database, ManualClock, Namespace, ValidationError
from synapsedb.conversation.messages import Message
from synapsedb.conversation.sessions import AsyncSessions, Sessions
from synapsedb.conversation.store import AsyncMemoryStore, InMemoryStore, MemoryStore
from synapsedb.conversation.strategies import (
    AsyncBuffer,
    AsyncTokenBuffer,
    AsyncVector,
    AsyncWindow,
    Buffer,
    TokenBuffer,
    Vector,
    Window,
)
from synapsedb.conversation.strategy_base import units
from synapsedb.conversation.tokens import count_message_tokens, encoding_for


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


def call(i: int, name: str = "get_weather") -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": f'{{"city": "c{i}"}}'},
    }


def contents(msgs: list[Message]) -> list[str]:
    return [m.content for m in msgs]


def check_tool_units(msgs: list[Message]) -> None:
    """What OpenAI's API demands: every tool message answers a call of an assistant message
    earlier in the list, with only tool messages in between."""
    open_calls: set[str] = set()
    for m in msgs:
        if m.role == "tool":
            assert m.tool_call_id in open_calls, f"tool result {m.tool_call_id} without its call"
        else:
            open_calls = {c["id"] for c in m.tool_calls or ()}


class Recording:
    """A store in front of another that records each load's ``last`` and how many messages
    it returned (to show which strategies read only the tail)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.loads = inner, []  # type: list[tuple[int | None, int]]
        self.ns = getattr(inner, "ns", None)
        self.ttl = getattr(inner, "ttl", None)

    def append(self, session_id: str, message: Any, **options: Any) -> Message:
        return self.inner.append(session_id, message, **options)  # type: ignore[no-any-return]

    def load(self, session_id: str, *, last: int | None = None) -> list[Message]:
        msgs = self.inner.load(session_id, last=last)
        self.loads.append((last, len(msgs)))
        return msgs  # type: ignore[no-any-return]

    def clear(self, session_id: str) -> None:
        self.inner.clear(session_id)

    @property
    def read(self) -> int:
        return sum(n for _, n in self.loads)


def chat(store: Any, sid: str, n: int, *, system: str | None = "You are terse.") -> None:
    if system:
        store.append(sid, Message.system(system))
    for i in range(n):
        store.append(sid, ("user", f"Question {i}: how warm is city {i} today?"))
        store.append(sid, ("assistant", f"Answer {i}: it is {10 + i} degrees in city {i}."))


@pytest.fixture(params=["memory", "sessions"])
def store(request: pytest.FixtureRequest, ns: Namespace) -> Any:
    return InMemoryStore() if request.param == "memory" else Sessions(ns)


# -- Buffer and the store contract --------------------------------------------------------------


def test_every_strategy_is_a_memory_store_that_passes_appends_and_clears_through(
    store: Any,
) -> None:
    for strategy in (Buffer(store), Window(store, k=2), TokenBuffer(store, max_tokens=500)):
        assert isinstance(strategy, MemoryStore)
    buf = Buffer(Window(store, k=3))  # appends reach the store through two wrappers
    stored = buf.append("s1", ("user", "hello"))
    assert stored.id is not None and stored.content == "hello"
    buf.append("s1", Message.assistant("hi there"))
    buf.append("s2", ("user", "other session"))
    assert contents(Buffer(store).load("s1")) == ["hello", "hi there"]
    buf.clear("s1")
    assert Buffer(store).load("s1") == [] and contents(store.load("s2")) == ["other session"]


def test_strategy_arguments_are_checked_with_the_field_named() -> None:
    store = InMemoryStore()
    for make, field in (
        (lambda: Window(store, k=-1), "k"),
        (lambda: Window(store, k=True), "k"),
        (lambda: TokenBuffer(store, max_tokens=0), "max_tokens"),
        (lambda: Window(store, keep_system="yes"), "keep_system"),
        (lambda: Window(object()), "store"),
        (lambda: Vector(store), "sessions"),
    ):
        with pytest.raises(ValidationError) as err:
            make()
        assert err.value.field == field
    with pytest.raises(ValidationError) as err:
        Window(store).load("")
    assert err.value.field == "session_id"
    with pytest.raises(ValidationError, match="use Window over it") as err:
        AsyncWindow(store)
    assert err.value.field == "store"
    with pytest.raises(ValidationError, match="use AsyncTokenBuffer over it"):
        TokenBuffer(AsyncWindow(AsyncSessions(object())))


# -- Window -------------------------------------------------------------------------------------


def test_window_keeps_the_last_k_and_the_head_system_message(store: Any) -> None:
    chat(store, "s", 10)
    win = Window(store, k=3)
    assert contents(win.load("s")) == [
        "You are terse.",
        "Answer 8: it is 18 degrees in city 8.",
        "Question 9: how warm is city 9 today?",
        "Answer 9: it is 19 degrees in city 9.",
    ]
    assert contents(Window(store, k=3, keep_system=False).load("s"))[0].startswith("Answer 8")
    assert contents(Window(store, k=0).load("s")) == ["You are terse."]
    assert len(Window(store, k=100).load("s")) == 21  # shorter than k: everything, once


def test_window_without_a_head_system_message_keeps_nothing_extra(store: Any) -> None:
    chat(store, "s", 5, system=None)
    store.append("s", Message.system("a system message in the middle is a message"))
    assert contents(Window(store, k=2).load("s")) == [
        "Answer 4: it is 14 degrees in city 4.",
        "a system message in the middle is a message",
    ]


def tool_session(store: Any, sid: str) -> None:
    store.append(sid, Message.system("Use the tools."))
    store.append(sid, ("user", "Weather in c1 and c2?"))
    store.append(sid, Message.assistant(tool_calls=[call(1), call(2)]))
    store.append(sid, Message.tool("12 C", "call_1"))
    store.append(sid, Message.tool("15 C", "call_2"))


def test_window_never_separates_tool_results_from_their_call(store: Any) -> None:
    tool_session(store, "s")
    # in flight: the newest messages are tool results; k=1 would start inside the unit
    for k in (1, 2, 3):
        got = Window(store, k=k).load("s")
        check_tool_units(got)
        assert got[0].content == "Use the tools." and got[1].tool_calls is not None
        assert contents(got[-2:]) == ["12 C", "15 C"]
    store.append("s", ("assistant", "c1: 12 C, c2: 15 C."))
    got = Window(store, k=2).load("s")  # the window moves back to the call: 4 messages
    check_tool_units(got)
    assert [m.role for m in got] == ["system", "assistant", "tool", "tool", "assistant"]
    assert [m.role for m in Window(store, k=1).load("s")] == ["system", "assistant"]


def test_tool_results_whose_call_is_not_in_the_session_are_dropped() -> None:
    store = InMemoryStore()
    store.append("s", Message.tool("orphan result", "call_9"))
    store.append("s", ("user", "hi"))
    for strategy in (Window(store, k=5), TokenBuffer(store, max_tokens=1000)):
        assert contents(strategy.load("s")) == ["hi"]


def test_window_over_sessions_reads_only_the_tail(ns: Namespace) -> None:
    sessions = Sessions(ns)
    chat(sessions, "long", 1000)  # 2,001 messages
    rec = Recording(sessions)
    got = Window(rec, k=4).load("long")
    assert contents(got)[0] == "You are terse." and len(got) == 5
    assert rec.loads == [(5, 5)]  # the head came from one events(limit=1), not a full load
    tool_session(sessions, "long")
    rec.loads.clear()
    got = Window(rec, k=2).load("long")  # the unit is longer than the first read: read more
    check_tool_units(got)
    assert [m.role for m in got] == ["system", "assistant", "tool", "tool"]
    assert all(last is not None for last, _ in rec.loads) and rec.read < 40


def test_every_system_message_the_session_starts_with_is_kept(ns: Namespace) -> None:
    sessions = Sessions(ns)
    sessions.append("s", Message.system("You are terse."))
    sessions.append("s", Message.system("The user is called Ana."))
    chat(sessions, "s", 500, system=None)
    rec = Recording(sessions)
    for got in (Window(rec, k=2).load("s"), TokenBuffer(rec, max_tokens=100).load("s")):
        assert contents(got[:2]) == ["You are terse.", "The user is called Ana."]
        assert got[2].role != "system" and count_message_tokens(got) > 0
    assert all(last is not None for last, _ in rec.loads)  # tail reads only
    for i in range(10):  # a session of nothing but system messages, more than read at first
        sessions.append("sys", Message.system(f"rule {i}"))
    assert contents(Window(sessions, k=1).load("sys")) == [f"rule {i}" for i in range(10)]
    assert Window(sessions, k=1, keep_system=False).load("sys") == sessions.load("sys", last=1)


# -- TokenBuffer --------------------------------------------------------------------------------


def test_token_buffer_keeps_the_newest_messages_within_the_budget(store: Any) -> None:
    chat(store, "s", 30)
    everything = store.load("s")
    for budget in (40, 100, 333):
        got = TokenBuffer(store, max_tokens=budget).load("s")
        assert count_message_tokens(got) <= budget
        assert got[0].content == "You are terse."
        assert got[1:] == everything[len(everything) - len(got) + 1 :]  # a suffix
        older = everything[len(everything) - len(got)]  # the next older message did not fit
        assert count_message_tokens([*got, older]) > budget
    assert TokenBuffer(store, max_tokens=1000).load("s") == everything  # all of it fits


def test_token_buffer_counts_with_the_model_encoding(store: Any) -> None:
    chat(store, "s", 30, system=None)
    for model in (None, "gpt-4o"):
        got = TokenBuffer(store, max_tokens=120, model=model).load("s")
        assert (
            count_message_tokens(got, model)
            <= 120
            < count_message_tokens(store.load("s")[-len(got) - 1 :], model)
        )


def test_token_buffer_drops_a_tool_unit_that_does_not_fit_whole() -> None:
    store = InMemoryStore()
    tool_session(store, "s")
    store.append("s", ("assistant", "c1: 12 C, c2: 15 C."))
    whole = store.load("s")
    unit = whole[2:5]
    final = count_message_tokens(whole[:1] + whole[5:])
    # room for the final answer and one tool result, not for the call and both results
    got = TokenBuffer(
        store, max_tokens=final + count_message_tokens(unit[2:], reply_priming=False)
    ).load("s")
    assert [m.role for m in got] == ["system", "assistant"] and got[1].content.startswith("c1")
    got = TokenBuffer(store, max_tokens=count_message_tokens(whole[:1] + unit + whole[5:])).load(
        "s"
    )
    check_tool_units(got)
    assert [m.role for m in got] == ["system", "assistant", "tool", "tool", "assistant"]


def test_token_buffer_keeps_the_system_message_even_when_it_alone_is_over_budget() -> None:
    store = InMemoryStore()
    store.append("s", Message.system("Instructions " * 200))
    store.append("s", ("user", "hi"))
    assert [m.role for m in TokenBuffer(store, max_tokens=50).load("s")] == ["system"]
    assert contents(TokenBuffer(store, max_tokens=50, keep_system=False).load("s")) == ["hi"]


def test_token_buffer_over_sessions_reads_the_tail_in_growing_chunks(ns: Namespace) -> None:
    sessions = Sessions(ns)
    chat(sessions, "long", 1500)  # 3,001 messages
    rec = Recording(sessions)
    got = TokenBuffer(rec, max_tokens=2000).load("long")
    assert count_message_tokens(got) <= 2000 and len(got) > 40
    assert [last for last, _ in rec.loads] == [32, 128]  # stops once the budget is full
    assert got[0].content == "You are terse."
    assert got[1:] == sessions.load("long", last=len(got) - 1)


def test_window_and_token_buffer_agree_with_a_reference_on_random_sessions() -> None:
    """Random sessions of text, tool units and orphans against a plain reference model."""
    rng = random.Random(7)
    counter = encoding_for(None)
    for trial in range(150):
        store = InMemoryStore()
        sid = f"t{trial}"
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            store.append(sid, Message.system("sys " * rng.randint(1, 30)))
        if rng.random() < 0.2:
            store.append(sid, Message.tool("stray", "call_x"))
        for i in range(rng.randint(0, 25)):
            if rng.random() < 0.25:
                calls = [call(i * 10 + j) for j in range(rng.randint(1, 3))]
                store.append(sid, Message.assistant(tool_calls=calls))
                for c in calls[: rng.randint(0, len(calls))]:
                    store.append(sid, Message.tool("r " * rng.randint(1, 20), c["id"]))
            else:
                role = rng.choice(["user", "assistant"])
                store.append(sid, (role, "w " * rng.randint(1, 40)))
        msgs = store.load(sid)
        k, budget = rng.randint(0, 12), rng.randint(10, 400)
        got = Window(store, k=k).load(sid)
        check_tool_units(got)
        n = next((i for i, m in enumerate(msgs) if m.role != "system"), len(msgs))
        head = msgs[:n]  # the system messages the session starts with
        assert got[: len(head)] == head
        body = got[len(head) :]
        assert body == msgs[len(msgs) - len(body) :]  # a suffix of the session
        avail = msgs[len(head) :]
        if avail and avail[0].role == "tool":  # results whose call is not in the session
            avail = avail[units(avail)[0][1] :]
        assert len(body) >= min(k, len(avail))  # at least k when there are k
        if body:
            first_unit = units(body)[0]
            assert len(body) - (first_unit[1] - first_unit[0]) < k  # no whole extra unit
        got = TokenBuffer(store, max_tokens=budget).load(sid)
        check_tool_units(got)
        assert got[: len(head)] == head
        body = got[len(head) :]
        assert body == msgs[len(msgs) - len(body) :]
        if count_message_tokens(head) <= budget:
            assert count_message_tokens(got) <= budget
        rest = msgs[len(head) : len(msgs) - len(body)]  # what was left out
        if rest:
            unit = units(rest)[-1]  # the next older unit: if whole, it did not fit
            if rest[unit[0]].role != "tool":
                extra = sum(counter.count_message(m) for m in rest[unit[0] : unit[1]])
                assert count_message_tokens(got) + extra > budget


# -- composition and async -----------------------------------------------------------------------


def test_strategies_compose(store: Any) -> None:
    chat(store, "s", 40)
    inner = TokenBuffer(store, max_tokens=300)
    assert Window(inner, k=4).load("s") == [inner.load("s")[0], *inner.load("s")[-4:]]
    outer = TokenBuffer(Window(store, k=6), max_tokens=80)
    got = outer.load("s")
    assert count_message_tokens(got) <= 80 and got[0].content == "You are terse."
    assert got[1:] == Window(store, k=6).load("s")[-(len(got) - 1) :]
    both = Window(TokenBuffer(store, max_tokens=10_000), k=2, keep_system=False)
    assert contents(both.load("s")) == contents(store.load("s")[-2:])


def test_async_twins_match_the_sync_strategies(ns: Namespace) -> None:
    chat(Sessions(ns), "s", 50)
    tool_session(Sessions(ns), "s")

    async def run() -> list[list[Message]]:
        store = AsyncSessions(ns)
        assert isinstance(AsyncWindow(store), AsyncMemoryStore)
        await AsyncBuffer(store).append("other", ("user", "appended through AsyncBuffer"))
        return [
            await AsyncBuffer(store).load("s"),
            await AsyncWindow(store, k=2).load("s"),
            await AsyncTokenBuffer(store, max_tokens=150).load("s"),
            await AsyncWindow(AsyncTokenBuffer(store, max_tokens=150), k=3).load("s"),
            await AsyncBuffer(store).load("other"),
        ]

    got = asyncio.run(run())
    sync = Sessions(ns)
    assert got[0] == Buffer(sync).load("s")
    assert got[1] == Window(sync, k=2).load("s")
    assert got[2] == TokenBuffer(sync, max_tokens=150).load("s")
    assert got[3] == Window(TokenBuffer(sync, max_tokens=150), k=3).load("s")
    assert contents(got[4]) == ["appended through AsyncBuffer"]


def test_async_strategies_over_an_async_in_memory_store() -> None:
    class AsyncDict:
        def __init__(self) -> None:
            self.inner = InMemoryStore()

        async def append(self, session_id: str, message: Any) -> Message:
            return self.inner.append(session_id, message)

        async def load(self, session_id: str) -> list[Message]:
            return self.inner.load(session_id)

        async def clear(self, session_id: str) -> None:
            self.inner.clear(session_id)

    async def run() -> tuple[list[Message], list[Message]]:
        store = AsyncDict()
        win = AsyncWindow(store, k=1)
        await win.append("s", Message.system("sys"))
        for i in range(5):
            await win.append("s", ("user", f"u{i}"))
        before = await win.load("s")
        await win.clear("s")
        return before, await win.load("s")

    before, after = asyncio.run(run())
    assert contents(before) == ["sys", "u4"] and after == []


# -- Vector -------------------------------------------------------------------------------------


def test_vector_returns_the_relevant_turns_in_order_then_the_last_user_message(
    ns: Namespace, clock: ManualClock
) -> None:
    sessions = Sessions(ns, searchable=True)
    sessions.append("s", Message.system("You plan trips."))
    turns = [
        "My budget for the Hawaii trip is 3000 dollars.",
        "Noted, 3000 dollars.",
        "I prefer window seats on flights.",
        "Window seats, noted.",
        "My sister lives in Lisbon.",
        "Nice, Lisbon.",
        "Which islands fit my Hawaii budget?",
    ]
    for i, text in enumerate(turns):
        clock.advance(1)
        sessions.append("s", ("user" if i % 2 == 0 else "assistant", text))
    got = Vector(sessions, k=2).load("s")
    assert got[0].content == "You plan trips."
    assert got[-1].content == "Which islands fit my Hawaii budget?"
    middle = got[1:-1]
    assert len(middle) == 2 and "My budget for the Hawaii trip is 3000 dollars." in contents(middle)
    assert [m.ts for m in middle] == sorted(m.ts for m in middle)  # chronological
    assert got[-1].content not in contents(middle)
    only = Vector(sessions, k=1, include_last=False, keep_system=False).load("s")
    assert contents(only) == ["My budget for the Hawaii trip is 3000 dollars."]


def test_vector_leaves_out_tool_results_and_cleared_turns(ns: Namespace) -> None:
    sessions = Sessions(ns, searchable=True)
    sessions.append("s", ("user", "The parcel number is 1458."))
    sessions.clear("s")
    sessions.append("s", ("user", "Where is parcel 1458?"))
    sessions.append("s", Message.assistant("Checking parcel 1458.", tool_calls=[call(1, "track")]))
    sessions.append("s", Message.tool("parcel 1458 is in Lyon", "call_1"))
    sessions.append("s", ("user", "Any news on parcel 1458?"))
    got = Vector(sessions, k=5).load("s")
    check_tool_units(got)
    assert contents(got) == [
        "Where is parcel 1458?",
        "Checking parcel 1458.",
        "Any news on parcel 1458?",
    ]
    assert got[1].tool_calls is None
    sessions.append("s", Message.assistant(tool_calls=[call(2, "track")]))
    sessions.append("s", Message.tool("parcel 1458 is in Paris", "call_2"))
    got = Vector(sessions, k=1).load("s")  # a tool call in progress comes whole after it
    check_tool_units(got)
    assert [m.role for m in got] == ["user", "user", "assistant", "tool"]
    assert got[1].content == "Any news on parcel 1458?"


def test_vector_needs_searchable_messages(ns: Namespace) -> None:
    sessions = Sessions(ns)  # not searchable
    sessions.append("s", ("user", "hello there"))
    sessions.append("s", ("user", "hello again"))
    with pytest.raises(ValidationError) as err:
        Vector(sessions).load("s")
    assert err.value.field == "sessions.searchable" and "searchable=True" in err.value.message
    assert Vector(sessions).load("empty") == []


def test_async_vector(ns: Namespace) -> None:
    sessions = Sessions(ns, searchable=True)
    for text in ("I love jazz.", "Pizza is fine.", "Recommend some jazz records?"):
        sessions.append("s", ("user", text))

    async def run() -> list[Message]:
        return await AsyncVector(AsyncSessions(ns), k=1).load("s")

    assert asyncio.run(run()) == Vector(sessions, k=1).load("s")
    assert contents(Vector(sessions, k=1).load("s")) == [
        "I love jazz.",
        "Recommend some jazz records?",
    ]


def test_the_strategies_section_of_the_docs_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/conversation.md's ``## Strategies`` example runs as written (no LLM configured: the
    summary is extractive), and every strategy and its async twin is named there."""
    import re

    from synapsedb.conversation import strategies

    text = (Path(__file__).resolve().parents[2] / "docs" / "conversation.md").read_text()
    section = text.split("## Strategies", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SYNAPSEDB_LLM_BASE_URL", raising=False)
    for code in blocks:
        exec(compile(code, "docs/conversation.md", "exec"), {"__name__": "docs"})
    for name in strategies.__all__:
        assert f"`{name}" in section, name
