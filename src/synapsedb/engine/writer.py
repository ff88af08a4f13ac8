"""Serialized writes with leader-based group commit.

Callers validate their input, wrap it in an :class:`Op` and call :meth:`Writer.submit`. Ops
queue up; one caller at a time is the *leader*: it takes every op waiting (up to
``group_commit_max`` rows), plans each one against the committed state plus what earlier ops
in the same batch changed (a :class:`Tx`), commits all their rows in ONE storage transaction,
applies the new records to the in-memory state, wakes the owners of those ops, and hands
leadership on once its own op is done. So:

* a write is acknowledged only once durable, and becomes visible to readers at that moment;
* concurrent writers share one commit (and one fsync): throughput grows with concurrency,
  while a lone writer commits in its own thread with no hand-off to pay;
* ops are serialized: versions, compare-and-set and stream ids need no further locking;
* an op that fails its checks fails alone; a failed commit fails every op of that batch and
  changes nothing in memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..errors import ClosedError, StorageError, SynapseError
from ..storage.base import Batch, Storage
from .records import EventRec, FactRec, MemRec
from .state import NamespaceState

if TYPE_CHECKING:
    from .lineage import QueryLog

__all__ = ["Op", "Tx", "Writer"]

log = logging.getLogger("synapsedb.writer")


class Tx:
    """One group-commit batch being planned: overlay lookups and the records it will add."""

    def __init__(self, states: dict[str, NamespaceState], now_us: int) -> None:
        self.states = states
        self.now_us = now_us
        self.batch = Batch()
        self.new_ns: dict[str, NamespaceState] = {}
        self.spaces: dict[str, tuple[int, str]] = {}
        self.mems: list[tuple[str, MemRec]] = []
        self.facts: list[tuple[str, FactRec]] = []
        self.events: list[tuple[str, EventRec]] = []
        self.impacts: list[tuple[str, str]] = []  # (namespace, memory id) behind a new answer
        self.reloads: list[str] = []  # namespaces to rebuild from storage after the commit
        self.bump_us = 0  # imported history: system time must not go back past it
        self.configs: list[tuple[str, Any]] = []  # (namespace, NamespaceConfig) to apply
        self.new_live: dict[str, tuple[int, int]] = {}  # per namespace: memories, bytes added
        self._mem_tip: dict[tuple[str, str], MemRec] = {}
        self._fact_tip: dict[tuple[str, str, str], FactRec] = {}
        self._stream_tip: dict[tuple[str, str], tuple[int, int]] = {}

    # -- lookups that see this batch's earlier ops -------------------------------------------

    def latest_memory(self, ns: str, mid: str) -> MemRec | None:
        rec = self._mem_tip.get((ns, mid))
        if rec is not None:
            return rec
        state = self.states.get(ns)
        chain = state.mems.get(mid) if state is not None else None
        return chain[-1] if chain else None

    def latest_fact(self, ns: str, entity: str, key: str) -> FactRec | None:
        rec = self._fact_tip.get((ns, entity, key))
        if rec is not None:
            return rec
        state = self.states.get(ns)
        chain = state.facts.get((entity, key)) if state is not None else None
        return chain[-1] if chain else None

    def stream_tail(self, ns: str, stream: str) -> tuple[int, int] | None:
        tip = self._stream_tip.get((ns, stream))
        if tip is not None:
            return tip
        state = self.states.get(ns)
        return state.stream_tail(stream) if state is not None else None

    def space(self, ns: str) -> tuple[int, str] | None:
        """The namespace's vector space: (dimension, embedder name or "caller"), once set."""
        if ns in self.spaces:
            return self.spaces[ns]
        state = self.states.get(ns)
        if state is None or state.dim is None:
            return None
        return state.dim, state.embedder or "caller"

    # -- emitting (only after every check of the op passed) ----------------------------------

    def ensure_namespace(self, ns: str) -> None:
        if ns not in self.states and ns not in self.new_ns:
            self.new_ns[ns] = NamespaceState(ns, self.now_us)
            self.batch.namespaces.append((ns, self.now_us, None, None))

    def set_space(self, ns: str, space: tuple[int, str]) -> None:
        self.ensure_namespace(ns)
        self.spaces[ns] = space
        state = self.states.get(ns) or self.new_ns[ns]
        self.batch.namespaces.append((ns, state.created_us, *space))

    def add_memory(self, ns: str, rec: MemRec) -> None:
        self.ensure_namespace(ns)
        self._mem_tip[(ns, rec.id)] = rec
        self.mems.append((ns, rec))
        self.batch.memories.append(rec.to_row(ns))

    def add_fact(self, ns: str, rec: FactRec) -> None:
        self.ensure_namespace(ns)
        self._fact_tip[(ns, rec.entity, rec.key)] = rec
        self.facts.append((ns, rec))
        self.batch.facts.append(rec.to_row(ns))

    def add_event(self, ns: str, rec: EventRec) -> None:
        self.ensure_namespace(ns)
        self._stream_tip[(ns, rec.stream)] = rec.key
        self.events.append((ns, rec))
        self.batch.events.append(rec.to_row(ns))

    def apply(self) -> None:
        """Make the committed batch visible (commit leader, after a successful commit)."""
        states = self.states
        for ns, state in self.new_ns.items():
            states[ns] = state
        for ns, (dim, embedder) in self.spaces.items():
            states[ns].embedder = embedder
            states[ns].dim = dim
        by_ns: dict[str, list[MemRec]] = {}
        for ns, rec in self.mems:
            by_ns.setdefault(ns, []).append(rec)
        for ns, recs in by_ns.items():
            states[ns].add_memories(recs)
        for ns, frec in self.facts:
            states[ns].add_fact(frec)
        for ns, erec in self.events:
            states[ns].add_event(erec)
        for ns, cfg in self.configs:
            states[ns].config = cfg
        for ns, mid in self.impacts:
            state = states.get(ns)
            if state is not None:
                state.impact[mid] = state.impact.get(mid, 0) + 1


