"""One tenant cannot shut the memory proxy off for another: each tenant has its own circuit
breaker for the upstream and its own share of the calls in flight, and the output tokens any
request may ask for are capped by the server.

A real server on loopback, the official ``openai`` SDK as each tenant's client, and
ScriptedUpstream, a stand-in for a hosted model: tenant B's requests (their text says
``flood``) get an answer that never comes in time (or one held until the test lets it go),
tenant A's an ordinary one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.proxy_env import ProxyEnv, start_proxy
from tests.support.scripted_upstream import Reply, Request

BREAKER = 3  # consecutive failures that open a tenant's breaker
SHARE = 4  # upstream calls a tenant may have in flight
ASK = [{"role": "user", "content": "What is my favourite colour?"}]
FLOOD = [{"role": "user", "content": "flood: write a novel"}]


class Upstream:
    """What the scripted upstream answers: B's flood slowly (``held``: until released)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.held = False

    def __call__(self, request: Request) -> Reply:
        if "flood" in str(request.messages[-1].get("content")):
            if self.held:
                self.release.wait(30)
                return Reply.text("a flood answer")
            return Reply.slow(30)  # past timeout_s: a read timeout
        return Reply.text("Teal.")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyEnv, Upstream]]:
    script = Upstream()
    path: Path = tmp_path_factory.mktemp("tenants") / "d"
    with start_proxy(
        path,
        breaker_failures=BREAKER,
        breaker_cooldown_s=300,
        timeout_s=1.0,
        max_retries=2,
        proxy_tenant_calls=SHARE,
    ) as proxy:
        proxy.upstream.responder = script
        yield proxy, script
        script.release.set()


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Wait for background state to settle (a bounded wait, not a timing assertion)."""
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def ask(proxy: ProxyEnv, who: str, messages: list[dict[str, str]], **kw: Any) -> Any:
    with proxy.sdk(who) as client:
        return client.chat.completions.create(model="m", messages=messages, **kw)  # type: ignore[arg-type]


def test_a_tenants_flood_of_timeouts_opens_only_its_own_breaker(
    env: tuple[ProxyEnv, Upstream],
) -> None:
    proxy, _ = env
    tenants = proxy.app.state.proxy.tenants
    outcomes: list[str] = []
    for i in range(BREAKER + 3):  # B: each request times out upstream, then is refused
        with pytest.raises(openai.APIStatusError) as err:
            ask(proxy, "b", FLOOD)
        assert err.value.status_code == 502
        outcomes.append("open" if "circuit breaker open" in err.value.message else "timeout")
        assert "not retried" in err.value.message or outcomes[-1] == "open"
        answer = ask(proxy, "a", ASK)  # A, between each of B's: answered
        assert answer.choices[0].message.content == "Teal.", i
    assert outcomes == ["timeout"] * BREAKER + ["open"] * 3
    floods = [r for r in proxy.upstream.chat_requests() if "flood" in str(r.messages[-1])]
    assert len(floods) == BREAKER  # sent once each (no retry), none while B's breaker is open
    assert tenants.breaker_state("tenant-b") == "open"
    assert tenants.breaker_state("tenant-a") == "closed"
    ready = httpx.get(f"{proxy.url}/readyz", timeout=10).json()
    assert ready["proxy"] == "ok"  # the upstream answers A: it is not down
    metrics = httpx.get(f"{proxy.url}/metrics", headers=proxy.auth("op"), timeout=10).text
    assert "synapsedb_proxy_breakers_open 1.0" in metrics


def test_a_tenant_holds_at_most_its_share_of_calls_and_the_other_is_served(
    tmp_path: Path,
) -> None:
    script = Upstream()
    script.held = True  # A's flood is answered only when the test says
    with start_proxy(tmp_path / "d", timeout_s=60, proxy_tenant_calls=SHARE) as proxy:
        proxy.upstream.responder = script
        tenants = proxy.app.state.proxy.tenants
        try:
            with ThreadPoolExecutor(SHARE) as pool:
                held = [pool.submit(ask, proxy, "a", FLOOD) for _ in range(SHARE)]
                wait_until(lambda: tenants.in_flight("tenant-a") == SHARE, "share not taken")
                # one more, with another of tenant-a's keys (the share is the tenant's)
                with (
                    proxy.sdk("a_only", ns="only") as client,
                    pytest.raises(openai.RateLimitError) as err,
                ):
                    client.chat.completions.create(model="m", messages=ASK)
                assert f"proxy_tenant_calls={SHARE}" in err.value.message
                assert int(err.value.response.headers["retry-after"]) >= 1
                assert ask(proxy, "b", ASK).choices[0].message.content == "Teal."  # B served
                script.release.set()
                answers = [f.result().choices[0].message.content for f in held]
            assert answers == ["a flood answer"] * SHARE
            wait_until(lambda: tenants.calls() == 0, "a place was not given back")
            assert ask(proxy, "a", ASK).choices[0].message.content == "Teal."
        finally:
            script.release.set()


def test_every_way_an_upstream_call_ends_gives_its_place_back(
    env: tuple[ProxyEnv, Upstream],
) -> None:
    proxy, _ = env
    tenants = proxy.app.state.proxy.tenants
    proxy.upstream.push(
        Reply.text("a b c d e", chunks=("a ", "b ", "c ", "d ", "e")),  # a whole stream
        Reply.text("a b c d e", drop_after=2),  # a stream that breaks
        Reply.error(404, "no such model", kind="invalid_request_error"),  # a refusal
        Reply.error(500, "boom"),  # a failure (not retried)
        Reply.text("x " * 200, chunk_delay_s=0.01),  # a stream the client leaves
    )
    with proxy.sdk("a") as client:
        assert (
            "".join(
                c.choices[0].delta.content or ""
                for c in client.chat.completions.create(model="m", messages=ASK, stream=True)
                if c.choices
            )
            == "a b c d e"
        )
        with pytest.raises(openai.APIError):
            list(client.chat.completions.create(model="m", messages=ASK, stream=True))
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="m", messages=ASK)
        with pytest.raises(openai.APIStatusError):
            client.chat.completions.create(model="m", messages=ASK)
    body = {"model": "m", "messages": ASK, "stream": True}
    with httpx.stream(
        "POST",
        f"{proxy.url}/v1/namespaces/acme/chat/completions",
        json=body,
        headers=proxy.auth("a"),
        timeout=30,
    ) as r:
        next(r.iter_lines())  # one event, then the client hangs up
    wait_until(lambda: tenants.calls() == 0, "a place was not given back")
    assert proxy.upstream.pending == 0


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/chat/completions", {"messages": ASK, "max_tokens": 4097}, "max_tokens"),
        (
            "/chat/completions",
            {"messages": ASK, "max_completion_tokens": 10**9},
            "max_completion_tokens",
        ),
        ("/chat/completions", {"messages": ASK, "max_tokens": "lots"}, "max_tokens"),
        ("/chat/completions", {"messages": ASK, "max_tokens": 0}, "max_tokens"),
        ("/chat/completions", {"messages": ASK, "max_tokens": True}, "max_tokens"),
        ("/responses", {"input": "hi", "max_output_tokens": 5000}, "max_output_tokens"),
        ("/responses", {"input": "hi", "max_output_tokens": 2.5}, "max_output_tokens"),
    ],
)
def test_output_tokens_over_the_servers_cap_are_a_400_naming_field_and_limit(
    env: tuple[ProxyEnv, Upstream], path: str, body: dict[str, Any], field: str
) -> None:
    proxy, _ = env
    proxy.upstream.requests.clear()
    r = proxy.call("POST", path, "a", json={"model": "m", **body})
    err = r.json()["error"]
    assert r.status_code == 400 and err["param"] == field, r.text
    if isinstance(body.get(field), int) and not isinstance(body[field], bool) and body[field]:
        assert err["message"] == (
            f"{field}: {body[field]} is over this server's limit of 4096 output tokens"
        )
    assert proxy.upstream.requests == []  # nothing sent, nothing recalled
    assert proxy.app.state.proxy.tenants.calls() == 0


def test_output_tokens_at_the_cap_go_through_as_asked(env: tuple[ProxyEnv, Upstream]) -> None:
    proxy, _ = env
    proxy.upstream.requests.clear()
    assert ask(proxy, "a", ASK, max_tokens=4096).choices[0].message.content == "Teal."
    with proxy.sdk("a") as client:
        out = client.responses.create(
            model="m", input="What is my favourite colour?", max_output_tokens=4096
        )
    assert out.output_text == "Teal."
    assert [r.body["max_tokens"] for r in proxy.upstream.chat_requests()] == [4096, 4096]
