"""The memory loop (synapsedb.memory_loop) on an embedded database with the real local embedder.

The LLM is ScriptedUpstream, a stand-in for a hosted model speaking OpenAI's protocol over a
real loopback socket; it answers by the schema a request asks for (``memories`` for
extraction, ``decisions`` for conflict resolution, ``query`` for the recall rewrite), so each
test scripts only the parts it is about.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.support.scripted_upstream import Reply, Request, ScriptedUpstream

import synapsedb
from synapsedb import Database, ManualClock
from synapsedb.embed import OnnxMiniLM
from synapsedb.errors import (
    EmbeddingError,
    NotFoundError,
    SynapseError,
    UpstreamError,
    ValidationError,
)
from synapsedb.llm import ChatClient, LLMSettings
from synapsedb.memory_loop import CONFIG_ENTITY, DECISIONS_STREAM, LoopSettings, MemoryLoop
from synapsedb.memory_loop import jobs as queue
from synapsedb.memory_loop.extract import Turn, candidates
from synapsedb.memory_loop.loop import turn_memory_id

START_US = 1_761_318_000_000_000  # 2025-10-24T15:00:00Z, a Friday
SAID = datetime(2025, 10, 24, 15, tzinfo=UTC)
HAWAII = "The user's budget for the Hawaii trip is $3000"


# -- the scripted model ----------------------------------------------------------------------


class Script:
    """What the stand-in model answers, by schema name: a value, a Reply, or a function of the
    request. ``None`` for a name the test did not script: a 500 (the test did not expect it)."""

    def __init__(self) -> None:
        self.memories: Any = {"memories": []}
        self.decisions: Any = {"decisions": []}
        self.query: Any = None

    def respond(self, request: Request) -> Any:
        fmt = request.response_format or {}
        name = (fmt.get("json_schema") or {}).get("name")
        answer = getattr(self, name, None) if name in ("memories", "decisions", "query") else None
        if callable(answer):
            answer = answer(request)
        return answer if answer is not None else Reply.error(500, f"unscripted {name!r}")

    def asked(self, upstream: ScriptedUpstream, name: str) -> list[Request]:
        return [
            r
            for r in upstream.chat_requests()
            if ((r.response_format or {}).get("json_schema") or {}).get("name") == name
        ]


def memory(
    content: str,
    kind: str = "fact",
    *,
    turns: list[int] | None = None,
    confidence: float = 0.9,
    valid_from: str | None = None,
    entity: str | None = None,
) -> dict[str, Any]:
    return {
        "type": kind,
        "content": content,
        "entity": entity,
        "confidence": confidence,
        "valid_from": valid_from,
        "source_turns": turns if turns is not None else [1],
    }


@pytest.fixture(scope="module")
def model() -> OnnxMiniLM:
    return OnnxMiniLM()  # loaded once: every database of this module shares it


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def upstream(script: Script) -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(responder=script.respond) as up:
        yield up


def chat_client(upstream: ScriptedUpstream, **overrides: Any) -> ChatClient:
    options: dict[str, Any] = {
        "base_url": upstream.base_url,
        "model": "scripted",
        "max_retries": 0,
        "timeout_s": 5.0,
        "breaker_failures": 1000,
        **overrides,
    }
    return ChatClient(LLMSettings(**options), sleep=lambda s: None)


@pytest.fixture
def llm(upstream: ScriptedUpstream) -> Iterator[ChatClient]:
    client = chat_client(upstream)
    yield client
    client.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_US)


def open_db(path: Path, clock: ManualClock, embedder: Any, **kw: Any) -> Database:
    return synapsedb.open(
        path, clock=clock, durability="os", background_maintenance=False, embedder=embedder, **kw
    )


def still(database: Database, llm: Any = None, **settings: Any) -> MemoryLoop:
    """Replace the database's loop by one whose worker is not started: the test runs the
    jobs itself (run_pending), so nothing happens behind its back."""
    if database.memory_loop is not None:
        database.memory_loop.close()
    loop = MemoryLoop(llm, LoopSettings(**settings))
    database.memory_loop = loop
    return loop


@pytest.fixture
def db(tmp_path: Path, clock: ManualClock, model: OnnxMiniLM) -> Iterator[Database]:
    database = open_db(tmp_path / "data", clock, model, llm=None)
    still(database)
    yield database
    database.close()


@pytest.fixture
def attach(db: Database) -> Callable[..., MemoryLoop]:
    """Give the database a loop with this LLM and these settings (not started)."""
    return lambda llm=None, **settings: still(db, llm, **settings)


def convo(*texts: str) -> list[dict[str, str]]:
    """Alternating user/assistant turns, starting with the user."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)
    ]


def loop_of(db: Database) -> MemoryLoop:
    loop = db.memory_loop
    assert isinstance(loop, MemoryLoop)
    return loop


# -- remember stores the turns first ---------------------------------------------------------


def test_remember_stores_the_turns_in_the_session_stream_before_anything_else(
    db: Database,
) -> None:
    loop = loop_of(db)
    mem = db.namespace("acme")
    msgs = [
        {"role": "system", "content": "You are a travel agent."},
        *convo("I'm planning a trip to Hawaii in March", "Lovely! Any budget?"),
    ]
    out = mem.remember(msgs, entity="user:1", session="s1")
    assert (out.entity, out.session, out.stream, out.status) == (
        "user:1",
        "s1",
        "session:s1",
        "queued",
    )
    assert out.job is not None and out.decisions == ()
    events = mem.events("session:s1")
    assert tuple(e.id for e in events) == out.turns
    assert [(e.entity, e.content, (e.data or {}).get("role")) for e in events] == [
        ("user:1", "You are a travel agent.", "system"),
        ("user:1", "I'm planning a trip to Hawaii in March", "user"),
        ("user:1", "Lovely! Any budget?", "assistant"),
    ]
    # the job is a KV fact of the namespace, queued: it extracts memories from the turns; it
    # names the turns, not the entity nor their words
    job = mem.get(queue.JOBS_ENTITY, str(out.job))
    assert job.value["state"] == "queued" and job.value["first"] == out.turns[0]
    assert job.value["last"] == out.turns[-1] and job.value["indexed"] is True
    assert "user:1" not in str(job.value) and "Hawaii" not in str(job.value)
    # user and assistant turns are searchable event memories as soon as remember returns;
    # the system prompt is not
    turn_ids = {turn_memory_id("session:s1", e.id): e.content for e in events[1:]}
    assert {m.id: m.content for m in mem.memories("user:1")} == turn_ids
    assert all(m.type == "event" for m in mem.memories("user:1"))
    hits = mem.query("Hawaii trip", entity="user:1", mode="keyword").hits
    assert [h.content for h in hits] == ["I'm planning a trip to Hawaii in March"]
    assert hits[0].metadata["event_id"] == events[1].id
    assert loop.run_pending(mem) == 0  # the extraction waits for an LLM
    job = mem.get(queue.JOBS_ENTITY, str(out.job))
    assert (job.value["state"], job.value["indexed"]) == ("queued", True)
    assert len(mem.memories("user:1")) == 2  # indexed once: nothing written again


def test_a_string_is_one_user_turn_and_blank_turns_are_skipped(db: Database) -> None:
    mem = db.namespace("acme")
    out = mem.remember("I have two cats", entity="user:1", session="s1")
    assert len(out.turns) == 1 and out.status == "queued"
    out = mem.remember(
        [{"role": "user", "content": "  "}, {"role": "user", "content": "hi"}],
        entity="user:1",
        session="s1",
    )
    assert len(out.turns) == 1
    assert [e.content for e in mem.events("session:s1")] == ["I have two cats", "hi"]


