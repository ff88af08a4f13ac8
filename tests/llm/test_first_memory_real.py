"""The first thing anyone tries, against a real local model (SmolLM2-135M on llama.cpp,
tests/llm/conftest.py) as the proxy's upstream and the memory loop's extractor: say it in one
conversation, ask in the next, at the defaults. tests/api/test_first_memory.py runs the same
story against ScriptedUpstream. A plumbing model: the test checks what is stored, recalled and
injected, never the quality of its answers or extractions."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import openai

import synapsedb
from synapsedb.config import LLMSettings
from synapsedb.server import create_app
from tests.support.live_server import serve

ADA = "My name is Ada and I live in Lisbon"


def test_told_in_one_conversation_injected_in_the_next(
    tmp_path: Path, local_llm_settings: LLMSettings
) -> None:
    db = synapsedb.open(
        tmp_path / "d", durability="os", background_maintenance=False, llm=local_llm_settings
    )
    try:
        with serve(create_app(db, llm=local_llm_settings, auth="none")) as url:
            base = f"{url}/v1/namespaces/travel"
            client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=600)
            started = time.monotonic()
            first = client.chat.completions.create(
                model="smollm2-135m-instruct",
                user="user:ada",
                max_tokens=32,
                messages=[{"role": "user", "content": ADA}],
                extra_headers={"X-SynapseDB-Session": "first-chat"},
            )
            print(
                f"\nfirst answer in {time.monotonic() - started:.1f} s: "
                f"{first.choices[0].message.content!r}"
            )
            second = client.chat.completions.with_raw_response.create(
                model="smollm2-135m-instruct",
                user="user:ada",
                max_tokens=32,
                messages=[{"role": "user", "content": "Where do I live?"}],
                extra_headers={"X-SynapseDB-Session": "second-chat"},
            )
            print(f"second answer: {second.parse().choices[0].message.content!r}")
            assert int(second.headers["x-synapsedb-memories"]) >= 1
            answer = second.headers["x-synapsedb-answer-id"]
            for _ in range(200):  # recorded just after the answer
                try:
                    lin = db.namespace("travel").lineage(answer)
                    break
                except synapsedb.NotFoundError:
                    time.sleep(0.05)
            assert any("Lisbon" in c.content for c in lin.cited)
            ready = httpx.get(f"{url}/readyz", timeout=10).json()
            print(f"memory loop: {ready.get('memory_loop')}")
    finally:
        db.close()
