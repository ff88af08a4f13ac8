"""What an open reads when it loads namespaces on first need (engine/lazy.py): the stored
namespace names and the latest stored system time (queries both backends run as they are),
and, for SQLite, the rows of a few namespaces at a time, read from one snapshot on reader
connections of their own.

SQLite's storage connection is shared with the writer: a read there in the middle of a commit
would see its uncommitted rows. Loads of namespaces come from any thread while commits run, so
they read on reader connections (WAL: a reader sees the last commit and never blocks the
writer), each in a read transaction so that every table is read from the same snapshot. Idle
readers are kept for the next load; all are closed with the storage.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import Any

from ..errors import StorageError
from .base import (
    AccessRow,
    AnswerRefs,
    CheckpointMark,
    EventRow,
    FactRow,
    LoadedRows,
    MemoryRow,
    NamespaceRow,
    StoredNames,
    TierMark,
    named_rows,
)

__all__ = [
    "LAST_SYS_US",
    "LoadReaders",
    "checkpoint_mark",
    "last_sys_us",
    "load_on_postgres",
    "namespace_names",
]

# where a system time is stored (the columns the loader checks against the clock), each read
# newest first: through an index on SQLite (sys_us: its migration 7), or from a small table
LAST_SYS_US = (
    ("namespaces", "created_us"),
    ("memory_versions", "sys_us"),
    ("fact_versions", "sys_us"),
    ("events", "sys_us"),
    ("access", "last_us"),
)
# the version logs whose rows name their namespace (their unique keys start with ns)
_LOGS = ("memory_versions", "fact_versions", "events")


def _most_of(conn: sqlite3.Connection, table: str, names: Sequence[Any], marks: str) -> bool:
    """Whether the rows of ``names`` are at least half of ``table`` (its largest rowid: rows
    are never deleted from a log but by an erasure's purge, so this is close to its size).

    Read through the log's unique index (ns, id, ...), ``ORDER BY ns, rowid`` sorts every row,
    blobs and all, in a temporary B-tree: 15-17 s for the 1,000,000 memories of one namespace
    (1.7 GB), against 5-6 s to scan the table in rowid order. For a few namespaces among many,
    the index reads only theirs; for most of the table, the scan reads less."""
    top = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    if not top:
        return False
    (count,) = conn.execute(f"SELECT count(*) FROM {table} WHERE ns IN ({marks})", names).fetchone()
    return int(count) * 2 >= int(top)


def _by_namespace(rows: Iterable[Any]) -> Iterator[Any]:
    """Rows in rowid order regrouped by namespace (first seen first), each group in order."""
    groups: dict[Any, list[Any]] = {}
    for row in rows:
        group = groups.get(row[0])
        if group is None:
            groups[row[0]] = group = []
        group.append(row)
    return chain.from_iterable(groups.values())


def last_sys_us(conn: Any, until_us: int, mark: str = "?") -> int:
    """The latest stored system time at or before ``until_us`` (0: none), on ``conn`` (a
    SQLite or psycopg connection; ``mark``: its parameter placeholder). A value that is not an
    integer (a damaged row) is no time: text sorts after every number in SQLite, so it is
    never at or before ``until_us``."""
    latest = 0
    for table, column in LAST_SYS_US:
        row = conn.execute(
            f"SELECT {column} FROM {table} WHERE {column} <= {mark} ORDER BY {column} DESC LIMIT 1",
            (until_us,),
        ).fetchone()
        if row is not None and isinstance(row[0], int | float):
            latest = max(latest, int(row[0]))
    return latest


def checkpoint_mark(conn: Any, ns: Any, mark_us: int, mark: str = "?") -> CheckpointMark:
    """The :class:`CheckpointMark` of ``ns`` at ``mark_us`` on ``conn`` (a SQLite or psycopg
    connection, in the snapshot the caller reads; ``mark``: its parameter placeholder). The
    memory log is read through its (ns, sys_us, erased) index only."""
    args = (ns, mark_us)
    rows, erased = conn.execute(
        "SELECT count(*), coalesce(sum(erased), 0) FROM memory_versions "
        f"WHERE ns = {mark} AND sys_us <= {mark}",
        args,
    ).fetchone()
    last = conn.execute(
        f"SELECT id, version FROM memory_versions WHERE ns = {mark} AND sys_us <= {mark} "
        "ORDER BY sys_us DESC, rowid DESC LIMIT 1",
        args,
    ).fetchone()
    (tiers,) = conn.execute(f"SELECT count(*) FROM tiers WHERE ns = {mark}", (ns,)).fetchone()
    (erasures,) = conn.execute(f"SELECT count(*) FROM erasures WHERE ns = {mark}", (ns,)).fetchone()
    return CheckpointMark(
        int(rows),
        int(erased),
        None if last is None else last[0],
        0 if last is None else int(last[1]),
        int(tiers),
        int(erasures),
    )


def namespace_names(conn: Any) -> StoredNames:
    """Names in table namespaces, and every other ``ns`` of the version logs (found with one
    index seek per distinct name, not a scan of the rows)."""
    names = [row[0] for row in conn.execute("SELECT name FROM namespaces").fetchall()]
    known = set(names)
    unnamed: list[Any] = []
    for table in _LOGS:
        for (ns,) in conn.execute(
            f"WITH RECURSIVE d(ns) AS (SELECT (SELECT min(ns) FROM {table}) UNION ALL "
            f"SELECT (SELECT min(ns) FROM {table} WHERE ns > d.ns) FROM d "
            f"WHERE d.ns IS NOT NULL) SELECT ns FROM d WHERE ns IS NOT NULL"
        ).fetchall():
            if ns not in known:
                known.add(ns)
                unnamed.append(ns)
    return StoredNames(names, unnamed)


def load_on_postgres(
    conn: Any, names: list[Any], since: Mapping[Any, int] | None = None
) -> LoadedRows:
    """:meth:`PostgresStorage.load_namespaces` on ``conn`` (psycopg, autocommit): every table
    read in one REPEATABLE READ read-only transaction, completely."""
    from .postgres_load import LOAD_ROWS, LOAD_SQL, MEM_COLUMNS

    since = {ns: mark for ns, mark in (since or {}).items() if ns in names}
    whole = [ns for ns in names if ns not in since]
    args = (names,)
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        counts = conn.execute(
            "SELECT ns, count(*) FROM memory_versions WHERE deleted = 0 AND erased = 0 "
            "AND ns = ANY(%s) GROUP BY ns",
            (whole,),
        ).fetchall()
        streams: dict[str, Any] = {}
        for kind, sql in LOAD_SQL.items():
            make = LOAD_ROWS[kind]
            with conn.cursor(binary=True, row_factory=lambda _cur, m=make: m) as cur:
                cur.execute(
                    sql.format(where=" WHERE ns = ANY(%s)", name_where=" WHERE name = ANY(%s)"),
                    (whole,) if kind == "memories" else args,
                )
                streams[kind] = iter(cur.fetchall())
        marks: dict[Any, CheckpointMark] = {}
        after: list[Any] = []
        for ns, mark_us in since.items():
            marks[ns] = checkpoint_mark(conn, ns, mark_us, "%s")
            make = LOAD_ROWS["memories"]
            with conn.cursor(binary=True, row_factory=lambda _cur, m=make: m) as cur:
                cur.execute(
                    f"SELECT {MEM_COLUMNS}, erased FROM memory_versions "
                    "WHERE ns = %s AND sys_us > %s ORDER BY rowid",
                    (ns, mark_us),
                )
                found = cur.fetchall()
            counts.append((ns, len(found)))
            after.extend(found)
        if after:
            streams["memories"] = chain(streams["memories"], after)
    return LoadedRows(memory_rows={n: int(c) for n, c in counts}, marks=marks, **streams)


class LoadReaders:
    """Reader connections on one SQLite file, for loads of a few namespaces at a time."""

    def __init__(
        self,
        path: Path,
        busy_timeout_ms: int,
        failed: Callable[[str, BaseException], StorageError],
        mem_columns: str,
        fact_columns: str,
        event_columns: str,
    ) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._failed = failed  # the StorageError for a failed read (logged)
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        # the loads read from each log, in commit order: (ns, rowid)
        logs = {
            "memories": ("memory_versions", mem_columns),
            "facts": ("fact_versions", fact_columns),
            "events": ("events", event_columns),
        }
        self._sql = {
            "namespaces": "SELECT name, created_us, dim, embedder, config FROM namespaces "
            "WHERE name IN ({marks})",
            "tiers": "SELECT ns, id, tier FROM tiers WHERE ns IN ({marks}) ORDER BY ns, rowid",
            "access": "SELECT ns, id, count, last_us FROM access WHERE ns IN ({marks})",
            **{
                kind: f"SELECT {columns}, erased FROM {table} WHERE ns IN ({{marks}}) "
                "ORDER BY ns, rowid"
                for kind, (table, columns) in logs.items()
            },
            "answers": "SELECT ns, id, memories FROM answers WHERE ns IN ({marks})",
        }
        # one namespace's memory versions after a checkpoint's mark
        self._after = (
            f"SELECT {mem_columns}, erased FROM memory_versions "
            "WHERE ns = ? AND sys_us > ? ORDER BY rowid"
        )
        # the same logs read by a scan in rowid order, when a load takes most of one (_most_of)
        self._scans = {
            kind: (
                table,
                f"SELECT {columns}, erased FROM {table} NOT INDEXED "
                "WHERE ns IN ({marks}) ORDER BY rowid",
            )
            for kind, (table, columns) in logs.items()
        }
        self._rows: dict[str, type[tuple[Any, ...]]] = {
            "namespaces": NamespaceRow,
            "tiers": TierMark,
            "access": AccessRow,
            "memories": MemoryRow,
            "facts": FactRow,
            "events": EventRow,
            "answers": AnswerRefs,
        }

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise StorageError(f"{self._path} is closed", path=str(self._path))
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            conn.execute("PRAGMA query_only=ON")
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            with self._lock:
                if self._closed:
                    conn.close()
                else:
                    self._idle.append(conn)

    def read(self, what: str, run: Callable[[sqlite3.Connection], Any]) -> Any:
        """``run(conn)`` on a reader, its reads in one snapshot; StorageError when it fails."""
        try:
            with self._reader() as conn:
                conn.execute("BEGIN")
                return run(conn)
        except sqlite3.Error as exc:
            raise self._failed(f"{what} failed: {exc}", exc) from exc

    def load(self, names: Sequence[Any], since: Mapping[Any, int] | None = None) -> LoadedRows:
        """The rows of ``names`` from one snapshot (see ``Storage.load_namespaces``)."""
        names = list(names)
        if not names:
            return LoadedRows(
                iter(()), iter(()), iter(()), {}, iter(()), iter(()), iter(()), iter(())
            )
        since = {ns: mark for ns, mark in (since or {}).items() if ns in names}
        whole = [ns for ns in names if ns not in since]

        def run(conn: sqlite3.Connection) -> LoadedRows:
            read: dict[str, Any] = {}
            counts: dict[Any, int] = {}
            for kind, sql in self._sql.items():
                keys = whole if kind == "memories" else names
                marks = ", ".join("?" * len(keys))
                if kind == "memories" and keys:
                    counts.update(
                        conn.execute(
                            "SELECT ns, count(*) FROM memory_versions WHERE deleted = 0 AND "
                            f"erased = 0 AND ns IN ({marks}) GROUP BY ns",
                            keys,
                        ).fetchall()
                    )
                scan = self._scans.get(kind)
                found: Iterable[Any]
                if not keys:
                    found = ()
                elif scan is not None and _most_of(conn, scan[0], keys, marks):
                    found = conn.execute(scan[1].format(marks=marks), keys)
                    if len(keys) > 1:
                        found = _by_namespace(found)
                else:
                    found = conn.execute(sql.format(marks=marks), keys)
                read[kind] = list(named_rows(self._rows[kind], found))
            checked: dict[Any, CheckpointMark] = {}
            for ns, mark_us in since.items():
                checked[ns] = checkpoint_mark(conn, ns, mark_us)
                after = list(named_rows(MemoryRow, conn.execute(self._after, (ns, mark_us))))
                counts[ns] = len(after)
                read["memories"].extend(after)
            return LoadedRows(
                memory_rows=counts,
                marks=checked,
                **{kind: iter(rows) for kind, rows in read.items()},
            )

        return self.read("load", run)  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the idle readers now, the busy ones when their read ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
