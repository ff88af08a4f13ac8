"""The first thing anyone tries with agent memory, at the defaults: tell the assistant something
through the memory proxy, then ask in a new conversation. The client is the official ``openai``
SDK, unmodified; the upstream is ScriptedUpstream, a stand-in for a hosted model that answers
chat turns and the memory loop's extraction by schema. Once in one server, asking at once (no
waiting for background work), and once across a ``kill -9`` of a real ``synapsedb serve``
right after its answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import synapsedb
from synapsedb.config import LLMSettings
from synapsedb.server import create_app
from tests.support.live_server import free_port, serve
from tests.support.proxy_env import injected
from tests.support.scripted_upstream import Reply, Request, ScriptedUpstream

ADA = "My name is Ada and I live in Lisbon"
ASK = "Where do I live?"
FACT = "The user lives in Lisbon"


def model(request: Request) -> Any:
    """Chat turns, and the extraction of the fact when the conversation holds it."""
    fmt = request.response_format or {}
    name = (fmt.get("json_schema") or {}).get("name")
    said = "\n".join(str(m.get("content")) for m in request.messages)
    if name == "memories":
        found = [
            {
                "type": "fact",
                "content": FACT,
                "entity": None,
                "confidence": 0.95,
                "valid_from": None,
                "source_turns": [1],
            }
        ]
        return {"memories": found if "Lisbon" in said.split("Conversation:")[-1] else []}
    if name == "decisions":
        return {"decisions": []}
    if name is not None:
        return {"query": ASK}
    if any("Lisbon" in block for block in injected(request.messages)):
        return Reply.text("You live in Lisbon.")
    return Reply.text("Nice to meet you, Ada! I'll keep that in mind.")


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1/namespaces/travel", api_key="unused", max_retries=0, timeout=60
    )


def tell_then_ask(url: str, upstream: ScriptedUpstream, kill: Any = None) -> str:
    """Conversation one says it; ``kill`` (if any) runs as soon as its answer is in; a new
    conversation asks. Returns the block of memories the model was given for the question."""
    with sdk(url) as client:
        first = client.chat.completions.create(
            model="m",
            user="user:ada",
            messages=[{"role": "user", "content": ADA}],
            extra_headers={"X-SynapseDB-Session": "first-chat"},
        )
    assert first.choices[0].message.content == "Nice to meet you, Ada! I'll keep that in mind."
    if kill is not None:
        url = kill()
    with sdk(url) as client:
        second = client.chat.completions.with_raw_response.create(
            model="m",
            user="user:ada",
            messages=[{"role": "user", "content": ASK}],
            extra_headers={"X-SynapseDB-Session": "second-chat"},
        )
    assert second.parse().choices[0].message.content == "You live in Lisbon."
    assert int(second.headers["x-synapsedb-memories"]) >= 1
    asked = [r for r in upstream.chat_requests() if r.response_format is None]
    (block,) = injected(asked[-1].messages)
    assert "Lisbon" in block
    # what the request holds is not injected back, nor the assistant's acknowledgement
    assert '"Where do I live?"' not in block and "keep that in mind" not in block
    return block


def test_told_in_one_conversation_injected_in_the_next(tmp_path: Path) -> None:
    with ScriptedUpstream(responder=model) as up:
        llm = LLMSettings(base_url=up.base_url, model="scripted", max_retries=0, timeout_s=10)
        db = synapsedb.open(tmp_path / "d", durability="os", background_maintenance=False, llm=llm)
        try:
            with serve(create_app(db, llm=llm, auth="none")) as url:
                tell_then_ask(url, up)  # asked at once: no drain, no sleep
        finally:
            db.close()


@pytest.fixture
def server_process(tmp_path: Path) -> Iterator[Any]:
    """Start ``synapsedb serve`` on the data directory (again, after a kill) with the
    scripted upstream; yields the starter, and stops what is left at the end."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(upstream: str) -> tuple[str, subprocess.Popen[bytes]]:
        port = free_port()
        env = {
            **os.environ,
            "SYNAPSEDB_LLM_BASE_URL": upstream,
            "SYNAPSEDB_LLM_MODEL": "m",
            "SYNAPSEDB_LLM_MAX_RETRIES": "0",
        }
        log = tmp_path / f"serve-{len(procs)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "synapsedb",
                    "serve",
                    "--data",
                    str(tmp_path / "d"),
                    "--port",
                    str(port),
                    "--auth",
                    "none",
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    return base, proc
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"synapsedb serve did not start: {log.read_text()}")

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)


def test_a_kill_right_after_the_answer_loses_nothing(server_process: Any) -> None:
    with ScriptedUpstream(responder=model) as up:
        url, proc = server_process(up.base_url)

        def kill() -> str:
            os.kill(proc.pid, signal.SIGKILL)  # no shutdown, no background work finished
            proc.wait(30)
            again, _ = server_process(up.base_url)
            return str(again)

        tell_then_ask(url, up, kill)
