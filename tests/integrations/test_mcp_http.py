"""MCP's streamable HTTP at ``/mcp`` on a real ``synapsedb serve`` app (uvicorn on loopback),
driven by the official SDK's client in both protocol eras: the API key of each request
decides tenant, scopes and agent for every tool and resource, as for the REST routes.

This file is where ``/mcp``'s tenant isolation is tested (tests/api/test_tenants.py probes the
REST routes and leaves ``/mcp`` to it): tenant B reaches none of tenant A's memories, facts,
answers or entities through any tool or resource, and cannot tell A's ids from ids that never
existed; a read-only key cannot call a write tool; a write key cannot erase."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import synapsedb
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore
from synapsedb.server.middleware import LOOPBACK_HOSTS
from tests.support.live_server import serve

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")

import httpx2  # noqa: E402  (the MCP SDK's HTTP client)
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

MODES = ["legacy", "auto"]  # the initialize handshake, and the 2026-07-28 per-request era


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    path = tmp_path_factory.mktemp("mcp") / "d"
    db = synapsedb.open(
        path, embedder=None, llm=None, durability="os", background_maintenance=False
    )
    keys = KeyStore(path)
    made = {
        "a": keys.create("acme", ["read", "write"]),
        "a_read": keys.create("acme", ["read"]),
        "a_admin": keys.create("acme", ["read", "write", "admin"]),
        "a_support": keys.create("acme", ["read", "write"], ["support"]),
        "a_intake": keys.create("acme", ["read", "write"], agents=["intake"]),
        "b": keys.create("globex", ["read", "write"]),
        "revoked": keys.create("acme", ["read", "write"]),
    }
    keys.revoke(made["revoked"][0].id)
    try:
        with serve(create_app(db, keys, allowed_hosts=LOOPBACK_HOSTS)) as url:
            yield {
                "url": url,
                "db": db,
                "keys": keys,
                **{name: tok for name, (_k, tok) in made.items()},
            }
    finally:
        db.close()


def session(
    env: dict[str, Any],
    key: str,
    scenario: Callable[[Any], Awaitable[Any]],
    *,
    mode: str = "auto",
    path: str = "/mcp",
    headers: dict[str, str] | None = None,
) -> Any:
    async def main() -> Any:
        h = {"Authorization": f"Bearer {env[key]}", **(headers or {})}
        async with httpx2.AsyncClient(headers=h, timeout=60) as http:
            transport = streamable_http_client(env["url"] + path, http_client=http)
            async with Client(transport, mode=mode) as client:
                return await scenario(client)

    return anyio.run(main)


async def ok(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    out = await client.call_tool(tool, args)
    assert not out.is_error, (tool, out.content)
    return out.structured_content  # type: ignore[no-any-return]


async def error(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    out = await client.call_tool(tool, args)
    assert out.is_error, (tool, out.structured_content)
    return out.structured_content["error"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", MODES)
def test_tenant_b_reaches_nothing_of_tenant_a(env: dict[str, Any], mode: str) -> None:
    entity = f"user:{mode}"

    async def a_writes(c: Any) -> dict[str, Any]:
        mem = await ok(c, "remember", entity=entity, content=f"acme secret {mode} plan")
        await ok(c, "set_fact", entity=entity, key="plan", value="gold")
        found = await ok(c, "recall", query=f"secret {mode}", entity=entity)
        assert [h["id"] for h in found["hits"]] == [mem["id"]]
        await ok(c, "record_answer", answer_id=f"ans-{mode}", query_ids=[found["query_id"]])
        return mem

    mem = session(env, "a", a_writes, mode=mode)

    async def b_looks(c: Any) -> None:
        never = "01M8AT7CND5JCGXY2QGP0DGBEE"
        for tool, args, bogus in [
            ("get_memory", {"id": mem["id"]}, {"id": never}),
            ("history", {"id": mem["id"]}, {"id": never}),
            ("history", {"entity": entity, "key": "plan"}, {"entity": "user:never", "key": "plan"}),
            (
                "get_fact",
                {"entity": entity, "key": "plan"},
                {"entity": "user:never", "key": "plan"},
            ),
            ("lineage", {"answer_id": f"ans-{mode}"}, {"answer_id": "ans-never"}),
        ]:
            seen, unseen = await error(c, tool, **args), await error(c, tool, **bogus)
            assert seen["code"] == unseen["code"] == "not_found", (tool, seen)
            assert "acme" not in seen["message"] and "globex" not in seen["message"]
            shape = {k: v for k, v in seen["details"].items() if k not in ("id", "entity")}
            assert shape == {
                k: v for k, v in unseen["details"].items() if k not in ("id", "entity")
            }
        assert (await ok(c, "recall", query=f"acme secret {mode} plan"))["hits"] == []
        assert (await ok(c, "get_fact", entity=entity))["facts"] == []
        listed = [str(r.uri) for r in (await c.list_resources()).resources]
        assert not any(entity.replace(":", "%3A") in u for u in listed)
        snap = await c.read_resource(f"synapsedb://default/entities/{entity.replace(':', '%3A')}")
        assert "acme secret" not in snap.contents[0].text
        # the tenant separator cannot name another tenant's namespace
        for name in ("acme..default", "..default"):
            err = await error(c, "recall", query="secret", namespace=name)
            assert (err["code"], err["details"]["field"]) == ("validation", "namespace")
        with pytest.raises(mcp.MCPError) as exc:
            await c.read_resource("synapsedb://acme..default/entities/" + entity)
        assert exc.value.error.data["error"]["details"]["field"] == "namespace"
        # and B's own writes stay B's
        await ok(c, "remember", entity=entity, content=f"globex note {mode}")

    session(env, "b", b_looks, mode=mode)

    async def a_again(c: Any) -> None:
        got = await ok(c, "recall", query=f"globex note {mode}", entity=entity)
        assert [h["content"] for h in got["hits"]] == [f"acme secret {mode} plan"]

    session(env, "a", a_again, mode=mode)
    assert env["db"].namespace("acme..default").get(mem["id"]).content == mem["content"]


@pytest.mark.parametrize("mode", MODES)
def test_a_read_only_key_calls_no_write_tool(env: dict[str, Any], mode: str) -> None:
    writes: dict[str, dict[str, Any]] = {
        "remember": {"entity": "user:ro", "content": "x"},
        "remember_conversation": {
            "entity": "user:ro",
            "messages": [{"role": "user", "content": "hi"}],
        },
        "set_fact": {"entity": "user:ro", "key": "k", "value": 1},
        "forget": {"entity": "user:ro"},
        "record_answer": {"answer_id": "ro-1", "query_ids": ["q"]},
    }

    async def scenario(c: Any) -> None:
        for tool, args in writes.items():
            err = await error(c, tool, **args)
            assert (err["code"], err["details"]["scope"]) == ("forbidden", "write"), tool
        assert (await ok(c, "recall", query="anything"))["query_id"]  # reading is allowed
        await c.list_resources()

    session(env, "a_read", scenario, mode=mode)
    ns = env["db"].namespace("acme..default")
    assert ns.entities().count("user:ro") == 0 and ns.facts("user:ro") == []


def test_erasing_needs_an_admin_key(env: dict[str, Any]) -> None:
    async def write_key(c: Any) -> None:
        await ok(c, "remember", entity="user:erase", content="to be erased")
        err = await error(c, "forget", entity="user:erase", purge=True)
        assert (err["code"], err["details"]["scope"]) == ("forbidden", "admin")
        assert (await ok(c, "forget", entity="user:erase"))["purged"] is False  # a tombstone

    session(env, "a", write_key)

    async def admin_key(c: Any) -> None:
        out = await ok(c, "forget", entity="user:erase", purge=True)
        assert out["purged"] is True and out["versions"] >= 2

    session(env, "a_admin", admin_key)


def test_namespaces_agents_and_the_default_namespace(env: dict[str, Any]) -> None:
    async def limited(c: Any) -> None:
        err = await error(c, "remember", entity="user:n", content="x", namespace="billing")
        assert err["code"] == "forbidden" and "billing" in err["message"]
        assert (await ok(c, "remember", entity="user:n", content="in support"))["entity"]

    session(env, "a_support", limited, path="/mcp?namespace=support")
    assert [m.content for m in env["db"].namespace("acme..support").memories("user:n")] == [
        "in support"
    ]

    async def bound(c: Any) -> None:
        assert (await ok(c, "remember", entity="user:n", content="by intake"))["agent"] == "intake"

    session(env, "a_intake", bound)

    async def impostor(c: Any) -> None:
        err = await error(c, "remember", entity="user:n", content="x")
        assert (err["code"], err["details"]["field"]) == ("forbidden", "agent")

    session(env, "a_intake", impostor, headers={"X-Agent": "billing"})


def test_the_endpoint_s_own_refusals(env: dict[str, Any]) -> None:
    url = env["url"] + "/mcp"
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in (
        {},
        {"Authorization": "Bearer sdb_bogus_x"},
        {"Authorization": f"Bearer {env['revoked']}"},
    ):
        r = httpx.post(url, json=init, headers={**accept, **headers})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json()["jsonrpc"] == "2.0" and r.json()["id"] is None  # JSON-RPC's shape
        assert r.json()["error"]["code"] == -32000
        assert r.json()["error"]["data"]["error"]["code"] == "unauthorized"
    auth = {**accept, "Authorization": f"Bearer {env['a']}"}
    r = httpx.post(url, content=b"{}", headers={**auth, "Content-Type": "text/plain"})
    assert r.status_code == 415
    assert r.json()["error"]["data"]["error"]["code"] == "unsupported_media_type"
    r = httpx.get(url, headers=auth)
    assert r.status_code == 405 and r.json()["error"]["details"]["allowed"] == ["POST"]
    r = httpx.post(url, json=init, headers={**auth, "Host": "evil.example"})
    assert r.status_code == 421  # the server's Host check covers /mcp (DNS rebinding)
    r = httpx.post(url, json=init, headers=auth)
    assert r.status_code == 200 and r.json()["result"]["serverInfo"]["name"] == "synapsedb"
    r = httpx.post(url, content=b"{not json", headers={**auth, "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700  # JSON-RPC's own shape


@pytest.mark.parametrize("key", ["revoked", "bogus"])
def test_a_refused_key_says_why_in_the_handshake(env: dict[str, Any], key: str) -> None:
    """The official client's error carries the server's words ("unauthorized: ..."), not
    "Server returned an error response". The SDK itself wraps a failed handshake in an
    ExceptionGroup (its task group), holding that one MCPError."""

    async def never(client: Any) -> None:  # pragma: no cover - the handshake is refused
        raise AssertionError("the session opened with a refused key")

    env = {**env, "bogus": "sdb_bogus_x"}
    with pytest.raises(BaseExceptionGroup) as exc:
        session(env, key, never, mode="legacy")
    assert exc.group_contains(mcp.MCPError, match=r"^unauthorized: a valid API key is required")


def test_a_key_revoked_mid_session_is_an_mcp_error(env: dict[str, Any]) -> None:
    """A call after the key was revoked raises MCPError itself, which a host shows as is."""
    made, token = env["keys"].create("acme", ["read", "write"])

    async def scenario(client: Any) -> mcp.MCPError:
        await ok(client, "get_fact", entity="user:1")
        env["keys"].revoke(made.id)
        with pytest.raises(mcp.MCPError) as exc:
            await client.call_tool("get_fact", {"entity": "user:1"})
        return exc.value

    err = session({**env, "fresh": token}, "fresh", scenario)
    assert str(err).startswith("unauthorized: ")
    assert err.error.data["error"]["code"] == "unauthorized"


def test_an_open_server_refuses_tenant_names(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", embedder=None, llm=None, durability="os") as db:
        db.namespace("acme..default").write("user:1", "a tenant's note")
        with serve(create_app(db)) as url:
            env = {"url": url, "none": "ignored-in-open-mode"}

            async def scenario(c: Any) -> None:
                err = await error(c, "get_fact", entity="user:1", namespace="acme..default")
                assert (err["code"], err["details"]["field"]) == ("validation", "namespace")
                assert (await ok(c, "remember", entity="user:1", content="open"))["id"]

            session(env, "none", scenario)
            assert db.namespaces() == ["acme..default", "default"]
