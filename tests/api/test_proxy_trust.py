"""What a tenant of the memory proxy can learn or take: never the server's upstream API key or
the operator's upstream address (in an upstream's error body passed on, or in an error
message), and never another answer's lineage through an upstream id that repeats; and what a
proxied turn costs a cold upstream model (one call, a bounded extraction).

The official ``openai`` SDK is the client; the upstream is ScriptedUpstream, a stand-in for a
hosted model that records what it was sent (tests/support/proxy_env.py).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import synapsedb
from synapsedb.config import LLMSettings
from synapsedb.memory_loop import LoopSettings
from synapsedb.memory_loop.extract import answer_tokens
from synapsedb.server import create_app
from tests.support.live_server import serve
from tests.support.proxy_env import UPSTREAM_KEY, ProxyEnv
from tests.support.scripted_upstream import Reply, Request, ScriptedUpstream

ASK = [{"role": "user", "content": "What is my favourite colour?"}]


def leaks(proxy: ProxyEnv, text: str) -> list[str]:
    """The pieces of the operator's upstream that ``text`` shows."""
    pieces = [
        UPSTREAM_KEY,
        proxy.upstream.base_url,
        f"127.0.0.1:{proxy.upstream.port}",
        str(proxy.upstream.port),
    ]
    return [p for p in pieces if p in text]


@pytest.mark.parametrize("status", [400, 404, 409, 413, 422])
def test_an_upstream_refusal_passed_on_shows_neither_key_nor_address(
    proxy: ProxyEnv, status: int
) -> None:
    url = proxy.upstream.base_url
    echo = f"Invalid request to {url}/chat/completions with key {UPSTREAM_KEY}"
    escaped = json.dumps(
        {
            "error": {
                "message": echo,
                "type": "invalid_request_error",
                "param": "model",
                "code": None,
            }
        }
    ).replace("/", "\\/")
    proxy.upstream.push(Reply(status=status, body=escaped.encode()))  # "\/", as PHP writes it
    body = {"model": "m", "messages": ASK}
    r = httpx.post(
        f"{proxy.url}/v1/namespaces/acme/chat/completions",
        json=body,
        headers=proxy.auth(),
        timeout=30,
    )
    assert r.status_code == status and leaks(proxy, r.text) == []
    err = r.json()["error"]
    assert err["message"] == "Invalid request to [upstream]/chat/completions with key [redacted]"
    assert (err["type"], err["param"]) == ("invalid_request_error", "model")  # the rest as sent
    proxy.upstream.push(Reply.error(status, echo, kind="invalid_request_error"))
    with proxy.sdk() as client, pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="m", input="What is my favourite colour?")
    assert caught.value.status_code == status and leaks(proxy, str(caught.value.body)) == []


@pytest.mark.parametrize(
    "failure",
    [Reply.error(500, "engine crashed at {url}"), Reply(body=b"<h1>{url} is down</h1>")],
    ids=["500-echoing-the-address", "not-a-completion"],
)
def test_an_upstream_failure_is_a_502_that_does_not_name_the_upstream(
    proxy: ProxyEnv, failure: Reply
) -> None:
    url = proxy.upstream.base_url
    raw = failure.body
    body = (
        json.loads(json.dumps(raw).replace("{url}", url))
        if isinstance(raw, dict)
        else raw.replace(b"{url}", url.encode())
        if isinstance(raw, bytes)
        else raw
    )
    for stream in (False, True):
        proxy.upstream.push(Reply(status=failure.status, body=body))
        with proxy.sdk() as client, pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="m", messages=ASK, stream=stream)  # type: ignore[call-overload]
        assert caught.value.status_code == 502
        message = caught.value.body["message"]  # type: ignore[index]
        assert message.startswith("LLM upstream: ") and leaks(proxy, message) == [], message


