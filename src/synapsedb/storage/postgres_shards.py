"""Sharded placement on PostgreSQL: which live process owns which share of the namespaces.

PostgreSQL is the one source of truth; there is no consensus of SynapseDB's own:

- **Shares.** A namespace belongs to one of :data:`SHARDS` shares (:func:`shard_of`: a CRC-32
  of its name, the same in every process and release). Table ``shards`` holds each share's
  owner: a member's address and the incarnation (one start of that process) that took it.
- **Members and leases.** Table ``members`` holds one row per process, keyed by its address,
  with a lease (``lease_until``, PostgreSQL's clock) the process renews; past it, the process
  counts as dead and anyone may take its shares.
- **Fencing.** In sharded mode every commit first locks the rows of the shares its namespaces
  belong to (``FOR SHARE``) and checks that this incarnation owns them all; otherwise it is
  rolled back with :class:`~synapsedb.errors.NotOwnerError` (nothing written). A change of
  owner is an ``UPDATE`` of those rows, which waits for the commits holding them, and every
  commit after it fails the check. So a process that takes a share over, and then loads its
  namespaces, reads every row any earlier owner committed, and no earlier owner commits after.
  Commits of different shares take no lock in common: writes serialize per share.
- **Moves.** A member gives a share it holds to the live member rendezvous hashing now assigns
  it to (a process joined), and takes a share assigned to it whose owner is nobody or dead (a
  process died, or left: a clean stop gives its shares up at once). Which member is
  assigned what is :mod:`synapsedb.engine.placement`'s business; this module runs the SQL.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import NotOwnerError, StorageError
from .base import Batch

if TYPE_CHECKING:
    import psycopg

__all__ = ["SHARDS", "Membership", "Placed", "check_owner", "namespaces_of", "shard_of"]

SHARDS = 256  # the shares of the namespaces (migration 6 makes one row each)
LOCK_TIMEOUT_MS = 5000  # how long a change of owner waits for the commits holding a share

_T = TypeVar("_T")


def shard_of(ns: str) -> int:
    """The share a namespace belongs to (the same in every process and release)."""
    return zlib.crc32(ns.encode()) % SHARDS


@dataclass(frozen=True, slots=True)
class Placed:
    """One reading of the tables: every member (address, incarnation, lease still valid) and
    each share's (owner, incarnation), None for nobody."""

    members: list[tuple[str, str, bool]]
    owners: list[tuple[str | None, str | None]]


def namespaces_of(batch: Batch) -> set[str]:
    """Every namespace whose rows ``batch`` writes or changes (the query log aside: a logged
    query of a namespace handed over a moment ago is a harmless row of its own)."""
    names: set[str] = set()
    for rows in (batch.namespaces, batch.memories, batch.facts, batch.events, batch.answers,
                 batch.erasures, batch.tiers, batch.access, batch.expired_memories,
                 batch.expired_facts, batch.erased_events, batch.erased_answers):  # fmt: skip
        names.update(row[0] for row in rows)
    names.update(row[1] for row in batch.configs)
    names.update(p.ns for p in batch.purges)
    return names


def check_owner(cur: psycopg.Cursor[Any], batch: Batch, address: str, incarnation: str) -> None:
    """Lock the shares of the batch's namespaces and check this incarnation owns them all
    (inside the commit's transaction); NotOwnerError rolls the batch back."""
    names = namespaces_of(batch)
    shards = sorted({shard_of(ns) for ns in names})
    if not shards:
        return
    cur.execute(
        "SELECT shard FROM shards WHERE shard = ANY(%s) AND owner = %s AND incarnation = %s "
        "ORDER BY shard FOR SHARE",
        (shards, address, incarnation),
    )
    held = {int(row[0]) for row in cur.fetchall()}
    if len(held) < len(shards):
        lost = sorted(ns for ns in names if shard_of(ns) not in held)
        raise NotOwnerError(
            f"this process no longer owns namespace {lost[0]!r}"
            + (f" (and {len(lost) - 1} more)" if len(lost) > 1 else "")
            + ": its share moved to another process; nothing was written",
            retry_after=1,
        )


