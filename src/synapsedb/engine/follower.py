"""Following the other processes on a shared storage (PostgreSQL, docs/deploy.md).

Each SynapseDB process keeps every namespace in memory. On a storage that several processes
write (:class:`~synapsedb.storage.base.SharedStorage`), each one applies the others' commits
to its own state, in the writer's thread like its own commits:

- before the writer plans a batch, under the storage's commit lock (so the plan sees every
  committed version, whoever wrote it), and
- when the storage reports another process's commit (PostgreSQL NOTIFY), through a
  :class:`CatchUp` op that plans nothing.

:meth:`Follower.catch_up` turns the rows committed since its marks into a :class:`Tx` that the
writer applies as it applies its own (so the change feed and SSE followers see them too).
Applying is idempotent: a version this process already holds (its own commit, or one a load
already brought) is skipped. Rows of a namespace that is not in memory here (never loaded, or
unloaded by the residency budget) are skipped too: its next load reads them from storage. That
is decided under the namespace's load lock, so no load that read an older snapshot can be
installing meanwhile. A namespace new to this process starts from its namespaces row
(so the change feed reports its first writes too), whose vector space and configuration are
also taken over when another process changes them. A namespace whose rows changed in place
(an erasure, a tier move), or whose namespaces row cannot be read, is reloaded from storage.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ..storage.base import NamespaceRow, SharedStorage
from .lazy import States
from .lifecycle import parse_config
from .records import EventRec, FactRec, MemRec
from .state import NamespaceState
from .writer import Op, Tx

__all__ = ["CatchUp", "Follower"]

_AWAY: Any = object()  # a namespace not in memory here: its rows are skipped


class CatchUp(Op):
    """Plans nothing: submitting it makes the writer catch up with other processes now."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0)

    def plan(self, tx: Tx) -> None:
        return None


class Follower:
    """Applies what other processes committed to ``storage`` since ``marks`` (taken before
    the states were loaded) to ``states``. Called by the writer's leader only."""

    def __init__(
        self,
        storage: SharedStorage,
        states: States,
        marks: Any,
        lock_of: Callable[[str], AbstractContextManager[Any]],
    ) -> None:
        self._storage = storage
        self._states = states
        self._marks = marks
        self._lock_of = lock_of  # a namespace's load lock (lazy.Loader.lock)

    def _held(self, ns: str, new: dict[str, NamespaceState], held: dict[str, Any]) -> Any:
        """The state the rows of ``ns`` apply to: one new in this batch, or in memory; None
        when it is unknown here (then it is loaded afresh); ``_AWAY`` when it is stored but
        not in memory (its rows are skipped: its next load reads them)."""
        if ns in held:
            return held[ns]
        state: Any = new.get(ns)
        if state is None:
            states = self._states
            state = states.resident(ns)
            if state is None and ns in states.pending:
                with self._lock_of(ns):  # no load of it is installing an older snapshot
                    state = states.resident(ns)
                    if state is None and ns in states.pending:
                        state = _AWAY
        held[ns] = state
        return state

    def catch_up(self) -> Tx | None:
        """The rows committed since the last call, as a Tx to apply (None: nothing new).
        Raises StorageError when the storage cannot be read (nothing is applied then)."""
        changes = self._storage.changes_since(self._marks)
        self._marks = changes.marks
        if not (changes.reloads or changes.namespaces or changes.memories or changes.facts
                or changes.events):  # fmt: skip
            return None
        tx = Tx(self._states, changes.last_us)
        reload = set(changes.reloads)
        held: dict[str, Any] = {}
        for row in changes.namespaces:
            if row.name not in reload:
                self._namespace(tx, row, reload, held)
        new = tx.new_ns  # namespaces the rows below may belong to, besides the known ones
        mem_tips: dict[tuple[str, str], int] = {}
        for mem in changes.memories:
            ns, mid, version = mem.ns, mem.id, mem.version
            state = self._held(ns, new, held)
            if state is _AWAY:
                continue
            if ns in reload or state is None or mid in state.cold:
                reload.add(ns)  # unknown here, or on disk only: load it afresh
                continue
            tip = mem_tips.get((ns, mid))
            if tip is None:
                chain = state.mems.get(mid)
                tip = chain[-1].version if chain else 0
            if version > tip:
                mem_tips[(ns, mid)] = version
                tx.mems.append((ns, MemRec.from_row(mem)))
        fact_tips: dict[tuple[str, str, str], int] = {}
        for fact in changes.facts:
            ns, entity, key, version = fact.ns, fact.entity, fact.key, fact.version
            state = self._held(ns, new, held)
            if state is _AWAY:
                continue
            if ns in reload or state is None:
                reload.add(ns)
                continue
            ftip = fact_tips.get((ns, entity, key))
            if ftip is None:
                fchain = state.facts.get((entity, key))
                ftip = fchain[-1].version if fchain else 0
            if version > ftip:
                fact_tips[(ns, entity, key)] = version
                tx.facts.append((ns, FactRec.from_row(fact)))
        tails: dict[tuple[str, str], tuple[int, int]] = {}
        for event in changes.events:
            ns, stream, event_key = event.ns, event.stream, (event.ms, event.seq)
            state = self._held(ns, new, held)
            if state is _AWAY:
                continue
            if ns in reload or state is None:
                reload.add(ns)
                continue
            tail = tails.get((ns, stream)) or state.stream_tail(stream) or (-1, -1)
            if event_key > tail:
                tails[(ns, stream)] = event_key
                tx.events.append((ns, EventRec.from_row(event)))
        if reload:  # their rows come with the reload
            tx.mems = [(ns, rec) for ns, rec in tx.mems if ns not in reload]
            tx.facts = [(ns, rec) for ns, rec in tx.facts if ns not in reload]
            tx.events = [(ns, rec) for ns, rec in tx.events if ns not in reload]
            tx.reloads = sorted(reload)
        return tx

    def _namespace(self, tx: Tx, row: NamespaceRow, reload: set[str], held: dict[str, Any]) -> None:
        """A namespace new here, or its vector space or configuration changed elsewhere."""
        name, dim, embedder = row.name, row.dim, row.embedder
        state = self._held(name, {}, held)
        if state is _AWAY:
            return  # its load reads the row
        try:
            cfg = parse_config(row.config)
        except Exception:  # the loader says what is wrong with it, and how to repair it
            reload.add(name)
            return
        if state is None:
            fresh = NamespaceState(name, row.created_us, dim, embedder)
            fresh.config = cfg
            tx.new_ns[name] = held[name] = fresh
            return
        if dim is not None and (state.dim, state.embedder) != (dim, embedder):
            tx.spaces[name] = (dim, embedder or "caller")  # (None: a row from before embedders)
        if cfg != state.config:
            tx.configs.append((name, cfg))
