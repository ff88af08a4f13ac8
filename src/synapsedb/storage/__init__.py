"""Durable storage behind a small protocol; SQLite is the embedded default, PostgreSQL the shared
store (:func:`open_storage` chooses by location)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ValidationError
from .base import Batch, LoadedRows, Storage
from .sqlite import SQLiteStorage

__all__ = ["Batch", "LoadedRows", "SQLiteStorage", "Storage", "is_postgres_url", "open_storage"]

POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a PostgreSQL database (``postgresql://...``), not a path."""
    return isinstance(location, str) and urlsplit(location).scheme in POSTGRES_SCHEMES


def open_storage(
    location: str | os.PathLike[str],
    *,
    durability: str = "fsync",
    erasure_wait_ms: int | None = None,
    query_log_max_rows: int | None = None,
) -> Any:
    """The storage at ``location``: a data directory path opens SQLite in it; a URL
    ``postgresql://user@host:5432/db?schema=name`` opens PostgreSQL (``schema`` is SynapseDB's,
    default ``synapsedb``; every other parameter goes to libpq). PostgreSQL commits with
    ``synchronous_commit = on`` whatever ``durability`` says."""
    if durability not in ("fsync", "os"):
        raise ValidationError(
            f"durability: expected 'fsync' or 'os', got {durability!r}", field="durability"
        )
    options: dict[str, Any] = {"query_log_max_rows": query_log_max_rows}
    if erasure_wait_ms is not None:
        options["erasure_wait_ms"] = erasure_wait_ms
    if not is_postgres_url(location):
        if isinstance(location, str) and "://" in location:
            raise ValidationError(
                f"storage: {urlsplit(location).scheme}:// is not a storage SynapseDB knows "
                "(a data directory path, or postgresql://...)",
                field="storage",
            )
        return SQLiteStorage(Path(location), durability=durability, **options)
    from .postgres import PostgresStorage  # psycopg: imported only for PostgreSQL

    assert isinstance(location, str)
    parts = urlsplit(location)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [v for k, v in query if k == "schema"]
    if len(schemas) > 1:
        raise ValidationError("storage: the URL names schema= more than once", field="schema")
    dsn = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "schema"])))
    return PostgresStorage(dsn, schema=schemas[0] if schemas else "synapsedb", **options)
