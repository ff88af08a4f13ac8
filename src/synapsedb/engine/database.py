"""The embedded database: one data directory, its storage, in-memory state and writer thread."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..clock import Clock, SystemClock
from ..config import Settings
from ..embed.base import Embedder
from ..errors import ClosedError, StorageError
from ..query.executor import Fusion
from ..storage.base import LoadedRows
from ..storage.files import (
    FILE_MODE,
    check_writable,
    make_private_dir,
    restrict_tree,
    storage_error,
)
from ..storage.sqlite import SQLiteStorage
from ..types import MaintenanceReport
from ..validation import check_agent, check_namespace
from .embedding import EmbeddingService
from .handle import MemoryLoopSeam
from .indexer import Indexer
from .lifecycle import RateLimiter
from .lineage import Flush, QueryLog, changes_of
from .loader import Unloadable, load_states
from .namespace import Namespace
from .observers import Observers
from .state import NamespaceState
from .writer import Op, Tx, Writer

__all__ = ["Database"]

log = logging.getLogger("synapsedb.database")


class Database:
    """An open SynapseDB data directory. Use :func:`synapsedb.open` to get one.

    Thread-safe: any number of threads may read and write through it at once. Only one process
    may open a data directory at a time (an exclusive lock on ``<dir>/LOCK``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
        embedder: Embedder | str | None = "settings",
        **overrides: Any,
    ) -> None:
        self.settings = (
            (settings or Settings()).replace(**overrides) if overrides else (settings or Settings())
        )
        self.clock: Clock = clock or SystemClock()
        self.fusion = Fusion()
        if embedder == "settings":
            embedder = self.settings.embedder
        self.embedding = EmbeddingService(embedder, self.settings)
        self.path = Path(path)
        # private to this user: the directory 0700, every file in it 0600 (docs/lifecycle.md)
        make_private_dir(self.path)
        check_writable(self.path)  # fail now, with the fix, not at the first write
        self._lock_fd = _lock_directory(self.path)
        self._closed = False
        self._close_lock = threading.Lock()
        try:
            self._secret = _secret(self.path)
            make_private_dir(self.path / "indexes")
            restrict_tree(self.path)  # files left by older versions were 0644
            self._storage = SQLiteStorage(
                self.path,
                durability=self.settings.durability,
                erasure_wait_ms=self.settings.erasure_wait_ms,
                query_log_max_rows=self.settings.query_log_max_rows,
            )
            self._states: dict[str, NamespaceState] = {}
            # namespaces with a stored row that cannot be loaded: unavailable, the others serve
            self._unavailable: dict[str, Unloadable] = {}
            last_us = self._load()
        except BaseException:
            os.close(self._lock_fd)
            raise
        self.observers = Observers()
        self.embedding.on_batch = lambda n: self.observers.emit(self.observers.embed, n)
        self.query_log = QueryLog()
        self.rates = RateLimiter()
        self._last_maintenance = time.monotonic()
        self._indexer = Indexer(
            self._states,
            self.settings,
            self.path / "indexes",
            flush=self._flush_log,
            maintain=self._maintain_in_background,
        )
        self._writer = Writer(
            self._storage,
            self._states,
            self.clock,
            last_us=last_us,
            max_rows=self.settings.group_commit_max,
            on_commit=self._after_commit,
            on_apply=self._after_apply,
            log=self.query_log,
            reload=self._reload_namespace,
            unavailable=self._unavailable,
        )
        self._indexer.start()
        # the memory loop (synapsedb.agentic), filled in by synapsedb.open: the engine never
        # imports it; Namespace.remember/recall reach it through this seam (MemoryLoopSeam)
        self.memory_loop: MemoryLoopSeam | None = None

    def _load(self) -> int:
        """Rebuild the in-memory state from storage; returns the latest system time of the
        namespaces that loaded (one that cannot be loaded is reported and left out)."""
        return self._apply_rows(self._storage.load(), self._states, self.clock.now_us())

    def _reload_namespace(self, ns: str) -> NamespaceState | None:
        """A fresh state for ``ns`` from storage (after an erasure, a tier move, an import, or
        a failed apply), without its saved graph; access counters not yet persisted carry over
        from the old state. None when ``ns`` holds nothing or cannot be loaded (then it is
        unavailable). Never raises."""
        states: dict[str, NamespaceState] = {}
        try:
            self._apply_rows(self._storage.load(ns), states, self._now_us())
        except Exception as exc:  # a storage read failed: memory can no longer match the disk
            log.exception("could not reload namespace %r from storage", ns)
            self._unavailable.setdefault(
                ns, Unloadable("(all)", ns, f"ns = '{ns}'", f"reloading it failed: {exc!r}")
            )
            return None
        with contextlib.suppress(FileNotFoundError):
            (self.path / "indexes" / f"{ns}.hnsw").unlink()  # stale rows (or erased vectors)
        new, old = states.get(ns), self._states.get(ns)
        if new is not None and old is not None:
            new.access.update(old.access)
            new.cold_access = {m: n for m, n in old.cold_access.items() if m in new.cold}
        return new

    def _apply_rows(self, rows: LoadedRows, states: dict[str, NamespaceState], now_us: int) -> int:
        """Check and apply stored rows into ``states``; a namespace with a bad row (or a time
        more than a day after ``now_us``) is logged with the repair and made unavailable.
        Returns the latest system time loaded."""
        loaded = load_states(rows, now_us)
        states.update(loaded.states)
        for ns, problem in loaded.unavailable.items():
            if ns not in self._unavailable:
                log.error("%s", problem.describe(self.path))
            self._unavailable[ns] = problem
        return loaded.last_us

    # -- public API ------------------------------------------------------------------------------

    def namespace(self, name: str, *, agent: str | None = None) -> Namespace:
        """A handle on namespace ``name``; it comes into being with its first write.

        ``agent`` is recorded as the writer of every change made through this handle, unless a
        call names another.
        """
        self._check_open()
        return Namespace(self, check_namespace(name), check_agent(agent))

    def namespaces(self) -> list[str]:
        """Names of the namespaces that hold anything, sorted."""
        self._check_open()
        return sorted(self._states)

    def tier_counts(self) -> dict[str, tuple[int, int]]:
        """Per namespace: (live memories in the hot tier, memories in the cold tier)."""
        self._check_open()
        return {name: (st.live, len(st.cold)) for name, st in list(self._states.items())}

    def unavailable_namespaces(self) -> dict[str, str]:
        """Namespaces that could not be loaded (a stored row is bad), with what is wrong and the
        repair; their requests answer StorageError while every other namespace serves."""
        self._check_open()
        return {ns: problem.describe(self.path) for ns, problem in self._unavailable.items()}

    def close(self) -> None:
        """Finish queued writes, close storage and release the directory lock. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            if self.memory_loop is not None:
                self.memory_loop.close()  # its worker writes through this database
            self._flush_log()
            self._writer.close()
            self._indexer.close()
            restrict_tree(self.path / "indexes")  # the vector graphs it just saved
            self._storage.close()
            self.embedding.settle()
        finally:
            os.close(self._lock_fd)

    def maintain(self, *, dry_run: bool = False) -> list[MaintenanceReport]:
        """Run maintenance in every namespace (see :meth:`Namespace.maintain`), and retry a
        pending erasure (see :attr:`erasure_pending`)."""
        self._check_open()
        reports = [self.namespace(ns).maintain(dry_run=dry_run) for ns in sorted(self._states)]
        if not dry_run and self._storage.erasure_pending:
            self._storage.finish_erasure(0)  # no waiting here: writers share the connection
        return reports

    @property
    def erasure_pending(self) -> bool:
        """True while erased text (forget purge, expired TTL) may still be in the SQLite
        write-ahead log, because another connection kept reading it; maintenance retries
        until it is gone."""
        return self._storage.erasure_pending

    def _maintain_in_background(self) -> None:
        """Maintain every namespace when due, and now any namespace over its quota (policy
        evict). One namespace's failure is logged and skipped: the others are maintained."""
        if not self.settings.background_maintenance:
            return
        now = time.monotonic()
        due = now - self._last_maintenance >= self.settings.maintenance_interval_s
        if due:
            self._last_maintenance = now
        for ns, state in sorted(list(self._states.items()), key=lambda item: item[0]):
            try:
                if due or _over_quota(state):
                    self.namespace(ns).maintain()
            except ClosedError:
                return
            except Exception:
                log.exception("background maintenance of namespace %r failed; the other "
                              "namespaces are maintained", ns)  # fmt: skip

    def _after_commit(self, rows: int, seconds: float) -> None:
        self.observers.emit(self.observers.commit, rows, seconds)
        self._indexer.wake()

    def _after_apply(self, tx: Tx) -> None:
        if tx.purged:  # visible now: queries that started before may still log the name
            visible_us = self._now_us()
            for ns, entity, ids in tx.purged:
                self.query_log.remember_purge(ns, entity, ids, visible_us)
                self.observers.emit(self.observers.erase, ns, entity)
        if self.observers.change:
            for ns, entries in changes_of(tx).items():
                self.observers.emit(self.observers.change, ns, entries)

    def wait_for_indexes(self, timeout: float | None = None) -> bool:
        """Block until background indexing has caught up with every write (False on timeout).

        Queries never need this (rows not yet in an HNSW graph are searched exactly); it is for
        benchmarks and operations that want steady-state speed.
        """
        self._check_open()
        return self._indexer.wait(timeout)

    @property
    def last_commit_us(self) -> int:
        """System time of the latest commit (never decreases; later commits are >= it)."""
        return self._writer.last_us

    @property
    def indexing_pending(self) -> int:
        """Rows written but not yet in their namespace's HNSW graph (searched exactly meanwhile)."""
        return 0 if self._closed else self._indexer.pending()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<synapsedb.Database {str(self.path)!r}{' closed' if self._closed else ''}>"

    # -- engine internals used by Namespace ------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the database is closed")

    def _submit(self, op: Op) -> Any:
        self._check_open()
        return self._writer.submit(op)

    def subject_of(self, entity: str) -> str:
        """The erasure log's stand-in for an entity: a keyed hash, never the name itself."""
        return hmac.new(self._secret, entity.encode(), hashlib.sha256).hexdigest()[:32]

    def _flush_log(self) -> None:
        """Commit the buffered query log now (the background thread calls this when idle)."""
        if len(self.query_log):
            with contextlib.suppress(ClosedError):  # closing: close() flushes first itself
                self._writer.submit(Flush())

    def _log_query(self, row: tuple[Any, ...]) -> None:
        if self.query_log.add(row) >= 1024:
            self._indexer.wake()  # a busy reader: do not let the buffer grow

    def _now_us(self) -> int:
        """The present for reads: never before the last committed change."""
        return max(self.clock.now_us(), self._writer.last_us)

    def _state(self, ns: str) -> NamespaceState | None:
        """The namespace's state (None: it holds nothing yet); StorageError when it could not
        be loaded."""
        self._check_open()
        state = self._states.get(ns)
        if state is None and ns in self._unavailable:
            raise self._unavailable[ns].error()
        return state


def _over_quota(state: NamespaceState) -> bool:
    cfg = state.config
    if cfg.policy != "evict":
        return False
    return (cfg.max_hot is not None and state.live > cfg.max_hot) or (
        cfg.max_bytes is not None and state.hot_bytes > cfg.max_bytes
    )


def _secret(path: Path) -> bytes:
    """A per-database key for hashing erased entities (so their names are not guessable).

    Created 0600 from the first byte on (never readable by others, not even briefly)."""
    key = path / "SECRET"
    try:
        return key.read_bytes()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise storage_error(f"cannot read {key}: {exc.strerror or exc}", key, exc) from exc
    value = os.urandom(32)
    tmp = path / "SECRET.tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # left by a crash between creating and renaming it
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(value)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, key)
    except OSError as exc:
        raise storage_error(f"cannot create {key}: {exc.strerror or exc}", key, exc) from exc
    return value


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
