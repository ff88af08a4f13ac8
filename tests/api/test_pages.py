"""Paging over HTTP: ``GET .../entities?prefix=&after=&limit=`` and ``GET .../memories?before=``
answer JSON lists, walk every item once, and refuse bad pages naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.server import create_app

NS = "/v1/namespaces/acme"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    db = synapsedb.open(
        tmp_path / "d",
        durability="os",
        embedder=None,
        clock=synapsedb.ManualClock(1_760_000_000_000_000),
        background_maintenance=False,
    )
    with TestClient(create_app(db)) as c:
        yield c
    db.close()


def test_entity_pages_walk_every_name_once(client: TestClient) -> None:
    names = [f"user:{i:03d}" for i in range(23)] + ["order:1"]
    items = [{"entity": n, "content": f"note for {n}"} for n in names]
    assert client.post(f"{NS}/memories:batch", json={"items": items}).status_code == 201
    assert client.get(f"{NS}/entities").json() == sorted(names)  # no limit: all, as before
    walked: list[str] = []
    params: dict[str, str | int] = {"limit": 5}
    while True:
        page = client.get(f"{NS}/entities", params=params).json()
        assert isinstance(page, list) and len(page) <= 5
        walked += page
        if len(page) < 5:
            break
        params["after"] = page[-1]
    assert walked == sorted(names)
    assert client.get(f"{NS}/entities", params={"prefix": "order:"}).json() == ["order:1"]
    got = client.get(
        f"{NS}/entities", params={"prefix": "user:", "after": "user:020", "limit": 2}
    ).json()
    assert got == ["user:021", "user:022"]


def test_stream_pages_walk_every_name_once(client: TestClient) -> None:
    names = [f"chat:{i:03d}" for i in range(17)] + ["desk:1"]
    for i, name in enumerate(names):
        r = client.post(
            f"{NS}/events",
            json={
                "entity": f"user:{i}",
                "event": f"event {i}",
                "stream": name,
                "searchable": False,
            },
        )
        assert r.status_code == 201, r.text
    assert client.get(f"{NS}/streams").json() == sorted(names)  # no limit: all, as before
    walked: list[str] = []
    params: dict[str, str | int] = {"limit": 5}
    while True:
        page = client.get(f"{NS}/streams", params=params).json()
        assert isinstance(page, list) and len(page) <= 5
        walked += page
        if len(page) < 5:
            break
        params["after"] = page[-1]
    assert walked == sorted(names)
    assert client.get(f"{NS}/streams", params={"prefix": "desk:"}).json() == ["desk:1"]
    got = client.get(
        f"{NS}/streams", params={"prefix": "chat:", "after": "chat:014", "limit": 2}
    ).json()
    assert got == ["chat:015", "chat:016"]


def test_memory_pages_walk_newest_first_with_before(client: TestClient) -> None:
    ids = []
    for i in range(7):
        r = client.post(
            f"{NS}/memories", json={"entity": "u", "content": f"note {i}", "ts": 1_700_000_000 + i}
        )
        ids.append(r.json()["id"])
    walked: list[str] = []
    params: dict[str, str | int] = {"entity": "u", "limit": 3}
    while True:
        page = client.get(f"{NS}/memories", params=params).json()
        walked += [m["id"] for m in page]
        if len(page) < 3:
            break
        params["before"] = page[-1]["id"]
    assert walked == ids[::-1]


@pytest.mark.parametrize(
    ("path", "params", "status", "field"),
    [
        ("entities", {"limit": "0"}, 422, "limit"),
        ("entities", {"limit": "10001"}, 422, "limit"),
        ("entities", {"limit": "ten"}, 422, "limit"),
        ("memories", {"before": ""}, 422, "before"),
        ("streams", {"limit": "0"}, 422, "limit"),
        ("streams", {"limit": "10001"}, 422, "limit"),
        ("streams", {"limit": "1.5"}, 422, "limit"),
        ("memories", {"before": "m_nope"}, 404, "before"),
    ],
)
def test_bad_pages_name_the_field(
    client: TestClient, path: str, params: dict[str, str], status: int, field: str
) -> None:
    client.post(f"{NS}/memories", json={"entity": "u", "content": "something"})
    r = client.get(f"{NS}/{path}", params=params)
    assert r.status_code == status
    assert r.json()["error"]["details"]["field"] == field


def test_the_mcp_entities_resource_reads_at_most_a_thousand_names(tmp_path: Path) -> None:
    """``synapsedb://<ns>/entities`` past MAX_NAMES: the first names and ``next``, whose read
    gives the rest; ``prefix`` and ``after`` in the URI page as entities() does."""
    from synapsedb.integrations.mcp.resources import MAX_NAMES, parse_uri

    names = [f"user:{i:04d}" for i in range(MAX_NAMES + 5)] + ["order:1"]
    with synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    ) as db:
        ns = db.namespace("acme")
        ns.write_many([(n, f"note {n}") for n in names])
        first = parse_uri("synapsedb://acme/entities").read(ns)
        assert first["entities"] == sorted(names)[:MAX_NAMES]
        assert first["next"] == f"synapsedb://acme/entities?after=user%3A{MAX_NAMES - 2:04d}"
        rest = parse_uri(first["next"]).read(ns)
        assert rest == {"entities": sorted(names)[MAX_NAMES:]}  # the last page: no next
        assert parse_uri("synapsedb://acme/entities?prefix=order%3A").read(ns) == {
            "entities": ["order:1"]
        }
        with pytest.raises(synapsedb.ValidationError):
            parse_uri("synapsedb://acme/entities/user%3A0001?after=x")  # the list's only


def test_the_cli_pages_entities_and_memories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from synapsedb import cli

    for name, value in (
        ("EMBEDDER", "none"),
        ("DURABILITY", "os"),
        ("BACKGROUND_MAINTENANCE", "false"),
    ):
        monkeypatch.setenv(f"SYNAPSEDB_{name}", value)
    for name in ("SYNAPSEDB_URL", "SYNAPSEDB_API_KEY", "SYNAPSEDB_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    data = ["--data", str(tmp_path / "d"), "-n", "acme"]

    def run(*argv: str) -> object:
        capsys.readouterr()
        code = cli.main([*argv, *data, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        return json.loads(out)

    ids = [
        run("write", entity, f"note {i}", "--ts", str(1_700_000_000 + i))["id"]  # type: ignore[index]
        for i, entity in enumerate(["user:1", "user:2", "user:2", "order:9"])
    ]
    assert run("entities", "--limit", "2") == ["order:9", "user:1"]
    assert run("entities", "--after", "user:1", "--limit", "2") == ["user:2"]
    assert run("entities", "--prefix", "user:") == ["user:1", "user:2"]
    for stream in ("chat:b", "chat:a", "desk"):
        run("append", "user:1", f"in {stream}", "--stream", stream, "--not-searchable")
    assert run("streams", "--limit", "2") == ["chat:a", "chat:b"]
    assert run("streams", "--after", "chat:b") == ["desk"]
    assert run("streams", "--prefix", "chat:", "--after", "chat:a") == ["chat:b"]
    page = run("memories", "--limit", "2", "--before", ids[2])
    assert [m["id"] for m in page] == [ids[1], ids[0]]  # type: ignore[index]
    capsys.readouterr()
    assert cli.main(["entities", "--limit", "0", *data]) == 2
    assert "limit" in capsys.readouterr().err
    assert cli.main(["streams", "--limit", "10001", *data]) == 2
    assert "limit" in capsys.readouterr().err


def test_the_async_client_pages_too(tmp_path: Path) -> None:
    import asyncio

    import httpx

    from synapsedb.client import AsyncRemoteDatabase

    with synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    ) as served:

        async def run() -> None:
            transport = httpx.ASGITransport(app=create_app(served))
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                mem = AsyncRemoteDatabase("http://t", client=http).namespace("acme")
                written = await mem.write_many(
                    [
                        (f"user:{i}", {"content": f"note {i}", "ts": 1_700_000_000 + i})
                        for i in range(5)
                    ]
                )
                assert await mem.entities(prefix="user:", after="user:1", limit=2) == [
                    "user:2",
                    "user:3",
                ]
                page = await mem.memories(limit=2, before=written[3].id)
                assert [m.id for m in page] == [written[2].id, written[1].id]
                with pytest.raises(synapsedb.ValidationError) as err:
                    await mem.entities(after=1)
                assert err.value.details["field"] == "after"
                for name in ("s:b", "s:a", "t"):
                    await mem.append("user:1", f"in {name}", stream=name, searchable=False)
                assert await mem.streams(prefix="s:", limit=1) == ["s:a"]
                assert await mem.streams(after="s:a", limit=5) == ["s:b", "t"]
                with pytest.raises(synapsedb.ValidationError) as err:
                    await mem.streams(limit="5")  # type: ignore[arg-type]
                assert err.value.details["field"] == "limit"

        asyncio.run(run())
