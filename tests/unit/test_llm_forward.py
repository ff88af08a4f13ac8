"""AsyncChatClient.forward (what the memory proxy sends on) against ScriptedUpstream, a stand-in
for a hosted model speaking OpenAI's protocol over a real loopback socket.

Retries and the breaker run on a fake clock: tests assert the sleeps asked for, never wall time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from tests.support.scripted_upstream import Reply, ScriptedUpstream

from synapsedb.errors import UpstreamError, ValidationError
from synapsedb.llm import AsyncChatClient, Chunk, ChunkStream, Completion, LLMSettings
from synapsedb.llm.forward import SSEParser

KEY = "sk-forward-0123456789"
T = TypeVar("T")
BODY: dict[str, Any] = {
    "messages": [{"role": "user", "content": "Hi there"}],
    "temperature": 0.3,
    "user": "user:42",
    "some_future_option": {"kept": True},
}


class Harness:
    def __init__(self, upstream: ScriptedUpstream) -> None:
        self.upstream = upstream
        self.sleeps: list[float] = []
        self.now = 1000.0
        self.loop = asyncio.new_event_loop()
        self.clients: list[AsyncChatClient] = []

    def client(self, **overrides: Any) -> AsyncChatClient:
        options: dict[str, Any] = {
            "base_url": self.upstream.base_url,
            "model": "conf-model",
            "api_key": KEY,
            "timeout_s": 10.0,
            **overrides,
        }

        async def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)
            self.now += seconds

        made = AsyncChatClient(
            LLMSettings(**options), sleep=sleep, clock=lambda: self.now, random=lambda: 0.5
        )
        self.clients.append(made)
        return made

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)  # type: ignore[arg-type]

    def drain(self, stream: ChunkStream) -> list[Chunk]:
        async def collect() -> list[Chunk]:
            return [chunk async for chunk in stream]

        return self.run(collect())

    def close(self) -> None:
        for client in self.clients:
            self.run(client.aclose())
        self.loop.close()


@pytest.fixture
def h() -> Iterator[Harness]:
    with ScriptedUpstream() as up:
        harness = Harness(up)
        yield harness
        harness.close()


def test_a_whole_answer_is_the_upstreams_bytes_and_the_body_goes_as_it_is(h: Harness) -> None:
    h.upstream.push(Reply.text("Hello from upstream"))
    llm = h.client()
    got = h.run(llm.forward(BODY))
    assert isinstance(got, Completion) and got.status == 200
    assert got.text == "Hello from upstream" and got.body is not None
    assert json.loads(got.raw) == got.body and got.body["object"] == "chat.completion"
    (req,) = h.upstream.chat_requests()
    assert req.body == {**BODY, "model": "conf-model"}  # every field kept, the model added
    assert req.headers["authorization"] == f"Bearer {KEY}"
    h.upstream.push(Reply.text("again"))
    h.run(llm.forward({**BODY, "model": "callers-model"}))
    assert h.upstream.chat_requests()[1].body["model"] == "callers-model"
    h.upstream.push(Reply.text("none"))
    h.run(h.client(model="").forward(BODY))
    assert "model" not in h.upstream.chat_requests()[2].body


def test_a_stream_yields_each_event_as_sent(h: Harness) -> None:
    h.upstream.push(Reply.text("one two three", chunks=("one ", "two ", "three")))
    stream = h.run(h.client().forward({**BODY, "stream": True}))
    assert isinstance(stream, ChunkStream) and stream.status == 200
    chunks = h.drain(stream)
    assert chunks[-1].done and chunks[-1].value is None
    assert "".join(c.text for c in chunks) == "one two three"
    assert all(json.loads(c.data) == c.value for c in chunks[:-1])
    assert len({c.id for c in chunks[:-1]}) == 1 and chunks[0].id is not None
    (req,) = h.upstream.chat_requests()
    assert req.body["stream"] is True and req.headers["accept"] == "text/event-stream"


def test_failures_before_the_first_byte_are_retried_then_streamed(h: Harness) -> None:
    h.upstream.push(Reply.error(503), Reply.error(429), Reply.text("finally here"))
    stream = h.run(h.client().forward({**BODY, "stream": True}))
    assert isinstance(stream, ChunkStream)
    assert "".join(c.text for c in h.drain(stream)) == "finally here"
    assert len(h.upstream.chat_requests()) == 3 and h.sleeps == [0.25, 0.5]


@pytest.mark.parametrize("stream", [False, True])
def test_a_forward_that_times_out_waiting_is_sent_once(h: Harness, stream: bool) -> None:
    """The caller's generation is still running upstream: no second copy of it."""
    h.upstream.push(Reply.slow(60), Reply.text("never sent"))
    llm = h.client(timeout_s=0.2, max_retries=2)
    with pytest.raises(UpstreamError, match="timed out waiting for the answer") as err:
        h.run(llm.forward({**BODY, "stream": stream}))
    assert err.value.attempts == 1 and "not retried" in err.value.message
    assert len(h.upstream.chat_requests()) == 1 and h.sleeps == [] and h.upstream.pending == 1


