"""Running summaries (issue 12): the Summarizer (incremental folds, LLM or extractive, LLM
failure -> extractive) and the Summary / SummaryBuffer strategies (state as a versioned fact of
the session, budgets, nothing lost).

The model is ScriptedUpstream (tests/support/scripted_upstream.py): a scripted stand-in for a
hosted model, a real HTTP server speaking OpenAI's wire format, so a real ChatClient crosses a
real socket; it records every request, which is how these tests count what the model is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.scripted_upstream import Reply, Request, ScriptedUpstream

import synapsedb
from synapsedb import Database, ManualClock, Namespace, ValidationError
from synapsedb.config import LLMSettings
from synapsedb.conversation.messages import Message
from synapsedb.conversation.sessions import AsyncSessions, Sessions
from synapsedb.conversation.store import InMemoryStore
from synapsedb.conversation.strategies import (
    AsyncSummary,
    AsyncSummaryBuffer,
    Summary,
    SummaryBuffer,
    Window,
)
from synapsedb.conversation.summary import (
    DEFAULT_SUMMARY_PROMPT,
    Summarizer,
    SummaryState,
    extractive_summary,
    render,
)
from synapsedb.conversation.tokens import count_message_tokens, count_tokens
from synapsedb.llm import AsyncChatClient, ChatClient


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


SETTINGS = {"model": "scripted", "max_retries": 0, "timeout_s": 5.0, "breaker_failures": 1000}


class Scripted:
    """Answers each summary request with ``S<n>`` (n counting requests) unless told to fail;
    ``lines(i)`` are the conversation lines request ``i`` carried."""

    def __init__(self) -> None:
        self.fail = False
        self.answer: str | None = None
        self.seen: list[Request] = []

    def respond(self, request: Request) -> Any:
        self.seen.append(request)
        if self.fail:
            return Reply.error(503, "overloaded")
        return self.answer or f"S{len(self.seen)}"

    def lines(self, i: int) -> list[str]:
        text = self.seen[i].messages[-1]["content"]
        part = text.split("New lines of conversation:\n", 1)[1].split("\n\nNew summary:", 1)[0]
        return part.splitlines()

    def summary_sent(self, i: int) -> str:
        text = self.seen[i].messages[-1]["content"]
        return text.split("Current summary:\n", 1)[1].split("\n\nNew lines", 1)[0]


@pytest.fixture
def script() -> Scripted:
    return Scripted()


@pytest.fixture
def upstream(script: Scripted) -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(responder=script.respond) as up:
        yield up


@pytest.fixture
def llm(upstream: ScriptedUpstream) -> Iterator[ChatClient]:
    client = ChatClient(
        LLMSettings(base_url=upstream.base_url, **SETTINGS),  # type: ignore[arg-type]
        sleep=lambda s: None,
    )
    yield client
    client.close()


def talk(store: Any, sid: str, start: int, n: int) -> None:
    for i in range(start, start + n):
        store.append(sid, ("user", f"Turn {i}: my favourite number is {1000 + i}."))
        store.append(sid, ("assistant", f"Noted turn {i}, number {1000 + i}."))


def summary_of(msgs: list[Message]) -> Message:
    found = [m for m in msgs if m.metadata and "summary" in m.metadata]
    assert len(found) == 1, msgs
    return found[0]


# -- the extractive summary ----------------------------------------------------------------------


TRIP = [
    Message.user("Hi!"),
    Message.assistant("Hello! How can I help?"),
    Message.user("My name is Ana. My budget is 3000 dollars for Maui in June. I hate red-eyes."),
    Message.assistant("Great: 3000 dollars, Maui, June, and no red-eye flights."),
    Message.user("ok thanks"),
]


def test_extractive_summary_is_deterministic_bounded_and_keeps_the_informative_sentences() -> None:
    text = extractive_summary("", TRIP, 40)
    assert text == extractive_summary("", TRIP, 40)
    assert count_tokens(text) <= 40
    assert "User: My name is Ana." in text and "3000 dollars, Maui, June" in text
    assert "ok thanks" not in text and "Hi!" not in text  # no content words: never picked
    assert "How can I help?" not in text
    for budget in range(16, 200, 7):
        assert count_tokens(extractive_summary("", TRIP * 3, budget, "gpt-4o"), "gpt-4o") <= budget
    # folding more in: the previous summary's sentences compete with the new ones
    more = [Message.user("My sister Rita lives in Lisbon and visits in May.")]
    again = extractive_summary(text, more, 60)
    assert "Rita lives in Lisbon" in again and "Ana" in again and count_tokens(again) <= 60
    assert extractive_summary("", [Message.user("Supercalifragilistic " * 50)], 16).endswith("...")


def test_summary_without_an_llm_is_extractive_and_says_so(ns: Namespace) -> None:
    for llm in (None, ChatClient(LLMSettings())):  # none, or one that is not configured
        sessions = Sessions(ns)
        sid = f"s{llm is None}"
        sessions.append(sid, Message.system("You plan trips."))
        for m in TRIP:
            sessions.append(sid, m)
        got = Summary(sessions, Summarizer(llm, max_tokens=60), keep=2).load(sid)
        assert got[0].content == "You plan trips."  # the head system message is never folded
        summary = got[1]
        assert summary.role == "system"
        assert summary.content.startswith("Summary of the earlier conversation (extractive")
        folded = sessions.load(sid)[1:4]
        assert summary.metadata == {
            "summary": {"method": "extractive", "version": 1, "through": folded[-1].id}
        }
        assert "Maui" in summary.content
        assert [m.content for m in got[2:]] == [
            "Great: 3000 dollars, Maui, June, and no red-eye flights.",
            "ok thanks",
        ]


# -- incremental, versioned ---------------------------------------------------------------------


def test_folds_send_only_the_turns_newer_than_the_summary(
    ns: Namespace, llm: ChatClient, script: Scripted
) -> None:
    sessions = Sessions(ns)
    talk(sessions, "s", 0, 10)  # 20 messages
    strategy = Summary(sessions, Summarizer(llm), keep=2)
    got = strategy.load("s")
    assert len(script.seen) == 1 and script.summary_sent(0) == "(none yet)"
    assert script.lines(0)[0] == "User: Turn 0: my favourite number is 1000."
    assert len(script.lines(0)) == 18  # all but the 2 kept
    assert got[0].content == "Summary of the earlier conversation: S1"
    assert [m.content for m in got[1:]] == [
        "Turn 9: my favourite number is 1009.",
        "Noted turn 9, number 1009.",
    ]
    assert strategy.load("s") == got and len(script.seen) == 1  # nothing new: no request
    talk(sessions, "s", 10, 2)
    got = strategy.load("s")
    assert len(script.seen) == 2 and script.summary_sent(1) == "S1"
    assert script.lines(1) == [
        "User: Turn 9: my favourite number is 1009.",
        "Assistant: Noted turn 9, number 1009.",
        "User: Turn 10: my favourite number is 1010.",
        "Assistant: Noted turn 10, number 1010.",
    ]
    assert summary_of(got).metadata["summary"]["version"] == 2  # type: ignore[index]
    # the state is a fact of the session: every version kept, shared by another strategy
    versions = ns.history("session:s", "summary")
    assert [(f.value["text"], f.value["version"]) for f in versions] == [("S1", 1), ("S2", 2)]
    assert versions[1].value["through"] == sessions.load("s")[-3].id
    assert sessions.info("s").summary_version == 2
    other = Summary(Sessions(ns), Summarizer(llm), keep=2)
    assert other.load("s") == got and len(script.seen) == 2


def test_a_summary_over_a_long_session_reads_only_what_is_new(ns: Namespace) -> None:
    from tests.unit.test_conversation_strategies import Recording

    sessions = Sessions(ns)
    talk(sessions, "s", 0, 600)  # 1,200 messages
    rec = Recording(sessions)
    strategy = SummaryBuffer(rec, Summarizer(max_tokens=60), max_tokens=500)
    first = strategy.load("s")
    assert rec.loads == [(None, 1200)]  # the first summary reads everything once
    talk(sessions, "s", 600, 3)
    rec.loads.clear()
    again = strategy.load("s")
    assert rec.read < 200 and all(last is not None for last, _ in rec.loads)  # not 1,206
    assert summary_of(again).metadata["summary"]["version"] == 2  # type: ignore[index]
    assert count_message_tokens(again) <= 500 and again[-1].content.startswith("Noted turn 602")
    assert summary_of(first) != summary_of(again)


def test_summary_batches_folds(ns: Namespace, llm: ChatClient, script: Scripted) -> None:
    sessions = Sessions(ns)
    strategy = Summary(sessions, Summarizer(llm), keep=4)  # batch defaults to keep
    seen = []
    for i in range(10):
        talk(sessions, "s", i, 1)
        got = strategy.load("s")
        verbatim = [m for m in got if m.role != "system"]
        seen.append((len(script.seen), len(verbatim)))
        assert 4 <= len(verbatim) <= 7 or len(verbatim) == 2 * (i + 1)
    assert seen == [(0, 2), (0, 4), (0, 6), (1, 4), (1, 6), (2, 4), (2, 6), (3, 4), (3, 6), (4, 4)]
    assert all(len(script.lines(i)) == 4 for i in range(1, 4))


def test_an_llm_failure_falls_back_to_extractive_and_loses_nothing(
    ns: Namespace, llm: ChatClient, script: Scripted, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = Sessions(ns)
    for m in TRIP:
        sessions.append("s", m)
    script.fail = True
    with caplog.at_level(logging.WARNING, logger="synapsedb.conversation"):
        got = Summary(sessions, Summarizer(llm, max_tokens=60), keep=1).load("s")
    assert "the LLM failed (UpstreamError" in caplog.text
    summary = summary_of(got)
    assert summary.metadata["summary"]["method"] == "extractive"  # type: ignore[index]
    assert "Maui" in summary.content and "3000" in summary.content
    assert [m.content for m in got[1:]] == ["ok thanks"]
    script.fail = False  # the model is back: the next fold is the model's, from that summary
    sessions.append("s", ("assistant", "Anything else?"))
    sessions.append("s", ("user", "Book it."))
    got = Summary(sessions, Summarizer(llm, max_tokens=60), keep=1).load("s")
    assert summary_of(got).metadata["summary"] == {  # type: ignore[index]
        "method": "llm",
        "version": 2,
        "through": sessions.load("s")[-2].id,
    }
    assert script.summary_sent(-1) == ns.history("session:s", "summary")[0].value["text"]
    assert script.lines(-1) == ["User: ok thanks", "Assistant: Anything else?"]


def test_an_empty_or_overlong_answer(ns: Namespace, llm: ChatClient, script: Scripted) -> None:
    store = InMemoryStore()
    for m in TRIP:
        store.append("s", m)
    script.answer = "word " * 500
    state = Summarizer(llm, max_tokens=40).fold(None, store.load("s"))
    assert state.method == "llm" and count_tokens(state.text) <= 40
    assert state.text.endswith("...")
    script.answer = "   "
    state = Summarizer(llm, max_tokens=40).fold(None, store.load("s"))
    assert state.method == "extractive" and "Maui" in state.text


def test_the_prompt_can_be_replaced(llm: ChatClient, script: Scripted) -> None:
    Summarizer(
        llm, summary_prompt="Résume en français, {max_words} mots au plus.", max_tokens=100
    ).fold(None, TRIP)
    sent = script.seen[-1].messages
    assert sent[0] == {"role": "system", "content": "Résume en français, 75 mots au plus."}
    assert "User: My name is Ana." in sent[1]["content"]
    Summarizer(llm).fold(SummaryState(text="Earlier: Ana."), TRIP[:1])
    assert script.seen[-1].messages[0]["content"] == DEFAULT_SUMMARY_PROMPT.replace(
        "{max_words}", "225"
    )
    whole = "Old: {summary}\nNew: {conversation}\nAnswer in {max_words} words."
    Summarizer(llm, summary_prompt=whole, max_tokens=40).fold(SummaryState(text="Ana."), TRIP[:1])
    assert script.seen[-1].messages == [
        {"role": "user", "content": "Old: Ana.\nNew: User: Hi!\nAnswer in 30 words."}
    ]
    with pytest.raises(ValidationError) as err:
        Summarizer(summary_prompt=" ")
    assert err.value.field == "summary_prompt"
    with pytest.raises(ValidationError) as err:
        Summarizer(max_tokens=3)
    assert err.value.field == "max_tokens"


def test_long_histories_are_folded_in_bounded_requests(llm: ChatClient, script: Scripted) -> None:
    store = InMemoryStore()
    talk(store, "s", 0, 100)
    state = Summarizer(llm, max_input_tokens=300).fold(None, store.load("s"))
    sent = [line for i in range(len(script.seen)) for line in script.lines(i)]
    assert len(script.seen) > 3 and len(sent) == 200  # every turn exactly once, in order
    assert sent[0].startswith("User: Turn 0:") and sent[-1].startswith("Assistant: Noted turn 99")
    assert all(count_tokens("\n".join(script.lines(i))) <= 300 for i in range(len(script.seen)))
    assert state.text == f"S{len(script.seen)}" and state.folded == 200 and state.version == 1
    assert [script.summary_sent(i) for i in range(3)] == ["(none yet)", "S1", "S2"]


# -- clear ----------------------------------------------------------------------------------------


def test_clear_resets_the_summary_and_history_keeps_it(ns: Namespace, llm: ChatClient) -> None:
    sessions = Sessions(ns)
    talk(sessions, "s", 0, 5)
    strategy = Summary(sessions, Summarizer(llm), keep=2)
    assert summary_of(strategy.load("s")).content.endswith("S1")
    strategy.clear("s")
    assert strategy.load("s") == []
    talk(sessions, "s", 5, 1)
    assert all(m.role != "system" for m in strategy.load("s"))  # no stale summary
    assert [f.deleted for f in ns.history("session:s", "summary")] == [False, True]
    # a clear made on the store directly: the summary of what it hid is not shown either
    talk(sessions, "t", 0, 5)
    assert summary_of(Summary(sessions, Summarizer(llm), keep=2).load("t"))
    sessions.clear("t")
    talk(sessions, "t", 5, 1)
    got = Summary(sessions, Summarizer(), keep=2).load("t")
    assert [m.content for m in got] == [
        "Turn 5: my favourite number is 1005.",
        "Noted turn 5, number 1005.",
    ]


def test_concurrent_folds_keep_one_version(
    ns: Namespace, llm: ChatClient, script: Scripted
) -> None:
    """Two loads fold the same turns at once: the second write loses the compare-and-set and
    takes the first one's summary instead of writing a second version of the same fold."""
    sessions = Sessions(ns)
    talk(sessions, "s", 0, 5)
    rival = Summary(Sessions(ns), Summarizer(llm), keep=2)

    class Racing:
        """A namespace whose first summary write lets the rival fold and write first."""

        def __init__(self) -> None:
            self.raced = False

        def __getattr__(self, name: str) -> Any:
            method = getattr(ns, name)
            if name != "set":
                return method

            def racing_set(*args: Any, **kwargs: Any) -> Any:
                if args[1] == "summary" and not self.raced:
                    self.raced = True
                    rival.load("s")
                return method(*args, **kwargs)

            return racing_set

    got = Summary(Sessions(Racing()), Summarizer(llm), keep=2).load("s")
    assert len(script.seen) == 2  # both asked the model
    assert summary_of(got).content.endswith("S2")  # the rival's (second request) won
    assert [f.value["text"] for f in ns.history("session:s", "summary")] == ["S2"]