def test_turns_without_a_user_turn_are_indexed_but_not_extracted(db: Database) -> None:
    mem = db.namespace("acme")
    out = mem.remember([{"role": "system", "content": "Be brief"}], entity="user:1", session="s1")
    assert (out.status, out.job, len(out.turns)) == ("stored", None, 1)
    assert queue.jobs(mem) == []
    said = "Your order #1458 ships on Monday."
    out = mem.remember([{"role": "assistant", "content": said}], entity="user:1", session="s1")
    assert (out.status, out.job) == ("stored", None)  # indexed at once, nothing to extract
    assert queue.jobs(mem) == []
    assert [m.content for m in mem.memories("user:1")] == [said]


def test_acknowledgements_and_small_talk_are_stored_but_not_searchable(db: Database) -> None:
    mem = db.namespace("acme")
    out = mem.remember(
        convo(
            "My name is Ada and I live in Lisbon", "Nice to meet you, Ada! I'll keep that in mind."
        ),
        entity="user:1",
        session="s1",
    )
    mem.remember(convo("thanks!", "You're welcome!"), entity="user:1", session="s1")
    assert len(mem.events("session:s1")) == 4  # the conversation as it was
    assert [m.content for m in mem.memories("user:1")] == ["My name is Ada and I live in Lisbon"]
    assert mem.memories("user:1")[0].id == turn_memory_id("session:s1", out.turns[0])
    # an answer that says something of its own is a memory
    mem.remember(
        convo("Any tips for Lisbon?", "Try the pastel de nata at Belem."),
        entity="user:1",
        session="s1",
    )
    assert "Try the pastel de nata at Belem." in {m.content for m in mem.memories("user:1")}


def test_turn_times_and_names_are_kept(db: Database) -> None:
    mem = db.namespace("acme")
    msgs = [
        {"role": "user", "content": "I moved to Porto", "ts": "2025-09-01T10:00:00Z", "name": "ana"}
    ]
    out = mem.remember(msgs, entity="user:1", session="s1")
    (event,) = mem.events("session:s1")
    assert event.id == out.turns[0]
    assert event.ts == datetime(2025, 9, 1, 10, tzinfo=UTC)
    assert event.data is not None and event.data["name"] == "ana"


def test_remember_without_a_loop_names_the_seam(tmp_path: Path, model: OnnxMiniLM) -> None:
    from synapsedb.engine import Database as Engine

    bare = Engine(tmp_path / "bare", durability="os", background_maintenance=False, embedder=None)
    try:
        with pytest.raises(ValidationError) as err:
            bare.namespace("acme").remember("hello", entity="user:1")
        assert err.value.details.get("field") == "memory_loop"
    finally:
        bare.close()


# -- the LLM down, absent or confused: nothing is lost -------------------------------------


def job_of(mem: Any, key: str) -> dict[str, Any]:
    value = mem.get(queue.JOBS_ENTITY, key).value
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize(
    ("answer", "overrides", "says"),
    [
        (Reply.error(503, "overloaded"), {}, "503"),
        (Reply.slow(2.0, "{}"), {"timeout_s": 0.2}, "timed out"),
        (Reply.text("not json at all"), {}, "does not match schema"),
        (Reply(body=b"<html>bad gateway</html>"), {}, "UpstreamError"),
    ],
    ids=["503", "timeout", "garbage-json", "garbage-body"],
)
def test_a_failing_llm_reschedules_the_job_with_backoff_and_keeps_the_turns(
    db: Database,
    attach: Callable[..., MemoryLoop],
    upstream: ScriptedUpstream,
    script: Script,
    answer: Reply,
    overrides: dict[str, Any],
    says: str,
) -> None:
    client = chat_client(upstream, **overrides)
    try:
        loop = attach(client, retry_base_s=30.0)
        mem = db.namespace("acme")
        script.memories = answer
        out = mem.remember(convo("I like green tea"), entity="user:1", session="s1")
        before = time.time()
        assert loop.run_pending(mem) == 0
        job = job_of(mem, str(out.job))
        # an unreachable model is an outage (never parks the job); a bad answer an attempt
        outage = says in ("503", "timed out")
        assert job["state"] == "queued"
        assert (job["attempts"], job["outages"]) == ((0, 1) if outage else (1, 0))
        assert says in job["error"] and says in str(loop.last_error)
        assert job["due"] >= before + 30.0  # the first retry waits retry_base_s
        asked = len(upstream.chat_requests())
        assert loop.run_pending(mem) == 0  # not due yet: the model is not asked again
        assert len(upstream.chat_requests()) == asked
        assert [e.content for e in mem.events("session:s1")] == ["I like green tea"]
        assert mem.memories("user:1", types=["fact", "preference"]) == []
        assert loop.status()["extraction_queued"] == 1
    finally:
        client.close()


def test_the_backoff_doubles_and_the_job_is_parked_after_max_attempts(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
    upstream: ScriptedUpstream,
) -> None:
    loop = attach(llm, retry_base_s=0.0, max_attempts=3)
    mem = db.namespace("acme")
    script.memories = Reply.text("not json at all")  # answers, never to the schema: counts
    out = mem.remember(convo("I like green tea"), entity="user:1", session="s1")
    key = str(out.job)
    for attempt in (1, 2):
        assert loop.run_pending(mem) == 0
        assert job_of(mem, key)["state"] == "queued"
        assert job_of(mem, key)["attempts"] == attempt
    assert loop.run_pending(mem) == 0
    parked = job_of(mem, key)
    assert (parked["state"], parked["attempts"]) == ("failed", 3)
    assert "does not match schema" in parked["error"]
    assert loop.status()["extraction_failed"] == 1
    assert loop.status()["extraction_queued"] == 0
    asked = len(upstream.chat_requests())
    assert loop.run_pending(mem) == 0  # a parked job is not run again
    assert len(upstream.chat_requests()) == asked
    # the model comes back; the operator requeues the parked job
    script.memories = {"memories": [memory("The user likes green tea", "preference")]}
    assert loop.retry_failed(mem) == 1
    assert job_of(mem, key)["attempts"] == 0
    assert loop.run_pending(mem) == 1
    with pytest.raises(NotFoundError):
        mem.get(queue.JOBS_ENTITY, key)  # done: the fact is deleted (history keeps it)
    assert [h.value["state"] for h in mem.history(queue.JOBS_ENTITY, key)][-1] == "running"
    assert [m.content for m in mem.memories("user:1", types=["preference"])] == [
        "The user likes green tea"
    ]


def test_an_outage_never_parks_a_job_and_its_wait_is_capped(
    db: Database, attach: Callable[..., MemoryLoop], llm: ChatClient, script: Script
) -> None:
    loop = attach(llm, retry_base_s=0.0, max_attempts=2)
    mem = db.namespace("acme")
    script.memories = Reply.error(503)
    out = mem.remember(convo("I like green tea"), entity="user:1", session="s1")
    for n in range(1, 6):  # more outages than max_attempts: still queued
        assert loop.run_pending(mem) == 0
        job = job_of(mem, str(out.job))
        assert (job["state"], job["attempts"], job["outages"]) == ("queued", 0, n)
    script.memories = {"memories": [memory("The user likes green tea", "preference")]}
    assert loop.run_pending(mem) == 1  # the model is back: the job runs


def test_an_outage_waits_at_most_five_minutes(db: Database) -> None:
    mem = db.namespace("acme")
    key = queue.enqueue(mem, {"entity": "user:1"}, None)
    job = queue.jobs(mem)[0]
    for _ in range(20):
        queue.reschedule(mem, job, "503", 1000.0, 5.0, 8, None, outage=True)
        job = next(j for j in queue.jobs(mem) if j.key == key)
    assert job.value["due"] == 1000.0 + queue.OUTAGE_DELAY_S
    assert job.state == "queued" and job.value["outages"] == 20


