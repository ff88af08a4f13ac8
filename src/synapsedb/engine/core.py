"""The engine core: what namespaces, retrieval, lineage and transfer use of an open database.

:class:`~synapsedb.engine.database.Database` owns the data directory (its lock, its secret,
the choice of storage) and the public API; it builds one :class:`EngineCore` over that
storage, and every namespace handle binds the core once and calls it directly:

- ``state(ns)``: the namespace's in-memory state (None: it holds nothing yet);
- ``submit(op)``: commit one op through the single writer, durably, and get its result;
- ``now_us()``: the present for reads, never before the latest commit;
- ``storage``, ``settings``, ``clock``, ``embedding``, ``fusion``, ``observers``, ``rates``,
  ``query_log``: the parts themselves;
- ``log_query(row)``, ``flush_log()``, ``subject_of(entity)``, ``erasure_pending``.

The core imports neither the database nor the namespace handle, so the engine's modules
depend on it in one direction only.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

from ..clock import Clock
from ..config import Settings
from ..errors import ClosedError, ValidationError
from ..query.executor import Fusion
from ..storage.base import LoadedRows, SharedStorage, Storage
from ..storage.files import restrict_tree
from ..storage.postgres_shards import shard_of
from .embedding import EmbeddingService
from .follower import CatchUp, Follower
from .indexer import Indexer
from .lazy import Loader, States
from .lifecycle import RateLimiter
from .lineage import Flush, QueryLog, changes_of
from .loader import MAX_LEAD_US, load_states
from .observers import Observers
from .placement import Placement, ShardedStorage
from .residency import Residency, Unload
from .state import NamespaceState
from .unavailable import Unloadable
from .writer import Op, Tx, Writer

__all__ = ["EngineCore", "MemoryLoopSeam"]

log = logging.getLogger("synapsedb.database")


class MemoryLoopSeam(Protocol):
    """What the engine needs of the memory loop (``synapsedb.memory_loop.MemoryLoop``), which
    lives above it: ``Namespace.remember``/``recall`` pass themselves in. The engine never
    imports the loop; :func:`synapsedb.open` attaches one as ``Database.memory_loop``."""

    def remember(
        self, ns: Any, messages: Any, *, entity: str, session: str | None = ...,
        agent: str | None = ..., memories: Any = ..., wait: bool = ...,
    ) -> Any: ...  # fmt: skip

    def recall(
        self, ns: Any, messages_or_text: Any, *, entity: str | None = ...,
        budget_tokens: int | None = ..., k: int | None = ..., threshold: float | None = ...,
        rewrite: str | None = ..., agent: str | None = ...,
    ) -> Any: ...  # fmt: skip

    def visit(self, names: list[str]) -> None: ...

    def close(self) -> None: ...


class EngineCore:
    """The engine's state, writer and indexer over one storage.

    Building it reads the stored namespace names (``settings.load == "lazy"``: each
    namespace loads at its first need, :mod:`.lazy`) or loads every namespace (``"eager"``);
    a namespace with a bad row is made unavailable and logged with the repair when it loads.
    :meth:`start` then starts loading the rest and background indexing, whose thread calls
    ``maintain`` when it is idle (the database runs namespace maintenance there).
    Thread-safe as the database is.
    """

    def __init__(
        self,
        path: Path,
        storage: Storage,
        settings: Settings,
        clock: Clock,
        embedding: EmbeddingService,
        secret: bytes,
        *,
        maintain: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self.storage = storage
        self.settings = settings
        self.clock = clock
        self.embedding = embedding
        self.fusion = Fusion()
        self._secret = secret
        self.closed = False
        self._close_lock = threading.Lock()
        # every namespace that holds anything; the writer adds and replaces entries. A lookup
        # of a namespace not loaded yet loads it (lazy.py)
        self.states = States()
        # namespaces with a stored row that cannot be loaded: unavailable, the others serve
        self.unavailable: dict[str, Unloadable] = {}
        # several processes on one PostgreSQL schema, sharded: this process owns a share of
        # the namespaces and serves only those (placement.py)
        self.placement = _placement(storage, settings, self._gain, self._lose)
        # replicated: follow the others' commits from where the rows ended before loading
        # them (follower.py)
        self._shared: SharedStorage | None = (
            storage if isinstance(storage, SharedStorage) and self.placement is None else None
        )
        marks = self._shared.follow_marks() if self._shared is not None else None
        open_us = clock.now_us()
        # the namespaces in memory are held to a budget; the least recently used idle ones
        # are unloaded, and load again on first need (residency.py; a storage that cannot
        # load one namespace at a time keeps everything)
        self.residency = (
            Residency(settings.memory_budget_bytes(), unload=self._unload, save=self._save_graph)
            if _loads_lazily(storage)
            else None
        )
        if self.residency is not None:
            self.states.on_install = self.residency.installed
            self.states.on_drop = self.residency.dropped
        # stored times are checked against the present, never before the open's
        self._loader = Loader(storage, self.states, self.unavailable,
                              now_us=lambda: max(clock.now_us(), open_us),
                              adopt=self._adopt, report=self._report,
                              room=self.residency.room if self.residency else None,
                              seen=lambda us: self._writer.at_least(us))  # fmt: skip
        if self.placement is not None:  # the namespaces of the share it takes, at start()
            self._loader.begin([])
            last_us = storage.last_sys_us(open_us + MAX_LEAD_US)
        elif settings.load == "lazy" and _loads_lazily(storage):
            named, unnamed = storage.namespace_names()
            self._loader.begin([*named, *unnamed])
            # rows without a namespaces row: unavailable, reported now as an eager open did
            # (and so never listed by namespaces())
            self._loader.load_all_of(unnamed)
            # the commit clock starts after every stored time (one a day or more ahead of
            # this clock makes its namespace unavailable, as an eager open did)
            last_us = storage.last_sys_us(open_us + MAX_LEAD_US)
        else:
            last_us = self._apply_rows(storage.load(), self.states, open_us)
        self._follower = (
            Follower(self._shared, self.states, marks, self._loader.lock)
            if self._shared is not None
            else None
        )
        self.observers = Observers()
        embedding.on_batch = lambda n: self.observers.emit(self.observers.embed, n)
        self.query_log = QueryLog()
        self.rates = RateLimiter()
        # the memory loop (synapsedb.memory_loop), attached by synapsedb.open: the engine never
        # imports it; Namespace.remember/recall reach it through this seam
        self.memory_loop: MemoryLoopSeam | None = None
        self._indexer = Indexer(
            self.states, settings, path / "indexes", flush=self.flush_log, maintain=maintain
        )
        self._writer = Writer(
            storage,
            self.states,
            clock,
            last_us=last_us,
            max_rows=settings.group_commit_max,
            on_commit=self._after_commit,
            on_apply=self._after_apply,
            log=self.query_log,
            reload=self._reload_namespace,
            unavailable=self.unavailable,
            serialize=self._shared.exclusive if self._shared is not None else None,
            follow=self._follow if self._follower is not None else None,
            unload=self._loader.unload,
            owned=self.placement.check if self.placement is not None else None,
        )

    def start(self) -> None:
        """Load the saved vector graphs, start loading the namespaces not loaded yet, and
        start background indexing (and with it the ``maintain`` calls): once whoever calls
        ``maintain`` is ready for them. On a shared storage, start following the other
        processes' commits as they are notified."""
        if self.placement is not None:
            self.placement.start()  # joins, and takes this process's share
        self._indexer.start()
        if self.residency is not None:
            self.residency.start()
        self._loader.start()
        if self._shared is not None:
            self._shared.listen(self.catch_up)

    def _follow(self) -> Tx | None:
        """Other processes' commits as a Tx for the writer to apply (writer thread)."""
        assert self._follower is not None
        tx = self._follower.catch_up()
        for ns in tx.reloads if tx is not None else ():
            # rows there changed in place (perhaps a purge): listeners drop what they keep
            # of the namespace (the change feed replays it from the rewritten history)
            self.observers.emit(self.observers.erase, ns, "")
        return tx

    def catch_up(self) -> None:
        """Apply the other processes' commits now (on a shared storage; a no-op otherwise).
        The storage's listener calls this when another process commits."""
        if self._follower is not None and not self.closed:
            with contextlib.suppress(ClosedError):
                self._writer.submit(CatchUp())

    # -- what namespace handles call -------------------------------------------------------------

    def check_open(self) -> None:
        if self.closed:
            raise ClosedError("the database is closed")

    def state(self, ns: str) -> NamespaceState | None:
        """The namespace's state (None: it holds nothing yet); StorageError when it could not
        be loaded."""
        if self.closed:
            raise ClosedError("the database is closed")
        if self.placement is not None:
            self.placement.check(ns)  # NotOwnerError: another process serves it
        state = self.states.get(ns)
        if state is None and ns in self.unavailable:
            raise self.unavailable[ns].error()
        if self.residency is not None:
            self.residency.touch(ns)
        return state

    def submit(self, op: Op) -> Any:
        """Commit ``op`` through the single writer (grouped with concurrent ops) and return its
        result once it is durable, or raise its error."""
        if self.closed:
            raise ClosedError("the database is closed")
        ns = getattr(op, "ns", None)
        if ns is not None:
            if self.placement is not None:
                self.placement.check(ns)
            if ns in self.states.pending:
                self._loader.load(ns)  # here, not in the writer's thread while others wait
            if self.residency is not None:
                self.residency.touch(ns)
        return self._writer.submit(op)

    def load_all(self, timeout: float | None = None) -> bool:
        """Load every namespace not loaded yet (what lists them all needs this first); False
        when ``timeout`` ran out first."""
        self.check_open()
        return self._loader.load_all(timeout)

    def names(self) -> list[str]:
        """Every namespace that holds anything and is not known to be unavailable, loaded or
        not (one whose stored rows turn out bad when it loads then drops out), sorted; with
        sharded placement, every process's."""
        self.check_open()
        if self.placement is not None:  # every process's, read from storage
            named, _unnamed = self.storage.namespace_names()
            return sorted({*named, *self.states.keys()} - set(self.unavailable))
        pending = [ns for ns in list(self.states.pending) if type(ns) is str]
        unavailable = self.unavailable
        return sorted({*self.states.keys(), *(ns for ns in pending if ns not in unavailable)})

    def holding(self, ns: str) -> contextlib.AbstractContextManager[None]:
        """``ns`` stays in memory while the block runs (residency.py): a change feed's
        follower waits in one, so it misses no change that another process commits."""
        if self.residency is None:
            return contextlib.nullcontext()
        return self.residency.holding(ns)

    def quietly(self) -> contextlib.AbstractContextManager[None]:
        """Uses of namespaces inside the block (maintenance) leave their recency as it was:
        they do not keep a namespace in memory (residency.py)."""
        return self.residency.quietly() if self.residency is not None else contextlib.nullcontext()

    @property
    def loading_pending(self) -> int:
        """Stored namespaces not loaded yet (the background thread loads them)."""
        return 0 if self.closed else self._loader.pending

    def now_us(self) -> int:
        """The present for reads: never before the last committed change."""
        return max(self.clock.now_us(), self._writer.last_us)

    @property
    def last_commit_us(self) -> int:
        """System time of the latest commit (never decreases; later commits are >= it)."""
        return self._writer.last_us

    def subject_of(self, entity: str) -> str:
        """The erasure log's stand-in for an entity: a keyed hash, never the name itself."""
        return hmac.new(self._secret, entity.encode(), hashlib.sha256).hexdigest()[:32]

    def log_query(self, row: tuple[Any, ...]) -> None:
        """Buffer one query log row (committed with the next group commit)."""
        if self.query_log.add(row) >= 1024:
            self._indexer.wake()  # a busy reader: do not let the buffer grow

    def flush_log(self) -> None:
        """Commit the buffered query log now (the background thread calls this when idle)."""
        if len(self.query_log):
            with contextlib.suppress(ClosedError):  # closing: close() flushes first itself
                self._writer.submit(Flush())

    @property
    def erasure_pending(self) -> bool:
        """True while erased text may still be in a log the storage keeps (see
        :attr:`Database.erasure_pending`)."""
        return self.storage.erasure_pending

    # -- background indexing ---------------------------------------------------------------------

    def wait_for_indexes(self, timeout: float | None = None) -> bool:
        """Block until every namespace is loaded and background indexing has caught up with
        every write (False on timeout)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._loader.load_all(timeout):
            return False
        return self._indexer.wait(None if deadline is None else deadline - time.monotonic())

    def indexing_pending(self) -> int:
        """Rows written but not yet in their namespace's HNSW graph."""
        return 0 if self.closed else self._indexer.pending()

    # -- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the memory loop, finish queued writes, save the indexes and close storage.
        Idempotent; every call after the first returns at once."""
        with self._close_lock:
            if self.closed:
                return
            self.closed = True
        self._loader.close()  # after the chunk it is reading
        if self.residency is not None:
            self.residency.close()  # after the unloads in hand
        if self.memory_loop is not None:
            self.memory_loop.close()  # its worker writes through this core
        self.flush_log()
        self._writer.close()
        if self.placement is not None:
            self.placement.close()  # after the last commit: the others take the share now
        self._indexer.close()
        restrict_tree(self.path / "indexes")  # the vector graphs it just saved
        self.storage.close()
        self.embedding.settle()

    # -- loading and reloading -------------------------------------------------------------------

    def _reload_namespace(self, ns: str) -> NamespaceState | None:
        """A fresh state for ``ns`` from storage (after an erasure, a tier move, an import, or
        a failed apply), without its saved graph; access counters not yet persisted carry over
        from the old state. None when ``ns`` holds nothing or cannot be loaded (then it is
        unavailable). Never raises."""
        states: dict[str, NamespaceState] = {}
        try:
            # one never loaded here is loaded first (under its lock, so that no background
            # load of an older snapshot lands after this one), then read afresh below
            self.states.get(ns)
            self._apply_rows(self.storage.load(ns), states, self.now_us())
        except Exception as exc:  # a storage read failed: memory can no longer match the disk
            log.exception("could not reload namespace %r from storage", ns)
            self.unavailable.setdefault(
                ns, Unloadable("(all)", ns, f"ns = '{ns}'", f"reloading it failed: {exc!r}")
            )
            return None
        with contextlib.suppress(FileNotFoundError):
            (self.path / "indexes" / f"{ns}.hnsw").unlink()  # stale rows (or erased vectors)
        new, old = states.get(ns), self.states.get(ns)
        if new is not None and old is not None:
            new.access.update(old.access)
            new.cold_access = {m: n for m, n in old.cold_access.items() if m in new.cold}
        return new

    def _apply_rows(self, rows: LoadedRows, states: dict[str, NamespaceState], now_us: int) -> int:
        """Check and apply stored rows into ``states``; a namespace with a bad row (or a time
        more than a day after ``now_us``) is logged with the repair and made unavailable.
        Returns the latest system time loaded."""
        loaded = load_states(rows, now_us)
        for ns, state in loaded.states.items():
            states[ns] = state  # (States: counted by the residency budget)
        for ns, problem in loaded.unavailable.items():
            if ns not in self.unavailable:
                self._report(problem)
            self.unavailable[ns] = problem
        return loaded.last_us

    def _report(self, problem: Unloadable) -> None:
        """A namespace found unavailable: the operator's log says what and how to repair."""
        log.error("%s", problem.describe(self.storage))

    def _adopt(self, ns: str, state: NamespaceState) -> None:
        """A namespace just loaded: it takes its saved vector graph (before it serves)."""
        self._indexer.adopt(ns, state)

    # -- the residency budget --------------------------------------------------------------------

    def _unload(self, names: list[str]) -> list[tuple[str, NamespaceState]]:
        """Drop the namespaces of ``names`` still idle from memory (through the writer, so
        that no batch sees a state go); the (namespace, state) pairs dropped."""
        assert self.residency is not None
        try:
            dropped: list[tuple[str, NamespaceState]] = self._writer.submit(
                Unload(names, idle=self.residency.idle)
            )
        except ClosedError:
            return []
        return dropped

    def owner_of(self, ns: str) -> str | None:
        """Sharded placement: the address of the process that serves ``ns`` ("" while its
        share moves); None when this process does (always, without sharded placement)."""
        return None if self.placement is None else self.placement.owner_of(ns)

    # -- sharded placement -------------------------------------------------------------------------

    def _gain(self, shards: set[int]) -> None:
        """Shares just taken over: their stored namespaces load at their first request."""
        named, unnamed = self.storage.namespace_names()
        names = [ns for ns in (*named, *unnamed) if type(ns) is str and shard_of(ns) in shards]
        self._loader.add_pending(names)
        if self.memory_loop is not None and names:
            self.memory_loop.visit(names)  # jobs the previous owner left queued there

    def _lose(self, shards: set[int]) -> None:
        """Shares just handed over: their namespaces leave memory (not to load here again)."""
        names = [ns for ns in [*list(self.states.keys()), *list(self.states.pending)]
                 if type(ns) is str and shard_of(ns) in shards]  # fmt: skip
        if names:
            with contextlib.suppress(ClosedError):
                self._writer.submit(Unload(names, keep=False))

    def _save_graph(self, ns: str, state: NamespaceState) -> None:
        """An unloaded namespace's vector graph goes to ``indexes/`` (its reload takes it)."""
        self._indexer.save(ns, state)

    # -- writer callbacks ------------------------------------------------------------------------

    def _after_commit(self, rows: int, seconds: float) -> None:
        self.observers.emit(self.observers.commit, rows, seconds)
        self._indexer.wake()

    def _after_apply(self, tx: Tx) -> None:
        if self.residency is not None:
            self.residency.resized(tx.touched(), self.states.resident)
        if tx.purged:  # visible now: queries that started before may still log the name
            visible_us = self.now_us()
            for ns, entity, ids in tx.purged:
                self.query_log.remember_purge(ns, entity, ids, visible_us)
                self.observers.emit(self.observers.erase, ns, entity)
        if self.observers.change:
            for ns, entries in changes_of(tx).items():
                self.observers.emit(self.observers.change, ns, entries)
        if self._follower is not None:
            self._indexer.wake()  # another process's rows, applied without a commit here


