"""Loading namespaces on first need, so that opening a data directory of many namespaces
returns as soon as it knows their names.

An open (``load = "lazy"``, the default) reads only the stored namespace names and the latest
stored system time (the commit clock starts after it). Every namespace named there is
*pending*: :class:`States`, the engine's dict of in-memory states, loads a pending namespace at
its first lookup (``get``, ``in``, ``[]``): a read, a write's plan, a query, a listing, the
follower applying another process's rows, maintenance. Each namespace is loaded exactly once,
under a lock of its own: two threads asking at once load it once, and a thread loading one
namespace never waits for another. Iterating the dict sees the loaded namespaces only; what
must see them all (:meth:`Loader.load_all`) loads the rest first.

A background thread loads every pending namespace a chunk at a time after the open (so a
server soon holds everything, as before); it stops at close, and as soon as the residency
budget has no room left (``room``, :mod:`.residency`): the rest then loads on first need.

A namespace can become pending again: the residency budget unloads the least recently used
idle ones (:meth:`Loader.unload` with ``keep=True``), and the next lookup loads it afresh from
storage. On PostgreSQL with ``placement = "sharded"`` (:mod:`.placement`) a process loads only
the namespaces it owns: those of a share it takes over become pending
(:meth:`Loader.add_pending`), those of a share it hands over are dropped (``keep=False``). A chunk is read from one snapshot
(``Storage.load_namespaces``) and checked by the same loader as an eager open
(:func:`~synapsedb.engine.loader.load_states`): a namespace with a bad row becomes unavailable
with the same report, just when it is loaded rather than at open.

Why a load never misses a commit: a commit that touches a namespace plans against its state,
and planning looks it up first, which loads it; so no commit of this process lands on a
pending namespace between the snapshot a load reads and the moment its state is installed.
Other processes' commits (PostgreSQL) are applied by the follower, which looks the namespace
up too, under the same lock; applying is idempotent, so rows that a load already brought are
skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..storage.base import Storage
from .loader import load_states
from .state import NamespaceState
from .unavailable import Unloadable

__all__ = ["CHUNK", "Loader", "States"]

log = logging.getLogger("synapsedb.database")

CHUNK = 8  # namespaces read in one snapshot (a first need waits for at most one chunk)
RETRY_S = 5.0  # after a failed background read, before the next try


class States(dict[str, NamespaceState]):
    """The in-memory state of each loaded namespace; a lookup of a pending one loads it
    first (see the module docstring). Iteration, ``len`` and ``items`` see loaded ones only."""

    __slots__ = ("on_drop", "on_install", "on_pending", "pending")

    def __init__(self) -> None:
        super().__init__()
        # stored namespaces not loaded yet: set at open, grown by unloads and shares taken over
        self.pending: set[Any] = set()
        # loads a pending namespace (Loader.load), set by Loader.begin
        self.on_pending: Callable[[Any], None] | None = None
        # told of every state installed (a load, a new namespace, a reload) and every state
        # dropped: what the residency budget counts (residency.py)
        self.on_install: Callable[[str, NamespaceState], None] | None = None
        self.on_drop: Callable[[str], None] | None = None

    def get(self, ns: Any, default: Any = None) -> Any:
        state = dict.get(self, ns)
        if state is None:
            if ns in self.pending and self.on_pending is not None:
                self.on_pending(ns)
            # read again either way: an install sets the state before it clears pending
            state = dict.get(self, ns)
        return default if state is None else state

    def __contains__(self, ns: object) -> bool:
        return self.get(ns) is not None

    def __getitem__(self, ns: str) -> NamespaceState:
        state = self.get(ns)
        if state is None:
            raise KeyError(ns)
        return state  # type: ignore[no-any-return]

    def __setitem__(self, ns: str, state: NamespaceState) -> None:
        self.install(ns, state)

    def install(self, ns: str, state: NamespaceState) -> None:
        """Make ``state`` the namespace's (the state first, then no longer pending)."""
        dict.__setitem__(self, ns, state)
        self.pending.discard(ns)
        if self.on_install is not None:
            self.on_install(ns, state)

    def pop(self, ns: Any, default: Any = None) -> Any:  # type: ignore[override]
        self.pending.discard(ns)
        state = dict.pop(self, ns, default)
        if self.on_drop is not None:
            self.on_drop(ns)
        return state

    def resident(self, ns: Any) -> NamespaceState | None:
        """The namespace's state if it is in memory now (never loads it)."""
        return dict.get(self, ns)


