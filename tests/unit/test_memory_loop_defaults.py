"""The memory loop at its defaults, as a new user meets it: what remember stored is recalled by
the very next request; recall never injects what the request already holds, nor a memory
next to its own source turn; a job held by a process that died is not waited for; a loop that
stops gives its jobs back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.scripted_upstream import Reply, ScriptedUpstream

import synapsedb
from synapsedb import Database
from synapsedb.embed import OnnxMiniLM
from synapsedb.errors import EmbeddingError
from synapsedb.llm import ChatClient, LLMSettings
from synapsedb.memory_loop import LoopSettings, MemoryLoop
from synapsedb.memory_loop import jobs as queue
from synapsedb.memory_loop.extract import turn_memory_id

ADA = "My name is Ada and I live in Lisbon"
ACK = "Nice to meet you, Ada! I'll keep that in mind."


def convo(*texts: str) -> list[dict[str, str]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)
    ]


@pytest.fixture(scope="module")
def model() -> OnnxMiniLM:
    return OnnxMiniLM()


def still(database: Database, llm: Any = None) -> MemoryLoop:
    """The database's loop replaced by one whose worker is not started."""
    if database.memory_loop is not None:
        database.memory_loop.close()
    loop = MemoryLoop(llm, LoopSettings())
    database.memory_loop = loop
    return loop


@pytest.fixture
def db(tmp_path: Path, model: OnnxMiniLM) -> Iterator[Database]:
    database = synapsedb.open(
        tmp_path / "data", durability="os", background_maintenance=False, embedder=model, llm=None
    )
    still(database)
    yield database
    database.close()


# -- read your writes ---------------------------------------------------------------------------


def test_what_remember_stored_is_recalled_by_the_next_request(db: Database) -> None:
    mem = db.namespace("acme")
    mem.remember(convo(ADA, ACK), entity="user:ada", session="first-chat")
    # no worker ran, nothing was waited for: the turn is searchable when remember returns
    found = mem.recall("Where do I live?", entity="user:ada", threshold=0.0)
    assert [m.content for m in found.memories] == [ADA]  # the acknowledgement is no memory