def test_a_stream_that_breaks_says_so_without_the_upstream(proxy: ProxyEnv) -> None:
    proxy.upstream.push(Reply.text("a b c d e", drop_after=2))
    with (
        proxy.sdk() as client,
        pytest.raises(openai.APIError, match="the stream broke") as caught,
    ):
        list(client.chat.completions.create(model="m", stream=True, messages=ASK))
    assert leaks(proxy, str(caught.value)) == []


def test_an_upstream_that_repeats_its_id_keeps_each_answers_lineage(proxy: ProxyEnv) -> None:
    """Lineage is recorded under an id SynapseDB makes: the second answer neither loses its
    lineage to the first (recorded first) nor takes the first's."""
    texts = ["Teal.", "Still teal."]
    raws = [
        json.dumps(
            {
                "id": "chatcmpl-same",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": t},
                    }
                ],
            }
        ).encode()
        for t in texts
    ]
    proxy.upstream.push(*(Reply(body=r) for r in raws))
    got = []
    with proxy.sdk() as client:
        for who in ("user:one", "user:two"):
            got.append(
                client.chat.completions.with_raw_response.create(model="m", messages=ASK, user=who)
            )
    assert [g.content for g in got] == raws  # the upstream's bytes, its id included
    assert [g.parse().id for g in got] == ["chatcmpl-same", "chatcmpl-same"]
    ids = [g.headers["x-synapsedb-answer-id"] for g in got]
    assert len(set(ids)) == 2 and all(i.startswith("chatcmpl-sdb-") for i in ids)
    proxy.drain()
    for ident, text in zip(ids, texts, strict=True):
        lineage = proxy.call("GET", f"/answers/{ident}/lineage")
        assert lineage.status_code == 200 and lineage.json()["text"] == text
    assert proxy.call("GET", "/answers/chatcmpl-same/lineage").status_code == 404
    assert proxy.app.state.proxy.warnings.counts.get("record", 0) == 0


def test_a_proxied_turn_to_a_cold_model_costs_one_call_and_a_bounded_extraction(
    tmp_path: Path,
) -> None:
    """The first request to a cold local model: the proxied call that times out waiting is
    sent once (no retry beside it), and the memory loop's extraction of the proxied turns, in
    the server's background worker, asks for max_tokens from its schema."""
    cold = threading.Event()

    def model(request: Request) -> Any:
        fmt = (request.response_format or {}).get("json_schema") or {}
        if fmt.get("name") == "memories":
            return {"memories": []}
        if not cold.is_set():
            cold.set()
            return Reply.slow(30)  # still loading: past the server's timeout
        return Reply.text("Lisbon is lovely.")

    with ScriptedUpstream(responder=model) as up:
        llm = LLMSettings(base_url=up.base_url, model="m", max_retries=2, timeout_s=1.0)
        db = synapsedb.open(
            tmp_path / "d",
            durability="os",
            background_maintenance=False,
            llm=llm,
            loop_settings=LoopSettings(poll_s=0.05),
        )
        try:
            with serve(create_app(db, llm=llm)) as url:
                client = openai.OpenAI(base_url=f"{url}/v1", api_key="-", max_retries=0)
                ask = [{"role": "user", "content": "I moved to Lisbon last month."}]
                with pytest.raises(openai.APIStatusError) as err:
                    client.chat.completions.create(model="m", messages=ask)  # type: ignore[arg-type]
                assert err.value.status_code == 502 and len(up.chat_requests()) == 1
                out = client.chat.completions.create(model="m", messages=ask)  # type: ignore[arg-type]
                assert out.choices[0].message.content == "Lisbon is lovely."
                deadline = time.monotonic() + 30
                while not [r for r in up.chat_requests() if r.response_format]:
                    assert time.monotonic() < deadline, "the turns were never extracted"
                    time.sleep(0.02)
        finally:
            db.close()
    (extraction,) = [r for r in up.chat_requests() if r.response_format]
    assert extraction.body["max_tokens"] == answer_tokens(LoopSettings()) == 800
