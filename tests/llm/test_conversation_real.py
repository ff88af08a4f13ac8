"""Conversation summaries made by a real model (issue 12): SummaryBuffer over Sessions and the
SmartContextManager fold turns with SmolLM2-135M on llama.cpp (tests/llm/conftest.py) through
the memory loop's ChatClient. A plumbing model: the tests check that the summary is the model's
(method "llm"), versioned and incremental, never what it says."""

from __future__ import annotations

from pathlib import Path

import synapsedb
from synapsedb.conversation import (
    Message,
    Sessions,
    SmartContextManager,
    Summarizer,
    SummaryBuffer,
)
from synapsedb.llm import ChatClient, LLMSettings

TURNS = [
    ("user", "I am planning a trip to Hawaii in March with my sister."),
    ("assistant", "Lovely! Which islands are you considering?"),
    ("user", "Maui and Kauai. Our budget is ten thousand dollars."),
    ("assistant", "That budget covers flights, two hotels and a car on both islands."),
    ("user", "My sister is vegetarian, so restaurants matter."),
    ("assistant", "Paia on Maui has several good vegetarian places."),
]


def test_summary_buffer_folds_with_the_model_incrementally(
    tmp_path: Path, local_llm_settings: LLMSettings
) -> None:
    with synapsedb.open(tmp_path / "d", llm=None) as db, ChatClient(local_llm_settings) as llm:
        ns = db.namespace("chat")
        sessions = Sessions(ns)
        for role, text in TURNS:
            sessions.append("trip", (role, text))
        strategy = SummaryBuffer(sessions, Summarizer(llm, max_tokens=40), max_tokens=80)
        first = strategy.load("trip")
        head = first[0]
        assert head.role == "system" and head.metadata is not None
        summary = head.metadata["summary"]
        assert summary["method"] == "llm" and summary["version"] == 1
        assert len(first) < len(TURNS) + 1  # older turns replaced by the model's summary
        sessions.append("trip", ("user", "Can you suggest a hike on Kauai?"))
        sessions.append("trip", ("assistant", "The Kalalau trail's first two miles are a classic."))
        second = strategy.load("trip")[0].metadata["summary"]  # type: ignore[index]
        assert second["version"] >= summary["version"]
        history = ns.history("session:trip", "summary")
        assert [f.version for f in history] == list(range(1, len(history) + 1))
        assert all(f.value["method"] == "llm" for f in history)


def test_the_context_manager_folds_with_the_model(local_llm_settings: LLMSettings) -> None:
    with ChatClient(local_llm_settings) as llm:
        manager = SmartContextManager(cheap_llm=llm, max_recent_tokens=60, max_summary_tokens=120)
        manager.set_system("You are a travel assistant.")
        for role, text in TURNS:
            manager.add(role, text)
        messages = manager.build()
        assert manager.summary_state.method == "llm" and manager.summary
        assert messages[0] == {"role": "system", "content": "You are a travel assistant."}
        assert sum(m["role"] != "system" for m in messages) < len(TURNS)
        assert isinstance(Message.of(messages[-1]), Message)