def test_summary_over_an_in_memory_store_keeps_its_state_in_memory(
    script: Scripted, llm: ChatClient
) -> None:
    store = InMemoryStore()
    talk(store, "s", 0, 3)
    strategy = Summary(store, Summarizer(llm), keep=2)
    assert summary_of(strategy.load("s")).metadata["summary"]["through"] == "s#4"  # type: ignore[index]
    strategy.clear("s")
    talk(store, "s", 3, 1)
    assert [m.role for m in strategy.load("s")] == ["user", "assistant"]


# -- SummaryBuffer --------------------------------------------------------------------------------


def test_summary_buffer_stays_within_budget_and_sends_every_turn_once(
    ns: Namespace, llm: ChatClient, script: Scripted
) -> None:
    sessions = Sessions(ns)
    sessions.append("s", Message.system("You are terse."))
    strategy = SummaryBuffer(sessions, Summarizer(llm, max_tokens=40), max_tokens=400)
    summarised = False
    for i in range(60):
        talk(sessions, "s", i, 1)
        got = strategy.load("s")
        assert count_message_tokens(got) <= 400
        everything = sessions.load("s")
        assert got[0] == everything[0]
        if len(got) > 1 and got[1].role == "system":
            summarised = True
            through = got[1].metadata["summary"]["through"]  # type: ignore[index]
            ids = [m.id for m in everything]
            assert got[2:] == everything[ids.index(through) + 1 :]  # the rest, verbatim
        else:
            assert not summarised and got == everything  # no summary while everything fits
    sent = [line for i in range(len(script.seen)) for line in script.lines(i)]
    folded = summary_of(got).metadata["summary"]["through"]  # type: ignore[index]
    n_folded = [m.id for m in sessions.load("s")].index(folded)  # all but the system message
    assert len(sent) == len(set(sent)) == n_folded  # each folded turn sent exactly once
    assert count_message_tokens(got) > 300  # the budget is used, not wasted


