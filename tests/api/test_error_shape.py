"""One error shape over every route of the app (the list comes from the app's route table and
its OpenAPI document, not from this file): malformed input of every kind answers a 4xx whose
body is ``{"error": {"code", "message", "details"}}``, with a code of the error tree whose
``http_status`` is the answer's status; never a 500."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

import synapsedb
from synapsedb import errors
from synapsedb.server import create_app

NS = "/v1/namespaces/fuzz"
PATH_VALUES = {
    "{ns}": "fuzz",
    "{id}": "m1",
    "{answer_id}": "a1",
    "{sid}": "s1",
    "{asset}": "app.js",
}
LIVE = ("/events/follow", "/changes")  # endless feeds: asked to end at once when they start
# The memory proxy answers in OpenAI's error shape (with the same codes), for OpenAI's SDKs:
# tests/api/test_proxy.py sends these routes the same malformed bodies.
OPENAI_SHAPED = ("/chat/completions", "/responses")

# A valid body per JSON body route, so that each bad field is seen by its own check (a new
# body route without one fails test_every_body_route_has_a_valid_body).
VALID: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/memories"): {"entity": "user:2", "content": "a valid memory"},
    ("POST", "/memories:batch"): {"items": [{"entity": "user:2", "content": "one of many"}]},
    ("PATCH", "/memories/{id}"): {"changes": {"content": "changed"}},
    ("PUT", "/facts"): {"entity": "user:2", "key": "plan", "value": "pro"},
    ("POST", "/events"): {"entity": "user:2", "event": "clicked", "stream": "s"},
    ("POST", "/query"): {"text": "memory", "k": 3},
    ("POST", "/answers"): {"answer_id": "a2", "query_ids": ["q-none"]},
    ("POST", "/remember"): {
        "messages": [{"role": "user", "content": "hi"}],
        "entity": "u:1",
        "memories": [],
    },
    ("POST", "/recall"): {"text": "what is my budget?", "entity": "u:1"},
    ("POST", "/forget"): {"id": "m-none"},
    ("POST", "/maintain"): {"dry_run": True},
    ("PUT", "/config"): {},
    ("POST", "/sessions/{sid}/messages"): {"message": {"role": "user", "content": "hi"}},
    ("PUT", "/sessions/{sid}"): {"ttl": 3600},
    ("POST", "/sessions/{sid}/search"): {"text": "hi", "k": 2},
    ("POST", "/sessions:purge_expired"): {"ttl": 3600},
    ("POST", "/cache:lookup"): {"key": "refund policy", "scope": "docs"},
    ("POST", "/cache"): {"key": "refund policy", "value": {"docs": ["a.md"]}, "scope": "docs"},
    ("POST", "/cache:invalidate"): {"key": "refund policy", "scope": "docs"},
}
CONFIG_FIELDS = [
    "max_hot",
    "max_bytes",
    "policy",
    "half_life_days",
    "recency",
    "importance",
    "frequency",
    "impact",
    "promote_after",
    "cold_fallback",
    "max_writes_per_s",
]


def deep(levels: int) -> Any:
    value: Any = 1
    for i in range(levels):
        value = [value] if i % 2 else {"a": value}
    return value


BAD_VALUES: list[Any] = [
    12345,
    -1,
    1.5,
    "x",
    "",
    True,
    [1, "a"],
    {"a": 1},
    2**70,
    deep(70),
    [True, False],
    "9" * 300,
]
BAD_PARAMS = ["abc", "-1", "1e999", "", "9" * 300, "nan", "2025-13-45", "[1]"]
BAD_BODIES: list[bytes] = [
    b"[1, 2]",
    b'"x"',
    b"null",
    b"7",
    b"{",
    b"{}" * 2,
    b"[" * 100 + b"]" * 100,
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 70 + b"1" + b"}" * 70,
]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    path: Path = tmp_path_factory.mktemp("shape") / "d"
    db = synapsedb.open(path, durability="os", embedder=None, background_maintenance=False)
    with TestClient(create_app(db), raise_server_exceptions=False) as c:
        assert (
            c.post(
                f"{NS}/memories", json={"entity": "user:1", "id": "m1", "content": "seed memory"}
            ).status_code
            == 201
        )
        c.put(f"{NS}/facts", json={"entity": "user:1", "key": "k", "value": 1})
        c.post(f"{NS}/events", json={"entity": "user:1", "event": "seen", "stream": "s"})
        q = c.post(f"{NS}/query", json={"text": "seed"}).json()
        c.post(f"{NS}/answers", json={"answer_id": "a1", "query_ids": [q["query_id"]]})
        yield c
    db.close()


def routes(client: TestClient) -> list[tuple[str, str]]:
    """(method, path template) of every route in the app's route table, but ``/mcp``: MCP's
    JSON-RPC errors are its protocol's shape (its own refusals, 401/415/405/421, are this
    shape: tests/integrations/test_mcp_http.py)."""
    return sorted(
        (m, r.path)
        for r in client.app.routes
        if isinstance(r, Route)  # type: ignore[attr-defined]
        and r.path != "/mcp"
        for m in (r.methods or ())
        if m != "HEAD"
    )


def document(client: TestClient) -> dict[str, Any]:
    return msgspec.json.decode(client.app.state.openapi)  # type: ignore[attr-defined,no-any-return]


def concrete(path: str) -> str:
    """The path with its parameters filled in (settings are changed in a namespace of their
    own, so that a tight write rate set there leaves the other checks to run)."""
    values = {**PATH_VALUES, "{ns}": "fuzz-config"} if path.endswith("/config") else PATH_VALUES
    for name, value in values.items():
        path = path.replace(name, value)
    return path


def short(path: str) -> str:
    return path.removeprefix("/v1/namespaces/{ns}")


class Failures(list[str]):
    """Every failed check of a test, reported together (one bug often shows up many times)."""

    def check(self, resp: httpx.Response, what: str) -> None:
        try:
            check(resp, what)
        except AssertionError as exc:
            self.append(str(exc).split("\n")[0][:300])

    def assert_none(self) -> None:
        assert not self, f"{len(self)} failures:\n" + "\n".join(self[:30])


def check(resp: httpx.Response, what: str) -> None:
    """A 2xx, or a 4xx in the one error shape with a code of the tree and its status."""
    assert resp.status_code < 500, (what, resp.status_code, resp.text[:300])
    if resp.status_code < 400:
        return
    body = resp.json()
    assert set(body) == {"error"}, (what, body)
    err = body["error"]
    assert set(err) == {"code", "message", "details"}, (what, err)
    assert isinstance(err["message"], str) and err["message"], (what, err)
    assert isinstance(err["details"], dict), (what, err)
    cls = type(errors.error_from_code(err["code"], err["message"]))
    assert cls is not errors.SynapseError and cls.code == err["code"], (what, err)
    assert cls.http_status == resp.status_code, (what, err, resp.status_code)


def send(client: TestClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    if path.endswith(LIVE):
        params = dict(kwargs.pop("params", None) or {})
        try:  # a valid idle timeout (even 1e300 s) becomes 0: the feed ends at once
            params["idle_timeout"] = "0" if float(params["idle_timeout"]) >= 0 else "-1"
        except (KeyError, ValueError):
            params.setdefault("idle_timeout", "0")
        params.setdefault("stream", "s")
        kwargs["params"] = params
    return client.request(method, path, **kwargs)


def test_every_body_route_has_a_valid_body(client: TestClient) -> None:
    doc = document(client)
    json_routes = {
        (m, short(p))
        for p, ops in doc["paths"].items()
        for m, op in ((m.upper(), op) for m, op in ops.items())
        if "application/json" in op.get("requestBody", {}).get("content", {})
    }
    assert json_routes == set(VALID)


def test_wrong_types_for_every_documented_body_field(client: TestClient) -> None:
    doc = document(client)
    failures, seen = Failures(), 0
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            content = op.get("requestBody", {}).get("content", {})
            if "application/json" not in content:
                continue
            key = (method.upper(), short(path))
            fields = list(content["application/json"]["schema"]["properties"]) or CONFIG_FIELDS
            for field in fields:
                for value in BAD_VALUES:
                    for body in ({**VALID[key], field: value}, {field: value}):
                        resp = send(client, method.upper(), concrete(path), json=body)
                        failures.check(resp, f"{method} {path} {field}={value!r:.40}")
                        seen += 1
    failures.assert_none()
    assert seen > 1000


def test_malformed_bodies_on_every_body_route(client: TestClient) -> None:
    for method, path in routes(client):
        if method not in ("POST", "PUT", "PATCH") or path.endswith(OPENAI_SHAPED):
            continue
        ndjson = path.endswith("/import")
        kind = "application/x-ndjson" if ndjson else "application/json"
        for raw in BAD_BODIES:
            resp = send(client, method, concrete(path), content=raw, headers={"content-type": kind})
            check(resp, f"{method} {path} {raw[:30]!r}")
            assert resp.status_code != 201 or ndjson, (method, path, raw[:30])
        for kind in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {} if kind is None else {"content-type": kind}
            resp = send(client, method, concrete(path), content=b'{"a": 1}', headers=headers)
            check(resp, f"{method} {path} as {kind}")
            assert resp.status_code == 415, (method, path, kind, resp.text)


def test_bad_query_parameters_on_every_route(client: TestClient) -> None:
    doc = document(client)
    failures = Failures()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for param in op["parameters"]:
                if param["in"] != "query":
                    continue
                for value in BAD_PARAMS:
                    resp = send(
                        client, method.upper(), concrete(path), params={param["name"]: value}
                    )
                    failures.check(resp, f"{method} {path} ?{param['name']}={value[:20]}")
    failures.assert_none()


def test_an_oversized_last_event_id_on_every_route(client: TestClient) -> None:
    for method, path in routes(client):
        resp = send(client, method, concrete(path), headers={"last-event-id": "9" * 5000})
        check(resp, f"{method} {path}")
        assert resp.status_code == 422 and resp.json()["error"]["details"]["limit"] == 128


def test_404_and_405_are_in_the_tree(client: TestClient) -> None:
    resp = client.get("/v1/nowhere")
    check(resp, "404")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"
    by_path: dict[str, set[str]] = {}
    for method, path in routes(client):
        by_path.setdefault(path, set()).add(method)
    for path, methods in by_path.items():
        for method in {"GET", "POST", "PUT", "PATCH", "DELETE"} - methods:
            resp = client.request(method, concrete(path), json={})
            check(resp, f"{method} {path}")
            assert resp.status_code == 405, (method, path, resp.status_code)
            err = resp.json()["error"]
            assert err["code"] == "method_not_allowed"
            assert set(err["details"]["allowed"]) >= methods
            assert set(resp.headers["allow"].split(", ")) >= methods


@pytest.mark.parametrize("exc", [TypeError("a bug"), ValueError("a bug"), KeyError("a bug")])
def test_a_bare_exception_from_the_engine_is_a_logged_500(
    client: TestClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    exc: Exception,
) -> None:
    """Not bad input (that is refused where it is parsed): a bug, answered 500 ``internal``
    and logged with its traceback, on the routed path and on the fast lane alike."""
    from synapsedb.engine import Namespace

    def broken(self: Namespace, *args: Any, **kwargs: Any) -> Any:
        raise exc

    monkeypatch.setattr(Namespace, "stats", broken)
    monkeypatch.setattr(Namespace, "get", broken)
    for path in (f"{NS}/stats", f"{NS}/facts?entity=user:1&key=k", f"{NS}/memories/m1"):
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="synapsedb.server"):
            resp = client.get(path)
        assert resp.status_code == 500, path
        assert resp.json()["error"] == {
            "code": "internal",
            "details": {},
            "message": "internal error (logged on the server)",
        }
        (rec,) = [r for r in caplog.records if r.name == "synapsedb.server"]
        assert rec.exc_info is not None and rec.exc_info[1] is exc
