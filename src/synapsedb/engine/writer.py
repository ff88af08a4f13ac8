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
* an op that fails its checks fails alone (so does one that raises something unexpected, or
  whose rows carry a NUL character, which PostgreSQL cannot store: the batch is planned again
  without it); a failed commit fails every op of that batch and
  changes nothing in memory; an op marked ``exclusive`` (an import) commits in a batch of
  its own, so nothing it brings can fail another tenant's write;
* on a storage several processes write (PostgreSQL), the leader holds the storage's commit
  lock while it applies the other processes' commits (``follow``), plans and commits, so
  every plan sees every committed version;
* acknowledged == durable == visible: once the commit returns, every op in it succeeded.
  Applying the batch to memory checks nothing (the plans did); should it raise all the same,
  the namespaces it touched are rebuilt from storage, the error is logged, and the ops still
  report success. A namespace that cannot be rebuilt becomes unavailable (its reads and
  writes answer StorageError) instead of serving state that differs from the disk.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol

from ..clock import Clock
from ..errors import ClosedError, SynapseError, ValidationError
from ..storage.base import BATCH_COLUMNS, Batch, NamespaceUpsert, QueryInsert, Row, Storage
from .records import EventRec, FactRec, MemRec
from .state import NamespaceState
from .unavailable import Unloadable

__all__ = ["Op", "PendingRows", "Tx", "Writer"]

log = logging.getLogger("synapsedb.writer")


