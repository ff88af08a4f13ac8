"""The auth mode is decided once, at start, and fails closed: a keyed server never turns open
(last key revoked, keys.db deleted or emptied), an open server cannot reach tenants'
namespaces, revocations count from the very next request, and keys can be bound to agents."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.cli import auth_mode, build_parser
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore

NS = "/v1/namespaces/support"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def db(tmp_path: Path) -> Iterator[synapsedb.Database]:
    with synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    ) as database:
        yield database


@pytest.fixture
def keys(tmp_path: Path) -> KeyStore:
    return KeyStore(tmp_path / "d")


def assert_closed(c: TestClient, token: str | None = None) -> None:
    """Every kind of /v1 request is 401, with or without the (former) key."""
    headers = {} if token is None else bearer(token)
    for method, path, kw in [
        ("GET", "/v1/namespaces", {}),
        ("GET", f"{NS}/memories", {}),
        ("GET", f"{NS}/facts", {"params": {"entity": "user:1", "key": "k"}}),  # the fast lane
        ("POST", f"{NS}/memories", {"json": {"entity": "user:1", "content": "anonymous"}}),
        ("GET", "/v1/namespaces/acme..support/memories", {}),  # the internal name, too
    ]:
        r = c.request(method, path, headers=headers, **kw)
        assert r.status_code == 401, (method, path, r.text)
        assert r.json()["error"]["code"] == "unauthorized"


def test_revoking_the_last_key_leaves_a_closed_server_not_an_open_one(
    db: synapsedb.Database, keys: KeyStore
) -> None:
    key, token = keys.create("acme", ["read", "write"])
    with TestClient(create_app(db, keys)) as c:
        w = c.post(
            f"{NS}/memories",
            json={"entity": "user:1", "content": "acme's secret"},
            headers=bearer(token),
        )
        assert w.status_code == 201
        keys.revoke(key.id)  # no sleep: the very next request sees it
        assert_closed(c, token)
        assert_closed(c)
    assert "acme..support" in db.namespaces()  # the data is there, and stayed out of reach


def test_a_keyed_server_started_with_no_live_key_refuses_everything(
    db: synapsedb.Database, keys: KeyStore
) -> None:
    with TestClient(create_app(db, keys, auth="keys")) as c:
        assert_closed(c)
        _, token = keys.create("acme", ["read"])  # a key made while it runs works at once
        assert c.get("/v1/namespaces", headers=bearer(token)).status_code == 200


def test_deleted_or_emptied_keys_db_means_no_valid_key(
    db: synapsedb.Database, keys: KeyStore, tmp_path: Path
) -> None:
    _, token = keys.create("acme", ["read", "write"])
    with TestClient(create_app(db, keys)) as c:
        assert c.get("/v1/namespaces", headers=bearer(token)).status_code == 200
        keys.path.unlink()
        assert_closed(c, token)
        # recreated by `synapsedb keys create` (another store): only the new key works
        _, fresh = KeyStore(tmp_path / "d").create("acme", ["read"])
        assert c.get("/v1/namespaces", headers=bearer(fresh)).status_code == 200
        assert c.get("/v1/namespaces", headers=bearer(token)).status_code == 401
        keys.path.write_bytes(b"")  # emptied in place
        assert_closed(c, fresh)
        keys.path.write_bytes(b"not a database at all, " * 200)  # or overwritten
        assert_closed(c, fresh)


def test_an_open_server_cannot_reach_tenants_namespaces(
    db: synapsedb.Database, keys: KeyStore
) -> None:
    _, token = keys.create("acme", ["read", "write", "admin"])
    with TestClient(create_app(db, keys)) as keyed:  # a keyed past leaves acme..support behind
        keyed.post(
            f"{NS}/memories",
            json={"entity": "user:1", "content": "acme's secret"},
            headers=bearer(token),
        )
        keyed.put(
            f"{NS}/facts",
            json={"entity": "user:1", "key": "k", "value": "acme's fact"},
            headers=bearer(token),
        )
    with TestClient(create_app(db, auth="none")) as c:
        tenant_ns = "/v1/namespaces/acme..support"
        for method, path, kw in [
            ("GET", f"{tenant_ns}/memories", {}),
            ("GET", f"{tenant_ns}/facts", {"params": {"entity": "user:1", "key": "k"}}),
            ("GET", f"{tenant_ns}/stats", {}),
            ("POST", f"{tenant_ns}/memories", {"json": {"entity": "u", "content": "x"}}),
            ("POST", f"{tenant_ns}/forget", {"json": {"entity": "user:1", "purge": True}}),
            ("GET", f"{tenant_ns}/changes", {"params": {"since": "0", "idle_timeout": "0"}}),
        ]:
            r = c.request(method, path, **kw)
            assert r.status_code == 422, (method, path, r.text)
            assert r.json()["error"]["details"]["field"] == "namespace"
            assert "acme's" not in r.text
        assert c.get("/v1/namespaces").json() == []
        assert "acme" not in c.get("/metrics").text
        # untenanted namespaces work as ever; a bearer token means nothing in this mode
        assert c.post(f"{NS}/memories", json={"entity": "u", "content": "open"}).status_code == 201
        assert c.get("/v1/namespaces", headers=bearer(token)).json() == ["support"]
    assert db.namespace("acme..support").stats().memories == 1  # untouched


def test_create_app_takes_the_mode_explicitly(db: synapsedb.Database, keys: KeyStore) -> None:
    with pytest.raises(synapsedb.ValidationError, match="auth"):
        create_app(db, auth="keys")  # keys mode needs the store
    with pytest.raises(synapsedb.ValidationError, match="auth"):
        create_app(db, keys, auth="maybe")  # type: ignore[arg-type]
    with pytest.raises(synapsedb.ValidationError, match="max_feeds_per_key"):
        create_app(db, keys, max_feeds_per_key=0)
    _, token = keys.create("acme", ["read"])
    with TestClient(create_app(db, keys, auth="none")) as c:  # the store is not consulted
        assert c.get(f"{NS}/stats").status_code == 200
        assert c.get(f"{NS}/stats", headers=bearer(token)).json()["namespace"] == "support"


# -- the CLI's choice ------------------------------------------------------------------------


def decide(argv: list[str], live_keys: bool) -> str:
    return auth_mode(build_parser().parse_args(["serve", *argv]), live_keys)


def test_serve_decides_the_mode_once_and_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SYNAPSEDB_AUTH", raising=False)
    assert decide([], live_keys=False) == "none"  # `make serve`: open on 127.0.0.1
    assert decide(["--host", "127.0.0.2"], live_keys=False) == "none"
    assert decide(["--host", "::1"], live_keys=False) == "none"
    assert decide([], live_keys=True) == "keys"  # keys exist: a loopback proxy stays keyed
    assert decide(["--host", "0.0.0.0"], live_keys=True) == "keys"
    assert decide(["--host", "myhost.example"], live_keys=True) == "keys"
    assert decide(["--auth", "none"], live_keys=True) == "none"
    assert decide(["--auth", "none", "--host", "0.0.0.0", "--insecure-open"], False) == "none"
    refused = [
        (["--host", "0.0.0.0"], False, "without API keys"),
        (["--auth", "keys"], False, "without API keys"),
        (["--auth", "none", "--host", "0.0.0.0"], True, "--insecure-open"),
        (["--auth", "none", "--host", "10.1.2.3"], False, "--insecure-open"),
        (["--host", "0.0.0.0"], False, "without API keys"),
    ]
    for argv, live, says in refused:
        with pytest.raises(synapsedb.ValidationError, match=says):
            decide(argv, live)
    monkeypatch.setenv("SYNAPSEDB_AUTH", "none")
    assert decide([], live_keys=True) == "none"
    monkeypatch.setenv("SYNAPSEDB_AUTH", "open")
    with pytest.raises(synapsedb.ValidationError, match="auth"):
        decide([], False)


def test_serve_refuses_auth_none_off_loopback(tmp_path: Path) -> None:
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
            "--auth",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYNAPSEDB_EMBEDDER": "none"},
    )
    assert out.returncode == 2 and "--insecure-open" in out.stderr
    assert not (tmp_path / "d" / "synapse.db").exists()  # refused before opening anything


# -- agents bound to keys --------------------------------------------------------------------


def test_a_key_bound_to_agents_acts_only_as_them(db: synapsedb.Database, keys: KeyStore) -> None:
    _, intake = keys.create("acme", ["read", "write"], agents=["intake"])
    _, pair = keys.create("acme", ["read", "write"], agents=["intake", "knowledge"])
    _, free = keys.create("acme", ["read", "write"])
    with pytest.raises(synapsedb.ValidationError, match="agents"):
        keys.create("acme", ["read"], agents=[])
    with TestClient(create_app(db, keys)) as c:
        # no agent named: the key's single agent
        m = c.post(f"{NS}/memories", json={"entity": "u", "content": "a"}, headers=bearer(intake))
        assert m.status_code == 201 and m.json()["agent"] == "intake"
        ok = c.post(
            f"{NS}/memories",
            json={"entity": "u", "content": "b"},
            headers={**bearer(pair), "X-Agent": "knowledge"},
        )
        assert ok.json()["agent"] == "knowledge"
        mid = m.json()["id"]
        before = c.get(f"{NS}/stats", headers=bearer(free)).json()
        posing = {**bearer(intake), "X-Agent": "resolution"}
        attempts = [
            ("POST", f"{NS}/memories", {"json": {"entity": "u", "content": "x"}}, posing),
            (
                "POST",
                f"{NS}/memories",
                {"json": {"entity": "u", "content": "x", "agent": "resolution"}},
                bearer(intake),
            ),
            (
                "POST",
                f"{NS}/memories:batch",
                {
                    "json": {
                        "items": [
                            {"entity": "u", "content": "x"},
                            {"entity": "u", "content": "y", "agent": "resolution"},
                        ]
                    }
                },
                bearer(intake),
            ),
            (
                "PATCH",
                f"{NS}/memories/{mid}",
                {"json": {"changes": {"content": "x", "agent": "resolution"}}},
                bearer(intake),
            ),
            ("DELETE", f"{NS}/memories/{mid}", {}, posing),
            (
                "PUT",
                f"{NS}/facts",
                {"json": {"entity": "u", "key": "k", "value": 1, "agent": "resolution"}},
                bearer(intake),
            ),
            (
                "POST",
                f"{NS}/events",
                {"json": {"entity": "u", "event": {"content": "x", "agent": "resolution"}}},
                bearer(intake),
            ),
            ("POST", f"{NS}/events", {"json": {"entity": "u", "event": "x"}}, posing),
            ("POST", f"{NS}/query", {"json": {"text": "x", "agent": "resolution"}}, bearer(intake)),
            ("POST", f"{NS}/forget", {"json": {"id": mid}}, posing),
        ]
        for method, path, kw, headers in attempts:
            r = c.request(method, path, headers=headers, **kw)
            assert r.status_code == 403, (method, path, r.text)
            err = r.json()["error"]
            assert err["code"] == "forbidden" and err["details"]["field"] == "agent"
            assert "resolution" in err["message"] and "intake" in err["message"]
        # a key bound to several agents must say which one it is
        unnamed = c.post(
            f"{NS}/memories", json={"entity": "u", "content": "z"}, headers=bearer(pair)
        )
        assert unnamed.status_code == 422 and unnamed.json()["error"]["details"]["field"] == "agent"
        assert c.get(f"{NS}/stats", headers=bearer(free)).json() == before  # nothing written
        # unbound keys name any agent, as before
        any_agent = c.post(
            f"{NS}/memories",
            json={"entity": "u", "content": "c"},
            headers={**bearer(free), "X-Agent": "resolution"},
        )
        assert any_agent.json()["agent"] == "resolution"
        audit = c.get(f"{NS}/audit", headers=bearer(free)).json()
        assert [e["agent"] for e in audit if e["action"] == "write"] == [
            "intake",
            "knowledge",
            "resolution",
        ]


def test_keys_cli_binds_agents_and_makes_operator_keys(tmp_path: Path) -> None:
    import json

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "synapsedb", "keys", *args, "--data", str(tmp_path / "d")],
            capture_output=True,
            text=True,
            timeout=60,
        )

    made = cli("create", "--tenant", "acme", "--agents", "intake,knowledge")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["agents"] == ["intake", "knowledge"]
    op = cli("create", "--scopes", "operator")
    assert op.returncode == 0, op.stderr
    assert json.loads(op.stdout)["scopes"] == ["operator"]
    assert cli("create", "--scopes", "read").returncode == 2  # a tenant key needs its tenant
    listed = [json.loads(line) for line in cli("list").stdout.splitlines()]
    assert [k["agents"] for k in listed] == [["intake", "knowledge"], None]
    assert [k["scopes"] for k in listed] == [["read", "write"], ["operator"]]


def test_an_old_keys_db_gains_the_agents_column(tmp_path: Path) -> None:
    import sqlite3

    (tmp_path / "d").mkdir()
    old = sqlite3.connect(tmp_path / "d" / "keys.db")
    old.execute(
        "CREATE TABLE api_keys (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, scopes TEXT NOT NULL,"
        " namespaces TEXT, rate REAL, hash TEXT NOT NULL, created_us INTEGER NOT NULL,"
        " revoked_us INTEGER)"
    )
    old.commit()
    old.close()
    store = KeyStore(tmp_path / "d")
    _, token = store.create("acme", ["read"], agents=["intake"])
    found = store.authenticate(token)
    assert found is not None and found.agents == ("intake",)


def test_revocation_is_seen_at_once_in_a_wal_keys_db_too(
    db: synapsedb.Database, keys: KeyStore
) -> None:
    """keys.db in WAL mode (switched by hand) keeps no change counter in its header: the store
    asks SQLite's data_version instead, and still sees a revocation on the next request."""
    import sqlite3

    conn = sqlite3.connect(keys.path)
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    key, token = keys.create("acme", ["read"])
    with TestClient(create_app(db, keys)) as c:
        assert c.get("/v1/namespaces", headers=bearer(token)).status_code == 200
        keys.revoke(key.id)
        assert c.get("/v1/namespaces", headers=bearer(token)).status_code == 401
        _, fresh = keys.create("acme", ["read"])
        assert c.get("/v1/namespaces", headers=bearer(fresh)).status_code == 200
    conn.close()
