"""Tenants and keys: for every route, tenant B cannot reach or detect tenant A's data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

import synapsedb
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore

NS = "/v1/namespaces/shared"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    keys = KeyStore(tmp_path / "d")
    tok = {
        name: keys.create(tenant, scopes, ns, rate)[1]
        for name, tenant, scopes, ns, rate in [
            ("a", "tenant-a", ["read", "write", "admin"], None, None),
            ("b", "tenant-b", ["read", "write", "admin"], None, None),
            ("a_read", "tenant-a", ["read"], None, None),
            ("a_write", "tenant-a", ["read", "write"], None, None),
            ("a_only", "tenant-a", ["read", "write"], ["only"], None),
            ("a_slow", "tenant-a", ["read"], None, 2.0),
        ]
    }
    client = TestClient(create_app(db, keys))
    a = {"Authorization": f"Bearer {tok['a']}"}
    client.post(
        f"{NS}/memories", json={"entity": "user:1", "id": "m1", "content": "A's secret"}, headers=a
    )
    client.put(f"{NS}/facts", json={"entity": "user:1", "key": "k", "value": 1}, headers=a)
    client.post(f"{NS}/events", json={"entity": "user:1", "event": "A's event"}, headers=a)
    client.post(
        f"{NS}/sessions/s1/messages",
        json={"message": {"role": "user", "content": "A's turn"}},
        headers=a,
    )
    q = client.post(f"{NS}/query", json={"text": "secret"}, headers=a).json()
    client.post(
        f"{NS}/answers", json={"answer_id": "ans1", "query_ids": [q["query_id"]]}, headers=a
    )
    yield {"client": client, "tok": tok, "keys": keys, "db": db}
    client.close()
    db.close()


def h(env: dict[str, Any], who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {env['tok'][who]}"}


# (method, path, kwargs with A's ids, the same request with ids that never existed)
PROBES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    # first: later probes add B's own query log to B's namespace
    ("GET", f"{NS}/export", {}, {"path": "/v1/namespaces/never-used/export"}),
    ("GET", "/v1/namespaces", {}, {}),
    ("GET", "/v1/whoami", {}, {}),  # B's own key: nothing of A's
    ("GET", f"{NS}/memories", {"params": {"entity": "user:1"}}, {"params": {"entity": "nobody"}}),
    ("GET", f"{NS}/memories/m1", {}, {"path": f"{NS}/memories/zz9"}),
    ("GET", f"{NS}/memories/m1/history", {}, {"path": f"{NS}/memories/zz9/history"}),
    ("GET", f"{NS}/accesses", {"params": {"ids": "m1"}}, {"params": {"ids": "zz9"}}),
    (
        "PATCH",
        f"{NS}/memories/m1",
        {"json": {"changes": {"content": "x"}}},
        {"path": f"{NS}/memories/zz9", "json": {"changes": {"content": "x"}}},
    ),
    ("DELETE", f"{NS}/memories/m1", {}, {"path": f"{NS}/memories/zz9"}),
    (
        "GET",
        f"{NS}/facts",
        {"params": {"entity": "user:1", "key": "k"}},
        {"params": {"entity": "nobody", "key": "k"}},
    ),
    (
        "DELETE",
        f"{NS}/facts",
        {"params": {"entity": "user:1", "key": "k"}},
        {"params": {"entity": "nobody", "key": "k"}},
    ),
    (
        "GET",
        f"{NS}/facts/history",
        {"params": {"entity": "user:1", "key": "k"}},
        {"params": {"entity": "nobody", "key": "k"}},
    ),
    ("GET", f"{NS}/events", {"params": {"stream": "user:1"}}, {"params": {"stream": "nobody"}}),
    (
        "GET",
        f"{NS}/events/follow",
        {"params": {"stream": "user:1", "idle_timeout": "0.2"}},
        {"params": {"stream": "nobody", "idle_timeout": "0.2"}},
    ),
    (
        "GET",
        f"{NS}/changes",
        {"params": {"since": "0", "idle_timeout": "0.2"}},
        {"params": {"since": "0", "entity": "nobody", "idle_timeout": "0.2"}},
    ),
    ("POST", f"{NS}/query", {"json": {"text": "secret"}}, {"json": {"text": "nothing"}}),
    (
        "POST",
        f"{NS}/recall",
        {"json": {"text": "what is the secret?", "entity": "user:1", "threshold": 0}},
        {"json": {"text": "what is the secret?", "entity": "nobody", "threshold": 0}},
    ),
    ("GET", f"{NS}/answers/ans1/lineage", {}, {"path": f"{NS}/answers/zz9/lineage"}),
    ("GET", f"{NS}/audit", {"params": {"entity": "user:1"}}, {"params": {"entity": "nobody"}}),
    ("GET", f"{NS}/snapshot", {"params": {"entity": "user:1"}}, {"params": {"entity": "nobody"}}),
    ("POST", f"{NS}/forget", {"json": {"id": "m1"}}, {"json": {"id": "zz9"}}),
    ("GET", f"{NS}/sessions", {}, {}),
    ("GET", f"{NS}/sessions/s1", {}, {"path": f"{NS}/sessions/zz9"}),
    ("GET", f"{NS}/sessions/s1/messages", {}, {"path": f"{NS}/sessions/zz9/messages"}),
    (
        "GET",
        f"{NS}/sessions/s1/messages",
        {"params": {"strategy": "summary_buffer"}},
        {"path": f"{NS}/sessions/zz9/messages", "params": {"strategy": "summary_buffer"}},
    ),
    (
        "POST",
        f"{NS}/sessions/s1/search",
        {"json": {"text": "A's turn"}},
        {"path": f"{NS}/sessions/zz9/search", "json": {"text": "A's turn"}},
    ),
    ("DELETE", f"{NS}/sessions/s1", {}, {"path": f"{NS}/sessions/zz9"}),
    (
        "DELETE",
        f"{NS}/sessions/s1",
        {"params": {"purge": "true"}},
        {"path": f"{NS}/sessions/zz9", "params": {"purge": "true"}},
    ),
    (
        "POST",
        f"{NS}/cache:lookup",
        {"json": {"key": "A's refund policy", "scope": "docs"}},
        {"json": {"key": "never stored", "scope": "docs"}},
    ),
    ("GET", f"{NS}/cache/stats", {}, {}),
    ("GET", f"{NS}/entities", {}, {}),
    ("GET", f"{NS}/streams", {}, {}),
    ("GET", f"{NS}/stats", {}, {}),
    ("GET", f"{NS}/config", {}, {}),
    ("GET", f"{NS}/memories", {}, {}),
]
# routes that create or change things are probed by what B then sees, not by equality
WRITES = {
    ("POST", "/memories"),
    ("POST", "/memories:batch"),
    ("PUT", "/facts"),
    ("POST", "/events"),
    ("POST", "/answers"),
    ("POST", "/maintain"),
    ("POST", "/import"),
    ("PUT", "/config"),
    ("POST", "/remember"),
    ("POST", "/sessions/{sid}/messages"),
    ("PUT", "/sessions/{sid}"),
    ("POST", "/sessions:purge_expired"),
    ("POST", "/cache"),
    ("POST", "/cache:invalidate"),
}
# the memory proxy needs an upstream model: its isolation is tested in test_proxy.py
WRITES |= {
    ("POST", "/chat/completions"),
    ("POST", "/responses"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/responses"),
}


def shape(resp: Any) -> Any:
    if resp.headers.get("content-type", "").startswith(
        ("application/x-ndjson", "text/event-stream")
    ):
        return resp.status_code, resp.text
    body = resp.json()
    if isinstance(body, dict) and "error" in body:
        return resp.status_code, body["error"]["code"], body["error"]["details"].get("field")
    if isinstance(body, dict) and "context" in body:  # recall: what it found, not the echo
        return resp.status_code, body["memories"], body["context"]
    if isinstance(body, dict) and "query_id" in body:
        return resp.status_code, body["hits"]
    if isinstance(body, dict) and "recorded_at" in body:
        return resp.status_code, "object"
    if isinstance(body, dict):  # echoes of the request (entity, session, time) are not data
        return resp.status_code, {
            k: v
            for k, v in body.items()
            if k not in ("entity", "as_of", "session_id", "stream", "target", "at")
        }
    return resp.status_code, body


def test_tenant_b_cannot_reach_or_detect_tenant_a(env: dict[str, Any]) -> None:
    c = env["client"]
    for method, path, kw, control in PROBES:
        got = c.request(method, path, headers=h(env, "b"), **kw)
        ckw = {k: v for k, v in control.items() if k != "path"}
        ref = c.request(method, control.get("path", path), headers=h(env, "b"), **ckw)
        assert got.status_code < 500 and shape(got) == shape(ref), (method, path)
        assert "A's" not in got.text
    # and A still has everything (B's deletes and updates did not touch it)
    assert c.get(f"{NS}/memories/m1", headers=h(env, "a")).json()["content"] == "A's secret"
    assert [
        m["content"]
        for m in c.get(f"{NS}/sessions/s1/messages", headers=h(env, "a")).json()["messages"]
    ] == ["A's turn"]
    assert c.get("/v1/namespaces", headers=h(env, "a")).json() == ["shared"]
    # B's writes land in B's own namespace of the same name
    c.post(f"{NS}/memories", json={"entity": "user:1", "content": "B's note"}, headers=h(env, "b"))
    seen_by_a = {m["content"] for m in c.get(f"{NS}/memories", headers=h(env, "a")).json()}
    assert seen_by_a == {"A's secret", "A's event"}
    seen_by_b = {m["content"] for m in c.get(f"{NS}/memories", headers=h(env, "b")).json()}
    assert seen_by_b == {"B's note"}
    # and so do B's remembered turns (the memory loop): A's stream and recall never see them
    r = c.post(
        f"{NS}/remember",
        headers=h(env, "b"),
        json={
            "messages": [{"role": "user", "content": "B's turn"}],
            "entity": "user:1",
            "session": "s",
            "memories": [{"type": "fact", "content": "B's fact"}],
        },
    )
    assert r.status_code == 200, r.text
    assert c.get(f"{NS}/events", params={"stream": "session:s"}, headers=h(env, "a")).json() == []
    got = c.post(
        f"{NS}/recall",
        headers=h(env, "a"),
        json={"text": "B's fact", "entity": "user:1", "threshold": 0},
    ).json()
    assert [m["content"] for m in got["memories"]] == ["A's secret", "A's event"]
    assert "B's" not in got["context"]


def test_every_route_is_probed(env: dict[str, Any]) -> None:
    probed = {(m, p.removeprefix(NS)) for m, p, _k, _c in PROBES}
    probed |= {(m, p.removeprefix(NS)) for m, p in [("GET", f"{NS}/memories/{{id}}")]}
    for route in env["client"].app.routes:
        assert isinstance(route, Route)
        if route.path in ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs"):
            continue  # service routes: no tenant data (/metrics is admin-only, tested below)
        if route.path in ("/ui", "/ui/{asset}"):
            continue  # the console's static files: no tenant data (tests/console)
        if route.path == "/mcp":
            continue  # JSON-RPC, not a REST route: its tenant isolation (every tool and resource
            # with another tenant's ids, read-only keys, admin for erasure) is tested in
            # tests/integrations/test_mcp_http.py
        suffix = route.path.removeprefix("/v1/namespaces/{ns}")
        for method in route.methods or ():
            if method == "HEAD" or (method, suffix) in WRITES:
                continue
            concrete = {
                p.removeprefix(NS)
                .replace("m1", "{id}")
                .replace("ans1", "{answer_id}")
                .replace("/sessions/s1", "/sessions/{sid}")
                for m, p, _k, _c in PROBES
                if m == method
            }
            assert suffix in concrete or route.path in concrete, (method, route.path)


def test_keys_scopes_and_limits(env: dict[str, Any]) -> None:
    c = env["client"]
    r = c.get(f"{NS}/stats")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert r.headers["WWW-Authenticate"] == "Bearer"
    assert c.get(f"{NS}/stats", headers={"Authorization": "Bearer sdb_bogus_x"}).status_code == 401
    w = c.post(f"{NS}/memories", json={"entity": "u", "content": "x"}, headers=h(env, "a_read"))
    assert w.status_code == 403 and w.json()["error"]["details"]["scope"] == "write"
    assert c.post(f"{NS}/maintain", json={}, headers=h(env, "a_write")).status_code == 403
    assert c.put(f"{NS}/config", json={"max_hot": 5}, headers=h(env, "a_write")).status_code == 403
    purge = c.post(
        f"{NS}/forget", json={"entity": "user:1", "purge": True}, headers=h(env, "a_write")
    )
    assert purge.status_code == 403
    assert c.get(f"{NS}/stats", headers=h(env, "a_only")).status_code == 403
    assert c.get("/metrics").status_code == 401
    assert c.get("/metrics", headers=h(env, "a_write")).status_code == 403
    assert c.get("/metrics", headers=h(env, "a")).status_code == 200
    assert c.get("/healthz").status_code == 200
    assert c.get("/v1/namespaces/only/stats", headers=h(env, "a_only")).status_code == 200
    statuses = [c.get(f"{NS}/stats", headers=h(env, "a_slow")) for _ in range(5)]
    limited = [r for r in statuses if r.status_code == 429]
    assert limited and int(limited[0].headers["Retry-After"]) >= 1
    key_id = env["tok"]["a_read"].split("_")[1]
    env["keys"].revoke(key_id)  # seen by the very next request: no waiting
    assert c.get(f"{NS}/stats", headers=h(env, "a_read")).status_code == 401


def test_a_tenant_rate_limits_all_its_keys_together(env: dict[str, Any]) -> None:
    c, keys = env["client"], env["keys"]
    keys.set_tenant_rate("tenant-a", 3.0)  # noticed by the very next request
    # two keys of the same tenant, neither limited alone, share the tenant's 3 requests/s
    statuses = [
        c.get(f"{NS}/stats", headers=h(env, name)).status_code
        for _ in range(3)
        for name in ("a", "a_write")
    ]
    assert statuses.count(429) >= 2
    limited = c.get(f"{NS}/stats", headers=h(env, "a"))
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    assert "tenant 'tenant-a'" in limited.json()["error"]["message"]
    assert c.get(f"{NS}/stats", headers=h(env, "b")).status_code == 200  # other tenants: free
    assert keys.tenant_rates() == {"tenant-a": 3.0}
    keys.set_tenant_rate("tenant-a", None)
    assert keys.tenant_rates() == {}
    with pytest.raises(synapsedb.ValidationError, match="rate"):
        keys.set_tenant_rate("tenant-a", 0)


def test_the_fast_lane_answers_exactly_as_the_routed_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /facts?entity=&key= skips the framework unless tracing is on; both answer alike."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from synapsedb.server.fastlane import FastLane
    from synapsedb.server.observe import Tracing

    answered: list[str] = []
    real = FastLane._answer

    def counted(self: FastLane, scope: Any, *args: str) -> Any:
        answered.append(args[2])
        return real(self, scope, *args)

    monkeypatch.setattr(FastLane, "_answer", counted)

    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    keys = KeyStore(tmp_path / "d")
    tokens = {
        name: keys.create(tenant, scopes, None, rate)[1]
        for name, tenant, scopes, rate in [
            ("a", "acme", ["read", "write"], None),
            ("w", "acme", ["write"], None),
            ("b", "globex", ["read"], None),
            ("slow", "acme", ["read"], 1.0),
        ]
    }
    fast = TestClient(create_app(db, keys))
    routed = TestClient(create_app(db, keys, Tracing(InMemorySpanExporter())))
    auth = {name: {"Authorization": f"Bearer {tok}"} for name, tok in tokens.items()}
    fast.put(
        f"{NS}/facts",
        json={"entity": "user:1", "key": "plan", "value": {"tier": 2}},
        headers=auth["a"],
    )
    cases = [
        ({"entity": "user:1", "key": "plan"}, auth["a"]),  # found
        ({"entity": "user:1", "key": "nope"}, auth["a"]),  # 404
        ({"entity": "user:1", "key": "plan"}, auth["b"]),  # another tenant: 404, not 403
        ({"entity": "user:1", "key": "plan"}, auth["w"]),  # no read scope: 403
        ({"entity": "user:1", "key": "plan"}, {}),  # no key: 401
        ({"entity": "", "key": "plan"}, auth["a"]),  # invalid entity: 422
        ({"entity": "user:1", "key": "plan"}, {"Authorization": "Bearer sdb_x_y"}),  # 401
    ]
    for params, headers in cases:
        answered.clear()
        a = fast.get(f"{NS}/facts", params=params, headers=headers)
        assert answered == [params["key"]]  # the fast lane answered this one
        b = routed.get(f"{NS}/facts", params=params, headers=headers)
        assert answered == [params["key"]]  # and not this one
        assert (a.status_code, a.json()) == (b.status_code, b.json()), params
        assert a.headers.get("www-authenticate") == b.headers.get("www-authenticate")
        assert a.headers["content-type"] == "application/json" and a.headers["x-request-id"]
    assert fast.get(f"{NS}/facts", params=cases[0][0], headers=auth["a"]).json()["value"] == {
        "tier": 2
    }
    answered.clear()  # other parameters take the routed handler
    assert fast.get(f"{NS}/facts", params={"entity": "user:1"}, headers=auth["a"]).is_success
    assert fast.get(
        f"{NS}/facts", params={**cases[0][0], "as_of": "2100-01-01"}, headers=auth["a"]
    ).is_success
    assert answered == []
    # the key's rate holds on the fast lane too
    statuses = [fast.get(f"{NS}/facts", params=cases[0][0], headers=auth["slow"]) for _ in range(3)]
    limited = [r for r in statuses if r.status_code == 429]
    assert limited and int(limited[0].headers["Retry-After"]) >= 1
    # and the request metrics name the route
    metrics = fast.get("/metrics", headers=auth["a"])
    assert metrics.status_code == 403  # admin only
    text = fast.app.state.metrics.render().decode()
    assert 'route="/v1/namespaces/{ns}/facts",status="200"' in text
    assert 'route="/v1/namespaces/{ns}/facts",status="404"' in text
    fast.close()
    routed.close()
    db.close()


def test_metrics_show_a_tenant_only_its_own_namespaces(env: dict[str, Any]) -> None:
    c, keys = env["client"], env["keys"]
    c.post(
        "/v1/namespaces/b-private/memories",
        json={"entity": "u", "content": "B's"},
        headers=h(env, "b"),
    )
    _, operator = keys.create("ops", ["operator"])
    mine = c.get("/metrics", headers=h(env, "a"))  # tenant-a's admin key
    assert mine.status_code == 200
    assert 'synapsedb_memories{namespace="shared",tier="hot"} 2.0' in mine.text
    for other in (
        "b-private",
        "tenant-b",
        "tenant-a..",
        "synapsedb_http_request_seconds",
        "synapsedb_commit",
        "synapsedb_committed_rows",
        "synapsedb_query_stage",
    ):
        assert other not in mine.text, other  # nor the server-wide counts of every tenant
    theirs = c.get("/metrics", headers=h(env, "b")).text
    assert 'namespace="b-private"' in theirs and 'namespace="shared"' not in theirs
    limited = c.get("/metrics", headers=h(env, "a_write"))
    assert limited.status_code == 403 and limited.json()["error"]["details"]["scope"] == "admin"
    everything = c.get("/metrics", headers={"Authorization": f"Bearer {operator}"})
    assert everything.status_code == 200
    for name in (
        'namespace="tenant-a..shared"',
        'namespace="tenant-b..b-private"',
        "synapsedb_http_request_seconds",
        "synapsedb_committed_rows",
    ):
        assert name in everything.text, name
    # an operator key reaches no tenant's data by itself
    stats = c.get(f"{NS}/stats", headers={"Authorization": f"Bearer {operator}"})
    assert stats.status_code == 403
    assert c.get("/metrics").status_code == 401


def test_readyz_counts_nothing_for_strangers(env: dict[str, Any]) -> None:
    c, keys = env["client"], env["keys"]
    _, operator = keys.create("ops", ["operator"])
    for headers in ({}, h(env, "a"), {"Authorization": "Bearer sdb_nope_x"}):
        r = c.get("/readyz", headers=headers)  # states only (the memory loop's LLM, the
        # proxy's upstream model): nothing that counts
        assert r.status_code == 200
        assert r.json() == {"status": "ready", "llm": "absent", "proxy": "absent"}
    told = c.get("/readyz", headers={"Authorization": f"Bearer {operator}"}).json()
    assert {
        k: told[k]
        for k in ("status", "indexing_rows_pending", "erasure_pending", "unavailable_namespaces")
    } == {
        "status": "ready",
        "indexing_rows_pending": 0,
        "erasure_pending": False,
        "unavailable_namespaces": {},
    }
    assert told["memory_loop"]["llm"] == "absent" and told["proxy"]["upstream"] == "absent"


def test_change_ids_are_numbered_per_namespace(env: dict[str, Any]) -> None:
    """A namespace's change ids count only its own changes: another tenant's writes leave no
    gap (the live side is tested over a real server in test_feeds_security)."""
    feed = env["client"].app.state.feed
    a, b = "tenant-a..shared", "tenant-b..shared"
    start_a, start_b = feed.seq(a), feed.seq(b)
    c = env["client"]
    for i in range(3):
        c.put(f"{NS}/facts", json={"entity": "u", "key": "k", "value": i}, headers=h(env, "b"))
    c.put(f"{NS}/facts", json={"entity": "u", "key": "k", "value": 0}, headers=h(env, "a"))
    assert feed.seq(a) == start_a + 1 and feed.seq(b) == start_b + 3
    items, complete, newest = feed.after(a, start_a)
    assert complete and [n for n, _ in items] == [start_a + 1] and newest == start_a + 1


def test_two_authorization_headers_mean_the_first_on_every_path(env: dict[str, Any]) -> None:
    """The fast lane and the routed handlers read the same (first) Authorization header, so a
    proxy that appends one cannot make one path see another identity (second hostile pass,
    F9)."""
    c, tok = env["client"], env["tok"]
    both = [("Authorization", f"Bearer {tok['a']}"), ("Authorization", f"Bearer {tok['b']}")]
    fast = c.get(f"{NS}/facts", params={"entity": "user:1", "key": "k"}, headers=both)
    routed = c.get(f"{NS}/facts", params={"entity": "user:1"}, headers=both)
    assert fast.status_code == 200 and fast.json()["value"] == 1  # tenant a's fact
    assert routed.status_code == 200 and [f["key"] for f in routed.json()] == ["k"]
    swapped = list(reversed(both))
    assert (
        c.get(f"{NS}/facts", params={"entity": "user:1", "key": "k"}, headers=swapped).status_code
        == 404
    )  # tenant b has no such fact
