"""The memory proxy's chat completions with the official ``openai`` SDK as an unmodified client,
against a real server on loopback whose upstream is ScriptedUpstream: a stand-in for a hosted
model speaking OpenAI's protocol over a real socket (what it was sent is recorded).

The ``proxy`` fixture (tests/api/conftest.py, tests/support/proxy_env.py): one server per
module, two tenants' keys.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.config import LLMSettings
from synapsedb.errors import error_from_code
from synapsedb.server import create_app
from tests.support.proxy_env import UPSTREAM_KEY, ProxyEnv, injected
from tests.support.scripted_upstream import Reply, ScriptedUpstream

BUDGET = "Alice's budget for the Hawaii trip is 5000 dollars"
ASK = "What is my budget for the Hawaii trip?"


# -- chat completions ---------------------------------------------------------------------------


def test_a_completion_gets_memory_and_is_the_upstreams_answer_byte_for_byte(
    proxy: ProxyEnv,
) -> None:
    mid = proxy.seed("user:alice", BUDGET)
    raw = (
        b'{"id": "chatcmpl-up-1",  "object": "chat.completion", "created": 1, "model": "m1",'
        b' "choices": [{"index": 0, "message": {"role": "assistant", "content": '
        b'"Your budget is $5000."}, "finish_reason": "stop"}],'
        b' "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}}'
    )
    proxy.upstream.push(Reply(body=raw))
    asked = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": ASK}]
    with proxy.sdk() as client:
        got = client.chat.completions.with_raw_response.create(
            model="gpt-test",
            messages=asked,
            user="user:alice",  # type: ignore[arg-type]
            extra_headers={"X-SynapseDB-Session": "trip-1"},
        )
    assert got.content == raw  # the upstream's bytes, unchanged
    completion = got.parse()
    assert completion.id == "chatcmpl-up-1"
    assert completion.choices[0].message.content == "Your budget is $5000."
    ident = got.headers["x-synapsedb-answer-id"]  # SynapseDB's id, not the upstream's
    assert ident.startswith("chatcmpl-sdb-")
    assert got.headers["x-synapsedb-memories"] == "1"
    (sent,) = proxy.upstream.chat_requests()
    assert sent.messages[0] == asked[0] and sent.messages[2] == asked[1]  # memory after system
    (context,) = injected(sent.messages)
    assert sent.messages[1]["content"] == context and mid in context and BUDGET in context
    assert sent.body["model"] == "gpt-test" and sent.body["user"] == "user:alice"
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # never the caller's key
    proxy.drain()
    lineage = proxy.call("GET", f"/answers/{ident}/lineage").json()
    assert [m["id"] for m in lineage["cited"]] == [mid]
    assert mid in {h["id"] for q in lineage["queries"] for h in q["hits"]}
    assert lineage["text"] == "Your budget is $5000." and lineage["agent"] == "proxy"
    turns = proxy.call("GET", "/events", params={"stream": "session:trip-1"}).json()
    assert [(e["data"]["role"], e["content"]) for e in turns] == [
        ("user", ASK),
        ("assistant", "Your budget is $5000."),
    ]
    assert {e["entity"] for e in turns} == {"user:alice"}


def test_a_streamed_completion_passes_the_upstreams_events_unchanged(proxy: ProxyEnv) -> None:
    mid = proxy.seed("user:sam", "Sam is allergic to peanuts")
    proxy.upstream.push(Reply.text("No peanuts for you.", chunks=("No ", "peanuts ", "for you.")))
    with proxy.sdk() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-test",
            stream=True,
            user="user:sam",
            messages=[{"role": "user", "content": "Am I allergic to peanuts?"}],
        )
        chunks = list(raw.parse())
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "No peanuts for you."
    )
    assert len({c.id for c in chunks}) == 1
    (sent,) = proxy.upstream.chat_requests()
    assert sent.stream and mid in injected(sent.messages)[0]
    proxy.drain()
    lineage = proxy.call("GET", f"/answers/{raw.headers['x-synapsedb-answer-id']}/lineage").json()
    assert [m["id"] for m in lineage["cited"]] == [mid]
    assert lineage["text"] == "No peanuts for you."


def test_streamed_event_bytes_are_the_upstreams(proxy: ProxyEnv) -> None:
    """The upstream writes ``json.dumps`` (", " and ": " separators); a proxy that decoded and
    re-encoded the chunks would write compact JSON instead."""
    proxy.upstream.push(Reply.text("one two", chunks=("one ", "two")))
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Count."}]}
    with httpx.stream(
        "POST",
        f"{proxy.url}/v1/namespaces/acme/chat/completions",
        json=body,
        headers=proxy.auth(),
        timeout=30,
    ) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        data = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]" and len(data) == 5  # role, two pieces, finish, [DONE]
    for payload in data[:-1]:
        assert payload == json.dumps(json.loads(payload))
        assert json.loads(payload)["object"] == "chat.completion.chunk"


def test_the_default_namespace_route(proxy: ProxyEnv) -> None:
    mid = proxy.seed("user:dee", "Dee's favourite colour is teal", ns="default")
    proxy.upstream.push(Reply.text("Teal."))
    with proxy.sdk(ns=None) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="m",
            messages=[{"role": "user", "content": "What is my favourite colour?"}],
            extra_headers={"X-SynapseDB-Entity": "user:dee"},
        )
    assert raw.parse().choices[0].message.content == "Teal."
    assert mid in injected(proxy.upstream.chat_requests()[0].messages)[0]
    proxy.drain()
    ident = raw.headers["x-synapsedb-answer-id"]
    assert proxy.call("GET", f"/answers/{ident}/lineage", ns="default").status_code == 200


def test_small_talk_needs_no_memory_and_still_gets_its_lineage(proxy: ProxyEnv) -> None:
    proxy.seed("user:default", "The default user likes thanks")
    proxy.upstream.push(Reply.text("You're welcome!"))
    with proxy.sdk() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": "thanks!"}]
        )
    assert injected(proxy.upstream.chat_requests()[0].messages) == []
    proxy.drain()
    lineage = proxy.call("GET", f"/answers/{raw.headers['x-synapsedb-answer-id']}/lineage").json()
    assert lineage["queries"] == [] and lineage["text"] == "You're welcome!"


def test_the_first_turn_in_a_new_namespace_gets_its_lineage(proxy: ProxyEnv) -> None:
    """A recall in a namespace that does not exist yet finds nothing and logs no query; the
    answer is still recorded (it was "not recorded: query ... is not in the query log")."""
    proxy.upstream.push(Reply.text("Hello!"))
    with proxy.sdk(ns="brand-new") as client:
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": "What is my favourite colour?"}]
        )
    proxy.drain()
    ident = raw.headers["x-synapsedb-answer-id"]
    got = proxy.call("GET", f"/answers/{ident}/lineage", ns="brand-new")
    assert got.status_code == 200, got.text
    assert got.json()["queries"] == [] and got.json()["text"] == "Hello!"


def test_the_proxy_rewrites_with_the_heuristic_never_an_extra_model_call(
    proxy: ProxyEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even with the loop's LLM available (whose default rewrite is the LLM's), a proxied
    elliptic question borrows the earlier user turn without a model call before the answer."""
    loop = proxy.db.memory_loop
    assert loop is not None
    from synapsedb.llm import ChatClient

    llm = ChatClient(LLMSettings(base_url=proxy.upstream.base_url, model="m", max_retries=0))
    loop.stop()  # its worker would extract the stored turns with this LLM meanwhile
    monkeypatch.setattr(loop, "llm", llm)
    try:
        proxy.seed("user:rw", "The budget for the Hawaii trip is $10,000")
        proxy.upstream.push(Reply.text("It is $10,000."))
        with proxy.sdk() as client:
            client.chat.completions.create(
                model="m",
                user="user:rw",
                messages=[
                    {"role": "user", "content": "I am planning the Hawaii trip."},
                    {"role": "assistant", "content": "Lovely."},
                    {"role": "user", "content": "What's my budget for it?"},
                ],
            )
        (sent,) = proxy.upstream.chat_requests()  # the answer only: no rewrite request
        assert sent.response_format is None
        assert any("$10,000" in block for block in injected(sent.messages))
    finally:
        monkeypatch.setattr(loop, "llm", None)
        llm.close()
        loop.start(proxy.db)


