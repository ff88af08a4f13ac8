"""The memory proxy end to end against a real model: an unmodified OpenAI client talks to
``synapsedb``'s proxy, whose upstream (and memory loop) is llama.cpp serving SmolLM2-135M
(tests/llm/conftest.py). tests/api/test_proxy.py runs the same paths against ScriptedUpstream,
a stand-in for a hosted model. A plumbing model: the tests check that answers flow and that
memory is recalled, injected and recorded, never the answers' quality."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

import synapsedb
from synapsedb import Database
from synapsedb.config import LLMSettings
from synapsedb.memory_loop import LoopSettings
from synapsedb.server import create_app
from tests.support.live_server import serve

USER = "user:42"


@pytest.fixture
def proxied(tmp_path: Path, local_llm_settings: LLMSettings) -> Iterator[tuple[str, Database]]:
    db = synapsedb.open(
        tmp_path / "d",
        durability="os",
        background_maintenance=False,
        llm=local_llm_settings,
        loop_settings=LoopSettings(rewrite="heuristic"),
    )
    db.namespace("travel").write(USER, "The user's budget for the Hawaii trip is $10,000")
    try:
        with serve(create_app(db, llm=local_llm_settings, auth="none")) as url:
            yield url, db
    finally:
        db.close()


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1/namespaces/travel", api_key="unused", max_retries=0, timeout=600
    )


def test_chat_completion_through_the_proxy(proxied: tuple[str, Database]) -> None:
    url, db = proxied
    raw = client(url).chat.completions.with_raw_response.create(
        model="smollm2-135m-instruct",
        user=USER,
        max_tokens=24,
        messages=[{"role": "user", "content": "What is my budget for the Hawaii trip?"}],
    )
    out = raw.parse()
    answer = out.choices[0].message.content
    print(f"\nSmolLM2 through the proxy: {answer!r}")
    assert answer and out.id
    lin = None  # the answer is recorded after it was sent: wait for its lineage
    for _ in range(200):
        try:
            lin = db.namespace("travel").lineage(raw.headers["x-synapsedb-answer-id"])
            break
        except synapsedb.NotFoundError:
            time.sleep(0.05)
    assert lin is not None
    assert any("$10,000" in c.content for c in lin.cited)


def test_streamed_chat_through_the_proxy(proxied: tuple[str, Database]) -> None:
    url, _db = proxied
    stream = client(url).chat.completions.create(
        model="smollm2-135m-instruct",
        user=USER,
        max_tokens=24,
        stream=True,
        messages=[{"role": "user", "content": "Remind me of my Hawaii budget."}],
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    print(f"\nSmolLM2 streamed through the proxy: {text!r}")
    assert text
