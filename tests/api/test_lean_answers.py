"""Answers leave memories' vectors out unless ``include=embedding`` asks for them: every route
whose answer holds memories, over HTTP and through the Python clients; exports stay lossless."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.client import AsyncRemoteDatabase, RemoteDatabase
from synapsedb.server import create_app
from synapsedb.surface import OPERATIONS
from synapsedb.types import Memory, Snapshot

NS = "/v1/namespaces/acme"
VEC = [0.25] * 8
BATCH_ITEM = {"entity": "u", "content": "y", "embedding": VEC}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    """A server with one memory (id ``m1``, a caller's vector) written; yields the client and
    that memory's id."""
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    with TestClient(create_app(db)) as http:
        r = http.post(
            f"{NS}/memories", json={"entity": "u", "id": "m1", "content": "first", "embedding": VEC}
        )
        assert r.status_code == 201, r.text
        yield http, "m1"
    db.close()


def calls(mid: str) -> list[tuple[str, str, dict[str, Any]]]:
    """One request to each route whose answer holds memories (writes change ``m1`` again)."""
    return [
        ("POST", f"{NS}/memories", {"json": {"entity": "u", "content": "x", "embedding": VEC}}),
        ("POST", f"{NS}/memories:batch", {"json": {"items": [BATCH_ITEM]}}),
        ("PATCH", f"{NS}/memories/{mid}", {"json": {"changes": {"salience": 0.8}}}),
        ("GET", f"{NS}/memories/{mid}", {}),
        ("GET", f"{NS}/memories", {"params": {"entity": "u"}}),
        ("GET", f"{NS}/memories/{mid}/history", {}),
        ("GET", f"{NS}/snapshot", {"params": {"entity": "u"}}),
        ("DELETE", f"{NS}/memories/{mid}", {}),
    ]


def memories_in(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, list):
        return body
    return body.get("memories", [body])  # type: ignore[no-any-return]


def test_every_memory_answer_is_lean_unless_asked(served: tuple[TestClient, str]) -> None:
    http, mid = served
    for method, path, kwargs in calls(mid):
        r = http.request(method, path, **kwargs)
        assert r.status_code < 300, (method, path, r.text)
        got = memories_in(r.json())
        assert got and all("embedding" not in m for m in got), (method, path)
        assert all("content" in m and "version" in m for m in got)
    http.post(f"{NS}/memories", json={"entity": "u", "id": "m2", "content": "z", "embedding": VEC})
    for method, path, kwargs in calls("m2"):
        params = {**kwargs.pop("params", {}), "include": "embedding"}
        r = http.request(method, path, params=params, **kwargs)
        assert r.status_code < 300, (method, path, r.text)
        got = memories_in(r.json())
        assert all("embedding" in m for m in got), (method, path)
        with_vectors = [m for m in got if m["embedding"] is not None]
        assert with_vectors or method == "DELETE", (method, path)  # a tombstone has none
        assert all(m["embedding"] == pytest.approx(VEC) for m in with_vectors)


def test_a_lean_write_is_a_fraction_of_the_full_one(served: tuple[TestClient, str]) -> None:
    http, _ = served
    vec = [0.05] * 384  # the local model's dimension; a namespace of its own
    lean = http.post(f"{NS}-384/memories", json={"entity": "u", "content": "a", "embedding": vec})
    full = http.post(
        f"{NS}-384/memories",
        params={"include": "embedding"},
        json={"entity": "u", "content": "a", "embedding": vec},
    )
    assert lean.status_code == full.status_code == 201
    assert len(lean.content) * 10 < len(full.content)


@pytest.mark.parametrize("value", ["vector", "embedding,vector", "", "EMBEDDING"])
def test_an_unknown_include_is_refused_before_anything_is_written(
    served: tuple[TestClient, str], value: str
) -> None:
    http, _ = served
    before = http.get(f"{NS}/stats").json()["memory_versions"]
    r = http.post(
        f"{NS}/memories",
        params={"include": value},
        json={"entity": "u", "content": "never written"},
    )
    assert r.status_code == 422
    assert r.json()["error"]["details"]["field"] == "include"
    r = http.request(
        "PATCH",
        f"{NS}/memories/m1",
        params={"include": value},
        json={"changes": {"content": "never"}},
    )
    assert r.status_code == 422
    assert http.get(f"{NS}/stats").json()["memory_versions"] == before


def test_include_repeated_or_comma_separated(served: tuple[TestClient, str]) -> None:
    http, mid = served
    for params in ({"include": ["embedding", "embedding"]}, {"include": "embedding,embedding"}):
        r = http.get(f"{NS}/memories/{mid}", params=params)
        assert r.status_code == 200 and r.json()["embedding"] == pytest.approx(VEC)


def test_the_routes_taking_include_are_those_answering_memories(tmp_path: Path) -> None:
    """The OpenAPI document offers ``include`` exactly where an answer holds memories."""

    def holds_memories(answer: Any) -> bool:
        return answer in (Memory, list[Memory], Snapshot)

    db = synapsedb.open(tmp_path, embedder=None)
    try:
        doc = msgspec.json.decode(create_app(db).state.openapi)
    finally:
        db.close()
    offered = {
        (method.upper(), path)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if any(p["name"] == "include" for p in op["parameters"])
    }
    answering = {(op.method, op.route) for op in OPERATIONS if holds_memories(op.answer)}
    assert offered == answering
    assert len(offered) == 8


def test_export_keeps_every_vector(served: tuple[TestClient, str]) -> None:
    http, _ = served
    lines = [msgspec.json.decode(x) for x in http.get(f"{NS}/export").content.splitlines() if x]
    vectors = [r for r in lines if r.get("kind") == "memory" and r.get("embedding")]
    assert vectors, lines[:3]


def test_python_clients_are_lean_unless_made_with_include(
    served: tuple[TestClient, str],
) -> None:
    http, mid = served
    lean = RemoteDatabase("http://testserver", client=http).namespace("acme")
    full = RemoteDatabase("http://testserver", client=http, include="embedding").namespace("acme")
    assert lean.get(mid).embedding is None
    assert full.get(mid).embedding.tolist() == pytest.approx(VEC)  # type: ignore[union-attr]
    assert all(m.embedding is None for m in lean.snapshot("u").memories)
    assert all(m.embedding is not None for m in full.snapshot("u").memories)
    assert lean.get(mid) == full.get(mid)  # the rest is the same
    with pytest.raises(synapsedb.ValidationError) as err:
        RemoteDatabase("http://testserver", client=http, include=["vector"])
    assert err.value.field == "include"

    async def run() -> tuple[Any, Any]:
        transport = httpx.ASGITransport(app=http.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as ah:
            a = AsyncRemoteDatabase("http://testserver", client=ah).namespace("acme")
            b = AsyncRemoteDatabase(
                "http://testserver", client=ah, include=("embedding",)
            ).namespace("acme")
            return await a.history(mid), await b.history(mid)

    plain, vectors = asyncio.run(run())
    assert [m.embedding for m in plain] == [None]
    assert vectors[0].embedding.tolist() == pytest.approx(VEC)


def test_the_documented_request_asks_for_the_vector(served: tuple[TestClient, str]) -> None:
    """docs/http.md#lean-answers: its curl example, sent as written."""
    import re
    import shlex

    text = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
    section = text.split("## Lean answers", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    words = shlex.split(block[1].replace("\\\n", " "))
    url = next(w for w in words if "localhost:7379" in w)
    body = words[words.index("-d") + 1]
    http, _ = served
    r = http.post(
        url.split("localhost:7379", 1)[1],
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 201, r.text
    assert "embedding" in r.json() and "include=embedding" in url


def test_connect_passes_include_to_the_clients() -> None:
    """synapsedb.connect / connect_async take include= like the client classes (no request is
    made here: the value is checked and kept)."""
    for include, want in ((None, ()), ("embedding", ("embedding",))):
        db = synapsedb.connect("http://127.0.0.1:9", include=include)
        assert db.include == want
        db.close()
        adb = synapsedb.connect_async("http://127.0.0.1:9", include=include)
        assert adb.include == want
        asyncio.run(adb.close())
    for connect in (synapsedb.connect, synapsedb.connect_async):
        with pytest.raises(synapsedb.ValidationError) as err:
            connect("http://127.0.0.1:9", include="vectors")
        assert err.value.field == "include"
