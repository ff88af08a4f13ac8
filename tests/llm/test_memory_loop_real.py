"""The memory loop end to end against a real model (llama.cpp serving SmolLM2-135M,
tests/llm/conftest.py): the same paths as tests/unit/test_memory_loop.py, whose scripted
upstream stands in for a hosted model. A 135M model is a plumbing model: these tests check
that its structured answers flow through extraction, resolution and recall into stored,
well-formed memories, never how good the memories are.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb.config import LLMSettings
from synapsedb.memory_loop import DECISIONS_STREAM, MEMORY_TYPES, LoopSettings

TURNS = [
    {
        "role": "user",
        "content": "My budget for the Hawaii trip is $10,000.",
        "ts": "2025-03-15T10:00:00Z",
    },
    {"role": "assistant", "content": "Noted: $10,000 for Hawaii.", "ts": "2025-03-15T10:00:05Z"},
]


@pytest.fixture
def db(tmp_path: Path, local_llm_settings: LLMSettings) -> Iterator[Any]:
    d = synapsedb.open(
        tmp_path / "db",
        llm=local_llm_settings,
        durability="os",
        background_maintenance=False,
        loop_settings=LoopSettings(poll_s=3600),
    )
    yield d
    d.close()


def check_decisions(ns: Any, done: Any) -> None:
    turn_ids = set(done.turns)
    for d in done.decisions:
        assert d.action in ("ADD", "UPDATE", "DELETE", "NOOP")
        assert d.type in MEMORY_TYPES and d.content
        assert set(d.source_turns) <= turn_ids
        if d.action in ("ADD", "UPDATE"):
            m = ns.get(d.memory_id)
            assert m.type == d.type and m.content == d.content
            assert m.metadata["source_turns"] == list(d.source_turns)
            assert m.metadata["decision"]["action"] == d.action
    logged = ns.events(DECISIONS_STREAM, limit=1000)
    assert len(logged) >= len(done.decisions)


def test_remember_inline_extracts_with_the_real_model(db: Any) -> None:
    ns = db.namespace("travel")
    done = ns.remember(TURNS, entity="user:42", session="A", wait=True)
    assert done.status == "extracted"
    assert len(done.turns) == 2
    print(f"\nSmolLM2 extracted: {[(d.action, d.type, d.content) for d in done.decisions]}")
    assert done.decisions, "the model extracted nothing from an explicit statement"
    check_decisions(ns, done)
    # the user's turn is a searchable memory too; the assistant's acknowledgement is not
    hits = ns.query("Hawaii budget", entity="user:42", types=["event"]).hits
    assert {h.metadata.get("event_id") for h in hits} == {done.turns[0]}


def test_queued_job_runs_with_the_real_model(db: Any) -> None:
    ns = db.namespace("travel")
    done = ns.remember(TURNS, entity="user:7", session="A")
    assert done.status == "queued"
    assert db.memory_loop.run_pending(ns) == 1
    assert ns.facts("synapsedb:jobs") == []
    kept = ns.memories("user:7", types=list(MEMORY_TYPES))
    print(f"\nSmolLM2 extracted (queued): {[m.content for m in kept]}")
    for m in kept:
        assert set(m.metadata["source_turns"]) <= set(done.turns)


def test_recall_with_the_real_model_rewriting(db: Any) -> None:
    ns = db.namespace("travel")
    ns.remember(TURNS, entity="user:9", session="A", wait=True)
    found = ns.recall(
        [
            {"role": "user", "content": "I'm going to Hawaii in June."},
            {"role": "assistant", "content": "Sounds great!"},
            {"role": "user", "content": "What's my budget for it?"},
        ],
        entity="user:9",
        rewrite="llm",
        threshold=0.0,
    )
    print(f"\nSmolLM2 rewrote the query as {found.query!r} ({found.rewritten_by})")
    assert found.needed and found.query
    assert found.rewritten_by in ("llm", "heuristic")
    assert found.memories and "10,000" in found.context
