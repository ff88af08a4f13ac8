"""HNSW acceleration for large namespaces (hnswlib), kept off the write path.

The catalog's vector matrix is always the truth and exact search over it is always correct;
HNSW only speeds up the search over a *prefix* of the catalog rows ``[0, count)``. A background
builder appends rows to the graph in small chunks; queries search the graph for the prefix and
scan the rows after it exactly, so a write is searchable the moment it commits, and updates and
deletes (which only change visibility masks) apply at once.

hnswlib forbids searching while inserting, so a small readers-writer lock keeps them apart; the
builder holds it only for one chunk at a time. A chunk is added by ``threads`` threads (hnswlib
inserts rows in parallel, each under its own node locks), and its size follows the measured time
per row so that one hold of the lock stays near ``HOLD_S`` whatever the graph's size and the
thread count: more threads make the catch-up after a bulk write faster, not the queries' wait
longer. With one thread the graph does not depend on the chunk sizes (rows go in one by one, in
order); with more, the order in which rows meet differs between runs, so two builds of the same
rows can differ slightly (search stays exact for the rows after the graph's prefix). Labels are catalog row numbers, which are stable
across restarts (rows are replayed in commit order), so the graph is saved at close and loaded
at open when its fingerprint (count, dimension, last row's id and commit time) still matches.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import hnswlib
import numpy as np

from .catalog import Catalog

__all__ = ["CHUNK_MAX", "CHUNK_MIN", "HOLD_S", "HnswIndex", "next_chunk", "usable_cores"]

log = logging.getLogger("synapsedb.hnsw")

# One write-lock hold (one chunk) aims at this long: about what 128 rows took with one thread on
# a 100,000-row graph (bench/bench_catchup.py), so queries wait no longer than they used to.
HOLD_S = 0.025
CHUNK_MIN = 16  # rows per chunk: the first chunk, and the floor however slow rows get
CHUNK_MAX = 4096  # rows per chunk: the ceiling however fast rows go (a small graph)


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def next_chunk(chunk: int, rows: int, seconds: float, target_s: float = HOLD_S) -> int:
    """The chunk size after one of ``chunk`` rows added ``rows`` (fewer when no more were
    waiting) in ``seconds``: what fits ``target_s`` at that pace, at most twice ``chunk``,
    within ``[CHUNK_MIN, CHUNK_MAX]``."""
    if rows <= 0:
        return max(CHUNK_MIN, min(CHUNK_MAX, chunk))
    fit = 2 * chunk if seconds <= 0 else int(rows * target_s / seconds)
    return max(CHUNK_MIN, min(CHUNK_MAX, 2 * chunk, fit))


class _RWLock:
    """Many readers or one writer, phase-fair: a reader that arrives while a writer holds the
    lock or waits for it joins the batch admitted when that writer lets go, and the next writer
    waits for that batch. So a query waits for at most one chunk, and a stream of overlapping
    queries cannot keep the builder out for ever."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._readers = 0  # readers holding the lock (admitted batches included)
        self._queued = 0  # readers waiting for the current or next writer to let go
        self._writers = 0  # writers waiting
        self._writer = False
        self._phase = 0  # bumped at each release_write, which admits the queued readers

    def acquire_read(self) -> None:
        with self._cv:
            if not self._writer and not self._writers:
                self._readers += 1
                return
            self._queued += 1
            phase = self._phase
            while self._phase == phase:
                self._cv.wait()
            # admitted by release_write, which counted this reader in _readers

    def release_read(self) -> None:
        with self._cv:
            self._readers -= 1
            if not self._readers:
                self._cv.notify_all()

    def acquire_write(self) -> None:
        with self._cv:
            self._writers += 1
            try:
                while self._writer or self._readers:
                    self._cv.wait()
            finally:
                self._writers -= 1
            self._writer = True

    def release_write(self) -> None:
        with self._cv:
            self._writer = False
            self._readers += self._queued
            self._queued = 0
            self._phase += 1
            self._cv.notify_all()


