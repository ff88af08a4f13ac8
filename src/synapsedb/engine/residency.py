"""The residency budget: which namespaces a process keeps in memory, and for how long.

Every namespace in memory is counted at its estimated size
(:meth:`~synapsedb.engine.state.NamespaceState.resident_bytes`), refreshed when it is loaded
and after each commit that changes it. When the sum goes over the budget (setting
``memory_budget_mb``), a background thread unloads the least recently used *idle* namespaces
(none used in the last :data:`IDLE_S`) until the sum is back under :data:`LOW_WATER` of the
budget. An unloaded namespace is pending again (:mod:`.lazy`): its next use loads it afresh
from storage, which holds every committed row. Its access counts are committed with the
unload (what tiering ranks by); its saved vector graph, when it has one, is written to the
data directory so that the reload takes it back.

"Used" means a read, a query or a write through a namespace handle (:meth:`touch`), and a
namespace someone waits on (a change feed's follower: :meth:`holding`) is in use throughout;
maintenance, background indexing and the memory loop do not count, so they never keep a
namespace in memory.
The background loader that warms a server after its start stops at :data:`WARM_LIMIT` of
the budget, so the warm-up never evicts what it loaded.

The estimate counts the namespaces, not the process: the embedding model, the HTTP server and
the allocator's slack come on top (docs/deploy.md says how much to leave). After unloading,
each dropped state's internal references are broken once nothing reads it
(:meth:`NamespaceState.drop`, :data:`GRACE_S` later; else it would wait for a full garbage
collection, which in a process of millions of objects came gigabytes over the budget), and
the C allocator is asked to hand freed pages back to the system (glibc's ``malloc_trim``, at
most once a second): without it, with namespaces loading and unloading all the time, the
process kept 1.7 times the memory its namespaces held (a 256 MiB budget: 393 MiB more than
at the start, against 216 MiB with it).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from .state import NamespaceState
from .writer import Op, Tx

__all__ = ["IDLE_S", "LOW_WATER", "WARM_LIMIT", "Residency", "Unload"]

log = logging.getLogger("synapsedb.database")

IDLE_S = 1.0  # a namespace used more recently than this is never unloaded
LOW_WATER = 0.9  # unloading stops once the namespaces take at most this share of the budget
WARM_LIMIT = 0.8  # the background warm-up loads namespaces up to this share of the budget
BATCH = 64  # namespaces unloaded per writer op
TRIM_EVERY_S = 1.0  # the allocator is asked to give memory back at most this often
HEADROOM = 0.25  # the process may grow this share of the budget beyond it (allocator slack)
GRACE_S = 2.0  # an unloaded state is taken apart this long after, once nothing holds it
GIVE_UP_S = 120.0  # one still held then is left to the garbage collector


def process_bytes() -> int:
    """This process's resident memory (Linux: /proc/self/statm; 0 where unknown)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


_PAGE = 4096
with contextlib.suppress(ValueError, OSError, AttributeError):
    _PAGE = os.sysconf("SC_PAGE_SIZE")


def _trimmer() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where there is none (another C library)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