def test_a_pasted_document_is_stored_cut_not_lost(proxy: ProxyEnv) -> None:
    """A user turn over what remember takes (a pasted document): the turn is stored with its
    start and a [...] mark, and the answer with it, instead of the whole turn failing."""
    doc = "Here is my itinerary: " + "day by day plans é " * 4000  # ~88 KB of UTF-8
    proxy.upstream.push(Reply.text("Got it."))
    with proxy.sdk() as client:
        client.chat.completions.create(
            model="m",
            user="user:paste",
            messages=[{"role": "user", "content": doc}],
            extra_headers={"X-SynapseDB-Session": "paste"},
        )
    proxy.drain()
    events = proxy.call("GET", "/events", params={"stream": "session:paste"}).json()
    assert [e["data"]["role"] for e in events] == ["user", "assistant"]
    stored = events[0]["content"]
    assert stored.startswith("Here is my itinerary") and stored.endswith(" [...]")
    assert len(stored.encode()) <= 32_000


# -- isolation -----------------------------------------------------------------------------------


def test_a_tenants_key_never_reaches_another_tenants_memories_or_namespaces(
    proxy: ProxyEnv,
) -> None:
    proxy.seed("user:tina", "Tina's passport number is X1234567", who="a")
    proxy.upstream.push(Reply.text("I do not know."))
    with proxy.sdk(who="b") as client:  # tenant B, its own namespace called "acme"
        client.chat.completions.create(
            model="m",
            user="user:tina",
            messages=[{"role": "user", "content": "What is my passport number?"}],
        )
    (sent,) = proxy.upstream.chat_requests()
    assert injected(sent.messages) == [] and "X1234567" not in json.dumps(sent.body)
    with proxy.sdk(who="a_only") as client, pytest.raises(openai.PermissionDeniedError) as err:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert err.value.body["code"] == "forbidden"  # type: ignore[index]
    with proxy.sdk(who="a_read") as client, pytest.raises(openai.PermissionDeniedError) as err:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "'write'" in err.value.message
    bad = openai.OpenAI(
        base_url=f"{proxy.url}/v1/namespaces/acme", api_key="sdb_bogus_x", max_retries=0
    )
    with bad, pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert len(proxy.upstream.chat_requests()) == 1  # refused requests never reach the model


