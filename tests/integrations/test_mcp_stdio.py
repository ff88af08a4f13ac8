"""``synapsedb mcp`` over stdio, driven by the official MCP SDK's own client (it spawns
``python -m synapsedb mcp ...`` as an MCP host would): every tool, resources, time travel,
errors carrying SynapseDB's code and field, embedded and as a client of a keyed server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import synapsedb
from synapsedb.errors import NotFoundError
from tests.support.live_server import serve

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

TOOLS = {
    "remember",
    "remember_conversation",
    "recall",
    "get_memory",
    "get_fact",
    "set_fact",
    "history",
    "forget",
    "lineage",
    "record_answer",
}


def params(*args: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNAPSEDB_")}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "synapsedb", "mcp", *args], env=env
    )


def run(server: StdioServerParameters, scenario: Callable[[Any], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with Client(server, mode="legacy", read_timeout_seconds=120) as client:
            return await scenario(client)

    return anyio.run(main)


async def ok(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    out = await client.call_tool(tool, args)
    assert not out.is_error, (tool, out.content)
    assert json.loads(out.content[0].text) == out.structured_content  # the same, as text
    return out.structured_content  # type: ignore[no-any-return]


async def error(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    out = await client.call_tool(tool, args)
    assert out.is_error, (tool, out.structured_content)
    assert json.loads(out.content[0].text) == out.structured_content
    return out.structured_content["error"]  # type: ignore[no-any-return]


def test_every_tool_over_stdio_on_a_data_directory(tmp_path: Path) -> None:
    data = tmp_path / "d"

    async def scenario(c: Any) -> dict[str, Any]:
        listed = {t.name: t for t in (await c.list_tools()).tools}
        assert set(listed) == TOOLS
        for tool in listed.values():
            assert tool.description and tool.input_schema["additionalProperties"] is False
            # what the client checks every structured answer against (an object, with $defs)
            assert tool.output_schema["type"] == "object", tool.name
            assert tool.output_schema.get("properties") or tool.output_schema.get("anyOf")
            for name, prop in tool.input_schema["properties"].items():
                assert prop.get("description"), (tool.name, name)
        assert listed["remember"].input_schema["required"] == ["entity", "content"]
        assert listed["recall"].annotations.read_only_hint is True
        assert listed["forget"].annotations.destructive_hint is True

        m1 = await ok(
            c,
            "remember",
            entity="user:42",
            metadata={"trip": "hawaii"},
            content="The user's budget for the Hawaii trip is $10,000",
        )
        assert m1["agent"] == "planner" and m1["type"] == "fact"
        m2 = await ok(
            c,
            "remember",
            entity="user:42",
            type="preference",
            content="The user prefers window seats on long flights",
        )
        found = await ok(c, "recall", query="how much can they spend in Hawaii", entity="user:42")
        assert found["hits"][0]["id"] == m1["id"] and "embedding" not in found["hits"][0]
        # time travel and filters: before m2 existed there was no preference to find
        prefs = await ok(c, "recall", query="seats", filter={"type": "preference"})
        assert [h["id"] for h in prefs["hits"]] == [m2["id"]]
        then = await ok(
            c, "recall", query="seats", filter={"type": "preference"}, as_of=m1["recorded_at"]
        )
        assert then["hits"] == []
        typed = await ok(c, "recall", query="Hawaii budget window seats", types=["preference"])
        assert [h["id"] for h in typed["hits"]] == [m2["id"]]

        f1 = await ok(c, "set_fact", entity="user:42", key="order", value={"status": "requested"})
        f2 = await ok(
            c, "set_fact", entity="user:42", key="order", value={"status": "refunded"}, if_version=1
        )
        assert f2["version"] == 2
        old = await ok(c, "get_fact", entity="user:42", key="order", as_of=f1["recorded_at"])
        assert old["value"] == {"status": "requested"}
        every = await ok(c, "get_fact", entity="user:42")
        assert [f["value"] for f in every["facts"]] == [{"status": "refunded"}]
        versions = (await ok(c, "history", entity="user:42", key="order"))["versions"]
        assert [v["version"] for v in versions] == [1, 2]
        assert {v["agent"] for v in versions} == {"planner"}
        assert len((await ok(c, "history", id=m1["id"]))["versions"]) == 1

        lin = await ok(
            c,
            "record_answer",
            answer_id="ans-1",
            query_ids=[found["query_id"]],
            text="Your budget is $10,000",
            cited=[m1["id"]],
        )
        assert lin["answer_id"] == "ans-1" and lin["cited"][0]["id"] == m1["id"]
        again = await ok(c, "lineage", answer_id="ans-1")
        assert again["queries"][0]["hits"][0]["content"] == m1["content"]

        gone = await ok(c, "forget", id=m2["id"])
        assert gone["memories"] == 1
        assert (await error(c, "get_memory", id=m2["id"]))["code"] == "not_found"
        before = await ok(c, "get_memory", id=m2["id"], as_of=m2["recorded_at"])
        assert before["content"] == m2["content"]

        # errors keep SynapseDB's code, field and limit
        bad = await error(c, "remember", entity="user:42", content="x", salience=7)
        assert (bad["code"], bad["details"]["field"], bad["details"]["limit"]) == (
            "validation",
            "salience",
            1,
        )
        assert (await error(c, "set_fact", entity="user:42", key="order", value=1, if_version=7))[
            "code"
        ] == "version_conflict"
        unknown = await error(c, "recall", query="x", colour="red")
        assert unknown["details"]["field"] == "colour" and "not an argument" in unknown["message"]
        missing = await error(c, "remember", entity="user:42")
        assert missing["details"]["field"] == "content"
        wrong = await error(c, "recall", query="x", k="ten")
        assert wrong["details"]["field"] == "k" and "integer" in wrong["message"]
        both = await error(c, "history", id=m1["id"], entity="user:42", key="order")
        assert both["details"]["field"] == "id"
        assert (await error(c, "forget", id=m1["id"], purge=True))["details"]["field"] == "purge"

        # another namespace of the same directory, by argument
        other = await ok(c, "remember", entity="user:42", content="elsewhere", namespace="other")
        assert (await error(c, "get_memory", id=other["id"]))["code"] == "not_found"

        # resources: the namespace's entities, each readable as a snapshot
        listing = (await c.list_resources()).resources
        uris = [str(r.uri) for r in listing]
        assert uris == ["synapsedb://travel/entities", "synapsedb://travel/entities/user%3A42"]
        snap = json.loads((await c.read_resource(uris[1])).contents[0].text)
        assert [m["id"] for m in snap["memories"]] == [m1["id"]]
        assert snap["facts"][0]["value"] == {"status": "refunded"}
        past = json.loads(
            (await c.read_resource(uris[1] + "?as_of=" + m1["recorded_at"])).contents[0].text
        )
        assert past["facts"] == [] and [m["id"] for m in past["memories"]] == [m1["id"]]
        names = json.loads((await c.read_resource(uris[0])).contents[0].text)
        assert names == {"entities": ["user:42"]}
        templates = (await c.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {
            "synapsedb://{namespace}/entities{?as_of,prefix,after}",
            "synapsedb://{namespace}/entities/{entity}{?as_of}",
        }
        with pytest.raises(mcp.MCPError) as exc:
            await c.read_resource("file:///etc/passwd")
        assert exc.value.error.data["error"]["details"]["field"] == "uri"
        return m1

    m1 = run(params("--data", str(data), "--namespace", "travel", "--agent", "planner"), scenario)
    with synapsedb.open(data, embedder=None, llm=None) as db:  # written where it said
        assert db.namespace("travel").get(m1["id"]).content == m1["content"]
        assert db.namespaces() == ["other", "travel"]


def test_stdio_as_a_client_of_a_keyed_server(tmp_path: Path) -> None:
    from synapsedb.server import create_app
    from synapsedb.server.keys import KeyStore

    db = synapsedb.open(tmp_path / "d", embedder=None, llm=None, durability="os")
    keys = KeyStore(tmp_path / "d")
    acme = keys.create("acme", ["read", "write"])[1]
    acme_read = keys.create("acme", ["read"])[1]
    globex = keys.create("globex", ["read", "write"])[1]
    try:
        with serve(create_app(db, keys)) as url:

            async def writes(c: Any) -> dict[str, Any]:
                return await ok(c, "remember", entity="user:1", content="acme's secret")

            mem = run(params("--url", url, "--api-key", acme, "-n", "support"), writes)
            assert db.namespace("acme..support").get(mem["id"]).content == "acme's secret"
            with synapsedb.connect(url, api_key=globex) as other, pytest.raises(NotFoundError):
                other.namespace("support").get(mem["id"])

            async def cannot_write(c: Any) -> dict[str, Any]:
                return await error(c, "remember", entity="user:1", content="x")

            err = run(params("--url", url, "--api-key", acme_read, "-n", "support"), cannot_write)
            assert (err["code"], err["details"]["scope"]) == ("forbidden", "write")

            async def cannot_see(c: Any) -> dict[str, Any]:
                return await error(c, "get_memory", id=mem["id"])

            assert (
                run(params("--url", url, "--api-key", globex, "-n", "support"), cannot_see)["code"]
                == "not_found"
            )
    finally:
        db.close()


def test_a_bad_start_is_said_on_stderr_with_status_2(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "synapsedb",
            "mcp",
            "--data",
            str(tmp_path / "d"),
            "--namespace",
            "no spaces",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert "namespace" in out.stderr and "validation" in out.stderr


def test_a_data_directory_in_use_is_said_to_the_host(tmp_path: Path) -> None:
    """A second server on a held data directory: the host's initialize gets a JSON-RPC error
    saying so (what hosts display), not only "Connection closed"; stderr says it too."""
    errlog = tmp_path / "stderr.txt"

    async def main() -> None:
        with errlog.open("w") as err:
            transport = stdio_client(params("--data", str(tmp_path / "d")), errlog=err)
            async with Client(transport, mode="legacy", read_timeout_seconds=120):
                raise AssertionError("the session opened on a held data directory")

    held = synapsedb.open(tmp_path / "d", embedder=None, llm=None)
    try:
        with pytest.raises(BaseExceptionGroup) as exc:  # the SDK's task group wraps it
            anyio.run(main)
    finally:
        held.close()
    assert exc.group_contains(mcp.MCPError, match=r"^storage: data directory .* is in use")
    found = exc.value.exceptions[0]
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    assert isinstance(found, mcp.MCPError) and found.error.data["error"]["code"] == "storage"
    assert "error [storage]: data directory" in errlog.read_text()


def test_the_refusal_answers_the_first_request_only() -> None:
    import io

    from synapsedb.errors import StorageError
    from synapsedb.integrations.mcp.stdio import REFUSED, refuse_stdio

    out = io.StringIO()
    stdin = io.StringIO(
        'not json\n{"jsonrpc": "2.0", "method": "notifications/x"}\n'
        '{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {}}\n'
        '{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}\n'
    )
    refuse_stdio(StorageError("data directory d is in use"), stdin, out)
    answer = json.loads(out.getvalue())
    assert answer["id"] == 7 and answer["error"]["code"] == REFUSED
    assert answer["error"]["message"] == "storage: data directory d is in use"
    assert stdin.readline().startswith('{"jsonrpc": "2.0", "id": 8')  # left unread
    empty = io.StringIO()
    refuse_stdio(StorageError("x"), io.StringIO(""), empty)  # end of input: no word
    assert empty.getvalue() == ""