class Op:
    """A unit of work. ``plan`` checks against ``tx`` first, then emits; it must not emit
    anything before it can no longer fail."""

    __slots__ = ("done", "error", "result", "size")

    def __init__(self, size: int = 1) -> None:
        self.size = size
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False

    def plan(self, tx: Tx) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class Writer:
    def __init__(
        self,
        storage: Storage,
        states: dict[str, NamespaceState],
        clock: Clock,
        *,
        last_us: int = 0,
        max_rows: int = 2000,
        on_commit: Callable[[int, float], None] | None = None,
        on_apply: Callable[[Tx], None] | None = None,
        log: QueryLog | None = None,
        reload: Callable[[str], NamespaceState | None] | None = None,
    ) -> None:
        self._log = log
        self._reload = reload
        self._storage = storage
        self._states = states
        self._clock = clock
        self._last_us = last_us
        self._max_rows = max_rows
        self._on_commit = on_commit
        self._on_apply = on_apply
        self._queue: deque[Op] = deque()
        self._cv = threading.Condition()
        self._leader = False
        self._closing = False

    @property
    def last_us(self) -> int:
        """System time of the latest batch (never decreases)."""
        return self._last_us

    def submit(self, op: Op) -> Any:
        """Queue ``op``, wait until its batch is durable, return its result or raise its error."""
        cv = self._cv
        with cv:
            if self._closing:
                raise ClosedError("the database is closed")
            self._queue.append(op)
            while not op.done and self._leader:
                cv.wait()
            if not op.done:
                self._leader = True
        if not op.done:
            try:
                while not op.done:
                    self._lead_one_batch()
            finally:
                with cv:
                    self._leader = False
                    cv.notify_all()
        if op.error is not None:
            raise op.error
        return op.result

    def close(self) -> None:
        """Refuse new ops and wait for the queued ones to finish."""
        with self._cv:
            self._closing = True
            while self._leader or self._queue:
                if not self._leader:  # queued ops whose owners have not woken yet
                    self._cv.notify_all()
                self._cv.wait(0.01)

    def _lead_one_batch(self) -> None:
        with self._cv:
            ops = [self._queue.popleft()]
            rows = ops[0].size
            while self._queue and rows + self._queue[0].size <= self._max_rows:
                nxt = self._queue.popleft()
                rows += nxt.size
                ops.append(nxt)
        try:
            self._process(ops)
        except BaseException as exc:  # never leave an op without an outcome
            log.exception("write batch failed")
            for op in ops:
                if op.error is None:
                    op.error, op.result = StorageError(f"internal write failure: {exc!r}"), None
            raise
        finally:
            with self._cv:
                for op in ops:
                    op.done = True
                self._cv.notify_all()

    def _process(self, ops: list[Op]) -> None:
        now = max(self._clock.now_us(), self._last_us)
        self._last_us = now
        tx = Tx(self._states, now)
        logged = self._log.drain() if self._log is not None else []
        tx.batch.queries.extend(logged)  # the query log rides along with every commit
        for op in ops:
            try:
                op.result = op.plan(tx)
            except SynapseError as exc:
                op.error = exc
        if len(tx.batch):
            started = time.perf_counter()
            try:
                self._storage.commit(tx.batch)
            except SynapseError as exc:
                if logged and self._log is not None:
                    self._log.requeue(logged)
                for op in ops:
                    if op.error is None:
                        op.error, op.result = exc, None
                return
            if self._on_commit is not None:
                self._on_commit(len(tx.batch), time.perf_counter() - started)
        tx.apply()
        self._last_us = max(self._last_us, tx.bump_us)
        for ns in tx.reloads:  # after an erasure: rebuild the namespace from what is stored
            assert self._reload is not None
            state = self._reload(ns)
            if state is None:
                self._states.pop(ns, None)
            else:
                self._states[ns] = state
        if self._on_apply is not None and (tx.mems or tx.facts or tx.events):
            self._on_apply(tx)
