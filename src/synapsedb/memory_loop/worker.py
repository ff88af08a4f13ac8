"""The memory loop's background worker: a daemon thread that runs the queued jobs of every
namespace, a few per namespace per pass, and gives back what it holds when it stops."""

from __future__ import annotations

import contextlib
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import NotOwnerError, SynapseError
from . import jobs as queue
from .settings import LoopSettings

__all__ = ["JOBS_PER_PASS", "BackgroundWorker"]

log = logging.getLogger("synapsedb.memory_loop")

JOBS_PER_PASS = 8  # jobs the worker runs in one namespace before visiting the next


class BackgroundWorker(ABC):
    """The thread part of :class:`~synapsedb.memory_loop.loop.MemoryLoop`: ``start``,
    ``visit`` and ``stop``. The loop holds the state below and runs each namespace's jobs."""

    settings: LoopSettings
    last_error: str | None
    _stop: threading.Event
    _wake: threading.Event
    _thread: threading.Thread | None
    _lock: threading.Lock
    _dirty: set[str]
    _arrived: set[str]
    _queued: dict[str, int]
    _failed: dict[str, int]
    _claimed: dict[tuple[str, str], tuple[Any, queue.Job]]

    @abstractmethod
    def run_pending(self, ns: Any, *, limit: int | None = None) -> int:
        """Run the namespace's due jobs; how many finished."""

    @abstractmethod
    def _recount(self, ns: Any) -> None:
        """Count the namespace's queued and failed jobs again."""

    @abstractmethod
    def _names(self) -> list[str]:
        """The namespaces to visit now."""

    def start(self, db: Any, *, names: Callable[[], Iterable[str]] | None = None) -> None:
        """Run queued jobs in a daemon thread: every namespace with jobs once (jobs queued
        before a restart; found in storage, not by loading each namespace), then those
        ``remember`` queued into, every ``poll_s`` (at once after a
        ``remember``)."""
        if self._thread is not None:
            return
        if names is None:  # those with jobs, found without loading every namespace
            find = getattr(db, "namespaces_with_facts", None)
            names = (lambda: find(queue.JOBS_ENTITY)) if callable(find) else db.namespaces
        with self._lock:
            self._dirty.update(names())
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._work, args=(db,), daemon=True, name="synapsedb-memory-loop"
        )
        self._thread.start()

    def _work(self, db: Any) -> None:
        # what the worker reads keeps no namespace in memory (engine/residency.py)
        quietly = getattr(getattr(db, "core", None), "quietly", contextlib.nullcontext)
        with quietly():
            self._run_jobs(db)

    def _run_jobs(self, db: Any) -> None:
        counted = False
        while not self._stop.is_set():
            self._wake.wait(self.settings.poll_s)
            self._wake.clear()
            if self._stop.is_set():
                continue
            try:
                self._take_arrivals(db)
            except SynapseError as exc:  # storage unreachable: they are looked at next time
                self.last_error = exc.message
            if not counted:
                # the queues as they are, before any job runs (a pass of slow extractions must
                # not leave /readyz saying nothing is queued); after the first wait, so that an
                # open still loads each namespace at its first use (engine/lazy.py)
                counted = True
                self._count(db)
            for name in self._names():
                if self._stop.is_set():
                    break
                try:
                    # a few jobs per namespace per pass: one tenant's backlog cannot starve
                    # the others (the rest is due again on the next pass)
                    if self.run_pending(db.namespace(name), limit=JOBS_PER_PASS):
                        self._wake.set()
                except NotOwnerError:
                    self._elsewhere(name)
                except SynapseError as exc:  # a namespace that cannot be read right now
                    self.last_error = f"{name}: {exc.message}"
                except Exception:  # a bug: logged, the worker goes on with the others
                    log.exception("memory loop: jobs of namespace %r failed", name)

    def _elsewhere(self, name: str) -> None:
        """Another process owns ``name`` (sharded placement): its jobs are that one's."""
        with self._lock:
            self._dirty.discard(name)
            self._queued.pop(name, None)
            self._failed.pop(name, None)

    def visit(self, names: list[str]) -> None:
        """Look at the jobs of ``names`` soon (namespaces this process just took over from
        another, which may have left jobs queued): those of them with jobs in storage."""
        with self._lock:
            self._arrived.update(names)
        self._wake.set()

    def _take_arrivals(self, db: Any) -> None:
        with self._lock:
            arrived, self._arrived = self._arrived, set()
        if not arrived:
            return
        find = getattr(db, "namespaces_with_facts", None)
        with_jobs = set(find(queue.JOBS_ENTITY)) if callable(find) else arrived
        with self._lock:
            self._dirty.update(arrived & with_jobs)

    def _count(self, db: Any) -> None:
        for name in self._names():
            if self._stop.is_set():
                return
            try:
                self._recount(db.namespace(name))
            except NotOwnerError:
                self._elsewhere(name)
            except SynapseError as exc:
                self.last_error = f"{name}: {exc.message}"
            except Exception:  # a bug: logged, the worker goes on with the others
                log.exception("memory loop: jobs of namespace %r not counted", name)

    def stop(self) -> None:
        """Stop the worker: it finishes the job it is running if that takes at most
        ``stop_wait_s``; jobs still held after that are given back (due at once), so the next
        process to open the data runs them instead of waiting out a lease."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.stop_wait_s)
            self._thread = None
        for ns, job in list(self._claimed.values()):
            with contextlib.suppress(SynapseError):
                queue.release(ns, job, job.agent)
        self._claimed.clear()
