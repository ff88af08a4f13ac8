"""The live change feed of a namespace: every committed write, in commit order.

The engine reports each commit's changes (``observers.change``); the feed numbers each
namespace's changes in a sequence of its own for this server process (a tenant's ids show no
gaps from another's writes) and keeps the newest ``size`` changes of all namespaces together.
A Server-Sent Events client gets ids ``<sys_us>-<boot>-<seq>``:

* resuming with an id of this process whose successor is still in the ring is exact: nothing
  missed, nothing repeated;
* an id from before a restart, or one the ring has dropped, is resumed from durable history
  (the audit trail) from that id's commit time: nothing missed, though changes committed in
  that same microsecond may come again.

A purge in a namespace (``observers.erase``) rewrites its durable history without the
entity's name; the ring then drops every change of that namespace it held (they may name the
entity or its fact keys), so an id from before the purge resumes from that rewritten history.
The feed never learns or keeps which entity it was.

Waiting clients are woken by a commit in their namespace (no polling), which also serves the
feed of one stream's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from ..engine import Database
from ..errors import QuotaExceededError, ValidationError
from ..times import LATEST_US
from ..types import AuditEntry

__all__ = ["ChangeFeed", "Cursor", "FeedLimit", "change_us", "entry_json", "matches"]


@dataclass(frozen=True, slots=True)
class Cursor:
    sys_us: int
    boot: str
    seq: int

    def __str__(self) -> str:
        return f"{self.sys_us}-{self.boot}-{self.seq}"

    @classmethod
    def parse(cls, raw: str, field: str) -> Cursor:
        parts = raw.split("-")
        if (len(parts) != 3 or not _digits(parts[0]) or not _digits(parts[2])
                or len(parts[0]) > 17 or len(parts[1]) > 16 or len(parts[2]) > 18
                or int(parts[0]) > LATEST_US):  # fmt: skip
            raise ValidationError(
                f"{field}: expected a change id like 1732350000000000-ab12cd34-17, got {raw!r}",
                field=field,
            )
        return cls(int(parts[0]), parts[1], int(parts[2]))


def _digits(text: str) -> bool:
    """ASCII digits only (``str.isdigit`` also accepts superscripts, which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


def change_us(entry: AuditEntry) -> int:
    at = entry.at if entry.at.tzinfo else entry.at.replace(tzinfo=UTC)
    return int(at.timestamp()) * 1_000_000 + at.microsecond


class ChangeFeed:
    """The newest ``size`` changes of all namespaces together, each numbered in its own
    namespace's sequence (so one tenant's ids say nothing of another's writes); waiters are
    woken by a commit in the namespace they follow, and only by that."""

    def __init__(self, db: Database, size: int = 65_536) -> None:
        self.db = db
        self.boot = os.urandom(4).hex()
        self.size = size
        self._seqs: dict[str, int] = {}  # namespace -> its newest number
        self._rings: dict[str, deque[tuple[int, AuditEntry]]] = {}
        self._order: deque[str] = deque()  # the namespace of each held change, oldest first
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        db.observers.change.append(self._on_change)
        db.observers.erase.append(self._on_erase)

    def detach(self) -> None:
        if self._on_change in self.db.observers.change:
            self.db.observers.change.remove(self._on_change)
        if self._on_erase in self.db.observers.erase:
            self.db.observers.erase.remove(self._on_erase)

    def _on_erase(self, ns: str, _entity: str) -> None:
        """Called by the committing thread once a purge in ``ns`` is visible: forget every
        change of ``ns`` held so far. Numbers go on; a reader resuming after one of them finds
        the ring incomplete and replays the durable history, which the purge rewrote. A
        reader that has had every change is still exact."""
        with self._lock:
            if self._rings.pop(ns, None) is not None:
                self._order = deque(n for n in self._order if n != ns)

    def seq(self, ns: str) -> int:
        """The number of the newest change of ``ns`` (0: none since this process started)."""
        return self._seqs.get(ns, 0)

    def _on_change(self, ns: str, entries: list[AuditEntry]) -> None:
        """Called by the committing thread once the changes are visible."""
        with self._lock:
            ring = self._rings.setdefault(ns, deque())
            seq = self._seqs.get(ns, 0)
            for entry in entries:
                seq += 1
                ring.append((seq, entry))
                self._order.append(ns)
            self._seqs[ns] = seq
            while len(self._order) > self.size:  # drop the oldest change of all
                old = self._order.popleft()
                dropped = self._rings[old]
                dropped.popleft()
                if not dropped:
                    del self._rings[old]
            waiters = list(self._waiters.get(ns, ()))
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # that client's loop is gone
                loop.call_soon_threadsafe(event.set)

    def after(self, ns: str, seq: int) -> tuple[list[tuple[int, AuditEntry]], bool, int]:
        """Changes of ``ns`` numbered after ``seq``; whether the ring still held every change
        after ``seq``; and the newest number (where to continue from)."""
        with self._lock:
            last = self._seqs.get(ns, 0)
            if seq >= last:
                return [], True, last
            ring = self._rings.get(ns)
            if not ring:
                return [], False, last
            first = ring[0][0]
            tail = list(itertools.islice(ring, max(0, seq + 1 - first), None))
        return tail, first <= seq + 1, last

    def cursor(self, seq: int, entry: AuditEntry) -> str:
        return str(Cursor(change_us(entry), self.boot, seq))

    async def wait(self, ns: str, seq: int, timeout: float) -> None:
        """Return when a change of ``ns`` numbered after ``seq`` exists, or after ``timeout``
        seconds."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with self._lock:
            if self._seqs.get(ns, 0) > seq:
                return
            self._waiters.setdefault(ns, set()).add(waiter)
        try:
            with self.db.core.holding(ns):  # in memory while followed (engine/residency.py)
                await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                waiting = self._waiters.get(ns)
                if waiting is not None:
                    waiting.discard(waiter)
                    if not waiting:
                        del self._waiters[ns]


def matches(entry: AuditEntry, entity: str | None) -> bool:
    return entity is None or entry.entity == entity


def entry_json(entry: AuditEntry, ns: str) -> dict[str, Any]:
    return {
        "namespace": ns,
        "at": entry.at,
        "agent": entry.agent,
        "action": entry.action,
        "entity": entry.entity,
        "target": entry.target,
        "version": entry.version,
    }


class FeedLimit:
    """Live feeds (Server-Sent Events answers) open at once, per API key: over ``per_key``, a
    new one is 429. In ``none`` mode there is no key to count by, and no limit."""

    def __init__(self, per_key: int) -> None:
        if not isinstance(per_key, int) or per_key < 1:
            raise ValidationError(
                f"max_feeds_per_key: expected a positive integer, got {per_key!r}",
                field="max_feeds_per_key",
            )
        self.per_key = per_key
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def open(self, key_id: str) -> int:
        """How many feeds the key ``key_id`` has open now."""
        return self._open.get(key_id, 0)

    def acquire(self, key_id: str | None) -> Callable[[], None]:
        """Take a place for one more feed of ``key_id``; returns what gives it back (once)."""
        if key_id is None:
            return lambda: None
        with self._lock:
            n = self._open.get(key_id, 0)
            if n >= self.per_key:
                raise QuotaExceededError(
                    f"feeds: key {key_id} has {n} live feeds open, the limit "
                    f"(max_feeds_per_key {self.per_key}); close one first",
                    field="feeds",
                    limit=self.per_key,
                )
            self._open[key_id] = n + 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                left = self._open[key_id] - 1
                if left:
                    self._open[key_id] = left
                else:
                    del self._open[key_id]

        return release
