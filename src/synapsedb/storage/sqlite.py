"""SQLite backend: WAL mode, one writer connection, versioned schema with migrations.

Durability maps to ``PRAGMA synchronous``: ``fsync`` -> FULL (the WAL is fsynced at every
commit, so a write survives power loss), ``os`` -> NORMAL (a write survives a process crash;
the OS may lose the last commits on power loss). Rows are loaded back in insertion order, which
is commit order, so replaying them rebuilds every version chain.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .base import (
    AccessRow,
    AnswerRefs,
    AnswerRow,
    Batch,
    ErasureRow,
    EventRow,
    FactRow,
    LoadedRows,
    MemoryRow,
    NamespaceRow,
    QueryRow,
    StoredNames,
    TierMark,
    TierRow,
    named_rows,
)
from .erasure import BUSY_TIMEOUT_MS, checkpoint, prune_queries, purge
from .failures import FailureLog
from .files import check_writable, create_private_file, read_or_create_secret
from .lazy_reads import LoadReaders, last_sys_us, namespace_names
from .sqlite_schema import MIGRATIONS

__all__ = ["MIGRATIONS", "SQLiteStorage"]

log = logging.getLogger("synapsedb.storage")


_NS_UPSERT = (
    "INSERT INTO namespaces (name, created_us, dim, embedder) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET dim = excluded.dim, embedder = excluded.embedder"
)
_MEM_COLUMNS = (
    "ns, id, version, sys_us, created_us, entity, type, content, metadata, embedding, salience, "
    "ts_us, agent, pinned, ttl, expires_us, deleted"
)
_FACT_COLUMNS = (
    "ns, entity, key, version, sys_us, created_us, value, agent, ttl, expires_us, deleted"
)
_EVENT_COLUMNS = "ns, stream, ms, seq, sys_us, entity, ts_us, agent, content, data, memory_id"


def _insert(table: str, columns: str) -> str:
    return f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * (columns.count(',') + 1))})"


_MEM_INSERT = _insert("memory_versions", _MEM_COLUMNS)
_FACT_INSERT = _insert("fact_versions", _FACT_COLUMNS)
_EVENT_INSERT = _insert("events", _EVENT_COLUMNS)
_R = TypeVar("_R", bound=tuple[Any, ...])  # a named row of storage.base
_QUERY_INSERT = _insert("queries", "ns, id, sys_us, agent, text, request, hits")
_ANSWER_INSERT = _insert(
    "answers", "ns, id, sys_us, agent, text, query_ids, cited, memories, entities"
)


class SQLiteStorage:
    """One SQLite file. :meth:`commit` is called from one writer thread at a time.

    ``erasure_wait_ms``: how long a commit that erases waits for other readers of the WAL to
    let it be checkpointed away (then the erasure is pending, retried by
    :meth:`finish_erasure`). ``query_log_max_rows``: the query log keeps at most about this
    many rows per namespace (the oldest go first; queries an answer refers to stay).
    """

    FILENAME = "synapse.db"

    def __init__(
        self,
        directory: str | Path,
        *,
        durability: str = "fsync",
        erasure_wait_ms: int = BUSY_TIMEOUT_MS,
        query_log_max_rows: int | None = None,
        failures: FailureLog | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.path = self.directory / self.FILENAME
        self.where = str(self.path)
        self._lock = threading.Lock()
        self._failures = failures or FailureLog()
        self._erasure_wait_ms = erasure_wait_ms
        self._query_log_max_rows = query_log_max_rows
        self._logged: dict[str, int] = {}  # per namespace: queries logged since its last prune
        self._erasure_pending = False
        check_writable(Path(directory))  # (logged when it fails)
        create_private_file(self.path)  # -wal and -shm get the database file's mode (0600)
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "PRAGMA synchronous=" + ("FULL" if durability == "fsync" else "NORMAL")
            )
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            # erased content must not linger in free space (forget purge)
            self._conn.execute("PRAGMA secure_delete=ON")
            self._migrate()
            # a WAL left by a run that could not checkpoint it may hold erased text
            if not checkpoint(self._conn, 0) and self._wal_size():
                self._erasure_pending = True
        except sqlite3.Error as exc:
            self._close_after_failed_open()
            raise self._failures.error(
                f"cannot open {self.path}: {exc}", exc, path=str(self.path)
            ) from exc
        except BaseException:  # a schema this version cannot read, ...: nothing stays open
            self._close_after_failed_open()
            raise
        self._readers = LoadReaders(
            self.path, BUSY_TIMEOUT_MS,
            lambda message, exc: self._failures.error(message, exc, path=str(self.path)),
            _MEM_COLUMNS, _FACT_COLUMNS, _EVENT_COLUMNS,
        )  # fmt: skip

    def _close_after_failed_open(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    @property
    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        current = self.schema_version
        if current > len(MIGRATIONS):
            raise self._failures.error(
                f"{self.path} has schema version {current}, newer than this SynapseDB "
                f"understands ({len(MIGRATIONS)}); upgrade SynapseDB",
                None,
                path=str(self.path),
            )
        if 0 < current < len(MIGRATIONS):  # an existing data dir: an index build can be long
            log.warning(
                "upgrading %s from schema version %d to %d (once; on a large data dir this "
                "can take minutes)",
                self.path,
                current,
                len(MIGRATIONS),
            )
        for version in range(current, len(MIGRATIONS)):
            # executescript commits; run each migration and its version bump as one script
            t0 = time.monotonic()
            self._conn.executescript(
                f"BEGIN; {MIGRATIONS[version]}; PRAGMA user_version = {version + 1}; COMMIT;"
            )
            if current:
                log.info("schema version %d done in %.1f s", version + 1, time.monotonic() - t0)

    def _rows(self, cls: type[_R], sql: str, args: tuple[Any, ...] = ()) -> Iterator[_R]:
        cur = self._conn.execute(sql, args)
        while rows := cur.fetchmany(4096):
            yield from named_rows(cls, rows)

    def load(self, ns: str | None = None) -> LoadedRows:
        where, args = ("", ()) if ns is None else (" WHERE ns = ?", (ns,))
        name_where = "" if ns is None else " WHERE name = ?"
        return LoadedRows(
            namespaces=self._rows(
                NamespaceRow,
                f"SELECT name, created_us, dim, embedder, config FROM namespaces{name_where}",
                args,
            ),
            tiers=self._rows(
                TierMark, f"SELECT ns, id, tier FROM tiers{where} ORDER BY rowid", args
            ),
            access=self._rows(AccessRow, f"SELECT ns, id, count, last_us FROM access{where}", args),
            memory_rows=dict(
                self._conn.execute(
                    "SELECT ns, count(*) FROM memory_versions WHERE deleted = 0 AND erased = 0"
                    + ("" if ns is None else " AND ns = ?")
                    + " GROUP BY ns",
                    args,
                ).fetchall()
            ),
            memories=self._rows(
                MemoryRow,
                f"SELECT {_MEM_COLUMNS}, erased FROM memory_versions{where} ORDER BY rowid",
                args,
            ),
            facts=self._rows(
                FactRow,
                f"SELECT {_FACT_COLUMNS}, erased FROM fact_versions{where} ORDER BY rowid",
                args,
            ),
            events=self._rows(
                EventRow,
                f"SELECT {_EVENT_COLUMNS}, erased FROM events{where} ORDER BY rowid",
                args,
            ),
            answers=self._rows(AnswerRefs, f"SELECT ns, id, memories FROM answers{where}", args),
        )

    def export_rows(self, ns: str) -> LoadedRows:
        """One namespace's rows, read completely under the lock (no cursor left open while a
        commit runs on the shared connection)."""
        with self._lock:
            rows = self.load(ns)
            return LoadedRows(
                namespaces=iter(list(rows.namespaces)),
                tiers=iter(list(rows.tiers)),
                access=iter(list(rows.access)),
                memory_rows=rows.memory_rows,
                memories=iter(list(rows.memories)),
                facts=iter(list(rows.facts)),
                events=iter(list(rows.events)),
                answers=iter(list(rows.answers)),
            )

    def namespace_names(self) -> StoredNames:
        return self._readers.read("reading the namespace names", namespace_names)  # type: ignore[no-any-return]

    def last_sys_us(self, until_us: int) -> int:
        return self._readers.read(  # type: ignore[no-any-return]
            "reading the latest system time", lambda conn: last_sys_us(conn, until_us)
        )

    def load_namespaces(self, names: Sequence[Any]) -> LoadedRows:
        return self._readers.load(names)

    def fact_namespaces(self, entity: str) -> list[str]:
        """The namespaces that hold (or held) a fact about ``entity``, without loading any."""
        return self._readers.read(  # type: ignore[no-any-return]
            "reading the namespaces of an entity's facts",
            lambda conn: [r[0] for r in conn.execute(
                "SELECT DISTINCT ns FROM fact_versions WHERE entity = ?", (entity,))],
        )  # fmt: skip

    def commit(self, batch: Batch) -> None:
        conn = self._conn
        with self._lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
                if batch.namespaces:
                    conn.executemany(_NS_UPSERT, batch.namespaces)
                if batch.memories:
                    conn.executemany(_MEM_INSERT, batch.memories)
                if batch.facts:
                    conn.executemany(_FACT_INSERT, batch.facts)
                if batch.events:
                    conn.executemany(_EVENT_INSERT, batch.events)
                if batch.queries:
                    conn.executemany(_QUERY_INSERT, batch.queries)
                if batch.answers:
                    conn.executemany(_ANSWER_INSERT, batch.answers)
                for p in batch.purges:
                    purge(conn, p)
                if batch.expired_memories:
                    conn.executemany(
                        "UPDATE memory_versions SET content = '', metadata = '{}', "
                        "embedding = NULL, erased = 1 WHERE ns = ? AND id = ?",
                        batch.expired_memories,
                    )
                if batch.expired_facts:
                    conn.executemany(
                        "UPDATE fact_versions SET value = 'null', erased = 1 "
                        "WHERE ns = ? AND entity = ? AND key = ?",
                        batch.expired_facts,
                    )
                if batch.erased_events:
                    conn.executemany(
                        "UPDATE events SET content = '', data = NULL, erased = 1 "
                        "WHERE ns = ? AND stream = ? AND ms = ? AND seq = ?",
                        batch.erased_events,
                    )
                if batch.erased_answers:
                    conn.executemany(
                        "UPDATE answers SET text = NULL, erased = 1 WHERE ns = ? AND id = ?",
                        batch.erased_answers,
                    )
                if batch.configs:
                    conn.executemany("UPDATE namespaces SET config = ? WHERE name = ?",
                                     batch.configs)  # fmt: skip
                if batch.tiers:
                    conn.executemany(
                        "INSERT INTO tiers (ns, id, sys_us, tier, score, reason) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        batch.tiers,
                    )
                if batch.access:
                    conn.executemany(
                        "INSERT INTO access (ns, id, count, last_us) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (ns, id) DO UPDATE SET count = excluded.count, "
                        "last_us = excluded.last_us",
                        batch.access,
                    )
                if batch.erasures:
                    conn.executemany(
                        "INSERT INTO erasures (ns, sys_us, agent, subject, counts) "
                        "VALUES (?, ?, ?, ?, ?)",
                        batch.erasures,
                    )
                if batch.queries and self._query_log_max_rows is not None:
                    self._prune_query_log(batch.queries)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise self._failures.error(
                    f"commit failed: {exc}", exc, path=str(self.path)
                ) from exc
            except BaseException:  # a bug (a value SQLite cannot bind...): leave no open
                if conn.in_transaction:  # transaction for the next batch to fail on
                    conn.execute("ROLLBACK")
                raise
            if batch.purges or batch.expired_memories or batch.expired_facts:
                # the old page images in the WAL still hold the content until a checkpoint
                self._erasure_pending = True
                self._finish_erasure(self._erasure_wait_ms)

    def _prune_query_log(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Keep each namespace's query log near ``query_log_max_rows`` (pruned once every
        tenth of that many new rows, so the cost is spread thin)."""
        keep = self._query_log_max_rows
        assert keep is not None
        every = max(1, keep // 10)
        for ns in {row[0] for row in rows}:
            n = self._logged.get(ns, 0) + sum(1 for row in rows if row[0] == ns)
            if n >= every:
                prune_queries(self._conn, ns, keep)
                n = 0
            self._logged[ns] = n

    @property
    def erasure_pending(self) -> bool:
        return self._erasure_pending

    def finish_erasure(self, wait_ms: int) -> bool:
        with self._lock:
            return self._finish_erasure(wait_ms)

    def _finish_erasure(self, wait_ms: int) -> bool:
        """Never raises: it runs after a commit, which must not look failed (a failure is
        logged and the erasure stays pending)."""
        if not self._erasure_pending:
            return True
        try:
            done = checkpoint(self._conn, wait_ms)
        except sqlite3.Error as exc:
            self._failures.error(f"checkpoint failed: {exc}", exc, path=str(self.path))
            return False
        if done:
            self._erasure_pending = False
        else:
            log.warning(
                "erased content is still in %s-wal: another connection is reading the "
                "database; the erasure is pending and will be retried by maintenance",
                self.path,
            )
        return done

    def _wal_size(self) -> int:
        try:
            return (self.path.parent / (self.FILENAME + "-wal")).stat().st_size
        except FileNotFoundError:
            return 0

    def _read(self, cls: type[_R], sql: str, params: tuple[Any, ...]) -> list[_R]:
        with self._lock:
            try:
                return list(named_rows(cls, self._conn.execute(sql, params).fetchall()))
            except sqlite3.Error as exc:
                raise self._failures.error(f"read failed: {exc}", exc, path=str(self.path)) from exc

    def read_queries(self, ns: str, ids: list[str]) -> list[QueryRow]:
        """Logged queries by id."""
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        return self._read(
            QueryRow,
            f"SELECT id, sys_us, agent, text, request, hits FROM queries "
            f"WHERE ns = ? AND id IN ({marks})",
            (ns, *ids),
        )

    def read_memory_chain(self, ns: str, mid: str) -> list[MemoryRow]:
        return self._read(
            MemoryRow,
            f"SELECT {_MEM_COLUMNS}, erased FROM memory_versions "
            "WHERE ns = ? AND id = ? ORDER BY version",
            (ns, mid),
        )

    def read_memory_chains(self, ns: str, ids: list[str]) -> list[MemoryRow]:
        out: list[MemoryRow] = []
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            out.extend(
                self._read(
                    MemoryRow,
                    f"SELECT {_MEM_COLUMNS}, erased FROM memory_versions "
                    f"WHERE ns = ? AND id IN ({', '.join('?' * len(part))}) ORDER BY rowid",
                    (ns, *part),
                )
            )
        return out

    def scan_queries(self, ns: str, since_us: int, until_us: int) -> list[QueryRow]:
        return self._read(
            QueryRow,
            "SELECT id, sys_us, agent, text, request, hits FROM queries "
            "WHERE ns = ? AND sys_us >= ? AND sys_us < ? ORDER BY sys_us",
            (ns, since_us, until_us),
        )

    def read_answer(self, ns: str, answer_id: str) -> AnswerRow | None:
        rows = self._read(
            AnswerRow,
            "SELECT id, sys_us, agent, text, query_ids, cited, memories, erased, entities "
            "FROM answers "
            "WHERE ns = ? AND id = ?",
            (ns, answer_id),
        )
        return rows[0] if rows else None

    def scan_answers(self, ns: str, since_us: int, until_us: int) -> list[AnswerRow]:
        return self._read(
            AnswerRow,
            "SELECT id, sys_us, agent, text, query_ids, cited, memories, erased, entities "
            "FROM answers "
            "WHERE ns = ? AND sys_us >= ? AND sys_us < ? ORDER BY sys_us",
            (ns, since_us, until_us),
        )

    def scan_tiers(self, ns: str, since_us: int, until_us: int) -> list[TierRow]:
        return self._read(
            TierRow,
            "SELECT id, sys_us, tier, score, reason FROM tiers "
            "WHERE ns = ? AND sys_us >= ? AND sys_us < ? ORDER BY rowid",
            (ns, since_us, until_us),
        )

    def scan_erasures(self, ns: str, since_us: int, until_us: int) -> list[ErasureRow]:
        return self._read(
            ErasureRow,
            "SELECT sys_us, agent, subject, counts FROM erasures "
            "WHERE ns = ? AND sys_us >= ? AND sys_us < ? ORDER BY sys_us",
            (ns, since_us, until_us),
        )

    def secret(self) -> bytes:
        """The database's key for hashing erased names: ``<directory>/SECRET``, as it always
        was (so existing data directories keep their aliases), created at the first call."""
        return read_or_create_secret(self.directory)

    def repair_command(self, statement: str) -> str:
        """A shell command that runs ``statement`` on this database (for repair advice)."""
        return f"sqlite3 {shlex.quote(str(self.path))} {shlex.quote(statement)}"

    def count_rows(self) -> dict[str, int]:
        """Row counts per table (for checks that memory agrees with disk)."""
        with self._lock:
            return {
                t: int(self._conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in ("namespaces", "memory_versions", "fact_versions", "events")
            }

    def close(self) -> None:
        self._readers.close()
        with self._lock:
            try:
                if self._erasure_pending:  # a last try; the next open tries again
                    self._finish_erasure(0)
                self._conn.close()
            except sqlite3.Error as exc:  # pragma: no cover - close rarely fails
                raise self._failures.error(
                    f"close failed: {exc}", exc, path=str(self.path)
                ) from exc
