"""``synapsedb demo --story hawaii`` against a real server whose upstream is ScriptedUpstream
(a stand-in for a hosted model): the memory loop extracts the budget from session A, and
session B, a new Responses chain, gets it injected and answered, with lineage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb.client import RemoteDatabase
from synapsedb.config import LLMSettings
from synapsedb.demo_hawaii import run_hawaii
from synapsedb.server import create_app
from tests.support.live_server import serve
from tests.support.scripted_upstream import Reply, Request, ScriptedUpstream


def model(request: Request) -> Any:
    """Extraction answers by its schema; chat answers with what the injected context says."""
    fmt = request.response_format or {}
    name = (fmt.get("json_schema") or {}).get("name")
    text = "\n".join(str(m.get("content")) for m in request.messages)
    if name == "memories":
        found = [
            {
                "type": "fact",
                "content": "The user's budget for the Hawaii trip is $10,000",
                "entity": None,
                "confidence": 0.95,
                "valid_from": None,
                "source_turns": [1],
            }
        ]
        return {"memories": found if "$10,000" in text.split("Conversation:")[-1] else []}
    if name is not None:
        return {"decisions": []} if name == "decisions" else {"query": "Hawaii trip budget"}
    memory = [
        m
        for m in request.messages
        if m["role"] == "system" and str(m["content"]).startswith("Memories about")
    ]
    if memory and "$10,000" in memory[0]["content"]:
        return Reply.text("Your budget for the Hawaii trip is $10,000!")
    return Reply.text("Lovely, tell me more.")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with ScriptedUpstream(responder=model) as up:
        llm = LLMSettings(base_url=up.base_url, model="scripted", max_retries=0, timeout_s=10)
        db = synapsedb.open(tmp_path / "d", durability="os", background_maintenance=False, llm=llm)
        try:
            with serve(create_app(db, llm=llm, auth="none")) as url:
                yield url
        finally:
            db.close()


def test_the_hawaii_story_through_the_proxy(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with RemoteDatabase(server) as db:
        answer_id = run_hawaii(db, server, None, "hawaii", wait_s=30)
        out = capsys.readouterr().out
        assert "memory] fact: The user's budget for the Hawaii trip is $10,000" in out
        session_b = out.split("session B")[1]
        assert "Your budget for the Hawaii trip is $10,000!" in session_b
        lin = db.namespace("hawaii").lineage(answer_id)
        assert any("$10,000" in c.content for c in lin.cited), json.dumps(str(lin))