# -- errors in OpenAI's shape ------------------------------------------------------------------


def openai_shape(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    assert type(error_from_code(err["code"], "x")).code == err["code"]
    return err  # type: ignore[no-any-return]


def test_an_upstream_failure_is_a_502_the_sdk_raises(proxy: ProxyEnv) -> None:
    proxy.upstream.push(Reply.error(503, "overloaded"), Reply.error(500, "boom"))
    with proxy.sdk() as client:
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert err.value.status_code == 502
        body = err.value.body
        assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}
        assert body["type"] == "upstream_error" and body["code"] == "upstream"
        assert body["param"] is None and "overloaded" in body["message"]
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(
                model="m", stream=True, messages=[{"role": "user", "content": "hi"}]
            )
        assert err.value.status_code == 502 and err.value.type == "upstream_error"


def test_an_upstream_4xx_the_request_caused_is_passed_on(proxy: ProxyEnv) -> None:
    proxy.upstream.push(
        Reply.error(
            404, "The model `nope` does not exist", kind="invalid_request_error", param="model"
        )
    )
    with proxy.sdk() as client, pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    assert err.value.param == "model" and "does not exist" in err.value.message


def test_a_stream_that_breaks_part_way_ends_with_an_error_event(proxy: ProxyEnv) -> None:
    proxy.upstream.push(Reply.text("a b c d e", drop_after=2))
    seen: list[str] = []
    ids: set[str] = set()
    with proxy.sdk() as client, pytest.raises(openai.APIError, match="broke"):
        raw = client.chat.completions.with_raw_response.create(
            model="m", stream=True, messages=[{"role": "user", "content": "Spell it."}]
        )
        for chunk in raw.parse():
            seen.append(chunk.choices[0].delta.content or "")
            ids.add(chunk.id)
    assert "".join(seen) == "a b " and len(ids) == 1
    proxy.drain()  # a broken answer is neither recorded nor remembered
    ident = raw.headers["x-synapsedb-answer-id"]
    assert proxy.call("GET", f"/answers/{ident}/lineage").status_code == 404


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "m", "stream": "yes", "messages": [{"role": "user", "content": "x"}]}, "stream"),
        ({"model": "m", "user": "", "messages": [{"role": "user", "content": "x"}]}, "user"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(
    proxy: ProxyEnv, body: dict[str, Any], param: str
) -> None:
    r = proxy.call("POST", "/chat/completions", json=body)
    assert r.status_code == 400
    err = openai_shape(r)
    assert err["param"] == param and err["type"] == "invalid_request_error"
    assert err["code"] == "validation" and param in err["message"]
    assert proxy.upstream.requests == []


def test_malformed_input_on_every_proxy_route_answers_openais_shape(proxy: ProxyEnv) -> None:
    routes = [
        p
        for r in proxy.app.routes
        if (p := getattr(r, "path", "")).endswith(("/chat/completions", "/responses"))
    ]
    assert len(routes) == 4
    for path in routes:
        url = proxy.url + path.replace("{ns}", "acme")
        for raw in (b"[1, 2]", b"{", b"null", b'{"a":' * 70 + b"1" + b"}" * 70):
            r = httpx.post(
                url, content=raw, headers={**proxy.auth(), "content-type": "application/json"}
            )
            assert r.status_code == 400, (path, raw[:10], r.text)
            openai_shape(r)
        r = httpx.post(url, content=b"{}", headers={**proxy.auth(), "content-type": "text/plain"})
        assert r.status_code == 415 and openai_shape(r)["code"] == "unsupported_media_type"
        r = httpx.post(url, json={})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert openai_shape(r)["type"] == "authentication_error"
    assert proxy.upstream.requests == []


def test_recall_failing_degrades_to_an_answer_without_memory(
    proxy: ProxyEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    loop = proxy.db.memory_loop
    assert loop is not None

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the index is on fire")

    monkeypatch.setattr(loop, "recall", broken)
    proxy.seed("user:ray", "Ray lives in Oslo")
    proxy.upstream.push(Reply.text("Somewhere."))
    with caplog.at_level(logging.WARNING, logger="synapsedb.proxy"), proxy.sdk() as client:
        out = client.chat.completions.create(
            model="m", user="user:ray", messages=[{"role": "user", "content": "Where do I live?"}]
        )
    assert out.choices[0].message.content == "Somewhere."
    assert injected(proxy.upstream.chat_requests()[0].messages) == []
    assert any("the index is on fire" in r.getMessage() for r in caplog.records)
    ready = httpx.get(f"{proxy.url}/readyz", headers=proxy.auth("op"), timeout=30).json()
    assert ready["proxy"]["upstream"] == "ok" and ready["proxy"]["memory_failures"]["recall"] >= 1
    text = httpx.get(f"{proxy.url}/metrics", headers=proxy.auth("op"), timeout=30).text
    assert 'synapsedb_proxy_upstream_state{state="ok"} 1.0' in text
    assert 'synapsedb_proxy_memory_failures_total{kind="recall"}' in text
    assert 'synapsedb_proxy_memory_failures_total{kind="recall"} 0.0' not in text


# -- without an upstream, or with a dead one ---------------------------------------------------


def test_no_llm_configured_is_a_503_saying_so(tmp_path: Path) -> None:
    with (
        synapsedb.open(tmp_path / "d", durability="os", embedder=None, llm=None) as db,
        TestClient(create_app(db)) as c,
    ):
        sdk = openai.OpenAI(
            base_url="http://testserver/v1/namespaces/acme",
            api_key="x",
            http_client=c,
            max_retries=0,
        )
        with pytest.raises(openai.APIStatusError) as err:
            sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert err.value.status_code == 503
        assert "SYNAPSEDB_LLM_BASE_URL" in err.value.message
        r = c.post("/v1/responses", json={"input": "hello"})
        assert r.status_code == 503 and openai_shape(r)["type"] == "service_unavailable"
        assert 'synapsedb_proxy_upstream_state{state="absent"} 1.0' in c.get("/metrics").text


def test_an_unreachable_upstream_is_a_502_and_the_breaker_answers_at_once(tmp_path: Path) -> None:
    with ScriptedUpstream() as gone:
        base = gone.base_url
    llm = LLMSettings(base_url=base, max_retries=0, breaker_failures=1, breaker_cooldown_s=600)
    with (
        synapsedb.open(tmp_path / "d", durability="os", embedder=None, llm=None) as db,
        TestClient(create_app(db, llm=llm)) as c,
    ):
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        first = c.post("/v1/chat/completions", json=body)
        assert first.status_code == 502 and "unreachable" in openai_shape(first)["message"]
        second = c.post("/v1/chat/completions", json={**body, "stream": True})
        err = openai_shape(second)
        assert second.status_code == 502 and "circuit breaker open" in err["message"]
        assert int(second.headers["retry-after"]) >= 1
        assert c.get("/readyz").json()["proxy"]["upstream"] == "unavailable"


def test_the_snippet_in_docs_proxy_md_runs(
    proxy: ProxyEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "proxy.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    snippet = code.group(1).replace('"http://127.0.0.1:7379"', repr(proxy.url))
    at = snippet.index("# which memories")  # that part waits for the background work
    ask, lineage = snippet[:at], snippet[at:]
    monkeypatch.setenv("SYNAPSEDB_API_KEY", proxy.tokens["a"])
    mid = proxy.seed("user:4321", "The budget for the Hawaii trip is 5000 dollars")
    proxy.upstream.push(
        Reply.text("5000 dollars."),
        Reply.text("Try the Moana."),
        Reply.text("Noted."),
        Reply.text("Friday."),
    )
    scope: dict[str, Any] = {}
    exec(ask, scope)
    proxy.drain()
    exec(lineage, scope)
    scope["client"].close()
    out = capsys.readouterr().out
    assert out.startswith("5000 dollars.\nTry the Moana.Friday.\n")
    assert "The budget for the Hawaii trip is 5000 dollars" in out
    assert mid in injected(proxy.upstream.chat_requests()[0].messages)[0]