class Residency:
    """Sizes and recency of the namespaces in memory, and the thread that unloads the least
    recently used idle ones when they outgrow ``budget`` bytes.

    ``unload(names)`` drops namespaces (through the writer, between batches; it returns the
    states it dropped, each then saved by ``save(ns, state)``). Thread-safe.
    """

    def __init__(
        self,
        budget: int,
        *,
        unload: Callable[[list[str]], list[tuple[str, NamespaceState]]],
        save: Callable[[str, NamespaceState], None],
    ) -> None:
        self.budget = budget
        # the process's memory before any namespace: what it holds beyond that counts against
        # the budget when it is more than the namespaces' estimate (allocator slack)
        self._baseline = process_bytes()
        self._unload = unload
        self._save = save
        self._lock = threading.Lock()
        # namespace -> when it was last used (time.monotonic()), least recently used first
        self._used: OrderedDict[str, float] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._holds: dict[str, int] = {}  # namespace -> waiters holding it in memory
        self.total = 0  # bytes: the sum of _sizes
        self.unloads = 0  # namespaces unloaded so far (a metric)
        self._quiet = threading.local()
        self._shrinking = threading.Lock()  # one shrink at a time
        self._trim = _trimmer()
        self._trimmed = 0.0  # time.monotonic() of the last trim
        # unloaded states to take apart (NamespaceState.drop) once nothing reads them:
        # [state, when unloaded, its size]
        self._graveyard: list[list[Any]] = []
        self._freeing = 0  # bytes of the states there: unloaded, not freed yet
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    # -- accounting --------------------------------------------------------------------------

    def touch(self, ns: str) -> None:
        """``ns`` was used now (a request's read, query or write)."""
        if getattr(self._quiet, "on", False):
            return
        now = time.monotonic()
        with self._lock:
            if ns in self._used:
                self._used[ns] = now
                self._used.move_to_end(ns)

    @contextlib.contextmanager
    def quietly(self) -> Iterator[None]:
        """Uses inside the block (maintenance) do not count as uses."""
        self._quiet.on = True
        try:
            yield
        finally:
            self._quiet.on = False

    @contextlib.contextmanager
    def holding(self, ns: str) -> Iterator[None]:
        """``ns`` stays in memory while the block runs (a follower waiting for its changes)."""
        with self._lock:
            self._holds[ns] = self._holds.get(ns, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._holds[ns] - 1
                if left:
                    self._holds[ns] = left
                else:
                    del self._holds[ns]
            self.touch(ns)

    def installed(self, ns: str, state: NamespaceState) -> None:
        """A state of ``ns`` is now in memory (loaded, created or rebuilt)."""
        size = state.resident_bytes()
        with self._lock:
            self.total += size - self._sizes.get(ns, 0)
            self._sizes[ns] = size
            if ns not in self._used:
                self._used[ns] = time.monotonic()
        if self.total > self.budget:
            self._wake.set()

    def resized(self, names: list[str], lookup: Callable[[str], NamespaceState | None]) -> None:
        """The states of ``names`` changed (after a commit): count them again."""
        over = False
        with self._lock:
            for ns in names:
                state = lookup(ns)
                if state is None or ns not in self._sizes:
                    continue
                size = state.resident_bytes()
                self.total += size - self._sizes[ns]
                self._sizes[ns] = size
            over = self.total > self.budget
        if over:
            self._wake.set()

    def dropped(self, ns: str) -> None:
        """``ns`` holds nothing in memory any more."""
        with self._lock:
            self.total -= self._sizes.pop(ns, 0)
            self._used.pop(ns, None)

    def idle(self, ns: str, now: float | None = None) -> bool:
        """Whether ``ns`` was not used in the last :data:`IDLE_S`, and nobody holds it."""
        if ns in self._holds:
            return False
        used = self._used.get(ns)
        return used is None or (time.monotonic() if now is None else now) - used >= IDLE_S

    def room(self) -> bool:
        """Whether the background warm-up may load more."""
        return self.used() < WARM_LIMIT * self.budget

    def used(self) -> int:
        """What counts against the budget: the namespaces' estimated size, or, when the
        process has grown more than :data:`HEADROOM` of the budget beyond that since its
        start, its growth less that headroom. The allocator keeps some freed memory in
        pieces it cannot give back, more the more namespaces come and go: without this
        ceiling, 100,000 namespaces cycling through a 4 GiB budget grew the process to
        6.4 GiB; with it counted in full, small budgets held a fraction of what they
        should (the process's own warm-up counted as namespaces)."""
        measured = process_bytes()
        if not measured:
            return self.total
        # (unloaded states not taken apart yet are on their way out: not counted twice)
        grown = measured - self._baseline - self._freeing - int(HEADROOM * self.budget)
        return max(self.total, grown)

    def size_of(self, ns: str) -> int | None:
        """The counted size of ``ns`` (None: not in memory)."""
        return self._sizes.get(ns)

    @property
    def resident(self) -> int:
        """Namespaces in memory."""
        return len(self._sizes)

    # -- unloading ---------------------------------------------------------------------------

    def victims(self, now: float | None = None) -> list[str]:
        """The least recently used idle namespaces whose unloading brings what counts
        (:meth:`used`) under the low-water mark (oldest first; none within the budget).
        The most recently used namespace is never one: unloading it would make room for
        nothing but its own next load (one namespace larger than the budget stays)."""
        now = time.monotonic() if now is None else now
        counted = self.used()
        with self._lock:
            if counted <= self.budget:
                return []
            excess = counted - int(LOW_WATER * self.budget)
            out: list[str] = []
            holds = self._holds
            latest = next(reversed(self._used), None)
            for ns, used in self._used.items():
                if excess <= 0 or now - used < IDLE_S or ns == latest:
                    break  # the rest were used later still
                if ns not in holds:
                    out.append(ns)
                    excess -= self._sizes.get(ns, 0)
            return out

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="synapsedb-residency", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(IDLE_S)
            self._wake.clear()
            if self._stop:
                return
            try:
                self.shrink()
                self.bury()
            except Exception:  # the next wake tries again; memory stays over budget meanwhile
                log.exception("unloading namespaces over the memory budget failed")

    def bury(self, now: float | None = None) -> int:
        """Take apart the unloaded states that nothing holds any more, :data:`GRACE_S` after
        their unload (a query that took one just before goes on reading it meanwhile);
        how many were."""
        now = time.monotonic() if now is None else now
        done, keep = 0, []
        with self._shrinking:
            for entry in self._graveyard:
                if now - entry[1] < GRACE_S:
                    keep.append(entry)
                    continue
                # held by the entry, this frame's name and getrefcount's argument alone
                state = entry[0]
                if sys.getrefcount(state) <= 3:
                    state.drop()
                    done += 1
                    self._freeing -= entry[2]
                elif now - entry[1] < GIVE_UP_S:
                    keep.append(entry)
                else:
                    self._freeing -= entry[2]
                del state
            self._graveyard = keep
        return done

    def shrink(self) -> int:
        """Unload victims until the total is under the low-water mark (or none is idle);
        returns how many namespaces were unloaded."""
        with self._shrinking:
            done = self._shrink()
            now = time.monotonic()
            if done and self._trim is not None and now - self._trimmed >= TRIM_EVERY_S:
                self._trimmed = now
                self._trim()  # the pages the unloaded namespaces freed go back to the system
            return done

    def _shrink(self) -> int:
        done = 0
        while not self._stop:
            names = self.victims()
            before = done
            for i in range(0, len(names), BATCH):
                for ns, state in self._unload(names[i : i + BATCH]):
                    done += 1
                    self.unloads += 1
                    try:
                        self._save(ns, state)
                    except Exception:  # a cache: the reload builds the graph again
                        log.exception("could not save the vector graph of namespace %r", ns)
                    size = state.resident_bytes()
                    self._freeing += size
                    self._graveyard.append([state, time.monotonic(), size])
                    del state
            if done == before:  # nothing (more) to unload, or every victim was used meanwhile
                return done
        return done

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()


class Unload(Op):
    """Drop namespaces from memory, in the writer's thread between batches (so no plan or
    apply of another op sees a state go). Each namespace still idle when planned is dropped
    once the batch has committed, its access counts committed with the batch; the result is
    the list of (namespace, state) dropped, filled when the batch applies.

    ``keep=False``: the namespaces are no longer this process's (a share handed over): they
    are dropped whether idle or not, and not made pending."""

    __slots__ = ("idle", "keep", "names")

    def __init__(
        self, names: list[str], *, keep: bool = True, idle: Callable[[str], bool] | None = None
    ) -> None:
        super().__init__(len(names))
        self.names, self.keep, self.idle = names, keep, idle

    def plan(self, tx: Tx) -> list[tuple[str, NamespaceState]]:
        out: list[tuple[str, NamespaceState]] = []
        names = []
        for ns in self.names:
            state = dict.get(tx.states, ns)  # (never loads one)
            if self.keep and (state is None or (self.idle is not None and not self.idle(ns))):
                continue
            if self.keep and state is not None and state.access_dirty:
                state.access_dirty = False  # what tiering ranks by survives the unload
                tx.batch.access.extend((ns, m, c, t) for m, (c, t) in list(state.access.items()))
            names.append(ns)
        if names:
            tx.unloads.append((names, self.keep, out))
        return out