def test_an_open_breaker_makes_the_llm_unavailable_and_nothing_calls_it(
    db: Database,
    attach: Callable[..., MemoryLoop],
    upstream: ScriptedUpstream,
    script: Script,
) -> None:
    client = chat_client(upstream, breaker_failures=1, breaker_cooldown_s=3600.0)
    try:
        loop = attach(client, retry_base_s=0.0)
        assert loop.status()["llm"] == "ok"
        mem = db.namespace("acme")
        mem.write("user:1", {"content": HAWAII, "type": "fact"})
        script.memories = Reply.error(503)
        out = mem.remember(
            convo("I like tea", "ok", "what's my budget for it?"), entity="user:1", session="s1"
        )
        assert loop.run_pending(mem) == 0  # fails once: the breaker opens
        assert loop.status()["llm"] == "unavailable"
        asked = len(upstream.chat_requests())
        assert loop.run_pending(mem) == 0
        assert job_of(mem, str(out.job))["state"] == "queued"
        script.query = {"query": "never asked"}
        recalled = mem.recall(
            convo("Hawaii!", "ok", "what's my budget for it?"), entity="user:1", rewrite="llm"
        )
        assert recalled.rewritten_by == "heuristic"
        assert len(upstream.chat_requests()) == asked  # the model was not called again
    finally:
        client.close()


def test_backoff_delays_double_per_attempt(db: Database) -> None:
    mem = db.namespace("acme")
    key = queue.enqueue(mem, {"entity": "user:1"}, None)
    dues = []
    for _ in range(3):
        (job,) = queue.due(mem, float("inf"))
        mine = queue.claim(mem, job, 1000.0, "w")
        assert mine is not None
        queue.reschedule(mem, mine, "down", 1000.0, 5.0, 10, "w")
        dues.append(job_of(mem, key)["due"] - 1000.0)
    assert dues == [5.0, 10.0, 20.0]


def test_run_pending_without_an_llm_does_nothing_and_keeps_the_job(
    db: Database,
    attach: Callable[..., MemoryLoop],
) -> None:
    mem = db.namespace("acme")
    for llm in (None, ChatClient(LLMSettings())):  # none, or one that is not configured
        loop = attach(llm)
        out = mem.remember(convo("I like green tea"), entity="user:1", session="s1")
        assert loop.run_pending(mem) == 0
        assert job_of(mem, str(out.job))["state"] == "queued"
        assert job_of(mem, str(out.job))["attempts"] == 0
        assert loop.status()["llm"] == "absent"
    assert loop.status()["extraction_queued"] == 2