def test_summary_buffer_without_an_llm_and_its_limits() -> None:
    store = InMemoryStore()
    talk(store, "s", 0, 40)
    got = SummaryBuffer(store, Summarizer(max_tokens=50), max_tokens=250).load("s")
    assert count_message_tokens(got) <= 250
    assert summary_of(got).metadata["summary"]["method"] == "extractive"  # type: ignore[index]
    with pytest.raises(ValidationError) as err:
        SummaryBuffer(store, Summarizer(max_tokens=300), max_tokens=200)
    assert err.value.field == "max_tokens"
    with pytest.raises(ValidationError) as err:
        Summary(store, "not a summarizer")  # type: ignore[arg-type]
    assert err.value.field == "summarizer"


def test_summaries_never_split_a_tool_call_from_its_results() -> None:
    store = InMemoryStore()
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    for i in range(6):
        store.append("s", ("user", f"Weather {i}?"))
        store.append("s", Message.assistant(tool_calls=[{**call, "id": f"c{i}"}]))
        store.append("s", Message.tool(f"{i} C", f"c{i}"))
        store.append("s", ("assistant", f"It is {i} C."))
    for strategy in (
        Summary(store, Summarizer(), keep=2),
        Summary(store, Summarizer(), keep=3),
        SummaryBuffer(store, Summarizer(max_tokens=30), max_tokens=130),
    ):
        got = strategy.load("s")
        verbatim = [m for m in got if m.role != "system"]
        assert verbatim and verbatim[0].role != "tool"
        for i, m in enumerate(verbatim):
            if m.role == "tool":
                assert verbatim[i - 1].role == "tool" or verbatim[i - 1].tool_calls
    assert render(store.load("s")[1]) == "Assistant: [called weather]"
    assert render(store.load("s")[2]) == "Tool result: 0 C"


