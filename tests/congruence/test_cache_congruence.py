"""The semantic cache embedded and over HTTP: the same calls give the same answers and the
same errors (SemanticCache over synapsedb.open and over the remote client)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.cache import SemanticCache
from synapsedb.client import RemoteDatabase
from synapsedb.errors import SynapseError
from synapsedb.server import create_app
from tests.congruence.conftest import ServedStorage


@pytest.fixture
def pair(tmp_path: Path, served_storage: ServedStorage) -> Iterator[tuple[Any, Any]]:
    start = 1_760_000_000_000_000
    local = synapsedb.open(
        tmp_path / "a",
        clock=synapsedb.ManualClock(start),
        durability="os",
        background_maintenance=False,
    )
    served = synapsedb.open(
        tmp_path / "b",
        clock=synapsedb.ManualClock(start),
        durability="os",
        background_maintenance=False,
        storage=served_storage(),
    )
    http = TestClient(create_app(served))
    remote = RemoteDatabase("http://testserver", client=http)
    yield local, remote
    remote.close()
    http.close()
    served.close()
    local.close()


def outcome(fn: Any) -> Any:
    try:
        value = fn()
    except SynapseError as err:
        return ("error", type(err).__name__, err.details.get("field"), err.details.get("limit"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def scenario(db: Any) -> list[Any]:
    c = SemanticCache(db, "acme", agent="knowledge")
    steps = [
        lambda: c.lookup("refund policy documents", scope="docs"),
        lambda: c.store(
            "refund policy documents", {"docs": ["a.md"]}, scope="docs", tags=["policy"]
        ),
        lambda: c.store(
            "refund policy for order 123", [1, None, "x"], scope="docs", params={"k": 3}
        ),
        lambda: c.lookup("documents about the refund policy", scope="docs"),
        lambda: c.lookup("what is the refund policy on order #123", scope="docs", params={"k": 3}),
        lambda: c.lookup("refund policy for order 456", scope="docs", params={"k": 3}),
        lambda: c.lookup("documents about the refund policy", scope="web"),
        lambda: c.lookup("documents about the refund policy", scope="docs", threshold=0.99),
        lambda: c.store("", 1, scope="docs"),
        lambda: c.store("k", 1, scope="no spaces allowed"),
        lambda: c.store("k", float("nan")),
        lambda: c.store("k", 1, ttl=0),
        lambda: c.store("k", 1, tags=["t"] * 3 + [f"t{i}" for i in range(20)]),
        lambda: c.lookup("k", threshold=2),
        lambda: c.invalidate(),
        lambda: c.invalidate("k", prefix="p"),
        lambda: c.stats(),
        lambda: c.invalidate(prefix="REFUND policy for", scope="docs"),
        lambda: c.invalidate(tag="policy"),
        lambda: c.store("weather in Paris", 18, scope="web"),
        lambda: c.invalidate("weather in paris", scope="web"),
        lambda: c.stats(),
        lambda: c.clear(),
    ]
    return [outcome(step) for step in steps]


def test_embedded_and_http_agree(pair: tuple[Any, Any]) -> None:
    local, remote = pair
    here, there = scenario(local), scenario(remote)
    assert here[3]["value"] == {"docs": ["a.md"]} and here[5] is None  # the scenario does hit
    for i, (a, b) in enumerate(zip(here, there, strict=True)):
        assert a == b, (i, a, b)
