"""HNSW acceleration for large namespaces (hnswlib), kept off the write path.

The catalog's vector matrix is always the truth and exact search over it is always correct;
HNSW only speeds up the search over a *prefix* of the catalog rows ``[0, count)``. A background
builder appends rows to the graph in small chunks; queries search the graph for the prefix and
scan the rows after it exactly, so a write is searchable the moment it commits, and updates and
deletes (which only change visibility masks) apply at once.

hnswlib forbids searching while inserting, so a small readers-writer lock keeps them apart; the
builder holds it only for one chunk at a time. Labels are catalog row numbers, which are stable
across restarts (rows are replayed in commit order), so the graph is saved at close and loaded
at open when its fingerprint (count, dimension, last row's id and commit time) still matches.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

import hnswlib
import numpy as np

from .catalog import Catalog

__all__ = ["HnswIndex"]

log = logging.getLogger("synapsedb.hnsw")


class _RWLock:
    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._readers = 0
        self._writer = False

    def acquire_read(self) -> None:
        with self._cv:
            while self._writer:
                self._cv.wait()
            self._readers += 1

    def release_read(self) -> None:
        with self._cv:
            self._readers -= 1
            if not self._readers:
                self._cv.notify_all()

    def acquire_write(self) -> None:
        with self._cv:
            while self._writer or self._readers:
                self._cv.wait()
            self._writer = True

    def release_write(self) -> None:
        with self._cv:
            self._writer = False
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
        _loaded: tuple[hnswlib.Index, int] | None = None,
    ) -> None:
        self.dim = dim
        self.m = m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.count = 0
        self.searches = 0  # graph searches served (an observable for tests and metrics)
        if _loaded is None:
            self._index = hnswlib.Index(space="ip", dim=dim)
            self._index.init_index(max_elements=1024, ef_construction=ef_construction, M=m)
        else:  # a graph read from a file (load): not initialized empty first
            self._index, self.count = _loaded
        self._index.set_num_threads(1)
        self._lock = _RWLock()

    # -- building (the builder thread) --------------------------------------------------------

    def extend(self, cat: Catalog, upto: int, chunk: int = 128) -> int:
        """Add rows ``[count, min(upto, count + chunk))``; returns how many were added."""
        start = self.count
        stop = min(upto, start + chunk)
        if stop <= start or cat.vectors is None:
            return 0
        vecs = cat.vectors[start:stop] * cat.inv_norm[start:stop, None]
        vecs[~cat.has_vec[start:stop]] = 0.0  # rows without a vector: never similar to anything
        labels = np.arange(start, stop, dtype=np.int64)
        self._lock.acquire_write()
        try:
            if stop > self._index.get_max_elements():
                self._index.resize_index(max(stop, int(self._index.get_max_elements() * 1.5)))
            self._index.add_items(vecs, labels, num_threads=1)
            self.count = stop
        finally:
            self._lock.release_write()
        return stop - start

    # -- searching -------------------------------------------------------------------------------

    def search(
        self, q: np.ndarray, k: int, ef: int, allowed: Callable[[int], bool] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` labels in the graph (cosine similarities); ``q`` must be normalized."""
        self._lock.acquire_read()
        try:
            count = self.count
            if count == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            self.searches += 1
            k = min(k, count)
            self._index.set_ef(max(ef, k))
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
    def load(cls, path: Path, cat: Catalog, *, ef_search: int = 64) -> HnswIndex | None:
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
                       _loaded=(graph, count))  # fmt: skip
        except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
            log.warning("ignoring saved HNSW index %s: %s", path, exc)
            return None