class Loader:
    """Loads the pending namespaces of ``states``: one at first need (:meth:`load`, which
    ``States`` calls), all of them (:meth:`load_all`), and the rest in a background thread
    (:meth:`start`, stopped by :meth:`close`).

    ``adopt(ns, state)`` is called on each loaded state before it is installed (the indexer
    takes its saved vector graph); ``report(problem)`` on each namespace found unavailable
    (logged with the repair, as at an eager open); ``now_us()`` is the present that stored
    system times are checked against; ``room()`` says whether the background thread may load
    more (False: the residency budget is full, the rest loads on first need); ``seen(us)``
    is told the latest system time of each chunk loaded (the commit clock stays after it)."""

    def __init__(
        self,
        storage: Storage,
        states: States,
        unavailable: dict[str, Unloadable],
        *,
        now_us: Callable[[], int],
        adopt: Callable[[str, NamespaceState], None],
        report: Callable[[Unloadable], None],
        room: Callable[[], bool] | None = None,
        seen: Callable[[int], None] | None = None,
    ) -> None:
        self._storage = storage
        self._room = room
        self._seen = seen
        self._states = states
        self._unavailable = unavailable
        self._now_us = now_us
        self._adopt = adopt
        self._report = report
        self._locks: dict[Any, threading.Lock] = {}
        self._order: list[Any] = []  # the pending names in the order the background loads them
        self._unseen: set[Any] = set()  # names of _order never loaded yet (nor found gone)
        self._next = 0  # the first name of _order no thread has claimed yet
        self._claim = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Condition()
        self._thread: threading.Thread | None = None

    def begin(self, names: Iterable[Any]) -> None:
        """Make ``names`` pending (before the database serves anything)."""
        self._order = list(dict.fromkeys(names))
        self._locks = {ns: threading.Lock() for ns in self._order}
        self._unseen = set(self._order)
        self._states.pending.update(self._order)
        self._states.on_pending = self.load

    def add_pending(self, names: Iterable[Any]) -> None:
        """Make ``names`` pending (those not in memory): each loads at its first need."""
        states, locks = self._states, self._locks
        for ns in names:
            if dict.get(states, ns) is None:
                locks.setdefault(ns, threading.Lock())
                states.pending.add(ns)
        states.on_pending = self.load

    def lock(self, ns: Any) -> threading.Lock:
        """The namespace's load lock (held while a load of it reads and installs)."""
        return self._locks.setdefault(ns, threading.Lock())

    def unload(self, ns: str, *, keep: bool) -> NamespaceState | None:
        """Drop the namespace's state from memory (the writer's thread calls this, between
        batches); ``keep``: it stays pending, so its next need loads it afresh, else it is
        no longer this process's. Returns the state dropped (None: it held none)."""
        with self.lock(ns):  # not while a load of it installs
            state = self._states.resident(ns)
            if state is not None or not keep:
                self._states.pop(ns, None)
            if keep and state is not None:
                self._states.pending.add(ns)
                self._states.on_pending = self.load
        return state  # type: ignore[no-any-return]

    def start(self) -> None:
        """Load the remaining pending namespaces in a background thread."""
        if self._states.pending and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="synapsedb-loader", daemon=True)
            self._thread.start()

    @property
    def pending(self) -> int:
        return len(self._states.pending)

    # -- loading ---------------------------------------------------------------------------------

    def load(self, ns: Any) -> None:
        """Load ``ns`` if it is still pending (exactly once: under its lock). Raises
        StorageError when its rows cannot be read (it stays pending: the next need tries
        again)."""
        lock = self._locks.get(ns)
        if lock is None:
            return
        with lock:
            if ns in self._states.pending:
                self._load_locked([ns])

    def load_all(self, timeout: float | None = None) -> bool:
        """Load every namespace pending when called, once each (helping the background
        thread, and waiting for the chunks it has in hand); False when ``timeout`` ran out
        first. Under a residency budget the least recently used may be unloaded again
        meanwhile. Raises StorageError when rows cannot be read."""
        deadline = None if timeout is None else time.monotonic() + timeout
        todo = set(self._states.pending)
        while todo:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            chunk = self._take(CHUNK)
            if chunk:
                self._load_chunk(chunk)
                todo.difference_update(chunk)
                continue
            # every name is claimed: load what is still pending (each waits for the thread
            # that holds its lock; one that failed there is tried again here)
            for ns in list(todo):
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                self.load(ns)
                todo.discard(ns)
        return True

    def load_all_of(self, names: Sequence[Any]) -> None:
        """Load ``names`` (those still pending) now, a chunk at a time."""
        for i in range(0, len(names), CHUNK):
            self._load_chunk([ns for ns in names[i : i + CHUNK] if ns in self._states.pending])

    def _take(self, n: int) -> list[Any]:
        """Claim up to ``n`` names no thread has claimed, still pending and never loaded (one
        unloaded since loads again at its next need, not in the background)."""
        with self._claim:
            out: list[Any] = []
            pending, unseen = self._states.pending, self._unseen
            while self._next < len(self._order) and len(out) < n:
                ns = self._order[self._next]
                self._next += 1
                if ns in pending and ns in unseen:
                    out.append(ns)
            return out

    def _load_chunk(self, names: Sequence[Any]) -> None:
        locks = [self._locks[ns] for ns in names]
        for lock in locks:  # only chunk loaders hold more than one: no cycle
            lock.acquire()
        try:
            self._load_locked([ns for ns in names if ns in self._states.pending])
        finally:
            for lock in locks:
                lock.release()

    def _load_locked(self, names: list[Any]) -> None:
        """Read, check and install ``names`` (their locks held by the caller)."""
        if not names:
            return
        loaded = load_states(self._storage.load_namespaces(names), self._now_us())
        if self._seen is not None and loaded.last_us:
            self._seen(loaded.last_us)
        states, unavailable = self._states, self._unavailable
        for key, problem in loaded.unavailable.items():
            if key not in unavailable:
                self._report(problem)
            unavailable[key] = problem
        pending = states.pending
        for ns, state in loaded.states.items():
            try:
                self._adopt(ns, state)
            except Exception:  # the saved graph is a cache: the indexer builds a new one
                log.exception("could not take the saved vector graph of namespace %r", ns)
            states.install(ns, state)
        pending.difference_update(names)  # unavailable ones (reported above), or gone
        self._unseen.difference_update(names)
        with self._done:
            self._done.notify_all()

    # -- the background thread -------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._room is not None and not self._room():
                return  # the residency budget is full: the rest loads on first need
            chunk = self._take(CHUNK)
            if not chunk:
                # the rest is in other threads' hands: done when they are; a name never
                # loaded after a while is one whose read failed there: go over them again
                self.wait(RETRY_S, self._stop)
                if not self._unseen & self._states.pending or self._stop.is_set():
                    return
                with self._claim:
                    self._next = 0
                continue
            try:
                self._load_chunk(chunk)
            except Exception:
                log.exception("loading namespaces in the background failed; they load on "
                              "first need, and the background tries again")  # fmt: skip
                with self._claim:
                    self._order.extend(chunk)  # (still pending) after the others
                if self._stop.wait(RETRY_S):
                    return

    def wait(self, timeout: float | None = None, stop: threading.Event | None = None) -> bool:
        """Block until every name of the open has loaded once (False on timeout, or once
        ``stop`` is set), loading nothing itself."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while self._unseen & self._states.pending:
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or (stop is not None and stop.is_set()):
                    return False
                self._done.wait(0.1 if left is None else min(left, 0.1))
        return True

    def close(self) -> None:
        """Stop the background thread (after the chunk it is reading); idempotent."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