def _placement(
    storage: Storage,
    settings: Settings,
    gained: Callable[[set[int]], None],
    lost: Callable[[set[int]], None],
) -> Placement | None:
    """The sharded placement of this process (None: replicated, or one process alone)."""
    if settings.placement != "sharded":
        return None
    if not all(callable(getattr(storage, name, None)) for name in ("fence", "take", "placed")):
        raise ValidationError(
            "placement: 'sharded' needs PostgreSQL storage (storage='postgresql://...')",
            field="placement",
        )
    if not _loads_lazily(storage):
        raise ValidationError("placement: 'sharded' needs a storage that loads one namespace "
                              "at a time", field="placement")  # fmt: skip
    if not settings.advertise_url:
        raise ValidationError(
            "advertise_url: sharded placement needs this process's address for the others "
            "(e.g. http://10.0.0.5:7379)",
            field="advertise_url",
        )
    return Placement(cast(ShardedStorage, storage), settings.advertise_url.rstrip("/"),
                     settings.lease_s, gained=gained, lost=lost)  # fmt: skip


def _loads_lazily(storage: Storage) -> bool:
    """Whether ``storage`` has what loading on first need reads (a storage of another kind,
    passed to the database as an object, may not: it loads eagerly)."""
    return all(callable(getattr(storage, name, None))
               for name in ("namespace_names", "last_sys_us", "load_namespaces"))  # fmt: skip
