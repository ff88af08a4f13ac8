"""The memory loop against hostile input: forged job facts (``synapsedb:jobs`` is a KV entity
any writer of the namespace can set), dates no calendar holds, windows wider than any
``remember`` call writes. The worker is shared by every tenant of a server: nothing a tenant
writes may stop it, hang it or make it skip the queue's own bookkeeping.

The LLM, where one is needed, is ScriptedUpstream: a stand-in for a hosted model speaking
OpenAI's protocol over a real loopback socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.scripted_upstream import Reply, ScriptedUpstream

import synapsedb
from synapsedb import Database
from synapsedb.embed import OnnxMiniLM
from synapsedb.errors import ValidationError
from synapsedb.llm import ChatClient, LLMSettings
from synapsedb.memory_loop import LoopSettings, MemoryLoop
from synapsedb.memory_loop import jobs as queue
from synapsedb.memory_loop.loop import WINDOW_CALLS, turn_memory_id


@pytest.fixture(scope="module")
def model() -> OnnxMiniLM:
    return OnnxMiniLM()


@pytest.fixture
def db(tmp_path: Path, model: OnnxMiniLM) -> Iterator[Database]:
    database = synapsedb.open(
        tmp_path / "data", durability="os", background_maintenance=False, embedder=model, llm=None
    )
    yield database
    database.close()


def still(database: Database, llm: Any = None, **settings: Any) -> MemoryLoop:
    """The database's loop replaced by one whose worker is not started (run_pending by hand)."""
    if database.memory_loop is not None:
        database.memory_loop.close()
    loop = MemoryLoop(llm, LoopSettings(**settings))
    database.memory_loop = loop
    return loop


def test_a_forged_attempt_count_parks_the_job_instead_of_hanging_or_crashing_the_worker(
    db: Database,
) -> None:
    # 2 ** (attempts - 1) was computed before capping the delay: 2000 overflowed a float
    # (OverflowError out of run_pending, the job left "running"), 1e300 never finished (the
    # worker thread of every tenant stuck); a negative count was never parked
    loop = still(db)
    mem = db.namespace("acme")
    for n, attempts in enumerate([2000, -1e9, 1e300]):
        key = f"extract:forged{n}"
        mem.set(
            queue.JOBS_ENTITY,
            key,
            {"state": "queued", "due": 0, "index": True, "attempts": attempts},
        )
        assert loop.run_pending(mem) == 0
        job = mem.get(queue.JOBS_ENTITY, key).value
        assert job["state"] == "failed" and "malformed job" in job["error"]
        assert 1 <= job["attempts"] <= queue.MAX_COUNT + 1


def test_an_outage_count_forged_huge_still_gives_a_bounded_delay(db: Database) -> None:
    mem = db.namespace("acme")
    mem.set(queue.JOBS_ENTITY, "extract:x", {"state": "queued", "outages": 1e300})
    (job,) = queue.jobs(mem)
    assert not queue.reschedule(mem, job, "down", 0.0, 5.0, 8, None, outage=True)
    value = mem.get(queue.JOBS_ENTITY, "extract:x").value
    assert value["due"] <= queue.OUTAGE_DELAY_S and value["outages"] <= queue.MAX_COUNT + 1


@pytest.mark.parametrize(
    "phrase",
    ["in 5000000000 years", "in 9000 years", "8000 years ago", "99999999 days ago", "January 0000"],
)
def test_a_caller_memory_whose_date_no_calendar_holds_is_a_400_not_a_500(
    db: Database, phrase: str
) -> None:
    still(db)
    mem = db.namespace("acme")
    with pytest.raises(ValidationError) as err:
        mem.remember(
            "I plan far ahead",
            entity="user:1",
            session="s1",
            memories=[{"content": "The user plans far ahead", "valid_from": phrase}],
        )
    assert err.value.details["field"] == "memories[0].valid_from"
    # checked before anything is stored
    assert mem.events("session:s1") == []


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


