"""Errors name a tenant's namespace as the tenant does (issue 10, second hostile pass, F12).

Some errors used to show the engine namespace (``not found in namespace 'acme..gs'``,
``'acme..v62' is unavailable``) where every other answer uses the public name (``gs``). Both the
routed handlers and the fast lane (``GET /facts?entity&key``) now rewrite it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from starlette.testclient import TestClient

import synapsedb
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore


def _open(path: Path) -> synapsedb.Database:
    return synapsedb.open(path, durability="os", embedder=None, background_maintenance=False)


def _only_public(body: dict[str, object], public: str) -> None:
    text = str(body)
    assert "acme.." not in text and "'acme" not in text, body
    assert f"'{public}'" in body["error"]["message"], body  # type: ignore[index]


def test_a_not_found_error_names_the_public_namespace(tmp_path: Path) -> None:
    d = tmp_path / "d"
    token = KeyStore(d).create("acme", ["read", "write"])[1]
    auth = {"Authorization": f"Bearer {token}"}
    with _open(d) as db, TestClient(create_app(db, KeyStore(d))) as client:
        ns = "/v1/namespaces/gs"
        assert (
            client.post(
                f"{ns}/memories", json={"entity": "u", "content": "x"}, headers=auth
            ).status_code
            == 201
        )
        r = client.patch(f"{ns}/memories/zz9", json={"changes": {"content": "y"}}, headers=auth)
        assert r.status_code == 404
        _only_public(r.json(), "gs")
        assert "not found in namespace 'gs'" in r.json()["error"]["message"]


def test_an_unavailable_namespace_is_named_publicly(tmp_path: Path) -> None:
    d = tmp_path / "d"
    token = KeyStore(d).create("acme", ["read", "write"])[1]
    auth = {"Authorization": f"Bearer {token}"}
    with _open(d) as db, TestClient(create_app(db, KeyStore(d))) as client:
        r = client.put(
            "/v1/namespaces/v62/facts", json={"entity": "u", "key": "k", "value": 1}, headers=auth
        )
        assert r.status_code == 200, r.text
    conn = sqlite3.connect(d / "synapse.db")
    with conn:  # a row the loader refuses: the namespace is unavailable after a reopen
        conn.execute("UPDATE fact_versions SET value = 'nope' WHERE ns = 'acme..v62'")
    conn.close()
    with _open(d) as db, TestClient(create_app(db, KeyStore(d))) as client:
        for r in (
            client.get("/v1/namespaces/v62/facts", params={"entity": "u"}, headers=auth),
            client.get(
                "/v1/namespaces/v62/facts", params={"entity": "u", "key": "k"}, headers=auth
            ),  # the fast lane
            client.put(
                "/v1/namespaces/v62/facts",
                json={"entity": "u", "key": "k", "value": 2},
                headers=auth,
            ),
            client.post("/v1/namespaces/v62/query", json={"text": "x"}, headers=auth),
        ):
            assert r.status_code == 503, r.text
            body = r.json()
            _only_public(body, "v62")
            assert "'v62' is unavailable" in body["error"]["message"]
            assert body["error"]["details"]["namespace"] == "v62"
