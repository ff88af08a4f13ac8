"""The memory loop's calls to the model are bounded: extraction and decisions ask for at most
what their schema can need (``max_tokens`` in the request body), and a request that timed out
waiting for its answer is never sent again beside it.

The model is ScriptedUpstream, a stand-in for a hosted model speaking OpenAI's protocol over a
real loopback socket; it records what it was sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.scripted_upstream import Reply, Request, ScriptedUpstream

import synapsedb
from synapsedb import Database
from synapsedb.errors import UpstreamError
from synapsedb.llm import ChatClient, LLMSettings
from synapsedb.memory_loop import LoopSettings, MemoryLoop
from synapsedb.memory_loop.extract import answer_tokens
from synapsedb.memory_loop.resolve import decision_tokens

LISBON = {
    "type": "fact",
    "content": "The user lives in Lisbon",
    "entity": None,
    "confidence": 0.9,
    "valid_from": None,
    "source_turns": [1],
}


def schema_name(request: Request) -> str | None:
    fmt = request.response_format or {}
    return (fmt.get("json_schema") or {}).get("name")


def answer(request: Request) -> Any:
    name = schema_name(request)
    if name == "memories":
        return {"memories": [LISBON]}
    if name == "decisions":
        return {"decisions": [{"candidate": 1, "action": "UPDATE", "target": 1, "reason": "moved"}]}
    return Reply.error(500, f"unexpected {name!r}")


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(responder=answer) as up:
        yield up


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = synapsedb.open(
        tmp_path / "data", durability="os", background_maintenance=False, llm=None
    )
    yield database
    database.close()


def with_loop(db: Database, upstream: ScriptedUpstream, **settings: Any) -> ChatClient:
    llm = ChatClient(
        LLMSettings(base_url=upstream.base_url, model="m", max_retries=2, timeout_s=10),
        sleep=lambda s: None,
    )
    if db.memory_loop is not None:
        db.memory_loop.close()
    db.memory_loop = MemoryLoop(llm, LoopSettings(**settings))
    return llm


def test_the_bounds_follow_the_schema_and_never_pass_the_setting() -> None:
    defaults = LoopSettings()
    assert answer_tokens(defaults) == defaults.max_tokens == 800  # 20 candidates need more
    assert answer_tokens(LoopSettings(max_candidates=1)) == 16 + 48 + 2000 // 4
    assert answer_tokens(LoopSettings(max_candidates=0)) == 16
    assert decision_tokens(1, defaults) == 16 + 24 + 500 // 4
    assert decision_tokens(40, defaults) == 800
    assert decision_tokens(1, LoopSettings(max_tokens=50)) == 50


def test_extraction_and_decisions_send_their_max_tokens(
    db: Database, upstream: ScriptedUpstream
) -> None:
    llm = with_loop(db, upstream, max_candidates=3)
    try:
        mem = db.namespace("acme")
        mem.write("user:ada", {"content": "The user lives in Berlin", "type": "fact"})
        done = mem.remember(
            [{"role": "user", "content": "I moved to Lisbon last month."}],
            entity="user:ada",
            session="s1",
            wait=True,
        )
        assert done.status == "extracted"
    finally:
        llm.close()
    sent = {schema_name(r): r.body for r in upstream.chat_requests()}
    assert sent["memories"]["max_tokens"] == 800 == answer_tokens(LoopSettings(max_candidates=3))
    assert sent["decisions"]["max_tokens"] == 165 == decision_tokens(1, LoopSettings())


def test_an_extraction_that_times_out_waiting_is_not_sent_again(
    db: Database, upstream: ScriptedUpstream
) -> None:
    """A cold local model still writing the answer: one request, and the job waits its turn
    (the loop retries it later, after its backoff), not three requests in a row."""
    llm = ChatClient(
        LLMSettings(base_url=upstream.base_url, model="m", max_retries=2, timeout_s=0.3),
        sleep=lambda s: None,
    )
    db.memory_loop = MemoryLoop(llm, LoopSettings())
    upstream.push(Reply.slow(30, "{}"), Reply.slow(30, "{}"))
    try:
        mem = db.namespace("acme")
        with pytest.raises(UpstreamError, match="timed out waiting for the answer"):
            mem.remember(
                [{"role": "user", "content": "I moved to Lisbon last month."}],
                entity="user:ada",
                session="s1",
                wait=True,
            )
    finally:
        llm.close()
    assert len(upstream.chat_requests()) == 1 and upstream.pending == 1


def test_a_failed_jobs_recorded_error_does_not_name_the_upstream(
    db: Database, upstream: ScriptedUpstream
) -> None:
    """Any reader of the namespace can read the jobs' facts: the error kept there is the
    tenant-safe message (the operator's log has the address)."""
    llm = with_loop(db, upstream)
    upstream.push(Reply.error(500, f"crashed serving {upstream.base_url}"))
    try:
        mem = db.namespace("acme")
        mem.remember(
            [{"role": "user", "content": "I moved to Lisbon last month."}],
            entity="user:ada",
            session="s1",
        )
        assert db.memory_loop is not None
        db.memory_loop.run_pending(mem)
    finally:
        llm.close()
    stored = json.dumps([f.value for f in mem.facts("synapsedb:jobs")])
    assert "LLM upstream: answered 500: crashed serving [upstream]" in stored
    assert "127.0.0.1" not in stored and str(upstream.port) not in stored
