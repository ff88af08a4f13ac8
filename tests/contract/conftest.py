"""The storage contract suite's backends: every test takes ``backend`` and runs once on SQLite
(a fresh data directory) and once on PostgreSQL (a fresh schema in the one pgserver that
tests/conftest.py starts per test session). Without pgserver the PostgreSQL cases skip on a developer's machine and fail under
CI=true (tests/support/backend_servers.py).

A :class:`Backend` opens the storage (again, for reopen tests) and reads its tables with raw SQL,
so that tests can check what is really stored: an erased name must be in no text column of any
table.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from synapsedb.storage.base import Storage
from synapsedb.storage.sqlite import SQLiteStorage


class Backend:
    """One backend's storage location: ``open()`` gives a storage on it (each one is closed at
    the end of the test), ``sql()`` runs a statement on it outside the storage."""

    name = ""

    def __init__(self) -> None:
        self._opened: list[Any] = []

    def open(self, **options: Any) -> Any:
        storage = self._open(**options)
        self._opened.append(storage)
        return storage

    def _open(self, **options: Any) -> Any:
        raise NotImplementedError

    def sql(self, statement: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def text_columns(self) -> dict[str, list[str]]:
        """Every table and its text columns, as the database describes them."""
        raise NotImplementedError

    def stored_text(self) -> str:
        """Every text value of every table, joined (what an erasure must leave no name in)."""
        parts: list[str] = []
        for table, columns in self.text_columns().items():
            for row in self.sql(f"SELECT {', '.join(columns)} FROM {table}"):
                parts.extend(str(v) for v in row if v is not None)
        return "\n".join(parts)

    def close_all(self) -> None:
        for storage in self._opened:
            storage.close()


class SQLiteBackend(Backend):
    name = "sqlite"

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _open(self, **options: Any) -> SQLiteStorage:
        return SQLiteStorage(self.directory, durability="os", **options)

    def sql(self, statement: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.directory / SQLiteStorage.FILENAME, isolation_level=None)
        try:
            return conn.execute(statement.replace("%s", "?"), args).fetchall()
        finally:
            conn.close()

    def text_columns(self) -> dict[str, list[str]]:
        tables = [r[0] for r in self.sql("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            t: [c[1] for c in self.sql(f"PRAGMA table_info({t})") if c[2].upper() == "TEXT"]
            for t in tables
        }


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn = dsn
        self.schema = "contract_" + uuid.uuid4().hex[:12]

    def _open(self, **options: Any) -> Any:
        from synapsedb.storage.postgres import PostgresStorage

        return PostgresStorage(self.dsn, schema=self.schema, **options)

    def sql(self, statement: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"SET search_path = {self.schema}")
            cur = conn.execute(statement, args)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def text_columns(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for table, column in self.sql(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = %s AND data_type = 'text' ORDER BY table_name, ordinal_position",
            (self.schema,),
        ):
            out.setdefault(table, []).append(column)
        return out


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b: Backend
    if request.param == "sqlite":
        b = SQLiteBackend(tmp_path / "data")
    else:
        b = PostgresBackend(request.getfixturevalue("postgres_dsn"))
    try:
        yield b
    finally:
        b.close_all()


@pytest.fixture
def storage(backend: Backend) -> Storage:
    opened: Storage = backend.open()
    return opened