class HnswIndex:
    """Cosine HNSW over catalog rows ``[0, count)``."""

    def __init__(
        self,
        dim: int,
        *,
        m: int = 16,
        ef_construction: int = 200,
        ef_search: int = 100,
        threads: int = 1,
        _loaded: tuple[hnswlib.Index, int] | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads: expected a positive integer, got {threads!r}")
        self.dim = dim
        self.m = m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.count = 0
        self.searches = 0  # graph searches served (an observable for tests and metrics)
        self.threads = min(threads, usable_cores())  # threads one chunk is added with
        self.chunk = CHUNK_MIN  # rows the next extend adds (follows the measured pace)
        self.last_hold_s = 0.0  # how long the latest chunk held the write lock
        if _loaded is None:
            self._index = hnswlib.Index(space="ip", dim=dim)
            self._index.init_index(max_elements=1024, ef_construction=ef_construction, M=m)
        else:  # a graph read from a file (load): not initialized empty first
            self._index, self.count = _loaded
        self._index.set_num_threads(1)
        self._ef = 0  # the ef last set on the graph (0: hnswlib's default until one is)
        self._lock = _RWLock()

    # -- building (the builder thread) --------------------------------------------------------

    def extend(self, cat: Catalog, upto: int, chunk: int | None = None) -> int:
        """Add rows ``[count, min(upto, count + chunk))``; returns how many were added.

        ``chunk`` defaults to :attr:`chunk`, which each call re-sizes from its own pace so that
        one write-lock hold lasts about ``HOLD_S``."""
        start = self.count
        stop = min(upto, start + (self.chunk if chunk is None else max(1, chunk)))
        if stop <= start or cat.vectors is None:
            return 0
        vecs = cat.vectors[start:stop] * cat.inv_norm[start:stop, None]
        vecs[~cat.has_vec[start:stop]] = 0.0  # rows without a vector: never similar to anything
        labels = np.arange(start, stop, dtype=np.int64)
        if stop > self._index.get_max_elements():  # room for every row known now, at least 1.5x
            grown = max(upto, int(self._index.get_max_elements() * 1.5))
        else:
            grown = 0
        self._lock.acquire_write()
        t0 = time.perf_counter()
        try:
            if grown:
                self._index.resize_index(grown)
            t1 = time.perf_counter()
            self._index.add_items(vecs, labels, num_threads=self.threads)
            self.count = stop
        finally:
            t2 = time.perf_counter()
            self._lock.release_write()
        self.last_hold_s = t2 - t0
        if chunk is None:  # the pace of rows alone (t1: after a resize's copy)
            self.chunk = next_chunk(self.chunk, stop - start, t2 - t1)
        return stop - start

    # -- searching -------------------------------------------------------------------------------

    def search(
        self, q: np.ndarray, k: int, ef: int, allowed: Callable[[int], bool] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` labels in the graph (cosine similarities); ``q`` must be normalized.

        hnswlib searches with the larger of the graph's ef and ``k``, so the graph's ef is set
        only when ``ef`` exceeds ``k`` (the executor's calls ask for ``ef_search`` then) and is
        otherwise left alone: an over-fetching search never widens the ef that concurrent
        searches read (hnswlib keeps one per graph)."""
        self._lock.acquire_read()
        try:
            count = self.count
            if count == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            self.searches += 1
            k = min(k, count)
            if ef > k and ef != self._ef:
                self._index.set_ef(ef)
                self._ef = ef
            try:
                labels, dist = self._index.knn_query(q, k=k, filter=allowed)
            except RuntimeError:  # fewer than k reachable (tiny or heavily filtered graph)
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
        finally:
            self._lock.release_read()
        return labels[0].astype(np.int64), (1.0 - dist[0]).astype(np.float32)

    # -- persistence -----------------------------------------------------------------------------

    @staticmethod
    def fingerprint(cat: Catalog, count: int) -> dict[str, object]:
        last = cat.recs[count - 1] if count else None
        return {
            "count": count,
            "dim": cat.dim,
            "last_id": last.id if last else None,
            "last_us": last.sys_us if last else None,
        }

    @staticmethod
    def _checksum(path: Path) -> tuple[int, int]:
        crc, size = 0, 0
        with path.open("rb") as fh:
            while block := fh.read(1 << 20):
                crc = zlib.crc32(block, crc)
                size += len(block)
        return size, crc

    def save(self, path: Path, cat: Catalog) -> None:
        tmp = path.with_suffix(".tmp")
        self._lock.acquire_read()
        try:
            meta = {**self.fingerprint(cat, self.count), "m": self.m,
                    "ef_construction": self.ef_construction}  # fmt: skip
            self._index.save_index(str(tmp))
        finally:
            self._lock.release_read()
        meta["size"], meta["crc32"] = self._checksum(tmp)
        path.with_suffix(".json.tmp").write_text(json.dumps(meta))
        os.replace(tmp, path)
        os.replace(path.with_suffix(".json.tmp"), path.with_suffix(".json"))

    @classmethod
    def load(
        cls, path: Path, cat: Catalog, *, ef_search: int = 64, threads: int = 1
    ) -> HnswIndex | None:
        """The saved graph if it still matches the catalog, else None (it will be rebuilt)."""
        try:
            meta = json.loads(path.with_suffix(".json").read_text())
            count = int(meta["count"])
            expected = {**cls.fingerprint(cat, count), "m": meta["m"],
                        "ef_construction": meta["ef_construction"], "size": meta["size"],
                        "crc32": meta["crc32"]}  # fmt: skip
            if count > cat.n or meta != expected:
                return None
            # hnswlib trusts the bytes it loads: never hand it a torn or foreign file
            if cls._checksum(path) != (meta["size"], meta["crc32"]):
                log.warning("ignoring saved HNSW index %s: checksum mismatch", path)
                return None
            graph = hnswlib.Index(space="ip", dim=int(meta["dim"]))
            graph.load_index(str(path), max_elements=max(count, 1024))
            if graph.get_current_count() != count:
                return None
            return cls(int(meta["dim"]), m=int(meta["m"]),
                       ef_construction=int(meta["ef_construction"]), ef_search=ef_search,
                       threads=threads, _loaded=(graph, count))  # fmt: skip
        except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
            log.warning("ignoring saved HNSW index %s: %s", path, exc)
            return None