def test_summary_composes_with_window(ns: Namespace) -> None:
    sessions = Sessions(ns)
    talk(sessions, "s", 0, 20)
    got = Window(Summary(sessions, Summarizer(max_tokens=40), keep=6), k=2).load("s")
    assert got[0].metadata and "summary" in got[0].metadata  # the summary is the head
    assert [m.content for m in got[1:]] == [m.content for m in sessions.load("s", last=2)]
    sessions.append("t", Message.system("You are terse."))
    talk(sessions, "t", 0, 20)
    got = Window(Summary(sessions, Summarizer(max_tokens=40), keep=6), k=2).load("t")
    assert got[0].content == "You are terse." and summary_of(got) == got[1]  # both kept
    assert got[2:] == sessions.load("t", last=2)


# -- models of the wrong kind, async ---------------------------------------------------------------


def test_a_sync_strategy_refuses_an_async_client(upstream: ScriptedUpstream) -> None:
    client = AsyncChatClient(LLMSettings(base_url=upstream.base_url, **SETTINGS))  # type: ignore[arg-type]
    store = InMemoryStore()
    talk(store, "s", 0, 3)
    with pytest.raises(ValidationError) as err:
        Summary(store, Summarizer(client)).load("s")
    assert err.value.field == "llm"
    asyncio.run(client.aclose())
    with pytest.raises(ValidationError) as err:
        Summarizer(llm="gpt-4o")
    assert err.value.field == "llm"


