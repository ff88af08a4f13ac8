"""The same operations, embedded and over HTTP, give the same results and the same errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.client import RemoteDatabase
from synapsedb.server import create_app
from tests.congruence.conftest import ServedStorage
from tests.congruence.lean import as_served


def normalize(value: Any) -> Any:
    """Drop what differs by construction between two databases (random query ids)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: (None if f.name == "query_id" else normalize(getattr(value, f.name)))
            for f in dataclasses.fields(value)
        }
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if hasattr(value, "tolist"):  # numpy embeddings
        return value.tolist()
    return value


@pytest.fixture(params=["lean", "embedding"])
def pair(
    tmp_path: Path, request: pytest.FixtureRequest, served_storage: ServedStorage
) -> Iterator[tuple[Any, Any]]:
    """An embedded database and a client of a served one (on SQLite or PostgreSQL): lean
    (vectors left out of answers, the default) or made with ``include="embedding"`` (answers as
    embedded, vectors too)."""
    start = 1_760_000_000_000_000
    local = synapsedb.open(
        tmp_path / "a",
        clock=synapsedb.ManualClock(start),
        durability="os",
        embedder=None,
        background_maintenance=False,
    )
    served = synapsedb.open(
        tmp_path / "b",
        clock=synapsedb.ManualClock(start),
        durability="os",
        embedder=None,
        background_maintenance=False,
        storage=served_storage(),
    )
    http = TestClient(create_app(served))
    include = "embedding" if request.param == "embedding" else None
    remote = RemoteDatabase("http://testserver", client=http, include=include)
    yield local, remote
    remote.close()
    http.close()
    served.close()
    local.close()


def scenario(db: Any) -> list[Any]:
    mem = db.namespace("acme", agent="intake")
    out: list[Any] = []
    out.append(
        mem.write(
            "user:4321",
            {
                "id": "m1",
                "content": "Refund requested for order 1458",
                "salience": 0.9,
                "ts": "2025-10-24T10:00:00Z",
                "metadata": {"channel": "email"},
                "embedding": [0.3, 0.2, 0.1],
            },
        )
    )
    out.append(
        mem.write_many(
            [
                ("user:4321", {"id": "m2", "content": "Refund email sent"}),
                {
                    "entity": "user:9",
                    "id": "m3",
                    "content": "Prefers phone",
                    "embedding": [0.1, 0.2, 0.3],
                },
            ]
        )
    )
    out.append(mem.update("m1", {"content": "Refund for order 1458 approved"}, if_version=1))
    out.append(mem.get("m1"))
    out.append(mem.history("m1"))
    out.append(mem.memories("user:4321"))
    out.append(mem.memories("user:4321", limit=1, before="m1"))
    out.append(mem.memories(limit=1, before="m3"))
    out.append(mem.set("user:4321", "order", {"id": 1458}, agent="resolution"))
    out.append(mem.get("user:4321", "order"))
    out.append(mem.facts("user:4321"))
    out.append(
        mem.append(
            "user:4321", "Refund confirmed delivered on 10/28.", stream="s", searchable=False
        )
    )  # a searchable event gets a random memory id
    out.append(mem.append("user:9", "Called back.", stream="s:2", searchable=False))
    out.append(mem.append("user:9", "Ticket closed.", stream="t:1", searchable=False))
    out.append(mem.events("s"))
    res = mem.query("user:4321 refund status", explain=True)
    out.append(res)
    out.append(mem.query("refund", filter={"channel": "email"}, mode="keyword"))
    out.append(mem.record_answer("a1", [res.query_id], text="delivered", cited=["m1"]))
    out.append(mem.lineage("a1"))
    out.append(mem.snapshot("user:4321"))
    out.append(mem.delete("m2"))
    out.append(mem.delete("user:4321", "order"))
    out.append(mem.configure(max_hot=2))
    out.append(mem.maintain(dry_run=True))
    out.append(mem.entities())
    out.append(mem.entities(limit=1))
    out.append(mem.entities(prefix="user:", after="user:4321", limit=5))
    out.append(mem.entities(prefix="order:"))
    out.append(mem.streams())
    out.append(mem.streams(limit=1))
    out.append(mem.streams(prefix="s", after="s", limit=5))
    out.append(mem.streams(prefix="t:"))
    out.append(mem.stats())
    out.append(mem.forget(entity="user:9", purge=True))
    out.append(mem.stats())
    out.append(db.namespaces())
    return out


