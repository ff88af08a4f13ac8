"""HNSW acceleration for large namespaces (faiss, 8-bit codes), kept off the write path.

The catalog's vector matrix is always the truth and exact search over it is always correct;
the graph only proposes candidates among a *prefix* of the catalog rows ``[0, count)``, which
the executor re-scores exactly from the catalog's float32 vectors. The graph holds each vector
as 384 one-byte codes (faiss ``IndexHNSWSQ``, 8-bit scalar quantiser trained per dimension on
the rows known when the graph starts), not a second float32 copy: a quarter of the memory, and
the re-scoring gives back the order that quantising blurs. A background builder appends rows to
the graph in small chunks; queries search the graph for the prefix and scan the rows after it
exactly, so a write is searchable the moment it commits, and updates and deletes (which only
change visibility masks) apply at once.

A filtered search passes the allowed rows as a bitmap (``IDSelectorBitmap``) that faiss reads
in native code while it walks the graph: no Python call per candidate. Each search passes its
own ``efSearch`` (``SearchParametersHNSW``), so searches running at once never share one.

faiss forbids searching while inserting, so a small readers-writer lock keeps them apart; the
builder holds it only for one chunk at a time. A chunk is added by ``threads`` threads (faiss
inserts rows in parallel, each under its own node locks), and its size follows the measured time
per row so that one hold of the lock stays near ``HOLD_S`` whatever the graph's size and the
thread count: more threads make the catch-up after a bulk write faster, not the queries' wait
longer. While no query searched the graph for ``IDLE_AFTER_S``, chunks are at least
``IDLE_ROWS``: faiss spreads a chunk over its threads only past 100 rows (one level's rows), so
a chunk of fewer than ``PARALLEL_ROWS`` is added on one thread, where a second one would only
wait.

faiss runs its threads with OpenMP (GNU libgomp). Unless told otherwise, libgomp's threads spin
for a while at every barrier and lock instead of sleeping; on a machine with more runnable
threads than cores (a shared server, queries and writes running beside the build) the spinning
threads take the cores from the ones with work, and a catch-up took several times longer (make
bench-peers at 100,000 rows under load 7-10: 148 s). So this module asks for
``OMP_WAIT_POLICY=PASSIVE`` before faiss loads (its libgomp reads the variable once, when
loaded), unless the environment already sets a policy. Labels are catalog row numbers, which are stable across restarts (rows are replayed in
commit order), so the graph is saved at close and loaded at open when its fingerprint (format,
count, dimension, last row's id and commit time) still matches.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

# before faiss (and its libgomp) loads: see the module docstring
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import faiss as _faiss

from .catalog import Catalog

__all__ = [
    "CHUNK_MAX",
    "CHUNK_MIN",
    "FORMAT",
    "HOLD_S",
    "IDLE_AFTER_S",
    "IDLE_ROWS",
    "PARALLEL_ROWS",
    "HnswIndex",
    "bitmap",
    "next_chunk",
    "usable_cores",
]

log = logging.getLogger("synapsedb.hnsw")

# faiss's own stubs are partial (no SearchParametersHNSW, no HNSW.neighbors): its calls are
# checked by the tests, not by mypy
faiss: Any = _faiss

# One write-lock hold (one chunk) aims at this long (bench/bench_catchup.py), so queries wait
# no longer than they used to.
HOLD_S = 0.025
CHUNK_MIN = 16  # rows per chunk: the first chunk, and the floor however slow rows get
CHUNK_MAX = 4096  # rows per chunk: the ceiling however fast rows go (a small graph)
# rows per chunk while no query searched the graph for IDLE_AFTER_S: faiss inserts a level's
# rows on several threads only past 100 of them, and each call costs a pass over every row (its
# locks), so a graph nobody searches catches up in big chunks on every thread; a query that
# comes after such a spell waits for at most one of them
IDLE_ROWS = 512
IDLE_AFTER_S = 1.0
# a chunk of fewer rows is added on one thread: faiss would run it on one anyway, and the others
# would only wait for it (spinning, under the default OpenMP wait policy)
PARALLEL_ROWS = 128
FORMAT = "faiss-hnsw-sq8"  # what a saved graph holds (a file of another kind is rebuilt)
TRAIN_MAX = 65_536  # rows the quantiser's ranges are trained on (evenly spread)


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


def bitmap(mask: np.ndarray) -> np.ndarray:
    """``mask`` (one bool per row) as the bitmap faiss's ``IDSelectorBitmap`` reads: bit
    ``r % 8`` of byte ``r // 8`` is row ``r``."""
    return np.packbits(mask, bitorder="little")


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
    """Cosine HNSW over catalog rows ``[0, count)``, vectors held as 8-bit codes."""

    def __init__(
        self,
        dim: int,
        *,
        m: int = 16,
        ef_construction: int = 128,
        ef_search: int = 100,
        threads: int = 1,
        _loaded: tuple[Any, int] | None = None,
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
        self._searched_at = -float("inf")  # time.monotonic() of the latest search
        if _loaded is None:
            self._index = faiss.IndexHNSWSQ(
                dim, faiss.ScalarQuantizer.QT_8bit, m, faiss.METRIC_INNER_PRODUCT
            )
            self._index.hnsw.efConstruction = ef_construction
        else:  # a graph read from a file (load)
            self._index, self.count = _loaded
        self._lock = _RWLock()

    @property
    def nbytes(self) -> int:
        """What the graph holds in memory: the codes and the neighbour lists."""
        hnsw, codes = self._index.hnsw, faiss.downcast_index(self._index.storage).codes
        return int(
            codes.size()
            + hnsw.neighbors.size() * 4
            + hnsw.offsets.size() * 8
            + hnsw.levels.size() * 4
        )

    # -- building (the builder thread) --------------------------------------------------------

    @staticmethod
    def _units(cat: Catalog, rows: slice | np.ndarray) -> np.ndarray:
        """The rows' vectors scaled to length 1 (rows without a vector: zeros, never similar
        to anything), as the contiguous float32 matrix faiss takes."""
        assert cat.vectors is not None
        vecs = cat.vectors[rows] * cat.inv_norm[rows, None]
        vecs[~cat.has_vec[rows]] = 0.0
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def extend(self, cat: Catalog, upto: int, chunk: int | None = None) -> int:
        """Add rows ``[count, min(upto, count + chunk))``; returns how many were added.

        The first call trains the quantiser's per-dimension ranges on up to ``TRAIN_MAX``
        rows spread over ``[0, upto)``. ``chunk`` defaults to :attr:`chunk`, which each call
        re-sizes from its own pace so that one write-lock hold lasts about ``HOLD_S``, or to
        at least ``IDLE_ROWS`` when no query searched the graph for ``IDLE_AFTER_S``."""
        start = self.count
        if chunk is None:
            idle = time.monotonic() - self._searched_at >= IDLE_AFTER_S
            size = max(self.chunk, IDLE_ROWS) if idle else self.chunk
        else:
            size = max(1, chunk)
        stop = min(upto, start + size)
        if stop <= start or cat.vectors is None:
            return 0
        sample = None
        if not self._index.is_trained:
            picks = np.unique(np.linspace(0, upto - 1, min(upto, TRAIN_MAX)).astype(np.int64))
            sample = self._units(cat, picks)
        vecs = self._units(cat, slice(start, stop))
        self._lock.acquire_write()
        t0 = time.perf_counter()
        try:
            if sample is not None:
                self._index.train(sample)
            t1 = time.perf_counter()
            # this thread's parallel regions only
            faiss.omp_set_num_threads(self.threads if stop - start >= PARALLEL_ROWS else 1)
            self._index.add(vecs)
            self.count = stop
        finally:
            t2 = time.perf_counter()
            self._lock.release_write()
        self.last_hold_s = t2 - t0
        if chunk is None and size == self.chunk:  # the pace of rows alone (t1: after training)
            self.chunk = next_chunk(self.chunk, stop - start, t2 - t1)
        return stop - start

    # -- searching -------------------------------------------------------------------------------

    def search(
        self, q: np.ndarray, k: int, ef: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``k`` labels from the graph, best first, with their similarities as the 8-bit
        codes give them (approximate: the caller re-scores from float32); ``q`` must be
        normalized. ``allowed``: a :func:`bitmap` of the rows that may be returned, read by
        faiss as it walks the graph (a row past the bitmap is never returned)."""
        query = np.ascontiguousarray(q.reshape(1, -1), dtype=np.float32)
        params = faiss.SearchParametersHNSW()
        if allowed is not None:
            selector = faiss.IDSelectorBitmap(allowed.shape[0], faiss.swig_ptr(allowed))
            params.sel = selector  # (the Python object keeps the selector alive)
        self._searched_at = time.monotonic()  # a query is here: the builder paces its chunks
        self._lock.acquire_read()
        try:
            count = self.count
            if count == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            self.searches += 1
            k = min(k, count)
            params.efSearch = max(ef, k)
            sims, labels = self._index.search(query, k, params=params)
        finally:
            self._lock.release_read()
        found = labels[0]
        if found.shape[0] and found[-1] < 0:  # fewer than k reachable (filtered or tiny)
            keep = found >= 0
            return found[keep].astype(np.int64), sims[0][keep]
        return found.astype(np.int64), sims[0]

    # -- persistence -----------------------------------------------------------------------------

    @staticmethod
    def fingerprint(cat: Catalog, count: int) -> dict[str, object]:
        last = cat.recs[count - 1] if count else None
        return {
            "format": FORMAT,
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
            meta = {
                **self.fingerprint(cat, self.count),
                "m": self.m,
                "ef_construction": self.ef_construction,
            }
            faiss.write_index(self._index, str(tmp))
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
            expected = {
                **cls.fingerprint(cat, count),
                "m": meta["m"],
                "ef_construction": meta["ef_construction"],
                "size": meta["size"],
                "crc32": meta["crc32"],
            }
            if count > cat.n or meta != expected:
                return None
            # faiss trusts the bytes it reads: never hand it a torn or foreign file
            if cls._checksum(path) != (meta["size"], meta["crc32"]):
                log.warning("ignoring saved HNSW index %s: checksum mismatch", path)
                return None
            graph = faiss.read_index(str(path))
            if (
                not isinstance(graph, faiss.IndexHNSWSQ)
                or graph.ntotal != count
                or graph.d != int(meta["dim"])
            ):
                return None
            return cls(
                int(meta["dim"]),
                m=int(meta["m"]),
                ef_construction=int(meta["ef_construction"]),
                ef_search=ef_search,
                threads=threads,
                _loaded=(graph, count),
            )
        except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
            log.warning("ignoring saved HNSW index %s: %s", path, exc)
            return None
