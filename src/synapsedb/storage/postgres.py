"""PostgreSQL backend: the storage protocol of :mod:`synapsedb.storage.base` on a PostgreSQL
database, with the same rows as the SQLite backend (the engine cannot tell them apart).

- **Durability.** Each :class:`Batch` is one transaction on the writer connection, which runs
  with ``synchronous_commit = on``: :meth:`PostgresStorage.commit` returns once PostgreSQL has
  flushed the commit to its WAL (and, with synchronous standbys configured, once they have it).
  A failed batch is rolled back and raises :class:`StorageError`, having written nothing. The
  one exception is a connection lost *during* COMMIT: PostgreSQL may have committed, and the
  StorageError says the outcome is unknown (as any client of any database must).
- **Connections.** One writer connection (commits, under a lock, in batch order), one reader
  connection for lineage and audit reads (so they never wait behind a commit), and one
  short-lived connection per :meth:`load`: a ``REPEATABLE READ`` read-only transaction whose
  server-side cursors stream the rows (a million memories never sit in memory at once) from
  one snapshot. A broken connection is replaced at its next use.
- **Schema.** :mod:`.postgres_schema`: the tables live in their own PostgreSQL schema
  (``synapsedb`` unless ``schema=`` says otherwise), versioned by ``schema_migrations``;
  migrations run under an advisory lock, so several processes may open one database at once.
- **Erasure.** :mod:`.postgres_erasure` says what VACUUM and WAL retention mean for erasure.
  A commit that erases then VACUUMs the tables it touched, once no open snapshot can see the old
  row versions; until then the erasure is pending (:attr:`erasure_pending`), and
  :meth:`finish_erasure` retries. Pending is known to this process only: a process that stopped
  with an erasure pending leaves the dead rows to autovacuum.

- **Several processes.** :mod:`.postgres_follow`: commits are serialized across processes by
  an advisory lock, each ends with a NOTIFY, and every process follows the others' commits
  (:meth:`follow_marks`, :meth:`changes_since`, :meth:`exclusive`, :meth:`listen`). With
  sharded placement (:mod:`.postgres_shards`, after :meth:`fence`) each process commits only
  the namespaces it owns, checked in each commit, and nothing of the above is needed.

psycopg 3 is imported here only (``pip install 'synapsedb[postgres]'``), never when
``synapsedb`` is imported.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import StorageError, ValidationError
from .base import Batch, Changes, LoadedRows, StoredNames
from .erasure import BUSY_TIMEOUT_MS
from .failures import FailureLog
from .lazy_reads import last_sys_us, load_on_postgres, namespace_names
from .postgres_copy import BulkInsert
from .postgres_erasure import PURGED_TABLES, prune_queries, purge, vacuum
from .postgres_follow import (
    COMMIT_LOCK,
    Listener,
    Marks,
    channel_of,
    read_changes,
    read_marks,
    reloads_of,
)
from .postgres_load import EVENT_COLUMNS, FACT_COLUMNS, MEM_COLUMNS, LoadSession
from .postgres_reads import AuditReads
from .postgres_schema import MIGRATIONS
from .postgres_shards import Membership, check_owner

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStorage"]

log = logging.getLogger("synapsedb.storage")

_T = TypeVar("_T")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _insert(table: str, columns: str) -> str:
    marks = ", ".join(["%s"] * (columns.count(",") + 1))
    return f"INSERT INTO {table} ({columns}) VALUES ({marks})"


_NS_UPSERT = (
    "INSERT INTO namespaces (name, created_us, dim, embedder) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (name) DO UPDATE SET dim = excluded.dim, embedder = excluded.embedder"
)
_MEM_INSERT = _insert("memory_versions", MEM_COLUMNS)
_FACT_INSERT = _insert("fact_versions", FACT_COLUMNS)
_EVENT_INSERT = _insert("events", EVENT_COLUMNS)
_QUERY_INSERT = _insert("queries", "ns, id, sys_us, agent, text, request, hits")
_ANSWER_INSERT = _insert(
    "answers", "ns, id, sys_us, agent, text, query_ids, cited, memories, entities"
)
_TIER_INSERT = _insert("tiers", "ns, id, sys_us, tier, score, reason")
_ERASURE_INSERT = _insert("erasures", "ns, sys_us, agent, subject, counts")
_ACCESS_UPSERT = (
    "INSERT INTO access (ns, id, count, last_us) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (ns, id) DO UPDATE SET count = excluded.count, last_us = excluded.last_us"
)
_EXPIRE_MEMORY = (
    "UPDATE memory_versions SET content = '', metadata = '{}', embedding = NULL, erased = 1 "
    "WHERE ns = %s AND id = %s"
)
_EXPIRE_FACT = (
    "UPDATE fact_versions SET value = 'null', erased = 1 WHERE ns = %s AND entity = %s AND key = %s"
)
_ERASE_EVENT = (
    "UPDATE events SET content = '', data = NULL, erased = 1 "
    "WHERE ns = %s AND stream = %s AND ms = %s AND seq = %s"
)
_ERASE_ANSWER = "UPDATE answers SET text = NULL, erased = 1 WHERE ns = %s AND id = %s"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise StorageError(
            "the PostgreSQL backend needs psycopg 3: pip install 'synapsedb[postgres]'"
        ) from exc
    return psycopg


class PostgresStorage(AuditReads, Membership):
    """The tables of one schema in one PostgreSQL database (``dsn``: a libpq URI or
    ``key=value`` string). :meth:`commit` is called from one writer thread at a time.

    ``erasure_wait_ms``: how long a commit that erases waits for snapshots that still see the
    erased rows before it VACUUMs (then the erasure is pending, retried by
    :meth:`finish_erasure`). ``query_log_max_rows``: the query log keeps at most about this
    many rows per namespace (the oldest go first; queries an answer refers to stay).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "synapsedb",
        erasure_wait_ms: int = BUSY_TIMEOUT_MS,
        query_log_max_rows: int | None = None,
        connect_timeout_s: int = 10,
        failures: FailureLog | None = None,
    ) -> None:
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise ValidationError(
                f"schema: {schema!r} is not a PostgreSQL schema name SynapseDB uses (lower-case "
                "letters, digits and '_', not starting with a digit, at most 63 characters)",
                field="schema",
                limit=63,
            )
        self._pg = _psycopg()
        self._dsn = dsn
        self.schema = schema
        self._connect_timeout_s = connect_timeout_s
        self._failures = failures or FailureLog()
        self._erasure_wait_ms = erasure_wait_ms
        self._query_log_max_rows = query_log_max_rows
        self._logged: dict[str, int] = {}  # per namespace: queries logged since its last prune
        self._lock = threading.RLock()  # the writer connection (held across exclusive())
        self._read_lock = threading.Lock()  # the reader connection
        self._pending: set[str] = set()  # tables with erased rows not yet vacuumed
        self._pending_xid = 0  # the latest erasing transaction
        self._loads: weakref.WeakSet[LoadSession] = weakref.WeakSet()
        self._closed = False
        self.origin = uuid.uuid4().hex  # this storage's commits, in its NOTIFY payloads
        self._channel = channel_of(schema)
        self._bulk = BulkInsert({_MEM_INSERT: ("memory_versions", MEM_COLUMNS),
                                 _FACT_INSERT: ("fact_versions", FACT_COLUMNS),
                                 _EVENT_INSERT: ("events", EVENT_COLUMNS)})  # fmt: skip
        self._commit_lock = COMMIT_LOCK + schema
        self._listener: Listener | None = None
        self._members_lock = threading.Lock()  # the members connection (postgres_shards.py)
        # the marks just before and just after this process's latest commit: commits are
        # serialized, so every row between them is this process's own (not read back)
        self._own: tuple[Marks, Marks] | None = None
        self._own_pending: tuple[Marks, Marks] | None = None
        # inside exclusive(), an erasure's VACUUM waits until the commit lock is released:
        # other processes waiting for it hold snapshots that would keep VACUUM waiting
        self._exclusive = False
        self._erase_on_release = False
        self.where = self._describe(dsn)
        self._writer: psycopg.Connection[Any] | None = None
        self._reader: psycopg.Connection[Any] | None = None
        try:
            self._writer = self._connect()
            self._migrate(self._writer)
        except BaseException as exc:
            if self._writer is not None:
                self._writer.close()
            if isinstance(exc, self._pg.Error):
                raise self._failures.error(
                    f"cannot open PostgreSQL storage {self.where}: {exc}", exc, where=self.where
                ) from exc
            raise

    # -- connections -----------------------------------------------------------------------------

    def _describe(self, dsn: str) -> str:
        """Where the data is, for messages: database, host and schema, never the password."""
        try:
            info = self._pg.conninfo.conninfo_to_dict(dsn)
        except self._pg.Error:
            return f"(unparsable connection string) schema {self.schema}"
        return (
            f"database {info.get('dbname') or '(default)'} on {info.get('host') or '(default)'}"
            f"{':' + str(info['port']) if info.get('port') else ''} schema {self.schema}"
        )

    def _connect(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise StorageError(f"PostgreSQL storage {self.where} is closed", where=self.where)
        conn = self._pg.connect(self._dsn, autocommit=True, connect_timeout=self._connect_timeout_s)
        try:
            conn.execute("SET synchronous_commit = on")
            conn.execute(
                self._pg.sql.SQL("SET search_path = {}").format(
                    self._pg.sql.Identifier(self.schema)
                )
            )
        except BaseException:
            conn.close()
            raise
        return conn

    def _writer_conn(self) -> psycopg.Connection[Any]:
        if self._writer is None or self._writer.closed or self._writer.broken:
            self._writer = self._connect()
        return self._writer

    def _reader_conn(self) -> psycopg.Connection[Any]:
        if self._reader is None or self._reader.closed or self._reader.broken:
            self._reader = self._connect()
        return self._reader

    # -- schema ------------------------------------------------------------------------------------

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        ident = self._pg.sql.Identifier(self.schema)
        with conn.transaction():
            # one process migrates at a time; the others then find the schema current
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", ("synapsedb:" + self.schema,)
            )
            conn.execute(self._pg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )  # a reference table under Citus
            current = self._version(conn)
            if current > len(MIGRATIONS):
                raise self._failures.error(
                    f"PostgreSQL storage {self.where} has schema version {current}, newer than "
                    f"this SynapseDB understands ({len(MIGRATIONS)}); upgrade SynapseDB",
                    None,
                    where=self.where,
                )
            for version in range(current, len(MIGRATIONS)):
                conn.execute(MIGRATIONS[version])  # type: ignore[arg-type]  # (a fixed script)
                conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version + 1,))

    @staticmethod
    def _version(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
        return int(row[0]) if row else 0

    @property
    def schema_version(self) -> int:
        rows = self._read("SELECT coalesce(max(version), 0) FROM schema_migrations", ())
        return int(rows[0][0])

    # -- loading -----------------------------------------------------------------------------------

    def load(self, ns: str | None = None) -> LoadedRows:
        """Every row (or one namespace's), read from one snapshot and streamed: within a
        namespace in commit order (``rowid``), namespaces one after another."""
        try:
            session = LoadSession(self._connect(), self._load_failed)
            self._loads.add(session)
            return session.rows(ns)
        except self._pg.Error as exc:
            raise self._failures.error(f"load failed: {exc}", exc, where=self.where) from exc

    def _load_failed(self, exc: BaseException) -> StorageError:
        return self._failures.error(f"load failed: {exc}", exc, where=self.where)

    def export_rows(self, ns: str) -> LoadedRows:
        """One namespace's rows, read completely before returning."""
        rows = self.load(ns)
        try:
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
        except self._pg.Error as exc:
            raise self._failures.error(f"export failed: {exc}", exc, where=self.where) from exc

    def namespace_names(self) -> StoredNames:
        return self._on_reader(namespace_names, "reading the namespace names")

    def last_sys_us(self, until_us: int) -> int:
        """One index seek per version table (schema version 4)."""
        return self._on_reader(
            lambda conn: last_sys_us(conn, until_us, "%s"), "reading the latest system time"
        )

    def load_namespaces(self, names: Sequence[Any]) -> LoadedRows:
        """Read on the reader connection, in one REPEATABLE READ read-only transaction."""
        names = list(names)
        return self._on_reader(lambda conn: load_on_postgres(conn, names), "load")

    # -- commit ------------------------------------------------------------------------------------

    def commit(self, batch: Batch) -> None:
        erasing = bool(batch.purges or batch.expired_memories or batch.expired_facts)
        with self._lock:
            xid = 0
            for attempt in (1, 2):
                committing = False
                try:
                    conn = self._writer_conn()
                    with conn.transaction(), conn.cursor() as cur:
                        self._write(cur, batch)
                        if erasing:
                            cur.execute("SELECT pg_current_xact_id()::text")
                            row = cur.fetchone()
                            xid = int(row[0]) if row else 0
                        committing = True  # leaving the block sends COMMIT
                    self._own = self._own_pending
                    break
                except self._pg.Error as exc:
                    lost = self._writer is not None and self._writer.broken
                    if lost and not committing and attempt == 1:
                        # the connection was gone before COMMIT (a server restart, a failover,
                        # an idle timeout): PostgreSQL rolled the batch back; once more, afresh
                        log.warning("PostgreSQL connection lost (%s); reconnecting", exc)
                        continue
                    unknown = (
                        " (the connection was lost during COMMIT: the batch may or may not be "
                        "committed)"
                        if lost and committing
                        else ""
                    )
                    raise self._failures.error(
                        f"commit failed: {exc}{unknown}", exc, where=self.where
                    ) from exc
            if erasing:
                self._pending |= set(PURGED_TABLES) if batch.purges else set()
                if batch.expired_memories:
                    self._pending.add("memory_versions")
                if batch.expired_facts:
                    self._pending.add("fact_versions")
                self._pending_xid = max(self._pending_xid, xid)
                if self._exclusive:
                    self._erase_on_release = True
                else:
                    self._finish_erasure(self._erasure_wait_ms)

    def _write(self, cur: psycopg.Cursor[Any], batch: Batch) -> None:
        member = self._member
        if member is not None:  # sharded: this incarnation owns the shares it writes
            check_owner(cur, batch, *member)
        else:
            # commits are serialized across processes: rowid order is commit order (followers
            # read by rowid); re-entrant when exclusive() holds the same lock for the session
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._commit_lock,))
            before = read_marks(cur)
        for sql, rows in (
            (_NS_UPSERT, batch.namespaces),
            (_MEM_INSERT, batch.memories),
            (_FACT_INSERT, batch.facts),
            (_EVENT_INSERT, batch.events),
            (_QUERY_INSERT, batch.queries),
            (_ANSWER_INSERT, batch.answers),
        ):
            if rows:
                self._bulk.insert(cur, sql, rows)  # version logs: one binary COPY
        for p in batch.purges:
            purge(cur, p)
        updates: tuple[tuple[str, Sequence[tuple[Any, ...]]], ...] = (
            (_EXPIRE_MEMORY, batch.expired_memories),
            (_EXPIRE_FACT, batch.expired_facts),
            (_ERASE_EVENT, batch.erased_events),
            (_ERASE_ANSWER, batch.erased_answers),
            ("UPDATE namespaces SET config = %s WHERE name = %s", batch.configs),
            (_TIER_INSERT, batch.tiers),
            (_ACCESS_UPSERT, batch.access),
            (_ERASURE_INSERT, batch.erasures),
        )
        for sql, params in updates:
            if params:
                cur.executemany(sql, params)
        if batch.queries and self._query_log_max_rows is not None:
            self._prune_query_log(cur, batch.queries)
        if member is not None:
            return  # no process follows another's commits: nothing to announce
        reloads = reloads_of(batch)
        if reloads:
            cur.executemany(
                "INSERT INTO reloads (ns, origin, rows) VALUES (%s, %s, %s)",
                [(ns, self.origin, full) for ns, full in reloads],
            )
        cur.execute("SELECT pg_notify(%s, %s)", (self._channel, self.origin))
        self._own_pending = (before, read_marks(cur))

    def _prune_query_log(self, cur: psycopg.Cursor[Any], rows: Sequence[tuple[Any, ...]]) -> None:
        """Keep each namespace's query log near ``query_log_max_rows`` (pruned once every
        tenth of that many new rows, so the cost is spread thin)."""
        keep = self._query_log_max_rows
        assert keep is not None
        every = max(1, keep // 10)
        for ns in {row[0] for row in rows}:  # (an import's rows are plain tuples)
            n = self._logged.get(ns, 0) + sum(1 for row in rows if row[0] == ns)
            if n >= every:
                prune_queries(cur, ns, keep)
                n = 0
            self._logged[ns] = n

    # -- several processes (postgres_follow.py) ----------------------------------------------------

    def follow_marks(self) -> Marks:
        """Where the log tables end now (take before load(): see SharedStorage)."""
        return self._on_reader(read_marks, "reading the log marks")

    def changes_since(self, marks: Marks) -> Changes:
        """Every row committed after ``marks`` (those of this process's latest commit are
        skipped when ``marks`` end just before it: the caller has them)."""
        own = self._own
        if own is not None and marks == own[0]:
            marks = own[1]
        return self._on_reader(
            lambda conn: read_changes(conn, marks, self.origin), "following commits"
        )

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the commit lock for this process's session: no other process commits until
        the block ends (the writer catches up, plans and commits inside)."""
        with self._lock:
            self._on_writer(
                lambda conn: conn.execute(
                    "SELECT pg_advisory_lock(hashtext(%s))", (self._commit_lock,)
                ),
                "taking the commit lock",
            )
            self._exclusive = True
            try:
                yield
            finally:
                self._exclusive = False
                writer = self._writer
                if writer is not None and not writer.broken and not writer.closed:
                    try:  # a lost connection released it already
                        writer.execute(
                            "SELECT pg_advisory_unlock(hashtext(%s))", (self._commit_lock,)
                        )
                    except self._pg.Error as exc:
                        log.warning("could not release the commit lock (%s); closing", exc)
                        writer.close()  # the session ends, and its lock with it
                if self._erase_on_release:  # an erasure committed inside: VACUUM now
                    self._erase_on_release = False
                    self._finish_erasure(self._erasure_wait_ms)

    def listen(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` soon after another process commits (see Listener)."""
        with self._lock:
            if self._listener is None and not self._closed:
                self._listener = Listener(
                    self._connect, self._channel, self.origin, on_change, self._pg
                )

    def _on_writer(self, run: Callable[[psycopg.Connection[Any]], _T], what: str) -> _T:
        with self._lock:
            for attempt in (1, 2):
                try:
                    return run(self._writer_conn())
                except self._pg.Error as exc:
                    if attempt == 1 and self._writer is not None and self._writer.broken:
                        continue
                    raise self._failures.error(
                        f"{what} failed: {exc}", exc, where=self.where
                    ) from exc
            raise AssertionError("unreachable")  # pragma: no cover

    def _on_reader(self, read: Callable[[psycopg.Connection[Any]], _T], what: str) -> _T:
        with self._read_lock:
            for attempt in (1, 2):
                try:
                    return read(self._reader_conn())
                except self._pg.Error as exc:
                    if attempt == 1 and self._reader is not None and self._reader.broken:
                        continue
                    raise self._failures.error(
                        f"{what} failed: {exc}", exc, where=self.where
                    ) from exc
            raise AssertionError("unreachable")  # pragma: no cover

    # -- erasure -----------------------------------------------------------------------------------

    @property
    def erasure_pending(self) -> bool:
        """Whether erased text may still be in dead row versions (pending a VACUUM)."""
        return bool(self._pending)

    def finish_erasure(self, wait_ms: int) -> bool:
        with self._lock:
            return self._finish_erasure(wait_ms)

    def _finish_erasure(self, wait_ms: int) -> bool:
        """Never raises: it runs after a commit, which must not look failed (a failure is
        logged and the erasure stays pending)."""
        if not self._pending:
            return True
        try:
            with self._connect() as conn:
                done = vacuum(conn, self._pending, self._pending_xid, wait_ms)
        except (self._pg.Error, StorageError) as exc:
            self._failures.error(f"vacuum failed: {exc}", exc, where=self.where)
            return False
        if done:
            self._pending.clear()
        else:
            log.warning(
                "erased content is still in dead row versions in %s: an open snapshot (another "
                "transaction, a replication slot) can see them; the erasure is pending and will "
                "be retried by maintenance",
                self.where,
            )
        return done

    # -- lineage and audit reads -------------------------------------------------------------------

    def _read(self, sql: str, params: tuple[Any, ...] | dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run a read on the reader connection (once more on a fresh one if it was gone)."""
        return self._on_reader(lambda conn: conn.execute(sql, params).fetchall(), "read")

    def secret(self) -> bytes:
        """The key for hashing erased names, shared by every process on this schema: created
        once (the first caller's random key wins; the others read it), then read."""

        def read(conn: psycopg.Connection[Any]) -> Any:
            conn.execute(
                "INSERT INTO secret (id, value) VALUES (1, %s) ON CONFLICT (id) DO NOTHING",
                (os.urandom(32),),
            )
            return conn.execute("SELECT value FROM secret WHERE id = 1").fetchone()

        row = self._on_writer(read, "reading the secret")
        if row is None:  # pragma: no cover - the INSERT above made it
            raise StorageError(f"PostgreSQL storage {self.where} has no secret", where=self.where)
        return bytes(row[0])

    def repair_command(self, statement: str) -> str:
        """A shell command that runs ``statement`` on this schema (for repair advice); the
        connection string is shown without its password."""
        try:
            info = self._pg.conninfo.conninfo_to_dict(self._dsn)
            info.pop("password", None)
            dsn = self._pg.conninfo.make_conninfo(**info)
        except self._pg.Error:
            dsn = "<your connection string>"
        script = f"SET search_path = {self.schema}; {statement}"
        return f"psql {shlex.quote(dsn)} -c {shlex.quote(script)}"

    def close(self) -> None:
        """Close every connection (a last try at a pending erasure first). Idempotent."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            if self._closed:
                return
            if self._pending:
                self._finish_erasure(0)
            self._closed = True
            for session in list(self._loads):
                session.close()
            self._close_members()
            with self._read_lock:
                for conn in (self._writer, self._reader):
                    if conn is not None:
                        conn.close()