def test_same_results(pair: tuple[Any, Any]) -> None:
    local, remote = pair
    lean = not remote.include
    compared = 0
    for a, b in zip(scenario(local), scenario(remote), strict=True):
        assert type(a) is type(b)
        assert normalize(as_served(a) if lean else a) == normalize(b)
        compared += normalize(a) != normalize(as_served(a))  # a vector to leave out (or keep)
    assert compared >= 5  # writes, updates, gets, lists, history, snapshot hold vectors


ERRORS: list[Callable[[Any], Any]] = [
    lambda m: m.get("missing"),
    lambda m: m.write("u", {"content": ""}),
    lambda m: m.write("u", {"content": "x", "colour": "red"}),
    lambda m: m.update("m1", {"content": "x"}, if_version=7),
    lambda m: m.query("x", filter={"$or": [{"ts": {"$gt": "soon"}}]}),
    lambda m: m.set("u", "k", 1, if_version=5),
    lambda m: m.events("s", limit=0),
    lambda m: m.lineage("nope"),
    lambda m: m.configure(policy="drop"),
    lambda m: m.entities(limit=0),
    lambda m: m.entities(limit=10_001),
    lambda m: m.entities(limit=True),
    lambda m: m.entities(prefix=3),
    lambda m: m.entities(after=["u"]),
    lambda m: m.memories(before="m_nope"),
    lambda m: m.memories("u", before=""),
    lambda m: m.memories(before=7),
    lambda m: m.streams(limit=0),
    lambda m: m.streams(limit=10_001),
    lambda m: m.streams(limit=False),
    lambda m: m.streams(prefix=3),
    lambda m: m.streams(after=["s"]),
]


@pytest.mark.parametrize("op", range(len(ERRORS)))
def test_same_errors(pair: tuple[Any, Any], op: int) -> None:
    caught = []
    for db in pair:
        mem = db.namespace("acme")
        mem.write("u", {"id": "m1", "content": "exists"})
        with pytest.raises(synapsedb.SynapseError) as err:
            ERRORS[op](mem)
        caught.append(err.value)
    a, b = caught
    assert type(a) is type(b)
    assert (a.code, a.details.get("field")) == (b.code, b.details.get("field"))


def test_async_client_gives_the_same_results(tmp_path: Path) -> None:
    import asyncio

    import httpx

    from synapsedb.client import AsyncRemoteDatabase

    start = 1_760_000_000_000_000
    local = synapsedb.open(
        tmp_path / "a",
        clock=synapsedb.ManualClock(start),
        durability="os",
        embedder=None,
        background_maintenance=False,
    )
    served = synapsedb.open(
        tmp_path / "b",
        clock=synapsedb.ManualClock(start),
        durability="os",
        embedder=None,
        background_maintenance=False,
    )

    async def remote_run() -> list[Any]:
        transport = httpx.ASGITransport(app=create_app(served))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            db = AsyncRemoteDatabase("http://testserver", client=http)
            mem = db.namespace("acme", agent="intake")
            out = [await mem.write("u", {"id": "m1", "content": "parcel in Hamburg"})]
            out.append(await mem.update("m1", {"content": "parcel in Munich"}))
            out.append(await mem.history("m1"))
            out.append(await mem.set("u", "k", [1, 2]))
            out.append(await mem.query("parcel", mode="keyword"))
            try:
                await mem.get("missing")
            except synapsedb.NotFoundError as exc:
                out.append(type(exc))
            return out

    try:
        got = asyncio.run(remote_run())
        mem = local.namespace("acme", agent="intake")
        want: list[Any] = [mem.write("u", {"id": "m1", "content": "parcel in Hamburg"})]
        want.append(mem.update("m1", {"content": "parcel in Munich"}))
        want.append(mem.history("m1"))
        want.append(mem.set("u", "k", [1, 2]))
        want.append(mem.query("parcel", mode="keyword"))
        want.append(synapsedb.NotFoundError)
        assert normalize(got) == normalize(as_served(want))
    finally:
        served.close()
        local.close()