def test_the_turns_are_found_by_another_process_after_this_one_closes(
    tmp_path: Path, model: OnnxMiniLM
) -> None:
    path = tmp_path / "data"
    code = (
        "import synapsedb\n"
        f"db = synapsedb.open({str(path)!r}, llm=None)\n"
        f"db.namespace('acme').remember({convo(ADA)!r}, entity='user:ada', session='s1')\n"
        "db.close()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    database = synapsedb.open(path, durability="os", embedder=model, llm=None)
    try:
        found = database.namespace("acme").recall(
            "Where do I live?", entity="user:ada", threshold=0.0
        )
        assert [m.content for m in found.memories] == [ADA]
    finally:
        database.close()


def test_a_process_killed_right_after_remember_loses_no_turn(
    tmp_path: Path, model: OnnxMiniLM
) -> None:
    path = tmp_path / "data"
    code = (
        "import os, signal, synapsedb\n"
        f"db = synapsedb.open({str(path)!r}, llm=None)\n"
        f"db.namespace('acme').remember({convo(ADA)!r}, entity='user:ada', session='s1')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], timeout=120)
    assert done.returncode == -9  # killed: no close, no background work finished
    database = synapsedb.open(path, durability="os", embedder=model, llm=None)
    try:
        found = database.namespace("acme").recall("Where do I live?", entity="user:ada")
        assert [m.content for m in found.memories] == [ADA]  # at the defaults
    finally:
        database.close()


def test_with_the_embedder_down_the_turns_are_kept_and_indexed_later(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = db.namespace("acme")
    loop = db.memory_loop
    assert isinstance(loop, MemoryLoop)

    def down(*args: Any, **kwargs: Any) -> Any:
        raise EmbeddingError("the model is unavailable")

    with monkeypatch.context() as patch:
        patch.setattr(OnnxMiniLM, "embed", down)
        out = mem.remember(convo(ADA), entity="user:ada", session="s1")
    assert out.status == "queued" and [e.content for e in mem.events("session:s1")] == [ADA]
    assert mem.memories("user:ada") == []
    assert loop.run_pending(mem) == 0  # indexed; the extraction waits for an LLM
    (turn,) = mem.memories("user:ada")
    assert turn.id == turn_memory_id("session:s1", out.turns[0])


# -- what recall injects ------------------------------------------------------------------------


def test_recall_never_returns_what_the_request_holds(db: Database) -> None:
    mem = db.namespace("acme")
    mem.remember(convo("Where do I live?"), entity="user:ada", session="earlier")
    mem.remember(convo(ADA), entity="user:ada", session="first-chat")
    asked = mem.recall("where do I  live?", entity="user:ada", threshold=0.0)
    assert "Where do I live?" not in [m.content for m in asked.memories]  # asked again
    assert ADA in [m.content for m in asked.memories]
    # a chain or a resent history: the turns already in the messages are not memories
    chat = [*convo(ADA, "Noted, Ada."), {"role": "user", "content": "Where do I live?"}]
    again = mem.recall(chat, entity="user:ada", threshold=0.0)
    assert ADA not in [m.content for m in again.memories]


def test_a_memory_and_its_own_source_turn_are_one_item(db: Database) -> None:
    mem = db.namespace("acme")
    out = mem.remember(
        convo(ADA),
        entity="user:ada",
        session="s1",
        memories=[
            {"type": "fact", "content": "The user lives in Lisbon"},
            {"type": "fact", "content": "The user's name is Ada"},
        ],
    )
    assert [d.action for d in out.decisions] == ["ADD", "ADD"]
    found = mem.recall("Which city is my home?", entity="user:ada", threshold=0.0)
    contents = [m.content for m in found.memories]
    # the turn and the facts taken from it: whichever ranks first stands for the turn
    assert len({ADA, "The user lives in Lisbon"} & set(contents)) == 1, contents
    if contents[0] == ADA:
        assert "The user's name is Ada" not in contents  # the turn says it already


def test_synapsedbs_own_entities_are_never_recalled(db: Database) -> None:
    mem = db.namespace("acme")
    mem.write("synapsedb:jobs", "Ada lives in Lisbon, says the bookkeeping")
    mem.write("user:ada", "Ada lives in Lisbon")
    found = mem.recall("Where does Ada live?", threshold=0.0)
    assert [m.entity for m in found.memories] == ["user:ada"]


# -- leases and stopping ------------------------------------------------------------------------


def test_a_job_held_by_a_process_that_died_is_due_at_once(db: Database, tmp_path: Path) -> None:
    mem = db.namespace("acme")
    out = mem.remember(convo(ADA), entity="user:ada", session="s1")
    (job,) = queue.jobs(mem)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = {**queue.holder(), "pid": int(gone.stdout), "started": "1"}
    mem.set(
        queue.JOBS_ENTITY,
        str(out.job),
        {**job.value, "state": "running", "due": 4e9, "holder": dead},
    )
    assert [j.key for j in queue.due(mem, 0.0)] == [out.job]  # its lease runs to 2096
    alive = {**queue.holder(), "pid": os.getppid(), "started": None}
    mem.set(
        queue.JOBS_ENTITY,
        str(out.job),
        {**job.value, "state": "running", "due": 4e9, "holder": alive},
    )
    assert queue.due(mem, 0.0) == []  # a live holder keeps its lease
    far = {"host": "another-host", "pid": int(gone.stdout), "started": "1"}
    mem.set(
        queue.JOBS_ENTITY,
        str(out.job),
        {**job.value, "state": "running", "due": 4e9, "holder": far},
    )
    assert queue.due(mem, 0.0) == []  # another host's process is not judged from here


def test_a_stopping_loop_gives_back_the_job_it_could_not_finish(db: Database) -> None:
    mem = db.namespace("acme")
    with ScriptedUpstream([Reply.slow(3.0)]) as up:
        llm = ChatClient(
            LLMSettings(base_url=up.base_url, model="scripted", max_retries=0, timeout_s=10.0)
        )
        loop = MemoryLoop(llm, LoopSettings(poll_s=0.01, stop_wait_s=0.2))
        db.memory_loop.close()  # type: ignore[union-attr]
        db.memory_loop = loop
        try:
            out = mem.remember(convo(ADA), entity="user:ada", session="s1")
            loop.start(db)
            deadline = time.monotonic() + 30
            while not up.chat_requests():  # the worker claimed the job and asks the model
                assert time.monotonic() < deadline
                time.sleep(0.01)
            (running,) = queue.jobs(mem)
            assert running.state == "running" and running.value["holder"] == queue.holder()
            loop.stop()  # the model is still thinking: the job is given back
            (back,) = queue.jobs(mem)
            assert (back.key, back.state, back.value["holder"]) == (out.job, "queued", None)
        finally:
            loop.stop()
            llm.close()


def test_the_queue_is_counted_before_the_first_job_runs(tmp_path: Path, model: OnnxMiniLM) -> None:
    path = tmp_path / "data"
    first = synapsedb.open(path, durability="os", embedder=model, llm=None)
    for i in range(3):
        first.namespace("acme").remember(
            convo(f"I water the garden on day {i}"), entity="user:ada", session=f"s{i}"
        )
    first.close()
    with ScriptedUpstream(responder=lambda request: Reply.slow(2.0)) as up:
        llm = LLMSettings(base_url=up.base_url, model="scripted", max_retries=0, timeout_s=10.0)
        again = synapsedb.open(
            path,
            durability="os",
            embedder=model,
            llm=llm,
            loop_settings=LoopSettings(stop_wait_s=0.1),
        )
        try:
            loop = again.memory_loop
            assert isinstance(loop, MemoryLoop)
            deadline = time.monotonic() + 30
            while not up.chat_requests():  # the first extraction is under way (2 s)
                assert time.monotonic() < deadline
                time.sleep(0.01)
            assert loop.status()["extraction_queued"] == 3
        finally:
            again.close()


def test_a_jobs_error_names_no_address(db: Database) -> None:
    assert queue.scrubbed("UpstreamError: http://10.0.0.5:8080/v1/chat/completions: 503") == (
        "UpstreamError: <address>: 503"
    )
    mem = db.namespace("acme")
    with ScriptedUpstream(responder=lambda request: Reply.error(400, "bad model")) as up:
        llm = ChatClient(LLMSettings(base_url=up.base_url, model="scripted", max_retries=0))
        loop = still(db, llm)
        try:
            out = mem.remember(convo(ADA), entity="user:ada", session="s1")
            assert loop.run_pending(mem) == 0
        finally:
            llm.close()
    job = mem.get(queue.JOBS_ENTITY, str(out.job)).value
    assert job["error"] and job["attempts"] == 1
    assert up.base_url not in job["error"] and "127.0.0.1" not in job["error"]
    assert loop.last_error is not None and "127.0.0.1" not in loop.last_error


def test_indexing_by_the_proxy_while_the_worker_holds_the_job_does_not_strand_it(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy's background lane makes a job's turns searchable (index_now) just after the
    worker claimed that job: the worker still runs it to the end, instead of leaving it
    ``running`` until its lease runs out."""
    mem = db.namespace("acme")
    claim = queue.claim

    def claim_then_index(ns: Any, job: queue.Job, now: float, agent: str | None) -> Any:
        mine = claim(ns, job, now, agent)
        loop.index_now(ns, job.key)  # the proxy's lane, between the claim and the indexing
        return mine

    with ScriptedUpstream(responder=lambda request: Reply.json({"memories": []})) as up:
        llm = ChatClient(LLMSettings(base_url=up.base_url, model="scripted", max_retries=0))
        loop = still(db, llm)
        try:
            out = loop.remember(mem, convo(ADA), entity="user:ada", session="s1", defer_index=True)
            monkeypatch.setattr(queue, "claim", claim_then_index)
            assert loop.run_pending(mem) == 1
        finally:
            llm.close()
    assert queue.get(mem, str(out.job)) is None and loop.extracted == 1
    assert [r for r in up.chat_requests() if r.response_format]  # extraction was asked for
    found = mem.recall("Where do I live?", entity="user:ada", threshold=0.0)
    assert [m.content for m in found.memories] == [ADA]
