from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import synapsedb
from synapsedb import Database, ManualClock, Namespace


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db(tmp_path: Path, clock: ManualClock) -> Iterator[Database]:
    # background maintenance off: tests decide when maintenance runs
    database = synapsedb.open(
        tmp_path / "data", clock=clock, durability="os", background_maintenance=False
    )
    yield database
    database.close()


@pytest.fixture
def mem(db: Database) -> Namespace:
    return db.namespace("acme-support", agent="intake")