def test_an_extracted_memory_naming_a_date_out_of_range_is_stored_without_a_valid_time(
    db: Database, upstream: ScriptedUpstream
) -> None:
    # the memory's own words are read for a date when the model gives none: "in 5000000000
    # years" raised OverflowError out of run_pending, the job stayed "running" and was taken
    # again every lease (5 minutes) forever, never parked; with wait=True a 500 and no job
    client = ChatClient(
        LLMSettings(base_url=upstream.base_url, model="scripted", max_retries=0, timeout_s=5.0),
        sleep=lambda s: None,
    )
    try:
        loop = still(db, client)
        mem = db.namespace("acme")
        said = "The sun will swallow the Earth in 5000000000 years, I read."
        upstream.push(
            Reply.json(
                {
                    "memories": [
                        {
                            "type": "fact",
                            "content": "The sun will swallow the Earth in 5000000000 years",
                            "entity": None,
                            "confidence": 0.9,
                            "valid_from": None,
                            "source_turns": [1],
                        }
                    ]
                }
            )
        )
        out = mem.remember(said, entity="user:1", session="s1")
        assert loop.run_pending(mem) == 1
        assert queue.jobs(mem) == []  # done, not left running
        facts = [m for m in mem.memories("user:1") if m.type == "fact"]
        assert [m.content for m in facts] == ["The sun will swallow the Earth in 5000000000 years"]
        assert "valid_from" not in facts[0].metadata
        assert out.status == "queued"
    finally:
        client.close()


def test_a_forged_job_window_indexes_no_more_turns_than_one_remember_call_may_carry(
    db: Database,
) -> None:
    # a legitimate job covers the turns of one remember call (at most max_turns); a forged
    # one naming a whole stream made the shared worker embed up to 10,000 turns in one batch
    loop = still(db, max_turns=1)
    mem = db.namespace("acme")
    data = {"role": "user", "session": "s1", "searchable": True}
    ids = [
        mem.append(
            "user:1",
            {"content": f"turn number {i} about bees", "data": data},
            stream="session:s1",
            searchable=False,
        ).id
        for i in range(WINDOW_CALLS + 3)
    ]
    mem.set(
        queue.JOBS_ENTITY,
        "extract:wide",
        {
            "entity": "user:1",
            "session": "s1",
            "stream": "session:s1",
            "first": ids[0],
            "last": ids[-1],
            "agent": None,
            "index": True,
            "indexed": False,
            "extract": False,
            "state": "queued",
            "due": 0,
            "attempts": 0,
        },
    )
    assert loop.run_pending(mem) == 1
    written = {m.id for m in mem.memories("user:1")}
    assert written == {turn_memory_id("session:s1", i) for i in ids[:WINDOW_CALLS]}


def test_a_job_runs_as_the_agent_that_wrote_it_not_the_agent_its_value_names(
    db: Database,
) -> None:
    # a key bound to agent "alice" can PUT a job fact whose value says agent "bob": the
    # worker wrote the turns' memories as "bob", past the agent check of every route
    loop = still(db)
    alice = db.namespace("acme", agent="alice")
    data = {"role": "user", "session": "s1", "searchable": True}
    ev = alice.append(
        "user:1",
        {"content": "I keep bees on the roof", "data": data},
        stream="session:s1",
        searchable=False,
    )
    alice.set(
        queue.JOBS_ENTITY,
        "extract:forged",
        {
            "entity": "user:1",
            "session": "s1",
            "stream": "session:s1",
            "first": ev.id,
            "last": ev.id,
            "agent": "bob",
            "index": True,
            "indexed": False,
            "extract": False,
        },
    )
    assert loop.run_pending(db.namespace("acme")) == 1
    (turn,) = alice.memories("user:1")
    assert turn.id == turn_memory_id("session:s1", ev.id) and turn.agent == "alice"
    # the queue's own writes keep the job's writer too (retried, it still runs as alice)
    assert {f.agent for f in alice.history(queue.JOBS_ENTITY, "extract:forged")} == {"alice"}


def test_a_remembered_job_keeps_its_agent_through_retries(db: Database) -> None:
    loop = still(db)
    mem = db.namespace("acme", agent="planner")
    out = mem.remember("I have two cats", entity="user:1", session="s1")
    job = mem.get(queue.JOBS_ENTITY, str(out.job))
    assert job.agent == "planner" and "agent" not in job.value  # the fact's writer says it
    mem.set(queue.JOBS_ENTITY, str(out.job), {**job.value, "state": "failed"})
    assert loop.retry_failed(db.namespace("acme")) == 1
    assert mem.get(queue.JOBS_ENTITY, str(out.job)).agent == "planner"
    assert loop.run_pending(db.namespace("acme")) == 0  # extraction waits for an LLM
    assert [m.agent for m in mem.memories("user:1")] == ["planner"]
