"""ScriptedUpstream, the stand-in for a hosted model that other tests rely on, speaks OpenAI's
chat-completions wire format (checked here with plain httpx, no SynapseDB code)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from tests.support.scripted_upstream import Reply, Request, ScriptedUpstream

MESSAGES = [{"role": "user", "content": "Plan a trip to Hawaii"}]


def _events(text: str) -> list[Any]:
    out = []
    for block in text.split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            data = block.removeprefix("data: ")
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_answers_from_the_queue_then_the_responder_and_records_everything() -> None:
    seen: list[str] = []

    def responder(request: Request) -> str:
        seen.append(request.messages[-1]["content"])
        return f"echo: {request.messages[-1]['content']}"

    with ScriptedUpstream(["first", {"a": 1}], responder=responder) as up:
        url = f"{up.base_url}/chat/completions"
        bodies = [
            httpx.post(url, json={"model": "m", "messages": MESSAGES}).json() for _ in range(3)
        ]
        contents = [b["choices"][0]["message"]["content"] for b in bodies]
        assert contents == ["first", '{"a": 1}', "echo: Plan a trip to Hawaii"]
        assert bodies[0]["object"] == "chat.completion" and bodies[0]["model"] == "m"
        assert bodies[0]["choices"][0]["finish_reason"] == "stop"
        assert bodies[0]["usage"] == {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
        assert seen == ["Plan a trip to Hawaii"]
        assert [r.path for r in up.chat_requests()] == ["/v1/chat/completions"] * 3
        assert httpx.get(f"{up.base_url}/models").json()["data"][0]["id"] == "scripted-model"
        assert httpx.post(f"{up.base_url}/embeddings", json={}).status_code == 404
        assert len(up.requests) == 5 and len(up.chat_requests()) == 3


def test_an_exhausted_script_is_a_loud_500() -> None:
    with ScriptedUpstream() as up:
        resp = httpx.post(f"{up.base_url}/chat/completions", json={"messages": MESSAGES})
        assert resp.status_code == 500 and "no reply left" in resp.json()["error"]["message"]


def test_streaming_is_server_sent_events_ending_with_done() -> None:
    with ScriptedUpstream(
        [Reply.text("Aloha from Maui"), Reply(content="ab", chunks=("a", "b"))]
    ) as up:
        body = {
            "model": "m",
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        resp = httpx.post(f"{up.base_url}/chat/completions", json=body)
        assert resp.headers["content-type"] == "text/event-stream"
        events = _events(resp.text)
        assert events[-1] == "[DONE]"
        chunks = events[:-1]
        assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
        assert len({c["id"] for c in chunks}) == 1
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        assert text == "Aloha from Maui"
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
        body = {"messages": MESSAGES, "stream": True}
        events = _events(httpx.post(f"{up.base_url}/chat/completions", json=body).text)
        assert [e["choices"][0]["delta"].get("content") for e in events[1:3]] == ["a", "b"]
        assert "usage" not in events[-2]


def test_a_stream_can_be_cut_off() -> None:
    with ScriptedUpstream([Reply(content="one two three four", drop_after=2)]) as up:
        got: list[str] = []
        body = {"messages": MESSAGES, "stream": True}
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", f"{up.base_url}/chat/completions", json=body) as resp,
        ):
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    got.append(json.loads(line[6:])["choices"][0]["delta"].get("content", ""))
        assert got == ["", "one ", "two "]


def test_failures_it_can_simulate() -> None:
    script = [Reply.error(429, "slow down", retry_after=2), Reply.dropped(), Reply.slow(30)]
    with ScriptedUpstream(script) as up:
        url = f"{up.base_url}/chat/completions"
        resp = httpx.post(url, json={"messages": MESSAGES})
        assert (resp.status_code, resp.headers["retry-after"]) == (429, "2")
        assert resp.json()["error"]["message"] == "slow down"
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(url, json={"messages": MESSAGES})
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url, json={"messages": MESSAGES}, timeout=0.2)


def test_refusing_a_response_format_does_not_use_the_script() -> None:
    with ScriptedUpstream(["kept"], refuse_formats={"json_schema"}) as up:
        url = f"{up.base_url}/chat/completions"
        fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
        resp = httpx.post(url, json={"messages": MESSAGES, "response_format": fmt})
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "response_format"
        assert up.pending == 1
        ok = httpx.post(
            url, json={"messages": MESSAGES, "response_format": {"type": "json_object"}}
        )
        assert ok.json()["choices"][0]["message"]["content"] == "kept"
