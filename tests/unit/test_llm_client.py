"""The LLM chat client (sync and async) against ScriptedUpstream, a stand-in for a hosted model
speaking OpenAI's protocol over a real loopback socket.

Retries and the breaker run on a fake clock: tests assert the sleeps asked for, never wall time.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.scripted_upstream import Reply, ScriptedUpstream

from synapsedb.errors import ClosedError, UpstreamError, ValidationError
from synapsedb.llm import AsyncChatClient, BreakerState, ChatClient, LLMSettings
from synapsedb.llm import protocol as llm_protocol
from synapsedb.llm.protocol import Send, Session

KEY = "sk-test-0123456789abcdef"
USER = [{"role": "user", "content": "I moved to Lisbon last week."}]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "kind": {"enum": ["fact", "preference"]},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["text", "kind", "confidence"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}
GOOD = {"facts": [{"text": "lives in Lisbon", "kind": "fact", "confidence": 0.9}]}
BAD = {"facts": [{"text": "lives in Lisbon", "kind": "fact", "confidence": "high"}]}


class FakeTime:
    """A monotonic clock that moves only when slept on (or advanced by the test)."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


class AsyncAsSync:
    """Runs an AsyncChatClient's coroutines on one private event loop, so one test body covers
    both clients (the same assertions hold for each)."""

    def __init__(self, client: AsyncChatClient) -> None:
        self.client = client
        self.loop = asyncio.new_event_loop()

    def chat(self, *args: Any, **kwargs: Any) -> Any:
        return self.loop.run_until_complete(self.client.chat(*args, **kwargs))

    def chat_json(self, *args: Any, **kwargs: Any) -> Any:
        return self.loop.run_until_complete(self.client.chat_json(*args, **kwargs))

    configured = property(lambda self: self.client.configured)
    settings = property(lambda self: self.client.settings)
    structured_mode = property(lambda self: self.client.structured_mode)
    breaker_state = property(lambda self: self.client.breaker_state)

    def __repr__(self) -> str:
        return repr(self.client)

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())

    def shutdown(self) -> None:
        self.close()
        self.loop.close()


Client = ChatClient | AsyncAsSync


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture(params=["sync", "async"])
def make(
    request: pytest.FixtureRequest, upstream: ScriptedUpstream, fake_time: FakeTime
) -> Iterator[Callable[..., Client]]:
    made: list[Client] = []

    def build(settings: LLMSettings | None = None, **overrides: Any) -> Client:
        options: dict[str, Any] = {
            "base_url": upstream.base_url,
            "model": "test-model",
            "api_key": KEY,
            "timeout_s": 10.0,
            **overrides,
        }
        settings = settings or LLMSettings(**options)
        timing = {"clock": fake_time.clock, "random": lambda: 0.5}
        client: Client
        if request.param == "sync":
            client = ChatClient(settings, sleep=fake_time.sleep, **timing)
        else:
            client = AsyncAsSync(AsyncChatClient(settings, sleep=fake_time.async_sleep, **timing))
        made.append(client)
        return client

    yield build
    for client in made:
        client.shutdown() if isinstance(client, AsyncAsSync) else client.close()


# -- plain chat --------------------------------------------------------------------------------


def test_chat_speaks_openai_wire_format(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply.text("Noted: Lisbon.", finish_reason="stop"))
    reply = make().chat(USER, temperature=0.3, max_tokens=50, stop="\n\n")
    assert (reply.content, reply.model, reply.finish_reason) == (
        "Noted: Lisbon.",
        "test-model",
        "stop",
    )
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (6, 2)
    assert reply.raw["object"] == "chat.completion"
    (sent,) = upstream.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body == {
        "model": "test-model",
        "messages": USER,
        "temperature": 0.3,
        "max_tokens": 50,
        "stop": ["\n\n"],
    }


