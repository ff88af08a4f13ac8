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
    db = synapsedb.open(tmp_path / "d", durability="os", embedder=None,
                        clock=synapsedb.ManualClock(1_760_000_000_000_000),
                        background_maintenance=False)  # fmt: skip
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
    got = client.get(f"{NS}/entities", params={"prefix": "user:", "after": "user:020",
                                               "limit": 2}).json()  # fmt: skip
    assert got == ["user:021", "user:022"]


def test_memory_pages_walk_newest_first_with_before(client: TestClient) -> None:
    ids = []
    for i in range(7):
        r = client.post(f"{NS}/memories", json={"entity": "u", "content": f"note {i}",
                                                "ts": 1_700_000_000 + i})  # fmt: skip
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
    [("entities", {"limit": "0"}, 422, "limit"), ("entities", {"limit": "10001"}, 422, "limit"),
     ("entities", {"limit": "ten"}, 422, "limit"), ("memories", {"before": ""}, 422, "before"),
     ("memories", {"before": "m_nope"}, 404, "before")],
)  # fmt: skip
def test_bad_pages_name_the_field(
    client: TestClient, path: str, params: dict[str, str], status: int, field: str
) -> None:
    client.post(f"{NS}/memories", json={"entity": "u", "content": "something"})
    r = client.get(f"{NS}/{path}", params=params)
    assert r.status_code == status
    assert r.json()["error"]["details"]["field"] == field