def test_async_summaries_with_an_async_client(
    ns: Namespace, upstream: ScriptedUpstream, script: Scripted
) -> None:
    sessions = Sessions(ns)
    talk(sessions, "s", 0, 30)

    async def run() -> tuple[list[Message], list[Message]]:
        async with AsyncChatClient(LLMSettings(base_url=upstream.base_url, **SETTINGS)) as llm:  # type: ignore[arg-type]
            store = AsyncSessions(ns)
            first = await AsyncSummary(store, Summarizer(llm), keep=2).load("s")
            for i in range(10):
                await store.append("s", ("user", f"More detail number {i}."))
            await store.append("s", ("user", "One more thing."))
            second = await AsyncSummaryBuffer(
                store, Summarizer(llm, max_tokens=40), max_tokens=200
            ).load("s")
            return first, second

    first, second = asyncio.run(run())
    assert first[0].content.endswith("S1") and len(first) == 3
    assert summary_of(second).metadata["summary"]["version"] == 2  # type: ignore[index]
    assert count_message_tokens(second) <= 200 and second[-1].content == "One more thing."
    assert len(script.seen) == 2 and script.summary_sent(1) == "S1"
    # the blocking fold also takes a blocking client's answer through afold
    state = asyncio.run(Summarizer().afold(None, TRIP))
    assert state.method == "extractive" and state.version == 1 and state.through is None
