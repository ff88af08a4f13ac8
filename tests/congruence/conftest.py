"""Congruence tests run twice: the served side on SQLite (a data directory) and on PostgreSQL
(a fresh schema of one pgserver per test session). The embedded side stays on SQLite, so a
passing test shows that the same calls give the same answers and errors across the wire AND
across backends. Without pgserver the PostgreSQL runs skip on a developer's machine and fail
under CI=true (tests/support/backend_servers.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

ServedStorage = Callable[[], "str | None"]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served_storage(request: pytest.FixtureRequest) -> ServedStorage:
    """``storage=`` for the served database: None (SQLite in its path) or a PostgreSQL URL
    naming a schema no other test uses (a new one per call)."""
    if request.param == "sqlite":
        return lambda: None
    dsn: str = request.getfixturevalue("postgres_dsn")

    def fresh() -> str:
        schema = "congruence_" + uuid.uuid4().hex[:12]
        return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"

    return fresh
