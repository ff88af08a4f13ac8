"""MCP's ``resources/list`` pages the namespace's entities with an opaque cursor (the page's
last name, encoded), asking ``Namespace.entities`` for one page at a time; the entities
resource reads at most 1,000 names with a ``next`` URI, and takes ``prefix`` and ``after``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import synapsedb
from synapsedb.integrations.mcp.resources import (
    MAX_NAMES,
    PAGE,
    decode_cursor,
    encode_cursor,
    entity_uri,
    page,
)

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp import Client  # noqa: E402

from synapsedb.integrations.mcp import LocalBackend  # noqa: E402
from synapsedb.integrations.mcp.server import build_server  # noqa: E402

NS = "travel"
NAMES = sorted([f"user:{i:04d}" for i in range(2 * PAGE + 37)] + ["ünïcode:1", "a b/c?d"])
# more than a page of them, so that a page made only of them is skipped too
INTERNAL = ["synapsedb:jobs", "synapsedb:config"] + [f"synapsedb:x{i:04d}" for i in range(PAGE + 5)]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = tmp_path_factory.mktemp("mcp-pages") / "d"
    with synapsedb.open(
        path, embedder=None, llm=None, durability="os", background_maintenance=False
    ) as database:
        ns = database.namespace(NS)
        ns.write_many([(n, f"note about {n}") for n in NAMES])
        for name in INTERNAL:  # SynapseDB's own entities: hidden from every list below
            ns.set(name, "state", {"queued": 1})
        yield database


def run(db: Any, scenario: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(LocalBackend(db, NS))) as client:
            return await scenario(client)

    return anyio.run(main)


def test_resources_list_walks_every_entity_once_with_opaque_cursors(db: Any) -> None:
    async def scenario(c: Any) -> list[tuple[list[str], str | None]]:
        pages = []
        cursor = None
        while True:
            got = await c.list_resources(cursor=cursor)
            pages.append(([str(r.uri) for r in got.resources], got.next_cursor))
            cursor = got.next_cursor
            if cursor is None:
                return pages

    pages = run(db, scenario)
    assert [len(uris) for uris, _ in pages] == [PAGE + 1, PAGE, len(NAMES) - 2 * PAGE]
    assert pages[0][0][0] == f"synapsedb://{NS}/entities"  # the list, on the first page only
    walked = [u for uris, _ in pages for u in uris][1:]
    assert walked == [entity_uri(NS, n) for n in NAMES]  # sorted, each once
    for _uris, cursor in pages[:-1]:
        assert cursor is not None and ":" not in cursor and "user" not in cursor  # opaque


def test_a_cursor_this_server_did_not_give_is_a_validation_error(db: Any) -> None:
    async def scenario(c: Any) -> list[Any]:
        out = []
        for bad in ("", "100", "not a cursor", "%%%", "A", "w" * 2000, "_-_-"):
            with pytest.raises(mcp.MCPError) as exc:
                await c.list_resources(cursor=bad)
            out.append((bad, exc.value.error.code, exc.value.error.data["error"]["details"]))
        return out

    for bad, code, details in run(db, scenario):
        assert code == -32602, bad
        assert details["field"] == "cursor", bad


def test_the_entities_resource_pages_through_mcp(db: Any) -> None:
    async def read(c: Any, uri: str) -> Any:
        return json.loads((await c.read_resource(uri)).contents[0].text)

    async def scenario(c: Any) -> list[Any]:
        base = f"synapsedb://{NS}/entities"
        templates = (await c.list_resource_templates()).resource_templates
        return [
            await read(c, base),
            await read(c, base + "?prefix=user%3A01&after=user%3A0105"),
            await read(c, base + "?prefix=%C3%BC"),
            {t.uri_template for t in templates},
        ]

    everything, some, uni, templates = run(db, scenario)
    assert everything == {"entities": NAMES}  # fewer than MAX_NAMES: no next
    assert some == {"entities": [f"user:{i:04d}" for i in range(106, 200)]}
    assert uni == {"entities": ["ünïcode:1"]}
    assert "synapsedb://{namespace}/entities{?as_of,prefix,after}" in templates


def test_synapsedb_s_own_entities_are_not_resources(db: Any) -> None:
    async def scenario(c: Any) -> tuple[Any, Any]:
        base = f"synapsedb://{NS}/entities"
        listed = json.loads((await c.read_resource(base + "?prefix=synapsedb%3A")).contents[0].text)
        with pytest.raises(mcp.MCPError) as exc:
            await c.read_resource(entity_uri(NS, "synapsedb:jobs"))
        return listed, exc.value.error

    listed, err = run(db, scenario)
    assert listed == {"entities": []}
    assert err.code == -32002 and err.data["error"]["code"] == "not_found"
    assert db.namespace(NS).facts("synapsedb:jobs")  # there, only not a resource


class _Spy:
    """A namespace handle recording the entities() calls ``page`` makes."""

    def __init__(self, names: list[str]) -> None:
        self.names = sorted(names)
        self.calls: list[dict[str, Any]] = []

    def entities(self, **kwargs: Any) -> list[str]:
        self.calls.append(kwargs)
        after, limit = kwargs.get("after"), kwargs["limit"]
        return [n for n in self.names if after is None or n > after][:limit]


def test_page_asks_for_one_page_never_the_whole_list() -> None:
    spy = _Spy([f"e{i:05d}" for i in range(10 * MAX_NAMES)])
    chunk, cursor = page(spy, None)
    assert chunk == spy.names[:PAGE] and cursor is not None
    chunk, cursor = page(spy, cursor)
    assert chunk == spy.names[PAGE : 2 * PAGE]
    assert spy.calls == [
        {"after": None, "limit": PAGE + 1},
        {"after": spy.names[PAGE - 1], "limit": PAGE + 1},
    ]
    exact = _Spy([f"e{i}" for i in range(PAGE)])
    assert page(exact, None) == (exact.names, None)  # a full last page has no next cursor


@pytest.mark.parametrize("name", ["user:1", "a", "ünïcode", "😀" * 256, "x" * 256, "a/b?c=d"])
def test_cursors_round_trip(name: str) -> None:
    cursor = encode_cursor(name)
    assert cursor.isascii() and "=" not in cursor
    assert decode_cursor(cursor) == name


@pytest.mark.parametrize("bad", ["", "A", "dXNlcjox=", "dXNlcjox\n", "Zg==", "/w", "ab+c", "Zh"])
def test_bad_cursors_are_refused(bad: str) -> None:
    """Empty, a lone character, padding, a newline, not base64url, not UTF-8 (``/w``: 0xff),
    a second spelling of a name (``Zh`` decodes to ``f`` as ``Zg`` does)."""
    assert decode_cursor("Zg") == "f"
    with pytest.raises(synapsedb.ValidationError) as err:
        decode_cursor(bad)
    assert err.value.details["field"] == "cursor"


def test_a_cursor_past_the_last_name_is_an_empty_last_page(tmp_path: Path) -> None:
    with synapsedb.open(
        tmp_path / "d", embedder=None, llm=None, durability="os", background_maintenance=False
    ) as database:
        ns = database.namespace("x")
        ns.write("b", "note")
        assert page(ns, encode_cursor("a")) == (["b"], None)
        assert page(ns, encode_cursor("b")) == ([], None)


def test_an_output_schema_refuses_an_answer_that_drifted() -> None:
    """The schemas say something: a remember answer without its id, or with a field of the wrong type, fails."""
    import jsonschema

    from synapsedb.integrations.mcp.encode import to_json
    from synapsedb.integrations.mcp.schemas import output_schema

    with synapsedb.open(
        Path(__import__("tempfile").mkdtemp()) / "d", embedder=None, llm=None
    ) as db:
        memory = to_json(db.namespace("n").write("user:1", {"content": "x", "embedding": [1.0]}))
    schema = output_schema("remember")
    jsonschema.validate(memory, schema)
    for broken in ({k: v for k, v in memory.items() if k != "id"}, {**memory, "salience": "hi"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)