class Membership:
    """The members and shares tables, on a connection of their own (a lease is renewed even
    while a long commit holds the writer connection). Mixed into PostgresStorage, which
    provides ``_connect``, ``_pg``, ``_failures`` and ``where``."""

    _connect: Callable[[], psycopg.Connection[Any]]
    _pg: Any
    _failures: Any
    where: str
    # (address, incarnation) once fence() is called: commits then check the owner of their
    # shares instead of taking the schema's commit lock
    _member: tuple[str, str] | None = None
    _members_conn: psycopg.Connection[Any] | None = None
    _members_lock: threading.Lock

    def _on_members(self, run: Callable[[psycopg.Connection[Any]], _T], what: str) -> _T:
        with self._members_lock:
            for attempt in (1, 2):
                try:
                    conn = self._members_conn
                    if conn is None or conn.closed or conn.broken:
                        conn = self._members_conn = self._connect()
                    return run(conn)
                except self._pg.Error as exc:
                    conn = self._members_conn
                    if attempt == 1 and conn is not None and conn.broken:
                        continue
                    raise self._failures.error(
                        f"{what} failed: {exc}", exc, where=self.where
                    ) from exc
            raise AssertionError("unreachable")  # pragma: no cover

    def fence(self, address: str, incarnation: str) -> None:
        """From now on every commit checks that this incarnation owns the shares it writes."""
        self._member = (address, incarnation)

    def join(self, address: str, incarnation: str, lease_s: float) -> None:
        """Enter ``members`` with a lease; StorageError if a live process has this address."""

        def run(conn: psycopg.Connection[Any]) -> Any:
            return conn.execute(
                "INSERT INTO members (address, incarnation, lease_until) "
                "VALUES (%s, %s, now() + make_interval(secs => %s)) "
                "ON CONFLICT (address) DO UPDATE SET incarnation = excluded.incarnation, "
                "started = now(), lease_until = excluded.lease_until "
                "WHERE members.lease_until < now() OR members.incarnation = excluded.incarnation "
                "RETURNING address",
                (address, incarnation, float(lease_s)),
            ).fetchone()

        if self._on_members(run, "joining the members") is None:
            raise StorageError(
                f"another live SynapseDB process has the address {address} on {self.where}: "
                "give each process its own (advertise_url), or wait for its lease to end",
                where=self.where,
            )

    def renew(self, address: str, incarnation: str, lease_s: float) -> bool:
        """Extend the lease; False when this incarnation is no longer a member."""

        def run(conn: psycopg.Connection[Any]) -> Any:
            return conn.execute(
                "UPDATE members SET lease_until = now() + make_interval(secs => %s) "
                "WHERE address = %s AND incarnation = %s RETURNING address",
                (float(lease_s), address, incarnation),
            ).fetchone()

        return self._on_members(run, "renewing the lease") is not None

    def placed(self) -> Placed:
        """The members and the owner of each share, read from one snapshot."""

        def run(conn: psycopg.Connection[Any]) -> Placed:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                members = conn.execute(
                    "SELECT address, incarnation, lease_until > now() FROM members"
                ).fetchall()
                rows = conn.execute(
                    "SELECT shard, owner, incarnation FROM shards ORDER BY shard"
                ).fetchall()
            owners: list[tuple[str | None, str | None]] = [(None, None)] * SHARDS
            for shard, owner, inc in rows:
                if 0 <= shard < SHARDS:
                    owners[shard] = (owner, inc)
            return Placed([(str(a), str(i), bool(alive)) for a, i, alive in members], owners)

        return self._on_members(run, "reading the placement")

    def _move(self, sql: str, args: tuple[Any, ...], what: str) -> list[int]:
        def run(conn: psycopg.Connection[Any]) -> list[int]:
            with conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
                return sorted(int(r[0]) for r in conn.execute(sql, args).fetchall())

        return self._on_members(run, what)

    def take(self, address: str, incarnation: str, shards: Iterable[int]) -> list[int]:
        """Take the shares of ``shards`` that nobody live owns (nobody, a dead member, an
        earlier incarnation); the shares taken. Waits for the commits that hold them."""
        return self._move(
            "WITH c AS (SELECT s.shard FROM shards s WHERE s.shard = ANY(%s) AND NOT EXISTS ("
            "  SELECT 1 FROM members m WHERE m.address = s.owner "
            "  AND m.incarnation = s.incarnation AND m.lease_until > now()) "
            "  ORDER BY s.shard FOR UPDATE) "
            "UPDATE shards s SET owner = %s, incarnation = %s, epoch = s.epoch + 1, "
            "moved_at = now() FROM c WHERE s.shard = c.shard RETURNING s.shard",
            (sorted(shards), address, incarnation),
            "taking shares over",
        )

    def give(
        self, address: str, incarnation: str, shards: Iterable[int], to: tuple[str, str] | None
    ) -> list[int]:
        """Hand the shares of ``shards`` this incarnation owns to ``to`` (a member's address
        and incarnation; None: nobody, for whoever is assigned them to take); the shares
        given. Waits for this process's commits that hold them."""
        owner, inc = to if to is not None else (None, None)
        return self._move(
            "WITH c AS (SELECT shard FROM shards WHERE shard = ANY(%s) AND owner = %s "
            "  AND incarnation = %s ORDER BY shard FOR UPDATE) "
            "UPDATE shards s SET owner = %s, incarnation = %s, epoch = s.epoch + 1, "
            "moved_at = now() FROM c WHERE s.shard = c.shard RETURNING s.shard",
            (sorted(shards), address, incarnation, owner, inc),
            "handing shares over",
        )

    def leave(self, address: str, incarnation: str) -> None:
        """Give every share up and leave ``members`` (a clean stop: the others take the
        shares at their next look instead of after the lease)."""

        def run(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
                conn.execute(
                    "UPDATE shards SET owner = NULL, incarnation = NULL, epoch = epoch + 1, "
                    "moved_at = now() WHERE owner = %s AND incarnation = %s",
                    (address, incarnation),
                )
                conn.execute(
                    "DELETE FROM members WHERE address = %s AND incarnation = %s",
                    (address, incarnation),
                )

        self._on_members(run, "leaving the members")

    def _close_members(self) -> None:
        with self._members_lock:
            if self._members_conn is not None:
                self._members_conn.close()