def test_no_model_configured_sends_none(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    upstream.push("hi")
    make(model="").chat(USER)
    assert "model" not in upstream.requests[0].body


def test_bad_messages_are_refused_before_any_request(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    client = make()
    with pytest.raises(ValidationError) as err:
        client.chat([{"role": "wizard", "content": "x"}])
    assert err.value.field == "messages[0].role"
    with pytest.raises(ValidationError, match="messages"):
        client.chat("hello")
    with pytest.raises(ValidationError, match="temperature"):
        client.chat(USER, temperature=5)
    assert upstream.requests == []


def test_unconfigured_is_a_mode_not_an_error(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    settings = LLMSettings.from_env({})
    assert not settings.configured
    client = make(settings)
    assert client.configured is False
    with pytest.raises(UpstreamError) as err:
        client.chat(USER)
    assert err.value.details == {"configured": False, "attempts": 0}
    with pytest.raises(UpstreamError):
        client.chat_json(USER, SCHEMA, name="facts")
    assert upstream.requests == []


def test_a_closed_client_refuses_calls(make: Callable[..., Client]) -> None:
    client = make()
    client.close()
    with pytest.raises(ClosedError):
        client.chat(USER)


def test_a_malformed_answer_is_an_upstream_error(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply(status=200, body=b"<html>proxy login</html>"))
    with pytest.raises(UpstreamError, match="not a chat completion") as err:
        make().chat(USER)
    assert err.value.details == {"status": 200, "attempts": 1, "breaker_open": False}
    assert len(upstream.requests) == 1


# -- structured output -------------------------------------------------------------------------


def test_json_schema_mode(make: Callable[..., Client], upstream: ScriptedUpstream) -> None:
    upstream.push(Reply.json(GOOD))
    client = make()
    assert client.chat_json(USER, SCHEMA, name="facts") == GOOD
    (sent,) = upstream.requests
    assert sent.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "facts", "schema": SCHEMA, "strict": True},
    }
    assert sent.messages == USER  # the endpoint enforces the schema: no prompt needed
    assert client.structured_mode == "json_schema"


def test_falls_back_to_json_object_and_remembers(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    upstream.refuse_formats = frozenset({"json_schema"})
    upstream.push(Reply.json(GOOD), Reply.json(GOOD))
    client = make()
    assert client.chat_json(USER, SCHEMA, name="facts") == GOOD
    refused, used = upstream.requests
    assert refused.response_format is not None and refused.response_format["type"] == "json_schema"
    # the schema rides along for servers that turn it into a grammar (llama.cpp)
    assert used.response_format == {"type": "json_object", "schema": SCHEMA}
    assert used.messages[0]["role"] == "system" and '"confidence"' in used.messages[0]["content"]
    assert used.messages[1:] == USER
    assert client.structured_mode == "json_object"
    assert client.chat_json(USER, SCHEMA, name="facts") == GOOD  # straight to the working mode
    assert [r.response_format for r in upstream.requests[2:]] == [
        {"type": "json_object", "schema": SCHEMA}
    ]


def test_falls_back_to_plain_instructions(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    upstream.refuse_formats = frozenset({"json_schema", "json_object"})
    system = {"role": "system", "content": "You extract memories."}
    upstream.push(Reply.text(f"Here you go:\n```json\n{Reply.json(GOOD).content}\n```\nDone."))
    client = make()
    assert client.chat_json([system, *USER], SCHEMA, name="facts") == GOOD
    formats = [r.response_format for r in upstream.requests]
    assert [f and f["type"] for f in formats] == ["json_schema", "json_object", None]
    prompt = upstream.requests[-1].messages
    assert prompt[0]["content"].startswith("You extract memories.\n\n")  # extended, not replaced
    assert "JSON object only" in prompt[0]["content"] and len(prompt) == 2
    assert client.structured_mode == "prompt"


def test_configured_first_mode_skips_the_probe(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply.json(GOOD))
    assert make(structured_output="prompt").chat_json(USER, SCHEMA, name="facts") == GOOD
    assert [r.response_format for r in upstream.requests] == [None]


def test_a_schema_the_endpoint_rejects_is_not_a_fallback(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    message = "Invalid schema for response_format 'facts': 'additionalProperties' is required"
    upstream.push(Reply.error(400, message, kind="invalid_request_error", param="response_format"))
    client = make()
    with pytest.raises(UpstreamError, match="Invalid schema") as err:
        client.chat_json(USER, SCHEMA, name="facts")
    assert err.value.details["status"] == 400
    assert client.structured_mode == "json_schema"
    assert len(upstream.requests) == 1


def test_one_repair_try_fixes_an_invalid_answer(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply.json(BAD), Reply.json(GOOD))
    assert make().chat_json(USER, SCHEMA, name="facts") == GOOD
    first, repair = upstream.requests
    assert repair.messages[: len(USER)] == USER
    assert repair.messages[-2] == {"role": "assistant", "content": Reply.json(BAD).content}
    assert repair.messages[-1]["role"] == "user"
    assert "$.facts[0].confidence: expected number, got string" in repair.messages[-1]["content"]
    assert repair.response_format == first.response_format


def test_still_invalid_after_the_repair_raises(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    upstream.push(
        Reply.json(BAD), Reply.json({"facts": [{"text": "x", "kind": "rumour", "confidence": 2}]})
    )
    with pytest.raises(UpstreamError) as err:
        make().chat_json(USER, SCHEMA, name="facts")
    assert "after one repair try" in err.value.message
    assert (
        '$.facts[0].kind: expected one of "fact", "preference", got "rumour"' in err.value.message
    )
    assert "$.facts[0].confidence: 2 is more than the maximum 1" in err.value.message
    assert err.value.details["attempts"] == 2
    assert len(upstream.requests) == 2  # exactly one repair


def test_prose_is_repaired_and_a_refusal_is_reported(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply.text("Sure! The user lives in Lisbon."), Reply.json(GOOD))
    client = make()
    assert client.chat_json(USER, SCHEMA, name="facts") == GOOD
    assert "not JSON" in upstream.requests[1].messages[-1]["content"]
    upstream.push(Reply(refusal="I can't help with that."), Reply(refusal="Still no."))
    with pytest.raises(UpstreamError, match="the model refused: Still no"):
        client.chat_json(USER, SCHEMA, name="facts")


def test_truncated_answers_say_so(make: Callable[..., Client], upstream: ScriptedUpstream) -> None:
    cut = Reply.json(GOOD).content[:20]
    upstream.push(Reply.text(cut, finish_reason="length"), Reply.text(cut, finish_reason="length"))
    with pytest.raises(UpstreamError, match="cut off at max_tokens"):
        make().chat_json(USER, SCHEMA, name="facts", max_tokens=8)
    assert upstream.requests[0].body["max_tokens"] == 8


def test_chat_json_refuses_unusable_schemas_and_names(
    make: Callable[..., Client], upstream: ScriptedUpstream
) -> None:
    client = make()
    with pytest.raises(ValidationError) as err:
        client.chat_json(USER, {"type": "object", "properties": {"a": {"pattern": "x"}}}, name="f")
    assert err.value.field == "schema.properties.a.pattern"
    with pytest.raises(ValidationError, match="root"):
        client.chat_json(USER, {"type": "array"}, name="f")
    with pytest.raises(ValidationError) as err:
        client.chat_json(USER, SCHEMA, name="has spaces")
    assert err.value.field == "name"
    assert upstream.requests == []


# -- retries -----------------------------------------------------------------------------------


def test_refusals_are_retried_with_jittered_exponential_backoff(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    upstream.push(Reply.error(503), Reply.error(429), Reply.error(503), "finally")
    reply = make(max_retries=3, backoff_base_s=0.5, backoff_cap_s=1.5).chat(USER)
    assert reply.content == "finally"
    # random() = 0.5 times min(cap, base * 2**n): 0.5*0.5, 0.5*1.0, 0.5*1.5 (capped)
    assert fake_time.sleeps == [0.25, 0.5, 0.75]
    assert len(upstream.requests) == 4


@pytest.mark.parametrize("status", [500, 502, 504])
def test_a_5xx_that_may_have_done_the_work_is_not_retried(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime, status: int
) -> None:
    upstream.push(Reply.error(status, "boom"), "never sent")
    client = make(max_retries=3, breaker_failures=2)
    with pytest.raises(UpstreamError, match=f"answered {status}: boom [(]not retried") as err:
        client.chat(USER)
    assert (err.value.status, err.value.attempts, err.value.breaker_open) == (status, 1, False)
    assert fake_time.sleeps == [] and len(upstream.requests) == 1 and upstream.pending == 1
    assert client.breaker_state == BreakerState.CLOSED  # one failure counted of two


def test_retry_after_is_honoured(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    upstream.push(
        Reply.error(429, "slow down", retry_after=3),
        Reply(status=503, body=b"busy", headers={"retry-after-ms": "1250"}),
        "ok",
    )
    assert make(backoff_cap_s=5).chat(USER).content == "ok"
    assert fake_time.sleeps == [3.0, 1.25]


def test_a_retry_after_longer_than_the_cap_is_not_waited_for(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    upstream.push(Reply.error(429, "quota", retry_after=120), "never sent")
    with pytest.raises(UpstreamError, match="retry after 120 s") as err:
        make(backoff_cap_s=8).chat(USER)
    assert err.value.details == {
        "status": 429,
        "attempts": 1,
        "breaker_open": False,
        "retry_after": 120.0,
    }
    assert fake_time.sleeps == [] and upstream.pending == 1


def test_retries_run_out(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    upstream.push(*[Reply.error(503, "busy")] * 3)
    with pytest.raises(UpstreamError, match=r"answered 503: busy \(gave up after 3") as err:
        make(max_retries=2).chat(USER)
    assert (err.value.status, err.value.attempts, err.value.breaker_open) == (503, 3, False)
    assert len(fake_time.sleeps) == 2 and len(upstream.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_are_not_retried(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime, status: int
) -> None:
    upstream.push(Reply.error(status, "your request is wrong"), "never sent")
    client = make()
    with pytest.raises(UpstreamError, match=f"answered {status}: your request is wrong") as err:
        client.chat(USER)
    assert err.value.attempts == 1
    assert fake_time.sleeps == [] and len(upstream.requests) == 1
    assert client.breaker_state == BreakerState.CLOSED


def test_an_upstream_408_is_a_timeout_and_retried(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    upstream.push(Reply.error(408, "request timeout"), "ok")
    assert make().chat(USER).content == "ok"
    assert fake_time.sleeps == [0.25]


def test_a_connection_dropped_after_the_request_is_not_retried(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    """The upstream had the whole request: it may have crashed on it (a second one would crash
    it again) or still be working behind a gateway."""
    upstream.push(Reply.dropped(), "never sent")
    with pytest.raises(UpstreamError, match="connection broke before the answer") as err:
        make(max_retries=2).chat(USER)
    assert err.value.attempts == 1 and "not retried" in err.value.message
    assert fake_time.sleeps == [] and len(upstream.requests) == 1


def test_an_unreachable_upstream_is_an_upstream_error(
    make: Callable[..., Client], fake_time: FakeTime
) -> None:
    with ScriptedUpstream() as gone:
        url = gone.base_url
    with pytest.raises(UpstreamError, match="unreachable") as err:
        make(base_url=url, max_retries=1).chat(USER)
    assert err.value.attempts == 2 and len(fake_time.sleeps) == 1


def test_a_read_timeout_is_not_retried_the_model_is_still_generating(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    """A cold local model still writing its first answer: a second request would run beside
    it and double the load (it was retried twice, a 134 s first answer)."""
    upstream.push(Reply.slow(60), Reply.slow(60))  # cut short when the upstream closes
    with pytest.raises(UpstreamError, match="timed out waiting for the answer") as err:
        make(timeout_s=0.2, max_retries=2).chat(USER)
    assert "not retried" in err.value.message and err.value.attempts == 1
    assert len(upstream.requests) == 1 and fake_time.sleeps == [] and upstream.pending == 1


def test_a_request_that_could_not_connect_in_time_is_retried(
    make: Callable[..., Client], fake_time: FakeTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing reached the upstream: safe to send again."""
    import httpx

    sent: list[str] = []

    def refuse(self: Any, request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        raise httpx.ConnectTimeout("connect timed out", request=request)

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", refuse)

    async def refuse_async(self: Any, request: httpx.Request) -> httpx.Response:
        return refuse(self, request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", refuse_async)
    with pytest.raises(UpstreamError, match=r"timed out \(ConnectTimeout\) \(gave up after 3"):
        make(max_retries=2).chat(USER)
    assert len(sent) == 3 and len(fake_time.sleeps) == 2


# -- circuit breaker ---------------------------------------------------------------------------


def test_breaker_opens_then_costs_nothing_then_probes_and_closes(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    client = make(max_retries=0, breaker_failures=3, breaker_cooldown_s=30)
    upstream.push(*[Reply.error(503)] * 3)
    for i in range(3):
        with pytest.raises(UpstreamError) as err:
            client.chat(USER)
        assert err.value.breaker_open is (i == 2)
    assert client.breaker_state == BreakerState.OPEN
    upstream.push("not reached while open")
    fake_time.now += 29
    with pytest.raises(UpstreamError, match="circuit breaker open") as err:
        client.chat(USER)
    assert err.value.details == {"attempts": 0, "breaker_open": True, "retry_after": 1.0}
    assert len(upstream.requests) == 3  # no request while open
    fake_time.now += 1
    assert client.breaker_state == BreakerState.HALF_OPEN
    assert client.chat(USER).content == "not reached while open"  # the probe
    assert client.breaker_state == BreakerState.CLOSED


def test_a_failed_probe_reopens_the_breaker(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    client = make(max_retries=0, breaker_failures=1, breaker_cooldown_s=10)
    upstream.push(Reply.error(500), Reply.error(500), "later")
    with pytest.raises(UpstreamError):
        client.chat(USER)
    fake_time.now += 10
    with pytest.raises(UpstreamError) as err:
        client.chat(USER)  # the probe fails
    assert err.value.breaker_open and client.breaker_state == BreakerState.OPEN
    with pytest.raises(UpstreamError, match="circuit breaker open"):
        client.chat(USER)
    assert len(upstream.requests) == 2


def test_the_breaker_stops_retries_and_4xx_do_not_count(
    make: Callable[..., Client], upstream: ScriptedUpstream, fake_time: FakeTime
) -> None:
    client = make(max_retries=5, breaker_failures=2)
    upstream.push(Reply.error(503), Reply.error(400), Reply.error(503), "ok")
    with pytest.raises(UpstreamError, match="400"):
        client.chat(USER)  # 503 (1 failure), then 400: the upstream works, the count resets
    assert client.chat(USER).content == "ok"  # 503 (1 failure), then ok
    assert client.breaker_state == BreakerState.CLOSED
    upstream.push(*[Reply.error(503)] * 5)
    fake_time.sleeps.clear()
    with pytest.raises(UpstreamError, match="circuit breaker opened") as err:
        client.chat(USER)
    assert err.value.attempts == 2 and err.value.breaker_open and len(fake_time.sleeps) == 1


def test_an_abandoned_probe_lets_the_next_caller_probe(fake_time: FakeTime) -> None:
    """A probe cancelled mid-request (an asyncio task cancelled) must not wedge the breaker
    half-open with no probe ever finishing."""
    settings = LLMSettings(
        base_url="http://127.0.0.1:9/v1", breaker_failures=1, breaker_cooldown_s=5
    )
    session = Session(settings, clock=fake_time.clock, random=lambda: 0.5)
    session.breaker.fail()
    fake_time.now += 5
    steps = llm_protocol.chat(session, USER)
    assert isinstance(next(steps), Send)  # the probe is in flight
    assert session.breaker.admit() == (False, False)  # others are refused meanwhile
    steps.close()  # cancelled
    assert session.breaker.admit() == (True, True)


# -- secrets -----------------------------------------------------------------------------------


def test_the_api_key_never_shows(
    make: Callable[..., Client], upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    upstream.push(
        Reply.error(503, f"overloaded (key {KEY})"),
        Reply.error(401, f"Incorrect API key provided: {KEY}"),
    )
    client = make()
    with (
        caplog.at_level(logging.DEBUG, logger="synapsedb.llm"),
        pytest.raises(UpstreamError) as err,
    ):
        client.chat(USER)
    assert "Incorrect API key provided: [redacted]" in str(err.value)
    assert "overloaded (key [redacted])" in caplog.text  # the retry was logged, redacted
    shown = [
        str(err.value),
        repr(err.value.details),
        caplog.text,
        repr(client),
        repr(client.settings),
    ]
    assert not [s for s in shown if KEY in s]


def test_a_password_in_the_base_url_never_shows(make: Callable[..., Client]) -> None:
    with ScriptedUpstream() as gone:
        port = gone.port
    client = make(base_url=f"http://user:hunter2-pw@127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(UpstreamError) as err:
        client.chat(USER)
    assert "hunter2-pw" not in str(err.value) and "hunter2-pw" not in repr(client)
    assert "127.0.0.1" not in str(err.value) and f"127.0.0.1:{port}/v1" in repr(client)


@pytest.mark.parametrize(
    "failure",
    [
        Reply.error(500, "boom at {url}/chat/completions"),
        Reply.error(503, "busy"),
        Reply(body=b"<html>bad gateway at {url}</html>"),
        Reply.dropped(),
        Reply.slow(30),
    ],
    ids=["500-echoing-the-url", "503", "not-a-completion", "dropped", "timeout"],
)
def test_an_upstream_error_never_names_the_operators_upstream(
    make: Callable[..., Client],
    upstream: ScriptedUpstream,
    caplog: pytest.LogCaptureFixture,
    failure: Reply,
) -> None:
    """Its message reaches tenants (the proxy's 502, a job's recorded error): the address is
    the operator's, and is in the operator's log only."""
    body = failure.body
    if isinstance(body, dict):
        body = json.loads(json.dumps(body).replace("{url}", upstream.base_url))
    elif isinstance(body, bytes):
        body = body.replace(b"{url}", upstream.base_url.encode())
    upstream.push(dataclasses.replace(failure, body=body))
    client = make(max_retries=0, timeout_s=0.3)
    with (
        caplog.at_level(logging.WARNING, logger="synapsedb.llm"),
        pytest.raises(UpstreamError) as err,
    ):
        client.chat(USER)
    shown = f"{err.value} {err.value.details}"
    assert str(upstream.port) not in shown and "127.0.0.1" not in shown, shown
    assert str(err.value).startswith("LLM upstream: ")
    assert upstream.base_url in caplog.text  # the operator's log names it
    upstream.push("ok")
    client.chat(USER)  # closes the breaker's count for the next case
    with pytest.raises(UpstreamError, match="circuit breaker") as err:
        opened = make(max_retries=0, breaker_failures=1)
        upstream.push(Reply.error(503))
        with contextlib.suppress(UpstreamError):
            opened.chat(USER)
        opened.chat(USER)
    assert "127.0.0.1" not in str(err.value)


# -- settings ----------------------------------------------------------------------------------


def test_settings_from_env() -> None:
    env = {
        "SYNAPSEDB_LLM_BASE_URL": "http://localhost:8080/v1",
        "SYNAPSEDB_LLM_MODEL": "smollm2",
        "SYNAPSEDB_LLM_API_KEY": KEY,
        "SYNAPSEDB_LLM_TIMEOUT_S": "2.5",
        "SYNAPSEDB_LLM_MAX_RETRIES": "0",
        "SYNAPSEDB_LLM_BREAKER_FAILURES": "9",
        "SYNAPSEDB_LLM_STRUCTURED_OUTPUT": "json_object",
        "OPENAI_API_KEY": "sk-not-for-this-host",
    }
    s = LLMSettings.from_env(env)
    assert (s.base_url, s.model, s.api_key, s.timeout_s) == (
        "http://localhost:8080/v1",
        "smollm2",
        KEY,
        2.5,
    )
    assert (s.max_retries, s.breaker_failures, s.structured_output) == (0, 9, "json_object")
    assert s.configured and LLMSettings.env_var("base_url") == "SYNAPSEDB_LLM_BASE_URL"
    assert LLMSettings.from_env({"OPENAI_API_KEY": "sk-x"}).api_key == ""
    with pytest.raises(ValidationError, match="SYNAPSEDB_LLM_TIMEOUT_S: expected a number") as err:
        LLMSettings.from_env({"SYNAPSEDB_LLM_TIMEOUT_S": "soon"})
    assert err.value.field == "timeout_s"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"base_url": "localhost:8080"}, "base_url"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"backoff_cap_s": float("inf")}, "backoff_cap_s"),
        ({"breaker_failures": 0}, "breaker_failures"),
        ({"structured_output": "xml"}, "structured_output"),
        ({"proxy_max_tokens": 0}, "proxy_max_tokens"),
        ({"proxy_tenant_calls": True}, "proxy_tenant_calls"),
        ({"max_connections": 2.5}, "max_connections"),
        ({"nonsense": 1}, "nonsense"),
    ],
)
def test_settings_refuse_bad_values(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        LLMSettings().replace(**change)
    assert err.value.field == field


def test_llm_package_stays_above_the_engine() -> None:
    """synapsedb.llm imports nothing from the engine, server, storage or the remote client."""
    root = Path(__file__).resolve().parents[2] / "src" / "synapsedb" / "llm"
    forbidden = {"engine", "server", "storage", "index", "query", "client", "cli"}
    found = []
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.level == 2:  # from ..engine import x
                    names = [node.module]
                elif node.level == 0 and node.module.startswith("synapsedb."):
                    names = [node.module.removeprefix("synapsedb.")]
            elif isinstance(node, ast.Import):
                names = [
                    a.name.removeprefix("synapsedb.")
                    for a in node.names
                    if a.name.startswith("synapsedb.")
                ]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in forbidden]
    assert found == []