def test_wait_without_an_llm_raises_after_storing_the_turns_and_queues_the_extraction(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    mem = db.namespace("acme")
    with pytest.raises(UpstreamError) as err:
        mem.remember(convo("I like green tea"), entity="user:1", session="s1", wait=True)
    assert "stored" in err.value.message
    assert [e.content for e in mem.events("session:s1")] == ["I like green tea"]
    # nothing is lost: the turns were made searchable inline, the extraction waits queued
    assert [m.content for m in mem.memories("user:1", types=["event"])] == ["I like green tea"]
    key = err.value.details["job"]
    assert job_of(mem, key)["state"] == "queued" and job_of(mem, key)["indexed"] is True
    loop = attach(llm)  # the model is back
    script.memories = {"memories": [memory("The user likes green tea", "preference")]}
    assert loop.run_pending(mem) == 1
    assert [m.content for m in mem.memories("user:1", types=["preference"])] == [
        "The user likes green tea"
    ]


def test_wait_with_a_failing_llm_raises_and_queues_the_extraction(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    loop = attach(llm, retry_base_s=0.0)
    mem = db.namespace("acme")
    script.memories = Reply.error(503, "overloaded")
    with pytest.raises(UpstreamError) as err:
        mem.remember(convo("I like green tea"), entity="user:1", session="s1", wait=True)
    key = err.value.details["job"]
    assert job_of(mem, key)["state"] == "queued"
    script.memories = {"memories": [memory("The user likes green tea", "preference")]}
    assert loop.run_pending(mem) == 1
    assert len(mem.memories("user:1", types=["preference"])) == 1
    assert len(mem.memories("user:1", types=["event"])) == 1  # indexed once


def test_a_job_left_with_nothing_to_do_is_finished(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
) -> None:
    # a worker died between marking the turns indexed and finishing an index-only job
    mem = db.namespace("acme")
    spec = {
        "entity": "user:1",
        "session": "s1",
        "stream": "session:s1",
        "first": "1-0",
        "last": "1-0",
        "agent": None,
        "index": True,
        "indexed": True,
        "extract": False,
    }
    queue.enqueue(mem, spec, None)
    for model_llm in (None, llm):
        loop = attach(model_llm)
        assert loop.run_pending(mem) == 1
        assert queue.jobs(mem) == []
        queue.enqueue(mem, spec, None)


def test_malformed_jobs_are_parked_and_do_not_stop_the_queue(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    # jobs are KV facts: anyone who can write the namespace can write odd ones
    loop = attach(llm)
    mem = db.namespace("acme")
    mem.set(queue.JOBS_ENTITY, "extract:a", {"state": "queued", "due": "soon", "queued_at": []})
    mem.set(queue.JOBS_ENTITY, "extract:b", {"state": "queued", "attempts": "many"})
    mem.set(queue.JOBS_ENTITY, "extract:c", {"entity": "user:1", "stream": 7, "due": None})
    mem.set(queue.JOBS_ENTITY, "extract:d", ["not", "an", "object"])
    script.memories = {"memories": [memory("The user likes tea", "preference")]}
    out = mem.remember(convo("I like tea"), entity="user:1", session="s1")
    assert loop.run_pending(mem) == 1  # the real job ran
    with pytest.raises(NotFoundError):
        mem.get(queue.JOBS_ENTITY, str(out.job))
    assert len(mem.memories("user:1", types=["preference"])) == 1
    for key in ("extract:a", "extract:b", "extract:c"):
        job = job_of(mem, key)
        assert job["state"] == "failed" and job["error"].startswith("malformed job"), key
    assert "stream" in job_of(mem, "extract:c")["error"]
    assert mem.get(queue.JOBS_ENTITY, "extract:d").value == ["not", "an", "object"]
    assert loop.status()["extraction_failed"] == 3


def test_queued_jobs_survive_a_restart_and_run_after_it(
    tmp_path: Path,
    clock: ManualClock,
    model: OnnxMiniLM,
    llm: ChatClient,
    script: Script,
) -> None:
    path = tmp_path / "data"
    first = open_db(path, clock, model, llm=None)
    out = first.namespace("acme").remember(convo("I'm vegetarian"), entity="user:1", session="s1")
    first.close()
    script.memories = {"memories": [memory("The user is vegetarian", "preference")]}
    # reopened with a model: the background worker finds the job left from before
    second = open_db(path, clock, model, llm=llm, loop_settings=LoopSettings(poll_s=0.02))
    try:
        mem = second.namespace("acme")
        deadline = time.monotonic() + 20
        while queue.jobs(mem) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert queue.jobs(mem) == []
        assert [m.content for m in mem.memories("user:1", types=["preference"])] == [
            "The user is vegetarian"
        ]
        (pref,) = mem.memories("user:1", types=["preference"])
        assert pref.metadata["source_turns"] == list(out.turns)
    finally:
        second.close()


# -- extraction ------------------------------------------------------------------------------


def test_extraction_writes_typed_memories_with_lineage_and_valid_time(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
    upstream: ScriptedUpstream,
) -> None:
    attach(llm)
    mem = db.namespace("acme")
    script.memories = {
        "memories": [
            memory(HAWAII, "fact", turns=[1], valid_from="last week"),
            memory("The user prefers window seats", "preference", turns=[3], confidence=0.8),
            memory("Book flights with refundable fares first", "procedure", turns=[1, 3]),
            memory(
                "The user went scuba diving in Maui", "episode", turns=[3], valid_from="2024-07-02"
            ),
        ]
    }
    msgs = convo(
        "I set my Hawaii budget at $3000 last week",
        "Great.",
        "Window seats please; I dived in Maui in July 2024",
    )
    out = mem.remember(msgs, entity="user:1", session="s1", wait=True)
    assert out.status == "extracted" and out.job is None
    u1, _, u3 = out.turns
    assert [(d.action, d.type, d.source_turns) for d in out.decisions] == [
        ("ADD", "fact", (u1,)),
        ("ADD", "preference", (u3,)),
        ("ADD", "procedure", (u1, u3)),
        ("ADD", "episode", (u3,)),
    ]
    by_type = {m.type: m for m in mem.memories("user:1") if m.type != "event"}
    fact = by_type["fact"]
    assert fact.content == HAWAII and fact.ts == SAID
    assert fact.metadata["confidence"] == 0.9 and fact.metadata["session"] == "s1"
    assert fact.metadata["source_turns"] == [u1]
    assert fact.metadata["valid_from"] == datetime(2025, 10, 17, tzinfo=UTC).timestamp()
    assert out.decisions[0].valid_from == datetime(2025, 10, 17, tzinfo=UTC)
    assert by_type["preference"].metadata["confidence"] == 0.8
    assert "valid_from" not in by_type["preference"].metadata
    assert by_type["episode"].metadata["valid_from"] == datetime(2024, 7, 2, tzinfo=UTC).timestamp()
    assert by_type["procedure"].metadata["source_turns"] == [u1, u3]
    # the model saw the turns numbered and dated
    (ask,) = script.asked(upstream, "memories")
    prompt = ask.messages[-1]["content"]
    assert "[1] 2025-10-24 user: I set my Hawaii budget" in prompt
    assert "[2] 2025-10-24 assistant: Great." in prompt


def test_the_llms_bad_items_are_dropped(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    attach(llm, min_confidence=0.5)
    mem = db.namespace("acme")
    script.memories = {
        "memories": [
            memory("   "),  # empty
            memory("The user is unsure about pineapple", confidence=0.2),  # under min_confidence
            memory("The user has a sister named Ana", turns=[0, 7, -1]),  # no such turns
            memory("The user owns a kayak", "fact", turns=[2, 9]),  # one good turn number
        ]
    }
    msgs = convo("My sister Ana and I kayak", "Fun!", "I own the kayak")
    out = mem.remember(msgs, entity="user:1", session="s1", wait=True)
    assert [d.content for d in out.decisions] == [
        "The user has a sister named Ana",
        "The user owns a kayak",
    ]
    u1, a2, u3 = out.turns
    # no usable turn number: the window's user turns are the source
    assert out.decisions[0].source_turns == (u1, u3)
    assert out.decisions[1].source_turns == (a2,)
    assert {m.content for m in mem.memories("user:1", types=["fact"])} == {
        "The user has a sister named Ana",
        "The user owns a kayak",
    }


def test_candidates_drop_what_no_schema_check_would_catch() -> None:
    turns = [Turn("1-0", "user", "I have a kayak", SAID), Turn("1-1", "assistant", "ok", SAID)]
    answer = {
        "memories": [
            {**memory("The user has opinions"), "type": "opinion"},
            {**memory("The user likes tea"), "confidence": "high"},
            {**memory("The user is sure"), "confidence": 7},  # clamped to 1
            "not an object",
            {**memory("The user owns a kayak"), "source_turns": [True, 2]},
            {**memory("The user lives here"), "entity": "not an entity"},
            {**memory("The user's sister lives here"), "entity": "user:2"},
        ]
    }
    out = candidates(answer, turns, "user:1", LoopSettings())
    assert [(c.content, c.confidence, c.source_turns, c.entity) for c in out] == [
        ("The user is sure", 1.0, ("1-0",), "user:1"),
        ("The user owns a kayak", 0.9, ("1-0", "1-1"), "user:1"),
        ("The user lives here", 0.9, ("1-0",), "user:1"),
        (
            "The user's sister lives here",
            0.9,
            ("1-0",),
            "user:1",
        ),  # the model cannot write into another entity
    ]
    many = {"memories": [memory(f"The user likes tea number {i}") for i in range(30)]}
    assert len(candidates(many, turns, "user:1", LoopSettings(max_candidates=5))) == 5


def test_extraction_through_the_queue_uses_the_same_window(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    loop = attach(llm)
    mem = db.namespace("acme")

    def echo(req: Request) -> Any:  # the last turn of the prompt, said back as a memory
        last_line = req.messages[-1]["content"].splitlines()[-1]
        return {"memories": [memory("The user said: " + last_line.split(": ", 1)[1])]}

    script.memories = echo
    first = mem.remember(convo("I like jazz"), entity="user:1", session="s1")
    mem.remember(convo("I like tea"), entity="user:2", session="s1")  # the same stream
    second = mem.remember(convo("I like chess"), entity="user:1", session="s1")
    assert loop.run_pending(mem) == 3
    assert {m.content for m in mem.memories("user:1", types=["fact"])} == {
        "The user said: I like jazz",
        "The user said: I like chess",
    }
    jazz = next(m for m in mem.memories("user:1", types=["fact"]) if "jazz" in m.content)
    assert jazz.metadata["source_turns"] == list(first.turns)
    assert second.turns != first.turns
    assert queue.jobs(mem) == []
    assert loop.status()["extraction_queued"] == 0


# -- conflict resolution ---------------------------------------------------------------------


def seed(mem: Any, content: str, kind: str = "fact", *, entity: str = "user:1") -> str:
    """A memory written by the loop itself (caller-extracted, inline)."""
    out = mem.remember(
        convo(content), entity=entity, session="seed", memories=[{"type": kind, "content": content}]
    )
    (decision,) = out.decisions
    assert decision.action == "ADD" and decision.memory_id is not None
    return decision.memory_id


def decided_by_llm(action: str, target: int | None, reason: str) -> Callable[[Request], Any]:
    return lambda req: {
        "decisions": [{"candidate": 1, "action": action, "target": target, "reason": reason}]
    }


def test_add_by_the_llm_keeps_both(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    attach(llm)
    mem = db.namespace("acme")
    old = seed(mem, HAWAII)
    script.memories = {"memories": [memory("The user's budget for the Japan trip is $5000")]}
    script.decisions = decided_by_llm("ADD", None, "another trip")
    out = mem.remember(convo("Japan: $5000"), entity="user:1", session="s2", wait=True)
    (d,) = out.decisions
    assert (d.action, d.target_id, d.reason, d.decided_by) == ("ADD", None, "another trip", "llm")
    assert mem.get(old).version == 1
    assert {m.content for m in mem.memories("user:1", types=["fact"])} == {
        HAWAII,
        "The user's budget for the Japan trip is $5000",
    }


def test_update_by_the_llm_supersedes_and_keeps_the_old_belief(
    db: Database,
    clock: ManualClock,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
    upstream: ScriptedUpstream,
) -> None:
    attach(llm)
    mem = db.namespace("acme")
    old = seed(mem, HAWAII)
    believed_at = datetime.fromtimestamp(clock.now_us() / 1e6, UTC)
    clock.advance(86_400)  # the next day
    said = datetime.fromtimestamp(clock.now_us() / 1e6, UTC)
    new_text = "The user's budget for the Hawaii trip is $5000"
    script.memories = {"memories": [memory(new_text)]}
    script.decisions = decided_by_llm("UPDATE", 1, "the budget changed")
    out = mem.remember(convo("Make the budget $5000"), entity="user:1", session="s2", wait=True)
    (d,) = out.decisions
    assert (d.action, d.target_id, d.decided_by) == ("UPDATE", old, "llm")
    # the model was shown the existing memory as the candidate's neighbour
    (ask,) = script.asked(upstream, "decisions")
    assert f"NEW 1 (fact): {new_text}" in ask.messages[-1]["content"]
    assert f"EXISTING 1: {HAWAII}" in ask.messages[-1]["content"]
    new = mem.get(str(d.memory_id))
    assert new.content == new_text and new.metadata["supersedes"] == old
    closed = mem.get(old)
    assert closed.version == 2 and closed.content == HAWAII
    assert closed.metadata["valid_to"] == said.timestamp()
    assert closed.metadata["superseded_by"] == d.memory_id
    assert [v.version for v in mem.history(old)] == [1, 2]
    assert "valid_to" not in mem.history(old)[0].metadata
    before = mem.get(old, as_of=believed_at)  # what we believed then
    assert before.version == 1 and "valid_to" not in before.metadata
    # valid time: true before the change, not after
    assert old in {m.id for m in mem.memories("user:1", valid_at=SAID)}
    assert old not in {m.id for m in mem.memories("user:1", valid_at=said)}
    assert d.memory_id in {m.id for m in mem.memories("user:1", valid_at=said)}


def test_delete_by_the_llm_tombstones_and_as_of_still_shows_it(
    db: Database,
    clock: ManualClock,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    attach(llm)
    mem = db.namespace("acme")
    old = seed(mem, "The user likes sushi", "preference")
    believed_at = datetime.fromtimestamp(clock.now_us() / 1e6, UTC)
    clock.advance(60)
    script.memories = {"memories": [memory("The user is off sushi now", "preference")]}
    script.decisions = decided_by_llm("DELETE", 1, "no longer true")
    out = mem.remember(convo("I'm off sushi now"), entity="user:1", session="s2", wait=True)
    (d,) = out.decisions
    assert (d.action, d.memory_id, d.target_id) == ("DELETE", None, old)
    with pytest.raises(NotFoundError):
        mem.get(old)
    assert mem.get(old, as_of=believed_at).content == "The user likes sushi"
    assert mem.history(old)[-1].deleted
    assert mem.memories("user:1", types=["preference"]) == []


def test_noop_by_the_llm_writes_no_memory(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    attach(llm)
    mem = db.namespace("acme")
    old = seed(mem, "The user likes sushi", "preference")
    script.memories = {"memories": [memory("The user enjoys sushi", "preference")]}
    script.decisions = decided_by_llm("NOOP", 1, "already known")
    out = mem.remember(convo("I enjoy sushi"), entity="user:1", session="s2", wait=True)
    (d,) = out.decisions
    assert (d.action, d.memory_id, d.target_id) == ("NOOP", None, old)
    assert [m.id for m in mem.memories("user:1", types=["preference"])] == [old]
    assert mem.get(old).version == 1


def test_an_unusable_llm_decision_falls_back_to_the_policy(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    attach(llm)
    mem = db.namespace("acme")
    old = seed(mem, "The user likes sushi", "preference")
    script.memories = {"memories": [memory("The user likes sushi", "preference")]}
    script.decisions = decided_by_llm("UPDATE", 9, "no such target")
    (d,) = mem.remember(convo("sushi!"), entity="user:1", session="s2", wait=True).decisions
    assert (d.action, d.target_id, d.decided_by) == ("NOOP", old, "similarity")
    script.decisions = Reply.error(503)  # the decision call fails: extraction still counts
    (d,) = mem.remember(convo("sushi!"), entity="user:1", session="s3", wait=True).decisions
    assert (d.action, d.target_id, d.decided_by) == ("NOOP", old, "similarity")


@pytest.mark.parametrize(
    ("old_text", "new_text", "action"),
    [
        ("The user likes sushi", "The user likes sushi", "NOOP"),
        ("The user has a dog named Rex", "The user has a dog called Rex", "NOOP"),
        ("The user likes sushi", "The user owns a red bicycle", "ADD"),
        ("The user likes sushi", "The user no longer likes sushi", "DELETE"),
        ("The user drinks coffee every morning", "The user stopped drinking coffee", "DELETE"),
        ("The user likes sushi", "The user does not like sushi", "DELETE"),
        (
            "The user's flight to Hawaii departs on March 3",
            "The user's flight to Hawaii departs on April 9",
            "UPDATE",
        ),
        (HAWAII, "The user's budget for the Hawaii trip is $5000", "UPDATE"),
        ("The user is 34 years old", "The user is 35 years old", "UPDATE"),
    ],
)
def test_the_similarity_policy_without_an_llm(
    db: Database,
    old_text: str,
    new_text: str,
    action: str,
) -> None:
    mem = db.namespace("acme")
    old = seed(mem, old_text)
    out = mem.remember(
        convo(new_text),
        entity="user:1",
        session="s2",
        memories=[{"type": "fact", "content": new_text}],
    )
    (d,) = out.decisions
    assert (d.action, d.decided_by) == (action, "similarity"), d.reason
    assert out.status == "extracted"  # the caller's memories: no extraction queued
    facts = {m.id: m.content for m in mem.memories("user:1", types=["fact"])}
    if action == "ADD":
        assert facts == {old: old_text, d.memory_id: new_text}
    elif action == "NOOP":
        assert facts == {old: old_text} and d.target_id == old
    elif action == "DELETE":
        assert facts == {} and d.target_id == old
    else:
        assert facts == {old: old_text, d.memory_id: new_text}
        assert "valid_to" in mem.get(old).metadata


def test_caller_memories_in_a_database_without_an_embedder(
    tmp_path: Path,
    clock: ManualClock,
) -> None:
    database = open_db(tmp_path / "plain", clock, None, llm=None)
    still(database)
    try:
        mem = database.namespace("acme")
        first = seed(mem, "The user likes tea")
        (d,) = mem.remember(
            convo("tea"),
            entity="user:1",
            session="s2",
            memories=[{"content": "The user likes tea"}],
        ).decisions
        assert (d.action, d.target_id) == ("NOOP", first)
        (d,) = mem.remember(
            convo("bike"),
            entity="user:1",
            session="s2",
            memories=[{"content": "The user likes a red bike"}],
        ).decisions
        assert d.action == "ADD" and "no vector" in d.reason
        assert len(mem.memories("user:1", types=["fact"])) == 2
    finally:
        database.close()


def test_caller_memories_take_type_confidence_and_valid_from(db: Database) -> None:
    mem = db.namespace("acme")
    out = mem.remember(
        [
            {"role": "user", "content": "We moved to Porto last month"},
            {"role": "assistant", "content": "Noted"},
        ],
        entity="user:1",
        session="s1",
        memories=[
            {
                "type": "fact",
                "content": " The user  lives in Porto ",
                "confidence": 0.7,
                "valid_from": "last month",
            }
        ],
    )
    (d,) = out.decisions
    assert (d.action, d.type, d.content, d.confidence) == (
        "ADD",
        "fact",
        "The user lives in Porto",
        0.7,
    )
    assert d.source_turns == (out.turns[0],)  # the user's turns
    assert d.valid_from == datetime(2025, 9, 24, tzinfo=UTC)
    m = mem.get(str(d.memory_id))
    assert m.metadata["valid_from"] == d.valid_from.timestamp()


def test_every_decision_is_in_the_decisions_stream_and_the_audit(
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    attach(llm)
    mem = db.namespace("acme")
    old = seed(mem, "The user likes sushi", "preference")
    script.memories = {
        "memories": [memory("The user likes sushi", "preference"), memory("The user owns a kayak")]
    }
    # one call per candidate; the model calls the sushi one known, the kayak one new
    script.decisions = lambda req: {
        "decisions": [
            {"candidate": 1, "action": "NOOP", "target": 1, "reason": "same"}
            if "sushi" in req.messages[-1]["content"].splitlines()[0]
            else {"candidate": 1, "action": "ADD", "target": None, "reason": "new"}
        ]
    }
    out = mem.remember(convo("sushi and my kayak"), entity="user:1", session="s2", wait=True)
    assert [d.action for d in out.decisions] == ["NOOP", "ADD"]
    events = mem.events(DECISIONS_STREAM)
    assert [(e.entity, (e.data or {})["action"]) for e in events] == [
        ("user:1", "ADD"),
        ("user:1", "NOOP"),
        ("user:1", "ADD"),
    ]
    noop = events[1]
    assert noop.memory_id is None  # not searchable
    assert noop.data is not None
    assert (noop.data["reason"], noop.data["by"], noop.data["target_id"]) == ("same", "llm", old)
    assert noop.data["source_turns"] == list(out.turns)
    assert noop.content == "NOOP preference: The user likes sushi"
    audited = {a.target for a in mem.audit("user:1") if a.action == "append"}
    assert {f"{DECISIONS_STREAM}/{e.id}" for e in events} <= audited
    assert mem.query("kayak", mode="keyword", types=["event"]).hits[0].content == (
        "sushi and my kayak"
    )  # the decisions are not searched as memories


# -- recall ----------------------------------------------------------------------------------


@pytest.fixture
def hawaii(db: Database) -> Any:
    """user:1 with a Hawaii budget and an unrelated memory, written without the LLM."""
    mem = db.namespace("acme")
    mem.write_many(
        [
            ("user:1", {"content": HAWAII, "type": "fact"}),
            ("user:1", {"content": "The user's cat is named Miso", "type": "fact"}),
            (
                "user:2",
                {"content": "The user's budget for the Japan trip is $9000", "type": "fact"},
            ),
        ]
    )
    return mem


def queries_logged(mem: Any) -> int:
    return sum(a.action == "query" for a in mem.audit())


@pytest.mark.parametrize("text", ["thanks!", "Thank you", "ok cool", "hi", "  "])
def test_small_talk_needs_no_memory(hawaii: Any, text: str) -> None:
    out = hawaii.recall(text, entity="user:1")
    assert (out.needed, out.memories, out.context, out.query_id) == (False, (), "", None)
    assert out.rewritten_by == "none"
    assert queries_logged(hawaii) == 0


def test_a_question_gets_its_memories_as_a_cited_context_block(hawaii: Any) -> None:
    out = hawaii.recall("What is my budget for the Hawaii trip?", entity="user:1")
    assert out.needed and out.rewritten_by == "none"
    assert out.query == "What is my budget for the Hawaii trip?"
    assert [m.content for m in out.memories] == [HAWAII]  # the cat is under the threshold
    (m,) = out.memories
    assert m.entity == "user:1" and m.type == "fact" and m.similarity >= 0.6
    assert out.context.startswith("Memories about user:1 (cite by id):\n")
    assert f"[{m.id}]" in out.context and HAWAII in out.context
    assert out.dropped >= 1
    assert out.query_id is not None and queries_logged(hawaii) == 1


def test_the_heuristic_borrows_the_previous_user_turn(hawaii: Any) -> None:
    msgs = convo("I'm planning the Hawaii trip", "Sounds great!", "what's my budget for it?")
    out = hawaii.recall(msgs, entity="user:1")
    assert out.rewritten_by == "heuristic"
    assert out.query == "I'm planning the Hawaii trip what's my budget for it?"
    assert [m.content for m in out.memories] == [HAWAII]
    alone = hawaii.recall("what's my budget for it?", entity="user:1")
    assert (alone.rewritten_by, alone.query) == ("none", "what's my budget for it?")
    # the borrowed turn names the trip: the budget is found with a higher similarity
    best_alone = max((m.similarity for m in alone.memories if m.content == HAWAII), default=0)
    assert out.memories[0].similarity > best_alone


def test_the_llm_rewrites_when_asked_and_the_heuristic_takes_over_when_it_fails(
    hawaii: Any,
    db: Database,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
    upstream: ScriptedUpstream,
) -> None:
    attach(llm)
    msgs = convo("I'm planning the Hawaii trip", "Sounds great!", "what's my budget for it?")
    script.query = {"query": "budget for the Hawaii trip"}
    out = hawaii.recall(msgs, entity="user:1", rewrite="llm")
    assert (out.rewritten_by, out.query) == ("llm", "budget for the Hawaii trip")
    assert [m.content for m in out.memories] == [HAWAII]
    (ask,) = script.asked(upstream, "query")
    assert "user: what's my budget for it?" in ask.messages[-1]["content"]
    out = hawaii.recall(msgs, entity="user:1", rewrite="heuristic")
    assert out.rewritten_by == "heuristic"
    assert len(script.asked(upstream, "query")) == 1  # not asked
    script.query = Reply.error(503)
    out = hawaii.recall(msgs, entity="user:1", rewrite="llm")
    assert out.rewritten_by == "heuristic"
    assert [m.content for m in out.memories] == [HAWAII]


def test_the_threshold_drops_weak_hits(hawaii: Any) -> None:
    q = "What is my budget for the Hawaii trip?"
    everything = hawaii.recall(q, entity="user:1", threshold=0)
    assert {m.content for m in everything.memories} == {HAWAII, "The user's cat is named Miso"}
    assert everything.dropped == 0
    assert all(0 < m.similarity < 1 for m in everything.memories)
    nothing = hawaii.recall(q, entity="user:1", threshold=1)
    assert nothing.memories == () and nothing.context == "" and nothing.tokens == 0
    assert nothing.needed and nothing.dropped == 2
    sims = sorted(m.similarity for m in everything.memories)
    between = hawaii.recall(q, entity="user:1", threshold=(sims[0] + sims[1]) / 2)
    assert [m.content for m in between.memories] == [HAWAII]


def test_the_threshold_can_be_set_per_namespace(
    hawaii: Any,
    db: Database,
    attach: Callable[..., MemoryLoop],
) -> None:
    loop = attach(None)
    q = "What is my budget for the Hawaii trip?"
    assert loop.threshold(hawaii) == 0.25
    assert loop.configure(hawaii, threshold=0.0) == 0.0
    assert len(hawaii.recall(q, entity="user:1").memories) == 2
    assert loop.threshold(db.namespace("other")) == 0.25  # other namespaces keep the default
    loop.configure(hawaii, threshold=1)
    assert hawaii.recall(q, entity="user:1").memories == ()
    assert len(hawaii.recall(q, entity="user:1", threshold=0).memories) == 2  # the call wins
    with pytest.raises(ValidationError) as err:
        loop.configure(hawaii, threshold=1.5)
    assert err.value.details.get("field") == "threshold"
    # the setting is a KV fact: one written by hand that configure would refuse is ignored
    for odd in (True, 7, "high", None):
        hawaii.set(CONFIG_ENTITY, "recall", {"threshold": odd})
        assert loop.threshold(hawaii) == 0.25


def test_the_block_holds_at_most_max_memories(
    db: Database, attach: Callable[..., MemoryLoop]
) -> None:
    mem = db.namespace("acme")
    places = [
        "Maui",
        "Oahu",
        "Kauai",
        "Lanai",
        "Molokai",
        "Hilo",
        "Kona",
        "Lahaina",
        "Hana",
        "Waikiki",
        "Kailua",
        "Princeville",
    ]
    mem.write_many(
        [
            ("user:1", f"In {2000 + i} the user flew to {p} with {n} friends")
            for i, (p, n) in enumerate(zip(places, range(2, 14), strict=True))
        ]
    )
    q = "Where did I fly with my friends?"
    assert len(mem.recall(q, entity="user:1", threshold=0).memories) == 7  # the default cap
    attach(None, max_memories=3)
    found = mem.recall(q, entity="user:1", threshold=0)
    assert len(found.memories) == 3 and found.dropped == 7
    assert found.context.count("\n- [") == 3
    with pytest.raises(ValidationError, match="max_memories"):
        LoopSettings(max_memories=0)


def test_the_budget_limits_the_block_and_the_memories_match_it(
    db: Database, attach: Callable[..., MemoryLoop]
) -> None:
    attach(None, max_memories=100)  # the budget alone decides here
    mem = db.namespace("acme")
    islands = ["Maui", "Oahu", "Kauai", "Lanai", "Molokai", "the Big Island", "Niihau", "Kahoolawe"]
    mem.write_many(
        [
            (
                "user:1",
                {
                    "content": f"The user's trip to {island} in Hawaii cost "
                    f"${1000 + 350 * i} in {2010 + i}",
                    "type": "fact",
                },
            )
            for i, island in enumerate(islands)
        ]
    )
    q = "How much do the Hawaii trips cost?"
    full = mem.recall(q, entity="user:1", threshold=0, budget_tokens=10_000)
    assert len(full.memories) == 8
    for budget in (70, 90, 130):  # the block's frame (its first line, markers, note): ~33
        out = mem.recall(q, entity="user:1", threshold=0, budget_tokens=budget)
        assert 0 < out.tokens <= budget
        assert 0 < len(out.memories) < 8
        lines = out.context.splitlines()[2:-2]
        assert [line.split("]")[0][3:] for line in lines] == [m.id for m in out.memories]
        assert out.dropped == 8 - len(out.memories)
        # in ranking order (one that does not fit is skipped for a shorter one after it)
        ranked = [m.id for m in full.memories]
        places = [ranked.index(m.id) for m in out.memories]
        assert places == sorted(places) and places[0] == 0
    tiny = mem.recall(q, entity="user:1", threshold=0, budget_tokens=5)
    assert tiny.memories == () and tiny.context == ""


def test_superseded_memories_are_not_recalled(
    db: Database,
    clock: ManualClock,
    attach: Callable[..., MemoryLoop],
    llm: ChatClient,
    script: Script,
) -> None:
    attach(llm)
    mem = db.namespace("acme")
    old = seed(mem, HAWAII)
    clock.advance(3600)
    script.memories = {"memories": [memory("The user's budget for the Hawaii trip is $5000")]}
    script.decisions = decided_by_llm("UPDATE", 1, "changed")
    (d,) = mem.remember(
        convo("budget is $5000 now"), entity="user:1", session="s2", wait=True
    ).decisions
    out = mem.recall("What is my budget for the Hawaii trip?", entity="user:1", threshold=0, k=20)
    ids = [m.id for m in out.memories]
    assert d.memory_id in ids and old not in ids


def test_recall_falls_back_to_keywords_when_the_embedder_fails(
    tmp_path: Path,
    clock: ManualClock,
    model: OnnxMiniLM,
) -> None:
    class Flaky:
        """The real model, until the test takes it down."""

        name, dim = model.name, model.dim
        down = False

        def embed(self, texts: Any) -> np.ndarray:
            if self.down:
                raise EmbeddingError("the embedding model is down (scripted)")
            return model.embed(texts)

    flaky = Flaky()
    database = open_db(tmp_path / "data", clock, flaky, llm=None)
    try:
        mem = database.namespace("acme")
        mem.write("user:1", {"content": HAWAII, "type": "fact"})
        mem.write("user:1", {"content": "The user's cat is named Miso", "type": "fact"})
        flaky.down = True
        out = mem.recall("Hawaii budget?", entity="user:1")
        assert [m.content for m in out.memories] == [HAWAII]  # keyword match only
        assert out.memories[0].similarity == 1.0
        assert mem.recall("Hawaii budget?", entity="user:1", threshold=1).memories != ()
    finally:
        database.close()


# -- input validation: the field is named and nothing is stored ----------------------------


def nothing_stored(mem: Any) -> bool:
    return mem.streams() == [] and mem.memories() == [] and queue.jobs(mem) == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"messages": []}, "messages"),
        ({"messages": 42}, "messages"),
        ({"messages": [{"content": "no role"}]}, "messages[0]"),
        (
            {"messages": [{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}]},
            "messages[1].role",
        ),
        (
            {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": 7}]},
            "messages[1].content",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "ok"},
                    {"role": "user", "content": "x" * 32_001},
                ]
            },
            "messages[1].content",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "ok"},
                    {"role": "user", "content": "é" * 20_000},
                ]
            },
            "messages[1].content",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "ok"},
                    {"role": "user", "content": "x", "name": "n" * 65},
                ]
            },
            "messages[1].name",
        ),
        ({"messages": [{"role": "user", "content": "ok"}] * 65}, "messages"),
        ({"messages": [{"role": "user", "content": "ok", "ts": "soon"}]}, "messages[0].ts"),
        (
            {"memories": [{"type": "fact", "content": "ok"}, {"type": "belief", "content": "x"}]},
            "memories[1].type",
        ),
        ({"memories": [{"type": "fact", "content": " "}]}, "memories[0].content"),
        (
            {"memories": [{"type": "fact", "content": "x", "confidence": 2}]},
            "memories[0].confidence",
        ),
        ({"memories": "The user likes tea"}, "memories"),
        ({"memories": [{"content": "The user likes tea"}] * 21}, "memories"),
        ({"memories": [{"content": "x" * 2001}]}, "memories[0].content"),
        ({"memories": [{"content": "x", "valid_from": "sometime"}]}, "memories[0].valid_from"),
        ({"memories": [{"content": "x", "valid_from": 2025}]}, "memories[0].valid_from"),
        ({"entity": ""}, "entity"),
        ({"entity": 5}, "entity"),
        ({"session": " "}, "session"),
        ({"session": "s" * 249}, "session"),  # "session:" + it would be too long a stream
        ({"wait": "yes"}, "wait"),
    ],
)
def test_remember_rejects_bad_input_naming_the_field_and_stores_nothing(
    db: Database,
    kwargs: dict[str, Any],
    field: str,
) -> None:
    mem = db.namespace("acme")
    args: dict[str, Any] = {
        "messages": [{"role": "user", "content": "I like tea"}],
        "entity": "user:1",
        "session": "s1",
        **kwargs,
    }
    messages = args.pop("messages")
    with pytest.raises(ValidationError) as err:
        mem.remember(messages, **args)
    assert err.value.details.get("field") == field, err.value.message
    assert field.split(".")[0].split("[")[0] in err.value.message
    assert nothing_stored(mem)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"budget_tokens": 0}, "budget_tokens"),
        ({"budget_tokens": 100_001}, "budget_tokens"),
        ({"budget_tokens": "10"}, "budget_tokens"),
        ({"k": 0}, "k"),
        ({"k": 101}, "k"),
        ({"k": True}, "k"),
        ({"threshold": -0.1}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": "high"}, "threshold"),
        ({"rewrite": "magic"}, "rewrite"),
        ({"entity": ""}, "entity"),
    ],
)
def test_recall_rejects_bad_input_naming_the_field(
    hawaii: Any, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as err:
        hawaii.recall("What is my budget?", **kwargs)
    assert err.value.details.get("field") == field
    assert field in err.value.message
    assert queries_logged(hawaii) == 0


def test_recall_rejects_messages_that_are_not_messages(hawaii: Any) -> None:
    for bad, field in (([], "messages"), ([{"content": "x"}], "messages[0]"), (3, "messages")):
        with pytest.raises(ValidationError) as err:
            hawaii.recall(bad)
        assert err.value.details.get("field") == field


def test_loop_settings_are_checked() -> None:
    for bad, field in (
        ({"threshold": 2}, "threshold"),
        ({"k": 0}, "k"),
        ({"rewrite": "x"}, "rewrite"),
        ({"max_turns": 1.5}, "max_turns"),
        ({"retry_base_s": -1}, "retry_base_s"),
    ):
        with pytest.raises(ValidationError) as err:
            LoopSettings(**bad)
        assert err.value.details.get("field") == field
    assert LoopSettings.from_env({"SYNAPSEDB_LOOP_THRESHOLD": "0.4"}).threshold == 0.4
    with pytest.raises(SynapseError):
        LoopSettings.from_env({"SYNAPSEDB_LOOP_K": "many"})


# -- the review's findings ------------------------------------------------------------------


def test_an_update_that_cannot_close_the_old_interval_still_supersedes_it(
    db: Database, attach: Callable[..., MemoryLoop], llm: ChatClient, script: Script
) -> None:
    """The new statement's valid_from is not after the old one's: no valid_to can be set,
    but the old memory is superseded, so it is neither recalled nor compared with again."""
    attach(llm)
    mem = db.namespace("acme")
    script.memories = {
        "memories": [memory("The user lives at 12 Rua Augusta", valid_from="2025-10-20")]
    }
    first = mem.remember(
        convo("I live at 12 Rua Augusta"), entity="user:1", session="s1", wait=True
    ).decisions[0]
    script.memories = {
        "memories": [memory("The user lives at 14 Rua Augusta", valid_from="2025-10-01")]
    }
    script.decisions = {
        "decisions": [
            {"candidate": 1, "action": "UPDATE", "target": 1, "reason": "the address was wrong"}
        ]
    }
    second = mem.remember(
        convo("Sorry, it is 14 Rua Augusta"), entity="user:1", session="s2", wait=True
    ).decisions[0]
    assert second.action == "UPDATE" and second.target_id == first.memory_id
    old = mem.get(str(first.memory_id))
    assert old.metadata["superseded_by"] == second.memory_id
    # 2025-10-01 is not after 2025-10-20: what it said was never true, its interval is empty
    assert old.metadata["valid_to"] == old.metadata["valid_from"] + 1e-6
    assert first.memory_id not in {h.id for h in mem.query("Where does the user live?")}
    found = mem.recall("Where does the user live?", entity="user:1", threshold=0.0)
    ids = [m.id for m in found.memories]
    assert second.memory_id in ids and first.memory_id not in ids


def test_an_update_supersedes_the_turns_the_old_memory_came_from(
    db: Database, attach: Callable[..., MemoryLoop], llm: ChatClient, script: Script
) -> None:
    attach(llm)
    mem = db.namespace("acme")
    script.memories = {"memories": [memory(HAWAII)]}
    first = mem.remember(
        convo("Set the Hawaii budget to $3000"), entity="user:1", session="s1", wait=True
    )
    script.memories = {"memories": [memory("The user's budget for the Hawaii trip is $5000")]}
    script.decisions = {
        "decisions": [{"candidate": 1, "action": "UPDATE", "target": 1, "reason": "budget raised"}]
    }
    second = mem.remember(
        convo("Make the Hawaii budget $5000 instead"), entity="user:1", session="s2", wait=True
    )
    old_turn = turn_memory_id("session:s1", first.turns[0])
    assert mem.get(old_turn).metadata["superseded_by"] == second.decisions[0].memory_id
    assert len(mem.history(old_turn)) == 2  # the words as first indexed are kept
    found = mem.recall("What is the Hawaii budget?", entity="user:1", threshold=0.0)
    texts = [m.content for m in found.memories]
    assert "The user's budget for the Hawaii trip is $5000" in texts
    assert not any("$3000" in t for t in texts), texts


@pytest.mark.parametrize(
    "text",
    ["thank you so much", "thanks a lot!", "Thanks again", "that's great, thanks for everything"],
)
def test_more_thanks_need_no_memory(db: Database, text: str) -> None:
    assert not db.namespace("acme").recall(text, entity="user:1").needed


def test_an_llm_outage_leaves_the_other_jobs_indexed_in_the_same_pass(
    db: Database, attach: Callable[..., MemoryLoop], llm: ChatClient, script: Script
) -> None:
    loop = attach(llm)
    mem = db.namespace("acme")
    script.memories = Reply.error(503)
    outs = [
        mem.remember(convo(f"I collect stamps from country {i}"), entity="user:1", session=f"s{i}")
        for i in range(3)
    ]
    assert loop.run_pending(mem) == 0
    for out in outs:  # every job's turns are searchable although the model never answered
        mem.get(turn_memory_id(out.stream, out.turns[0]))
    states = sorted(j.value.get("outages", 0) for j in queue.jobs(mem))
    assert states == [0, 0, 1]  # only the first job asked the model; the others wait for it


def test_an_embedder_outage_is_an_outage() -> None:
    from synapsedb.memory_loop.loop import is_outage

    assert is_outage(EmbeddingError("model unavailable"))
    assert is_outage(UpstreamError("down", status=503))
    assert not is_outage(UpstreamError("bad answer", mode="json_schema"))
    assert not is_outage(ValidationError("bad", field="x"))


def test_the_worker_runs_a_few_jobs_per_namespace_per_pass(
    db: Database, attach: Callable[..., MemoryLoop], llm: ChatClient
) -> None:
    loop = attach(llm)
    mem = db.namespace("acme")
    for i in range(5):
        mem.remember(convo(f"note {i} about my garden"), entity="user:1", session=f"s{i}")
    assert loop.run_pending(mem, limit=2) == 2  # extracted (nothing worth keeping): done
    assert len(queue.jobs(mem)) == 3


def test_recall_without_an_embedder_keeps_keyword_matches(
    tmp_path: Path, clock: ManualClock
) -> None:
    database = open_db(tmp_path / "plain", clock, None, llm=None)
    try:
        still(database)
        mem = database.namespace("acme")
        mem.write("user:1", "The Hawaii trip budget is $10,000")
        found = mem.recall("What is the Hawaii budget?", entity="user:1")
        assert [m.content for m in found.memories] == ["The Hawaii trip budget is $10,000"]
    finally:
        database.close()


def test_a_bug_in_a_job_counts_as_a_failure_and_is_logged(
    db: Database,
    attach: Callable[..., MemoryLoop],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    llm: ChatClient,
) -> None:
    loop = attach(llm, max_attempts=2, retry_base_s=0.0)
    mem = db.namespace("acme")
    out = mem.remember(convo("I like green tea"), entity="user:1", session="s1")

    def broken(*args: Any, **kwargs: Any) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr(loop, "_extract", broken)
    assert loop.run_pending(mem) == 0
    job = job_of(mem, str(out.job))
    assert (job["state"], job["attempts"]) == ("queued", 1) and "KeyError" in job["error"]
    assert "job" in caplog.text and "a bug" in caplog.text
    assert loop.run_pending(mem) == 0
    assert job_of(mem, str(out.job))["state"] == "failed"  # parked, not retaken forever
