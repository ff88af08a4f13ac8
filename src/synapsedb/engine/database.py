"""The embedded database: one data directory, its lock, secret and storage, and the engine core
over them (:mod:`synapsedb.engine.core`: in-memory state, writer and indexer threads)."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..clock import Clock, SystemClock
from ..config import Settings
from ..embed.base import Embedder
from ..errors import ClosedError, NotOwnerError, StorageError, ValidationError
from ..query.executor import Fusion
from ..storage import is_postgres_url, open_storage
from ..storage.base import Storage
from ..storage.files import (
    FILE_MODE,
    check_writable,
    make_private_dir,
    restrict_tree,
    storage_error,
)
from ..types import MaintenanceReport
from ..validation import check_agent, check_namespace
from .core import EngineCore, MemoryLoopSeam
from .embedding import EmbeddingService
from .namespace import Namespace
from .state import NamespaceState

__all__ = ["Database"]

log = logging.getLogger("synapsedb.database")


class Database:
    """An open SynapseDB data directory. Use :func:`synapsedb.open` to get one.

    Thread-safe: any number of threads may read and write through it at once. Only one process
    may open a data directory at a time (an exclusive lock on ``<dir>/LOCK``).

    ``storage`` says where the rows live: ``None`` (the default) is SQLite inside the data
    directory; ``"postgresql://user@host/db?schema=name"`` is PostgreSQL (docs/deploy.md); any
    object implementing :class:`~synapsedb.storage.base.Storage` is used as it is. The database
    takes the storage over and closes it when it closes. The data directory is needed either way:
    it holds ``LOCK`` (one process per directory) and ``indexes/`` (the saved vector graphs, a
    cache rebuilt from the rows when missing); with SQLite also the database file and
    ``SECRET``, while PostgreSQL keeps the secret in its ``secret`` table, shared by every
    process on the schema.

    The database owns the directory and the storage, and builds the
    :class:`~synapsedb.engine.core.EngineCore` (``core``) that namespaces, retrieval, lineage
    and transfer use: its state, writer, indexer and query log.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        storage: str | Storage | None = None,
        settings: Settings | None = None,
        clock: Clock | None = None,
        embedder: Embedder | str | None = "settings",
        **overrides: Any,
    ) -> None:
        self.settings = (
            (settings or Settings()).replace(**overrides) if overrides else (settings or Settings())
        )
        self.clock: Clock = clock or SystemClock()
        if embedder == "settings":
            embedder = self.settings.embedder
        if is_postgres_url(path):
            raise ValidationError(
                "path: a PostgreSQL URL is not a data directory; open a local directory (it "
                "holds the lock and the saved indexes) with storage='postgresql://...'",
                field="path",
            )
        if storage is not None and not isinstance(storage, str | os.PathLike):
            for name in ("load", "commit", "secret", "close"):
                if not callable(getattr(storage, name, None)):
                    raise ValidationError(
                        f"storage: expected a location or a Storage, got {type(storage).__name__} "
                        f"(it has no {name}())",
                        field="storage",
                    )
        self.embedding = EmbeddingService(embedder, self.settings)
        self.path = Path(path)
        # private to this user: the directory 0700, every file in it 0600 (docs/lifecycle.md)
        make_private_dir(self.path)
        check_writable(self.path)  # fail now, with the fix, not at the first write
        self._lock_fd = _lock_directory(self.path)
        self._released = False
        self._close_lock = threading.Lock()
        location = self.path if storage is None else storage
        opened = None if isinstance(location, str | os.PathLike) else location
        try:
            make_private_dir(self.path / "indexes")
            restrict_tree(self.path)  # files left by older versions were 0644
            if opened is None:
                assert isinstance(location, str | os.PathLike)
                opened = open_storage(
                    location,
                    durability=self.settings.durability,
                    erasure_wait_ms=self.settings.erasure_wait_ms,
                    query_log_max_rows=self.settings.query_log_max_rows,
                )
            self.core = EngineCore(self.path, opened, self.settings, self.clock, self.embedding,
                                   opened.secret(),
                                   maintain=self._maintain_in_background)  # fmt: skip
        except BaseException:
            try:
                if opened is not None:
                    opened.close()
            finally:
                os.close(self._lock_fd)
            raise
        core = self.core
        self.observers = core.observers
        self.query_log = core.query_log
        self.rates = core.rates
        self._last_maintenance = time.monotonic()
        # the query path (retrieval.py) and some tests still call these private names: the
        # core's own bound methods and storage, so a call costs what it did before
        self._state = core.state
        self._now_us = core.now_us
        self._submit = core.submit
        self._log_query = core.log_query
        self._flush_log = core.flush_log
        self._storage = core.storage
        try:
            core.start()
        except BaseException:  # (sharded: the address is a live process's)
            try:
                core.close()
            finally:
                os.close(self._lock_fd)
                self._released = True
            raise

    # -- public API ------------------------------------------------------------------------------

    @property
    def fusion(self) -> Fusion:
        """How hybrid queries fuse their keyword and vector rankings (replaceable)."""
        return self.core.fusion

    @fusion.setter
    def fusion(self, value: Fusion) -> None:
        self.core.fusion = value

    @property
    def memory_loop(self) -> MemoryLoopSeam | None:
        """The memory loop (synapsedb.memory_loop) behind ``Namespace.remember``/``recall``,
        attached by :func:`synapsedb.open`; the engine never imports it."""
        return self.core.memory_loop

    @memory_loop.setter
    def memory_loop(self, loop: MemoryLoopSeam | None) -> None:
        self.core.memory_loop = loop

    def namespace(self, name: str, *, agent: str | None = None) -> Namespace:
        """A handle on namespace ``name``; it comes into being with its first write.

        ``agent`` is recorded as the writer of every change made through this handle, unless a
        call names another.
        """
        self.core.check_open()
        return Namespace(self, check_namespace(name), check_agent(agent))

    def namespaces(self) -> list[str]:
        """Names of the namespaces that hold anything, sorted, loaded or not: one not loaded
        yet is listed from its stored name; one whose stored rows are bad is not listed once it
        has loaded (:meth:`unavailable_namespaces` loads every namespace and says which)."""
        return self.core.names()

    def namespaces_with_facts(self, entity: str) -> list[str]:
        """The namespaces of this process that hold a fact about ``entity`` (perhaps deleted
        since), sorted, read from storage without loading a namespace (what the memory loop
        looks at after a start: those with jobs). A storage that cannot say: every one."""
        find = getattr(self.core.storage, "fact_namespaces", None)
        names = find(entity) if callable(find) else self.core.names()
        return sorted(ns for ns in names if self.core.owner_of(ns) is None)

    def tier_counts(self, *, load: bool = True) -> dict[str, tuple[int, int]]:
        """Per namespace: (live memories in the hot tier, memories in the cold tier). Every
        namespace not loaded yet is loaded first; with ``load=False`` only the namespaces
        loaded so far are counted, at once (what a metrics scrape asks right after an open)."""
        if load:
            self.core.load_all()
        return {name: (st.live, len(st.cold)) for name, st in list(self.core.states.items())}

    def unavailable_namespaces(self, *, load: bool = True) -> dict[str, str]:
        """Namespaces that could not be loaded (a stored row is bad), with what is wrong and the
        repair; their requests answer StorageError while every other namespace serves. Every
        namespace not loaded yet is loaded first (a bad row is found when its namespace loads);
        with ``load=False`` those found so far, at once (see :attr:`loading_pending`)."""
        if load:
            self.core.load_all()
        storage = self.core.storage
        return {ns: problem.describe(storage) for ns, problem in self.core.unavailable.items()}

    def close(self) -> None:
        """Finish queued writes, close storage and release the directory lock. Idempotent."""
        with self._close_lock:
            if self._released:
                return
            self._released = True
        try:
            self.core.close()
        finally:
            os.close(self._lock_fd)

    def maintain(self, *, dry_run: bool = False) -> list[MaintenanceReport]:
        """Run maintenance in every namespace (see :meth:`Namespace.maintain`; each is loaded
        for it, one after another), and retry a pending erasure (see
        :attr:`erasure_pending`)."""
        reports = []
        with self.core.quietly():  # (one at a time: under a memory budget, not all fit)
            for ns in self.core.names():
                try:
                    reports.append(self.namespace(ns).maintain(dry_run=dry_run))
                except NotOwnerError:
                    continue  # another process's (sharded placement): it maintains it
                except StorageError:
                    if ns not in self.core.unavailable:  # (found bad as it loaded: skipped)
                        raise
        if not dry_run and self.core.storage.erasure_pending:
            self.core.storage.finish_erasure(0)  # no waiting here: writers share the connection
        return reports

    @property
    def erasure_pending(self) -> bool:
        """True while erased text (forget purge, expired TTL) may still be in a log the storage
        keeps (SQLite's write-ahead log, PostgreSQL's dead row versions awaiting VACUUM),
        because a reader could still see it; maintenance retries until it is gone."""
        return self.core.erasure_pending

    def _maintain_in_background(self) -> None:
        """Maintain every namespace when due, and now any namespace over its quota (policy
        evict). One namespace's failure is logged and skipped: the others are maintained."""
        if not self.settings.background_maintenance:
            return
        now = time.monotonic()
        due = now - self._last_maintenance >= self.settings.maintenance_interval_s
        if due:
            self._last_maintenance = now
        with self.core.quietly():  # maintenance keeps no namespace in memory
            for ns, state in sorted(list(self.core.states.items()), key=lambda item: item[0]):
                try:
                    if due or _over_quota(state):
                        self.namespace(ns).maintain()
                except ClosedError:
                    return
                except Exception:
                    log.exception("background maintenance of namespace %r failed; the other "
                                  "namespaces are maintained", ns)  # fmt: skip

    def wait_for_indexes(self, timeout: float | None = None) -> bool:
        """Block until background indexing has caught up with every write (False on timeout).

        Queries never need this (rows not yet in an HNSW graph are searched exactly); it is for
        benchmarks and operations that want steady-state speed.
        """
        self.core.check_open()
        return self.core.wait_for_indexes(timeout)

    @property
    def last_commit_us(self) -> int:
        """System time of the latest commit (never decreases; later commits are >= it)."""
        return self.core.last_commit_us

    @property
    def loading_pending(self) -> int:
        """Stored namespaces not loaded yet: each loads at its first use, and a background
        thread loads the rest after the open (``load = "lazy"``, the default)."""
        return self.core.loading_pending

    @property
    def indexing_pending(self) -> int:
        """Rows written but not yet in their namespace's HNSW graph (searched exactly meanwhile)."""
        return self.core.indexing_pending()

    @property
    def closed(self) -> bool:
        return self.core.closed

    def subject_of(self, entity: str) -> str:
        """The erasure log's stand-in for an entity: a keyed hash, never the name itself."""
        return self.core.subject_of(entity)

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<synapsedb.Database {str(self.path)!r}{' closed' if self.closed else ''}>"


def _over_quota(state: NamespaceState) -> bool:
    cfg = state.config
    if cfg.policy != "evict":
        return False
    return (cfg.max_hot is not None and state.live > cfg.max_hot) or (
        cfg.max_bytes is not None and state.hot_bytes > cfg.max_bytes
    )


def _lock_directory(path: Path) -> int:
    try:
        fd = os.open(path / "LOCK", os.O_RDWR | os.O_CREAT, FILE_MODE)
    except OSError as exc:
        raise storage_error(
            f"cannot open {path / 'LOCK'}: {exc.strerror or exc}", path / "LOCK", exc
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StorageError(
            f"data directory {path} is in use by another SynapseDB process", path=str(path)
        ) from None
    return fd
