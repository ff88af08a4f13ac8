"""Agent memory tests run twice: on an embedded database and through a real HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.live_server import serve

import synapsedb
from synapsedb import ManualClock


def _database(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Any
) -> Iterator[tuple[Any, ManualClock]]:
    clock = ManualClock()
    db = synapsedb.open(
        tmp_path / "d",
        clock=clock,
        durability="os",
        llm=None,
        background_maintenance=False,
        embedder=embedder,
    )
    try:
        if request.param == "embedded":
            yield db, clock
        else:
            from synapsedb.server import create_app

            with serve(create_app(db)) as url:
                client = synapsedb.connect(url)
                try:
                    yield client, clock
                finally:
                    client.close()
    finally:
        db.close()


@pytest.fixture(params=["embedded", "http"])
def agent_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, ManualClock]]:
    """(database or client, the clock of the database that holds the data); text embedded
    by the default local model."""
    yield from _database(request, tmp_path, "settings")


@pytest.fixture(params=["embedded", "http"])
def plain_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, ManualClock]]:
    """The same without an embedder (keyword search only): fast for many stores."""
    yield from _database(request, tmp_path, None)
