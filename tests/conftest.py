from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import synapsedb
from synapsedb import Database, ManualClock, Namespace
from tests.support.backend_servers import postgres_server


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


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """One PostgreSQL server (pgserver) for the whole test session; tests take a schema each."""
    with postgres_server() as dsn:
        yield dsn