class PendingRows(Protocol):
    """Rows waiting to ride along with the next commit (the query log,
    :class:`~synapsedb.engine.lineage.QueryLog`): taken by each batch, given back when its
    commit fails."""

    def drain(self) -> list[QueryInsert]: ...

    def requeue(self, rows: list[QueryInsert]) -> None: ...


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
        self.configs: list[tuple[str, Any]] = []  # (namespace, NamespaceConfig) to apply
        self.new_live: dict[str, tuple[int, int]] = {}  # per namespace: memories, bytes added
        # (namespace, entity, erased memory ids) of each purge in this batch
        self.purged: list[tuple[str, str, frozenset[str]]] = []
        # namespaces to drop from memory once the batch applied: (names, keep them pending,
        # the list the dropped (name, state) pairs go to): residency.Unload
        self.unloads: list[tuple[list[str], bool, list[tuple[str, NamespaceState]]]] = []
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
            self.batch.namespaces.append(NamespaceUpsert(ns, self.now_us, None, None))

    def set_space(self, ns: str, space: tuple[int, str]) -> None:
        self.ensure_namespace(ns)
        self.spaces[ns] = space
        state = self.states.get(ns) or self.new_ns[ns]
        self.batch.namespaces.append(NamespaceUpsert(ns, state.created_us, *space))

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

    def touched(self) -> list[str]:
        """Every namespace this batch changes (what to rebuild if applying it fails)."""
        names = [*self.new_ns, *self.spaces, *self.reloads]
        names += [ns for ns, _ in self.mems] + [ns for ns, _ in self.facts]
        names += [ns for ns, _ in self.events] + [ns for ns, _ in self.configs]
        names += [ns for ns, _ in self.impacts]
        return list(dict.fromkeys(names))

    def apply(self) -> None:
        """Make the committed batch visible (commit leader, after a successful commit)."""
        states = self.states
        for ns, fresh in self.new_ns.items():
            states[ns] = fresh
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
    anything before it can no longer fail, and what it emits must apply without error.

    An op about one namespace names it in ``ns`` (the writer refuses ops on an unavailable
    namespace). ``exclusive`` ops commit in a batch of their own."""

    __slots__ = ("done", "error", "result", "size")
    exclusive: ClassVar[bool] = False

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
        log: PendingRows | None = None,
        reload: Callable[[str], NamespaceState | None] | None = None,
        unavailable: dict[str, Unloadable] | None = None,
        serialize: Callable[[], AbstractContextManager[Any]] | None = None,
        follow: Callable[[], Tx | None] | None = None,
        unload: Callable[..., NamespaceState | None] | None = None,
        owned: Callable[[str], None] | None = None,
    ) -> None:
        self._unload = unload  # drops a namespace from memory (lazy.Loader.unload)
        # raises NotOwnerError for a namespace another process owns (sharded placement): an
        # op queued before its share moved fails alone, not its whole batch at the commit
        self._owned = owned
        self._serialize = serialize  # the storage's commit lock (shared storage only)
        self._follow = follow  # other processes' commits since the last call, as a Tx
        self._log = log
        self._reload = reload
        # namespaces that could not be loaded: ops on them fail (shared with the database)
        self._unavailable = unavailable if unavailable is not None else {}
        self._storage = storage
        self._states = states
        self._clock = clock
        self._last_us = last_us
        # the latest system time of a namespace loaded since the open (another process may
        # have written it, with a clock ahead of ours): no commit here goes before it
        self._floor_us = last_us
        self._floor_lock = threading.Lock()
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

    def at_least(self, us: int) -> None:
        """No later commit goes before ``us`` (a loaded namespace's latest system time)."""
        with self._floor_lock:
            if us > self._floor_us:
                self._floor_us = us

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
            while (
                self._queue
                and not ops[0].exclusive
                and not self._queue[0].exclusive
                and rows + self._queue[0].size <= self._max_rows
            ):
                nxt = self._queue.popleft()
                rows += nxt.size
                ops.append(nxt)
        try:
            self._process(ops)
        except BaseException:  # never leave an op without an outcome
            log.exception("write batch failed")
            for op in ops:
                if op.error is None:
                    op.error, op.result = _bug(), None
            raise
        finally:
            with self._cv:
                for op in ops:
                    op.done = True
                self._cv.notify_all()

    def _process(self, ops: list[Op]) -> None:
        if self._serialize is None:
            self._process_batch(ops)
            return
        planned = False
        try:
            with self._serialize():
                remote = self._follow() if self._follow is not None else None
                if remote is not None:  # other processes' commits, before planning on them
                    self._last_us = max(self._last_us, remote.now_us)
                    self._apply(remote)
                planned = True
                self._process_batch(ops)
        except SynapseError as exc:
            if planned:  # the ops have their outcomes; releasing the lock failed after them
                log.exception("releasing the storage's commit lock failed")
                return
            for op in ops:  # the lock or catching up failed: nothing was planned
                op.error, op.result = exc, None

    def _process_batch(self, ops: list[Op]) -> None:
        now = max(self._clock.now_us(), self._last_us, self._floor_us)
        self._last_us = now
        logged = self._drop_unstorable(self._log.drain()) if self._log is not None else []
        tx = self._plan(ops, now, logged)
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
            # durable from here on: nothing below may turn a committed op into a failure
            if self._on_commit is not None:
                try:
                    self._on_commit(len(tx.batch), time.perf_counter() - started)
                except Exception:
                    log.exception("commit observer failed")
        self._apply(tx)

    def _plan(self, ops: list[Op], now: int, logged: list[QueryInsert]) -> Tx:
        """Plan every op into one Tx. An op that raises something other than a SynapseError
        (a bug) may have emitted part of its rows: it fails alone, and the others are planned
        again in a fresh Tx without it."""
        failed: set[int] = set()
        while True:
            tx = Tx(self._states, now)
            tx.batch.queries.extend(logged)  # the query log rides along with every commit
            for i, op in enumerate(ops):
                if i in failed:
                    continue
                op.error = op.result = None
                ns = getattr(op, "ns", None)
                problem = None
                if isinstance(ns, str):
                    try:
                        if self._owned is not None:
                            self._owned(ns)
                        self._states.get(ns)  # one not loaded yet is loaded before its checks
                    except SynapseError as exc:  # its rows could not be read
                        op.error = exc
                        continue
                    problem = self._unavailable.get(ns)
                if problem is not None:
                    op.error = problem.error()
                    continue
                marks = _marks(tx.batch)
                try:
                    op.result = op.plan(tx)
                    _check_text(tx.batch, marks)
                except _Unstorable as exc:  # it emitted those rows: plan again without it
                    op.error, op.result = exc.error, None
                    failed.add(i)
                    break
                except SynapseError as exc:
                    op.error = exc
                except Exception:
                    log.exception("planning %s failed; it fails alone", type(op).__name__)
                    op.error, op.result = _bug(), None
                    failed.add(i)
                    break
            else:
                return tx

    def _drop_unstorable(self, logged: list[QueryInsert]) -> list[QueryInsert]:
        """The logged query rows that can be stored (a row with a NUL character would fail
        every batch it rides along with, again and again: it is dropped and logged)."""
        keep = [row for row in logged if not _has_nul(row)]
        if len(keep) < len(logged):
            log.error("dropped %d query log rows holding NUL characters", len(logged) - len(keep))
        return keep

    def _apply(self, tx: Tx) -> None:
        """Make a committed batch visible; never raises (see the module docstring)."""
        try:
            tx.apply()
            rebuild = tx.reloads  # after an erasure, a tier move, an import
        except Exception:
            rebuild = tx.touched()
            log.exception("applying a committed batch failed; rebuilding %s from storage", rebuild)
        for ns in dict.fromkeys(rebuild):
            self._rebuild(ns)
        for names, keep, dropped in tx.unloads:  # last: after every change to them
            for ns in names:
                try:
                    state = self._unload(ns, keep=keep) if self._unload is not None else None
                except Exception:  # it stays in memory (and counted): nothing is lost
                    log.exception("unloading namespace %r failed", ns)
                    continue
                if state is not None:
                    dropped.append((ns, state))
        if self._on_apply is not None and (tx.mems or tx.facts or tx.events or tx.purged):
            try:
                self._on_apply(tx)
            except Exception:
                log.exception("change observers failed")

    def _rebuild(self, ns: str) -> None:
        """Replace the state of ``ns`` with a fresh one from storage."""
        assert self._reload is not None
        try:
            state = self._reload(ns)
        except Exception as exc:  # memory no longer matches the disk: stop serving it
            log.exception("could not rebuild namespace %r from storage; it is unavailable "
                          "until the server restarts", ns)  # fmt: skip
            self._states.pop(ns, None)
            self._unavailable.setdefault(
                ns, Unloadable("(all)", ns, f"ns = '{ns}'", f"rebuilding it failed: {exc!r}")
            )
            return
        if state is None:
            self._states.pop(ns, None)
        else:
            self._states[ns] = state


_TEXT_LISTS = tuple(BATCH_COLUMNS)
# per row list: the positions of its text columns (checking a memory row costs about 2 us)
_NOT_TEXT = {"created_us", "sys_us", "version", "dim", "embedding", "salience", "ts_us", "pinned",
             "ttl", "expires_us", "deleted", "ms", "seq", "score", "count", "last_us"}  # fmt: skip
_TEXT_AT = {
    name: [i for i, column in enumerate(columns) if column not in _NOT_TEXT]
    for name, columns in BATCH_COLUMNS.items()
}


class _Unstorable(Exception):
    """An op emitted a row no backend may store (its error is what the op's owner hears)."""

    def __init__(self, error: ValidationError) -> None:
        super().__init__(error.message)
        self.error = error


def _marks(batch: Batch) -> tuple[int, ...]:
    """How many rows each of the batch's row lists holds (to find the rows an op adds)."""
    return tuple(len(getattr(batch, name)) for name in _TEXT_LISTS)


def _has_nul(row: Row, at: list[int] | None = None) -> bool:
    for i in range(len(row)) if at is None else at:
        v = row[i]
        if type(v) is str and "\x00" in v:
            return True
    return False


def _check_text(batch: Batch, marks: tuple[int, ...]) -> None:
    """Refuse rows added since ``marks`` that hold a NUL character in a text value: input
    validation refuses them first; this keeps one op that slipped through (a field a check
    missed) from failing the other ops of its batch on a backend that cannot store NUL."""
    for name, start in zip(_TEXT_LISTS, marks, strict=True):
        rows = getattr(batch, name)
        at = _TEXT_AT[name]
        for row in rows[start:] if len(rows) > start else ():
            if _has_nul(row, at):
                column = next(BATCH_COLUMNS[name][j] for j, v in enumerate(row)
                              if type(v) is str and "\x00" in v)  # fmt: skip
                raise _Unstorable(ValidationError(
                    f"{column}: must not contain NUL characters (\\u0000)", field=column
                ))  # fmt: skip


def _bug() -> SynapseError:
    """What the owner of an op hit by a bug hears: an internal error (500, not a retryable
    storage error), the details in the server's log only."""
    return SynapseError("internal error in the write path (logged on the server); nothing of "
                        "this write was committed")  # fmt: skip
