"""Several SynapseDB processes on one PostgreSQL schema: how each follows the others' commits.

- **Commit order.** Every batch's transaction first takes one advisory lock per schema
  (:data:`COMMIT_LOCK`), so commits are serialized across processes, and the ``rowid`` values
  a batch inserts are all above those of every earlier commit: ``rowid`` order is commit order
  in each log table (memory_versions, fact_versions, events), and "the rows after rowid N" is
  a prefix-closed set. A follower keeps one mark per table and reads the rows above it.
- **In-place changes.** A batch that changes stored rows in place (an erasure, expired rows,
  a tier move) also inserts one ``reloads`` row per namespace, and a follower loads those
  namespaces afresh; one that changes a namespaces row (a configuration; a new namespace or
  vector space comes with rows of it anyway) inserts one with ``rows = false``, and the
  follower is given the namespaces row.
- **Notification.** The transaction ends with ``pg_notify(channel, origin)``: PostgreSQL
  delivers it to every listening session once the commit is durable, in commit order.
  :class:`Listener` holds one connection per process on ``LISTEN channel`` and calls back for
  every other origin's notification (its own it skips), and once after each reconnection (it
  may have missed some). The callback makes the engine catch up through its writer.
- **Planning.** The writer holds the advisory lock as a session lock while it catches up,
  plans and commits (:meth:`PostgresStorage.exclusive`), so a batch is planned against every
  committed version: versions, compare-and-set and stream ids stay exact across processes.
  Unique keys on (namespace, id, version) and the like would refuse a conflicting batch all
  the same, should the lock be lost with its connection.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import Batch, Changes, EventRow, FactRow, MemoryRow, NamespaceRow, named_rows
from .postgres_load import EVENT_COLUMNS, FACT_COLUMNS, MEM_COLUMNS

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "COMMIT_LOCK",
    "Listener",
    "Marks",
    "channel_of",
    "read_changes",
    "read_marks",
    "reloads_of",
]

log = logging.getLogger("synapsedb.storage")

COMMIT_LOCK = "synapsedb:commit:"  # + schema: hashtext() of it is the advisory lock key

_TOPS = (
    "SELECT (SELECT coalesce(max(rowid), 0) FROM memory_versions), "
    "(SELECT coalesce(max(rowid), 0) FROM fact_versions), "
    "(SELECT coalesce(max(rowid), 0) FROM events), "
    "(SELECT coalesce(max(seq), 0) FROM reloads)"
)


@dataclass(frozen=True, slots=True)
class Marks:
    """The last rowid seen in each log table, and the last ``reloads`` seq."""

    memories: int = 0
    facts: int = 0
    events: int = 0
    reloads: int = 0


def channel_of(schema: str) -> str:
    """The NOTIFY channel of a schema (an identifier: at most 63 bytes)."""
    return ("synapsedb_" + schema)[:63]


def read_marks(conn: psycopg.Connection[Any] | psycopg.Cursor[Any]) -> Marks:
    row = conn.execute(_TOPS).fetchone()
    return Marks(*(int(v) for v in row)) if row else Marks()


def read_changes(conn: psycopg.Connection[Any], since: Marks, origin: str) -> Changes:
    """The rows committed after ``since``, from one snapshot (``conn`` in autocommit); the
    reloads of ``origin`` (the caller's own, applied when it committed them) left out."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        top = read_marks(conn)
        if top == since:
            return Changes(top, 0, [], [], [], [], [])
        reloads = conn.execute(
            "SELECT ns, rows FROM reloads WHERE seq > %s AND seq <= %s AND origin <> %s "
            "ORDER BY seq",
            (since.reloads, top.reloads, origin),
        ).fetchall()

        def after(table: str, columns: str, lo: int, hi: int) -> list[tuple[Any, ...]]:
            if hi <= lo:
                return []
            return conn.execute(
                f"SELECT {columns}, erased FROM {table} "
                "WHERE rowid > %s AND rowid <= %s ORDER BY rowid",
                (lo, hi),
            ).fetchall()

        memories = list(
            named_rows(
                MemoryRow, after("memory_versions", MEM_COLUMNS, since.memories, top.memories)
            )
        )
        facts = list(
            named_rows(FactRow, after("fact_versions", FACT_COLUMNS, since.facts, top.facts))
        )
        events = list(
            named_rows(EventRow, after("events", EVENT_COLUMNS, since.events, top.events))
        )
        named = {ns for ns, full in reloads if not full}
        named.update(row.ns for row in memories)
        named.update(row.ns for row in facts)
        named.update(row.ns for row in events)
        spaces = (
            conn.execute(
                "SELECT name, created_us, dim, embedder, config FROM namespaces "
                "WHERE name = ANY(%s)",
                (sorted(named),),
            ).fetchall()
            if named
            else []
        )
    times = [int(r.sys_us) for r in memories] + [int(r.sys_us) for r in facts]
    times += [int(r.sys_us) for r in events]
    return Changes(
        top,
        max(times, default=0),
        list(dict.fromkeys(ns for ns, full in reloads if full)),
        list(named_rows(NamespaceRow, spaces)),
        memories,
        facts,
        events,
    )


def reloads_of(batch: Batch) -> list[tuple[str, bool]]:
    """(namespace, rows) for each namespace whose stored rows ``batch`` changes in place
    (True: followers reload it) or whose configuration it changes (False: followers re-read
    its namespaces row)."""
    names = [p.ns for p in batch.purges]
    names += [ns for ns, _ in batch.expired_memories] + [ns for ns, *_ in batch.expired_facts]
    names += [ns for ns, *_ in batch.erased_events] + [row[0] for row in batch.tiers]
    full = dict.fromkeys(names, True)
    return [*full.items(), *((row[1], False) for row in batch.configs if row[1] not in full)]


class Listener:
    """One connection on ``LISTEN channel`` and the thread that waits on it, calling
    ``on_change`` for every notification whose payload is not ``origin``. Lost connections
    are replaced (then ``on_change`` is called once: notifications may have been missed)."""

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        channel: str,
        origin: str,
        on_change: Callable[[], None],
        pg: Any,
    ) -> None:
        self._connect, self._channel, self._origin = connect, channel, origin
        self._on_change, self._pg = on_change, pg
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="synapsedb-pg-listen", daemon=True)
        self._thread.start()
        self._ready.wait(10)  # listening (or failed once) before the caller goes on

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            try:
                with self._connect() as conn:
                    conn.execute(
                        self._pg.sql.SQL("LISTEN {}").format(self._pg.sql.Identifier(self._channel))
                    )
                    self._ready.set()
                    if not first:
                        self._call()  # what was committed while nobody listened
                    first = False
                    while not self._stop.is_set():
                        foreign = False
                        for note in conn.notifies(timeout=0.5):
                            if note.payload != self._origin:
                                foreign = True
                                break  # catch up now; later ones wait in psycopg's backlog
                        if foreign:
                            self._call()
            except Exception as exc:  # a lost connection: wait, reconnect, catch up
                self._ready.set()
                if self._stop.is_set():
                    return
                log.warning("listening for other processes' commits failed (%s); retrying", exc)
                first = False
                self._stop.wait(1.0)

    def _call(self) -> None:
        try:
            self._on_change()
        except Exception:
            log.exception("catching up with other processes' commits failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5)
