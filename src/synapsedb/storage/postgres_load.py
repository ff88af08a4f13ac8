"""Loading from PostgreSQL: every stream of one load reads one snapshot through a server-side
cursor, so a namespace of a million memories is streamed, never held in memory at once."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import StorageError
from .base import (
    AccessRow,
    AnswerRefs,
    EventRow,
    FactRow,
    LoadedRows,
    MemoryRow,
    NamespaceRow,
    TierMark,
    row_maker,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["EVENT_COLUMNS", "FACT_COLUMNS", "LOAD_ROWS", "LOAD_SQL", "MEM_COLUMNS", "LoadSession"]

MEM_COLUMNS = (
    "ns, id, version, sys_us, created_us, entity, type, content, metadata, embedding, salience, "
    "ts_us, agent, pinned, ttl, expires_us, deleted"
)
FACT_COLUMNS = (
    "ns, entity, key, version, sys_us, created_us, value, agent, ttl, expires_us, deleted"
)
EVENT_COLUMNS = "ns, stream, ms, seq, sys_us, entity, ts_us, agent, content, data, memory_id"

LOAD_SQL: dict[str, str] = {
    "namespaces": "SELECT name, created_us, dim, embedder, config FROM namespaces{name_where} "
    "ORDER BY name",
    "tiers": "SELECT ns, id, tier FROM tiers{where} ORDER BY ns, rowid",
    "access": "SELECT ns, id, count, last_us FROM access{where} ORDER BY ns, id",
    "memories": f"SELECT {MEM_COLUMNS}, erased FROM memory_versions{{where}} ORDER BY ns, rowid",
    "facts": f"SELECT {FACT_COLUMNS}, erased FROM fact_versions{{where}} ORDER BY ns, rowid",
    "events": f"SELECT {EVENT_COLUMNS}, erased FROM events{{where}} ORDER BY ns, rowid",
    "answers": "SELECT ns, id, memories FROM answers{where} ORDER BY ns, id",
}
# the named row each stream yields, built by the cursor (LOAD_SQL lists its fields in order)
LOAD_ROWS: dict[str, Callable[[Sequence[Any]], Any]] = {
    "namespaces": row_maker(NamespaceRow),
    "tiers": row_maker(TierMark),
    "access": row_maker(AccessRow),
    "memories": row_maker(MemoryRow),
    "facts": row_maker(FactRow),
    "events": row_maker(EventRow),
    "answers": row_maker(AnswerRefs),
}


class LoadSession:
    """One connection in a read-only REPEATABLE READ transaction: every stream of a
    :meth:`PostgresStorage.load` reads the same snapshot, through a server-side cursor opened
    when the stream is first read. The connection closes when every stream is exhausted or
    dropped (or the storage closes)."""

    ITERSIZE = 2000

    def __init__(
        self, conn: psycopg.Connection[Any], failed: Callable[[BaseException], StorageError]
    ) -> None:
        self._conn = conn
        self.failed = failed  # the StorageError for a failed read (logged)
        self._open = 0
        self._lock = threading.Lock()
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def rows(self, ns: str | None) -> LoadedRows:
        args: tuple[Any, ...] = () if ns is None else (ns,)
        where = "" if ns is None else " WHERE ns = %s"
        name_where = "" if ns is None else " WHERE name = %s"
        try:
            counts = self._conn.execute(
                "SELECT ns, count(*) FROM memory_versions WHERE deleted = 0 AND erased = 0"  # type: ignore[arg-type]
                + ("" if ns is None else " AND ns = %s")
                + " GROUP BY ns",
                args,
            ).fetchall()
        except BaseException:
            self.close()
            raise
        streams: dict[str, Any] = {  # each yields its LOAD_ROWS row
            kind: self._stream(kind, sql.format(where=where, name_where=name_where), args)
            for kind, sql in LOAD_SQL.items()
        }
        return LoadedRows(memory_rows={n: int(c) for n, c in counts}, **streams)

    def _stream(self, name: str, sql: str, args: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
        self._open += 1
        return _Stream(self, name, sql, args)

    def cursor(self, name: str, sql: str, args: tuple[Any, ...]) -> psycopg.ServerCursor[Any]:
        make = LOAD_ROWS[name]
        cur = self._conn.cursor(name=f"load_{name}", binary=True, row_factory=lambda _cur: make)
        cur.itersize = self.ITERSIZE
        cur.execute(sql, args)  # type: ignore[arg-type]
        return cur

    def release(self) -> None:
        with self._lock:
            self._open -= 1
            last = self._open == 0
        if last:
            self.close()

    def close(self) -> None:
        if not self._conn.closed:
            self._conn.close()  # (rolls the read-only transaction back)


class _Stream:
    """One kind of row of a load, read lazily through a server-side cursor; its cursor is
    closed and its session released when the stream is exhausted, fails, or is dropped."""

    def __init__(self, session: LoadSession, name: str, sql: str, args: tuple[Any, ...]):
        self._session = session
        self._name = name
        self._sql = sql
        self._args = args
        self._cursor: list[psycopg.ServerCursor[Any]] = []  # (shared with the finalizer)
        self._rows: Iterator[tuple[Any, ...]] | None = None
        self._release = weakref.finalize(self, _finish, session, self._cursor)

    def __iter__(self) -> _Stream:
        return self

    def __next__(self) -> tuple[Any, ...]:
        if not self._release.alive:
            raise StopIteration
        try:
            if self._rows is None:
                self._cursor.append(self._session.cursor(self._name, self._sql, self._args))
                self._rows = iter(self._cursor[0])
            return next(self._rows)
        except BaseException as exc:  # exhausted (StopIteration) or failed: done either way
            self._release()
            if isinstance(exc, StopIteration | StorageError) or not _is_pg_error(exc):
                raise
            raise self._session.failed(exc) from exc


def _finish(session: LoadSession, cursor: list[psycopg.ServerCursor[Any]]) -> None:
    for cur in cursor:
        if not cur.closed:
            with contextlib.suppress(Exception):  # (the connection may be gone)
                cur.close()
    session.release()


def _is_pg_error(exc: BaseException) -> bool:
    import psycopg

    return isinstance(exc, psycopg.Error)
