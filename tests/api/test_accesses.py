"""``accesses(ids)``: how often each memory was read and when last, embedded and over HTTP
alike (the counts behind salience's frequency and recency)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb.server import create_app
from tests.support.live_server import serve


@pytest.fixture(params=["embedded", "http"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    db = synapsedb.open(tmp_path / "d", durability="os", background_maintenance=False, llm=None)
    try:
        if request.param == "embedded":
            yield db.namespace("acme")
        else:
            with serve(create_app(db)) as url:
                client = synapsedb.connect(url)
                try:
                    yield client.namespace("acme")
                finally:
                    client.close()
    finally:
        db.close()


def test_reads_by_id_and_as_hits_are_counted(mem: Any) -> None:
    a = mem.write("user:1", {"content": "Refund requested for order 1458", "embedding": [1.0, 0.0]})
    b = mem.write("user:1", {"content": "Customer prefers email", "embedding": [0.0, 1.0]})
    assert [(x.id, x.count, x.last_access) for x in mem.accesses([a.id, b.id])] == [
        (a.id, 0, None),
        (b.id, 0, None),
    ]
    mem.get(a.id)
    mem.get(a.id)
    (hit,) = mem.query(embedding=[1.0, 0.0], k=1, mode="vector").hits
    assert hit.id == a.id
    got = {x.id: x for x in mem.accesses([b.id, a.id, "mem_unknown"])}
    assert set(got) == {a.id, b.id}  # an id that is no memory here is left out
    assert got[a.id].count == 3 and got[a.id].last_access is not None
    assert got[b.id].count == 0


def test_ids_are_checked(mem: Any) -> None:
    with pytest.raises(synapsedb.ValidationError) as err:
        mem.accesses(["x"] * 1001)
    assert err.value.details["field"] == "ids"
    with pytest.raises(synapsedb.ValidationError):
        mem.accesses([""])