def test_a_dead_upstream_is_an_upstream_error_and_opens_the_breaker(h: Harness) -> None:
    llm = h.client(max_retries=0, breaker_failures=2)
    for _ in range(2):
        h.upstream.push(Reply.error(500, "boom"))
        with pytest.raises(UpstreamError) as err:
            h.run(llm.forward({**BODY, "stream": True}))
        assert err.value.status == 500 and "boom" in err.value.message
    with pytest.raises(UpstreamError) as err:
        h.run(llm.forward(BODY))
    assert err.value.breaker_open and len(h.upstream.chat_requests()) == 2  # nothing sent
    port = h.upstream.port
    h.upstream.close()
    gone = h.client(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(UpstreamError, match="unreachable"):
        h.run(gone.forward(BODY))


def test_a_stream_that_breaks_part_way_raises_and_counts_as_a_failure(h: Harness) -> None:
    h.upstream.push(Reply.text("a b c d e f", drop_after=2))
    llm = h.client(breaker_failures=1)
    stream = h.run(llm.forward({**BODY, "stream": True}))
    assert isinstance(stream, ChunkStream) and llm.breaker_state == "closed"
    seen: list[str] = []

    async def read() -> None:
        async for chunk in stream:
            seen.append(chunk.text)

    with pytest.raises(UpstreamError) as err:
        h.run(read())
    assert err.value.details["broken"] is True and "".join(seen) == "a b "
    assert len(h.upstream.chat_requests()) == 1  # never retried once events were given out
    assert llm.breaker_state == "open"


def test_a_4xx_the_request_caused_is_passed_on_not_retried(h: Harness) -> None:
    h.upstream.push(
        Reply.error(
            404, "The model `nope` does not exist", kind="invalid_request_error", param="model"
        )
    )
    got = h.run(h.client().forward({**BODY, "stream": True, "model": "nope"}))
    assert isinstance(got, Completion) and got.status == 404 and got.body is not None
    assert got.body["error"]["param"] == "model" and len(h.upstream.chat_requests()) == 1


def test_a_stream_asked_for_but_answered_whole_is_a_completion(h: Harness) -> None:
    h.upstream.push(
        Reply(
            body={
                "id": "c1",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}}],
            }
        )
    )
    got = h.run(h.client().forward({**BODY, "stream": True}))
    assert isinstance(got, Completion) and got.text == "whole"


def test_a_2xx_that_is_not_json_is_an_upstream_error(h: Harness) -> None:
    h.upstream.push(Reply(body=b"<html>gateway</html>"))
    llm = h.client(breaker_failures=1)
    with pytest.raises(UpstreamError, match="not a chat completion"):
        h.run(llm.forward(BODY))
    assert llm.breaker_state == "open"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([1], "body"),
        ({}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({**BODY, "stream": "yes"}, "stream"),
        ({**BODY, "model": 7}, "model"),
    ],
)
def test_a_body_that_is_not_a_chat_request_sends_nothing(h: Harness, body: Any, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        h.run(h.client().forward(body))
    assert err.value.details["field"] == field and h.upstream.requests == []


def test_unconfigured_forward_raises_at_once(h: Harness) -> None:
    with pytest.raises(UpstreamError) as err:
        h.run(h.client(base_url="").forward(BODY))
    assert err.value.details["configured"] is False


STREAM = (
    b': keep-alive\r\n\r\nevent: note\r\ndata: {"a": 1}\r\n\r\n'
    b'data: line one\ndata: line two\n\ndata:{"b":2}\n\ndata: [DONE]\n\n'
)


def test_the_sse_parser_at_every_split_point() -> None:
    expected = [
        (b'{"a": 1}', {"a": 1}, "note"),
        (b"line one\nline two", None, None),
        (b'{"b":2}', {"b": 2}, None),
        (b"[DONE]", None, None),
    ]
    for cut in range(len(STREAM) + 1):
        parser = SSEParser()
        got = parser.feed(STREAM[:cut]) + parser.feed(STREAM[cut:]) + parser.close()
        assert [(c.data, c.value, c.event) for c in got] == expected, cut
    assert [c.data for c in SSEParser().feed(b"data: tail")] == []
    tail = SSEParser()
    tail.feed(b"data: tail")
    assert [c.data for c in tail.close()] == [b"tail"]


def test_the_sse_parser_refuses_an_endless_event() -> None:
    parser = SSEParser()
    with pytest.raises(ValueError, match="over"):
        for _ in range(2000):
            parser.feed(b"data: " + b"x" * 1000 + b"\n")


def test_events_answering_a_request_that_did_not_stream_are_an_upstream_error() -> None:
    """A misbehaving upstream that streams anyway: the caller asked for one JSON answer, so it
    gets an error, not events it cannot read."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            content=b'data: {"id": "x"}\n\ndata: [DONE]\n\n',
            headers={"content-type": "text/event-stream"},
        )

    async def call() -> Any:
        async with AsyncChatClient(
            LLMSettings(base_url="http://upstream.test/v1"), transport=httpx.MockTransport(handler)
        ) as llm:
            return await llm.forward(BODY)

    with pytest.raises(UpstreamError, match="not a chat completion"):
        asyncio.run(call())


def test_allowed_models_limit_what_a_caller_may_ask_for(h: Harness) -> None:
    llm = h.client(allowed_models="gpt-4o-mini, small ,")
    assert llm.settings.models == {"gpt-4o-mini", "small", "conf-model"}
    with pytest.raises(ValidationError) as exc:
        h.run(llm.forward({**BODY, "model": "gpt-4-expensive"}))
    assert exc.value.field == "model" and "gpt-4o-mini" in exc.value.message
    assert h.upstream.chat_requests() == []  # refused before anything was sent
    for allowed in ("small", "conf-model", None):  # listed, configured, or none named
        h.upstream.push(Reply.text("ok"))
        body = BODY if allowed is None else {**BODY, "model": allowed}
        h.run(llm.forward(body))
    assert [r.body["model"] for r in h.upstream.chat_requests()] == [
        "small",
        "conf-model",
        "conf-model",
    ]
    assert h.client().settings.models == frozenset()  # no list: any model
