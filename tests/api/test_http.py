"""The HTTP API over a real database: same semantics as embedded use, one error shape."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.server import create_app

NS = "/v1/namespaces/acme"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    db = synapsedb.open(tmp_path / "d", durability="os", background_maintenance=False)
    with TestClient(create_app(db)) as c:
        yield c
    db.close()


def test_seed_story_over_http(client: TestClient) -> None:
    r = client.post(
        f"{NS}/memories",
        json={
            "entity": "user:4321",
            "content": "Refund requested for order #1458 last week",
            "salience": 0.9,
            "ts": "2025-10-24T10:00:00Z",
        },
        headers={"X-Agent": "intake"},
    )
    assert r.status_code == 201
    m = r.json()
    assert m["agent"] == "intake" and m["ts"] == "2025-10-24T10:00:00Z" and m["version"] == 1
    assert client.get(f"{NS}/memories/{m['id']}").json()["content"].startswith("Refund")
    ev = client.post(
        f"{NS}/events",
        json={"entity": "user:4321", "event": "Refund confirmed delivered on 10/28."},
    ).json()
    assert ev["memory_id"]
    res = client.post(
        f"{NS}/query", json={"text": "user:4321 refund status"}, headers={"X-Agent": "knowledge"}
    ).json()
    assert res["entity"] == "user:4321" and len(res["hits"]) == 2
    ans = client.post(
        f"{NS}/answers",
        json={"answer_id": "a1", "query_ids": [res["query_id"]], "agent": "resolution"},
    )
    assert ans.status_code == 201 and ans.json()["queries"][0]["agent"] == "knowledge"
    assert client.get(f"{NS}/answers/a1/lineage").json()["answer_id"] == "a1"
    audit = client.get(f"{NS}/audit", params={"entity": "user:4321"}).json()
    assert {e["action"] for e in audit} >= {"write", "append", "query", "answer"}
    snap = client.get(f"{NS}/snapshot", params={"entity": "user:4321"}).json()
    assert len(snap["memories"]) == 2 and len(snap["events"]) == 1
    st = client.get(f"{NS}/stats").json()
    assert st["memories"] == 2 and st["events"] == 1
    assert client.get("/v1/namespaces").json() == ["acme"]


def test_memories_facts_and_events_routes(client: TestClient) -> None:
    batch = client.post(
        f"{NS}/memories:batch",
        json={"items": [{"entity": "u", "content": "a"}, {"entity": "u", "content": "b"}]},
    )
    assert batch.status_code == 201 and len(batch.json()) == 2
    mid = batch.json()[0]["id"]
    up = client.patch(f"{NS}/memories/{mid}", json={"changes": {"content": "a2"}, "if_version": 1})
    assert up.json()["version"] == 2
    conflict = client.patch(
        f"{NS}/memories/{mid}", json={"changes": {"content": "x"}, "if_version": 1}
    )
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "version_conflict"
    assert [v["content"] for v in client.get(f"{NS}/memories/{mid}/history").json()] == ["a", "a2"]
    assert len(client.get(f"{NS}/memories", params={"entity": "u"}).json()) == 2
    assert client.delete(f"{NS}/memories/{mid}").json()["deleted"] is True
    assert client.get(f"{NS}/memories/{mid}").status_code == 404
    f = client.put(f"{NS}/facts", json={"entity": "u", "key": "order", "value": {"id": 1458}})
    assert f.json()["value"] == {"id": 1458}
    assert client.get(f"{NS}/facts", params={"entity": "u", "key": "order"}).json()["version"] == 1
    assert len(client.get(f"{NS}/facts", params={"entity": "u"}).json()) == 1
    assert len(client.get(f"{NS}/facts/history", params={"entity": "u", "key": "order"}).json())
    assert client.delete(f"{NS}/facts", params={"entity": "u", "key": "order"}).status_code == 200
    client.post(f"{NS}/events", json={"entity": "u", "event": "one", "searchable": False})
    client.post(f"{NS}/events", json={"entity": "u", "event": {"content": "two", "data": {"n": 2}}})
    evs = client.get(f"{NS}/events", params={"stream": "u", "order": "desc"}).json()
    assert [e["content"] for e in evs] == ["two", "one"] and evs[0]["data"] == {"n": 2}


def test_lifecycle_routes(client: TestClient) -> None:
    for i in range(6):
        client.post(
            f"{NS}/memories", json={"entity": "u", "content": f"note {i}", "salience": i / 10}
        )
    assert client.put(f"{NS}/config", json={"max_hot": 3}).json()["max_hot"] == 3
    assert client.get(f"{NS}/config").json()["max_hot"] == 3
    preview = client.post(f"{NS}/maintain", json={"dry_run": True}).json()
    assert len(preview["demoted"]) == 3
    client.post(f"{NS}/maintain", json={})
    assert client.get(f"{NS}/stats").json()["cold_memories"] == 3
    both = client.post(f"{NS}/query", json={"text": "note", "tiers": ["hot", "cold"], "k": 10})
    assert len(both.json()["hits"]) == 6
    gone = client.post(f"{NS}/forget", json={"entity": "u", "purge": True}).json()
    assert gone["purged"] and gone["memories"] == 6


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        ("post", f"{NS}/memories", {"json": {"entity": "u", "content": ""}}, 422, "validation"),
        ("post", f"{NS}/memories", {"json": {"content": "x"}}, 422, "validation"),
        (
            "post",
            f"{NS}/memories",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            422,
            "validation",
        ),
        (
            "post",
            f"{NS}/memories",
            {"content": b"[1, 2]", "headers": {"content-type": "application/json"}},
            422,
            "validation",
        ),
        ("get", f"{NS}/memories/nope", {}, 404, "not_found"),
        ("get", "/v1/namespaces/BAD NAME/stats", {}, 422, "validation"),
        ("get", f"{NS}/facts", {}, 422, "validation"),
        ("get", f"{NS}/events", {"params": {"stream": "s", "limit": "many"}}, 422, "validation"),
        (
            "post",
            f"{NS}/query",
            {"json": {"text": "x", "filter": {"ts": {"$gt": "?"}}}},
            422,
            "validation",
        ),
        ("post", f"{NS}/query", {"json": {"text": "x", "colour": 1}}, 422, "validation"),
        ("get", "/v1/nowhere", {}, 404, "not_found"),
        ("delete", "/v1/namespaces", {}, 405, "method_not_allowed"),
        (
            "post",
            f"{NS}/memories",
            {"content": b"x" * (9 * 1024 * 1024), "headers": {"content-type": "application/json"}},
            413,
            "payload_too_large",
        ),
    ],
)
def test_one_error_shape_and_no_500(
    client: TestClient, method: str, path: str, kwargs: dict, status: int, code: str
) -> None:
    r = getattr(client, method)(path, **kwargs)
    assert r.status_code == status
    err = r.json()["error"]
    assert err["code"] == code and err["message"] and isinstance(err["details"], dict)
    assert client.get(f"{NS}/stats").json()["memory_versions"] == 0  # nothing written


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_runs_a_real_server_on_loopback(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "SYNAPSEDB_EMBEDDER": "none"}
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
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.1)
        r = httpx.post(f"{base}{NS}/memories", json={"entity": "u", "content": "over the wire"})
        assert r.status_code == 201
        hits = httpx.post(f"{base}{NS}/query", json={"text": "wire"}).json()["hits"]
        assert [h["content"] for h in hits] == ["over the wire"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_serve_refuses_a_public_address_without_keys(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "synapsedb",
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "without API keys" in out.stderr


def test_every_route_is_documented(tmp_path: Path) -> None:
    from starlette.routing import Route

    doc = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
    with synapsedb.open(tmp_path / "d", durability="os") as db:
        for route in create_app(db).routes:
            assert isinstance(route, Route)
            for method in route.methods or ():
                if method != "HEAD":
                    assert f"| {method} | `{route.path}` |" in doc, (method, route.path)


def test_keys_cli(tmp_path: Path) -> None:
    import json

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "synapsedb", "keys", *args, "--data", str(tmp_path / "d")],
            capture_output=True,
            text=True,
            timeout=60,
        )

    made = cli("create", "--tenant", "acme", "--scopes", "read,write", "--namespaces", "support")
    assert made.returncode == 0, made.stderr
    info = json.loads(made.stdout)
    assert info["key"].startswith("sdb_") and info["namespaces"] == ["support"]
    listed = cli("list")
    assert info["id"] in listed.stdout and info["key"] not in listed.stdout  # never the secret
    assert info["key"].split("_", 2)[2] not in (tmp_path / "d" / "keys.db").read_bytes().decode(
        "latin-1"
    )
    assert cli("revoke", info["id"]).returncode == 0
    assert '"revoked": true' in cli("list").stdout
    bad = cli("create", "--tenant", "Bad Tenant")
    assert bad.returncode == 2 and "tenant" in bad.stderr
    assert cli("limit", "--tenant", "acme", "--rate", "50").returncode == 0
    assert '{"tenant": "acme", "rate": 50.0}' in cli("list").stdout
    assert cli("limit", "--tenant", "acme", "--rate", "none").returncode == 0
    assert '"tenant": "acme", "rate"' not in cli("list").stdout
    wrong = cli("limit", "--tenant", "acme", "--rate", "fast")
    assert wrong.returncode == 2 and "rate" in wrong.stderr


def test_metrics(client: TestClient) -> None:
    for i in range(3):
        client.post(
            f"{NS}/memories",
            json={"entity": "u", "content": f"metric note {i}", "salience": i / 10},
        )
    client.get(f"{NS}/memories/missing")
    client.post(f"{NS}/query", json={"text": "metric note"})
    client.put(f"{NS}/config", json={"max_hot": 1})
    client.post(f"{NS}/maintain", json={})
    text = client.get("/metrics").text
    assert (
        'synapsedb_http_request_seconds_count{method="POST",'
        'route="/v1/namespaces/{ns}/memories",status="201"} 3.0'
    ) in text
    assert 'route="/v1/namespaces/{ns}/memories/{id}",status="404"' in text
    for stage in ("embed", "vector", "keyword", "fuse"):
        assert f'synapsedb_query_stage_seconds_count{{mode="hybrid",stage="{stage}"}} 1.0' in text
    assert "synapsedb_commit_seconds_count" in text and "synapsedb_committed_rows_total" in text
    assert "synapsedb_embedding_batch_size_count 3.0" in text
    assert 'synapsedb_tier_moves_total{direction="demote"} 2.0' in text
    assert 'synapsedb_memories{namespace="acme",tier="cold"} 2.0' in text
    assert 'synapsedb_memories{namespace="acme",tier="hot"} 1.0' in text


def test_openapi_document_and_docs_page(client: TestClient) -> None:
    from starlette.routing import Route

    doc = client.get("/openapi.json").json()
    assert doc["openapi"] == "3.1.0"
    for route in client.app.routes:  # every route, every method, is in the one document
        assert isinstance(route, Route)
        if not route.include_in_schema:
            continue
        for method in route.methods or ():
            if method != "HEAD":
                assert method.lower() in doc["paths"][route.path], (method, route.path)
    query = doc["paths"]["/v1/namespaces/{ns}/query"]["post"]
    schema = query["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/QueryResult"}
    assert "hits" in doc["components"]["schemas"]["QueryResult"]["properties"]
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/v1/namespaces/{ns}/query" in page.text and "<script" not in page.text


def test_an_unexpected_error_still_has_the_json_shape(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapsedb.engine import Namespace

    def broken(self: Namespace) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Namespace, "stats", broken)
    r = client.get(f"{NS}/stats")
    assert r.status_code == 500 and r.json()["error"]["code"] == "internal"


def test_readyz_waits_for_the_embedding_model(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "ok", durability="os") as db, TestClient(create_app(db)) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        deadline = time.monotonic() + 60
        while (r := c.get("/readyz")).status_code == 503 and time.monotonic() < deadline:
            assert r.json()["status"] == "loading_model"
            time.sleep(0.05)
        assert r.status_code == 200 and r.json()["status"] == "ready"
        assert r.json()["indexing_rows_pending"] == 0
    # a model that cannot load: alive, never ready, and the cause is said
    with (
        synapsedb.open(tmp_path / "bad", durability="os", embedder="sentence-transformers") as db,
        TestClient(create_app(db)) as c,
    ):
        deadline = time.monotonic() + 10
        while c.get("/readyz").json()["status"] == "loading_model" and time.monotonic() < deadline:
            time.sleep(0.02)
        r = c.get("/readyz")
        assert r.status_code == 503 and r.json()["status"] == "model_failed"
        assert "st_model" in r.json()["error"]
        assert c.get("/healthz").status_code == 200
