"""The background indexer: grows the HNSW graphs of large namespaces off the write path.

It wakes after commits, finds namespaces whose catalog has rows the graph does not hold yet
(and that are at least ``hnsw_threshold`` rows big), and adds them a chunk at a time so queries
are never blocked for long: ``hnsw_build_threads`` threads add one chunk, sized by the graph
from its own pace so that one chunk holds the graph's lock about ``hnsw.HOLD_S``. Graphs are saved at close and reloaded at open when still valid.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..config import Settings
from ..index.hnsw import HnswIndex
from .state import NamespaceState

__all__ = ["Indexer"]

log = logging.getLogger("synapsedb.indexer")


class Indexer:
    def __init__(
        self,
        states: dict[str, NamespaceState],
        settings: Settings,
        directory: Path,
        flush: Callable[[], None] | None = None,
        maintain: Callable[[], None] | None = None,
    ) -> None:
        self._flush = flush
        self._maintain = maintain
        self._states = states
        self._settings = settings
        self._dir = directory
        self._cv = threading.Condition()
        self._stop = False
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="synapsedb-indexer", daemon=True)

    def start(self) -> None:
        self._load_saved()
        self._thread.start()

    def wake(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def _path(self, ns: str) -> Path:
        return self._dir / f"{ns}.hnsw"

    def _eligible(self, state: NamespaceState) -> bool:
        cat = state.catalog
        return cat.dim is not None and cat.n >= self._settings.hnsw_threshold

    def _load_saved(self) -> None:
        if not self._dir.exists():
            return
        for ns, state in list(self._states.items()):
            self.adopt(ns, state)

    def adopt(self, ns: str, state: NamespaceState) -> None:
        """Give a namespace just loaded its saved graph (``indexes/<ns>.hnsw``), when it has
        one and is large enough to use it; call before the state serves."""
        if state.hnsw is not None or not self._eligible(state):
            return
        path = self._path(ns)
        if path.exists():
            state.hnsw = HnswIndex.load(
                path,
                state.catalog,
                ef_search=self._settings.hnsw_ef_search,
                threads=self._settings.hnsw_build_threads,
            )

    def pending(self) -> int:
        """Rows of eligible namespaces not yet in their graph, or in their keyword index when
        that was deferred at open (small namespaces build theirs on first search)."""
        total = 0
        for state in list(self._states.values()):
            if self._eligible(state):
                cat = state.catalog
                total += cat.n - (state.hnsw.count if state.hnsw else 0)
                if cat.keywords.lazy:
                    total += max(0, cat.n - cat.keywords.indexed)
        return total

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every eligible namespace is fully indexed; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.pending() or self._busy:
            if deadline is not None and time.monotonic() > deadline:
                return False
            self.wake()
            time.sleep(0.01)
        return True

    def _step(self) -> bool:
        """Index one chunk somewhere; False when there is nothing to do."""
        s = self._settings
        for state in list(self._states.values()):
            if not self._eligible(state):
                continue
            cat = state.catalog
            if state.hnsw is None:
                assert cat.dim is not None
                state.hnsw = HnswIndex(cat.dim, m=s.hnsw_m, ef_construction=s.hnsw_ef_construction,
                                       ef_search=s.hnsw_ef_search,
                                       threads=s.hnsw_build_threads)  # fmt: skip
            if state.hnsw.count < cat.n:
                state.hnsw.extend(cat, cat.n)
                return True
            if cat.keywords.lazy:  # a large namespace loaded at open: its first search is near
                cat.keywords.catch_up(cat.n, chunk=4096)
                return True
        return False

    def _run(self) -> None:
        while True:
            with self._cv:
                if self._stop:
                    return
            try:
                self._busy = True
                worked = self._step()
            except Exception:  # keep serving exact search; try again later
                log.exception("indexing failed")
                worked = False
            finally:
                self._busy = False
            if not worked:  # idle: commit a buffered query log, run maintenance when due
                for task in (self._flush, self._maintain):
                    if task is None:
                        continue
                    try:
                        task()
                    except Exception:
                        log.exception("background task failed")
            if not worked:
                with self._cv:
                    if self._stop:
                        return
                    self._cv.wait(1.0)

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread.is_alive():
            self._thread.join()
        for ns, state in list(self._states.items()):
            try:
                self.save(ns, state)
            except OSError:
                log.exception("could not save the HNSW index of %s", ns)

    def save(self, ns: str, state: NamespaceState) -> None:
        """Write the namespace's vector graph to ``indexes/<ns>.hnsw`` (when it has one), for
        the next load to take back (:meth:`adopt`)."""
        if state.hnsw is not None and state.hnsw.count:
            self._dir.mkdir(parents=True, exist_ok=True)
            state.hnsw.save(self._path(ns), state.catalog)
