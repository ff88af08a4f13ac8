"""The live change feed of a namespace: every committed write, in commit order.

The engine reports each commit's changes (``observers.change``); the feed numbers them in one
sequence for this server process and keeps the newest ``size`` in a ring. A Server-Sent Events
client gets ids ``<sys_us>-<boot>-<seq>``:

* resuming with an id of this process whose successor is still in the ring is exact: nothing
  missed, nothing repeated;
* an id from before a restart, or one the ring has dropped, is resumed from durable history
  (the audit trail) from that id's commit time: nothing missed, though changes committed in
  that same microsecond may come again.

Waiting clients are woken by the commit itself (no polling).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import threading
from collections import deque
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from ..engine import Database
from ..errors import ValidationError
from ..types import AuditEntry

__all__ = ["ChangeFeed", "Cursor", "change_us", "entry_json", "matches"]


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
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit():
            raise ValidationError(
                f"{field}: expected a change id like 1732350000000000-ab12cd34-17, got {raw!r}",
                field=field,
            )
        return cls(int(parts[0]), parts[1], int(parts[2]))


def change_us(entry: AuditEntry) -> int:
    at = entry.at if entry.at.tzinfo else entry.at.replace(tzinfo=UTC)
    return int(at.timestamp()) * 1_000_000 + at.microsecond


class ChangeFeed:
    def __init__(self, db: Database, size: int = 65_536) -> None:
        self.db = db
        self.boot = os.urandom(4).hex()
        self._seq = 0
        self._ring: deque[tuple[int, str, AuditEntry]] = deque(maxlen=size)
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        db.observers.change.append(self._on_change)

    def detach(self) -> None:
        if self._on_change in self.db.observers.change:
            self.db.observers.change.remove(self._on_change)

    @property
    def seq(self) -> int:
        return self._seq

    def _on_change(self, ns: str, entries: list[AuditEntry]) -> None:
        """Called by the committing thread once the changes are visible."""
        with self._lock:
            for entry in entries:
                self._seq += 1
                self._ring.append((self._seq, ns, entry))
            waiters = list(self._waiters)
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # that client's loop is gone
                loop.call_soon_threadsafe(event.set)

    def after(self, ns: str, seq: int) -> tuple[list[tuple[int, AuditEntry]], bool, int]:
        """Changes of ``ns`` numbered after ``seq``; whether the ring still held every change
        after ``seq``; and the newest number (where to continue from)."""
        with self._lock:
            last = self._seq
            if not self._ring or seq >= last:
                return [], True, last
            first = self._ring[0][0]
            tail = list(itertools.islice(self._ring, max(0, seq + 1 - first), None))
        return [(s, e) for s, n, e in tail if n == ns], first <= seq + 1, last

    def cursor(self, seq: int, entry: AuditEntry) -> str:
        return str(Cursor(change_us(entry), self.boot, seq))

    async def wait(self, seq: int, timeout: float) -> None:
        """Return when a change numbered after ``seq`` exists, or after ``timeout`` seconds."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with self._lock:
            if self._seq > seq:
                return
            self._waiters.add(waiter)
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(waiter)


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
