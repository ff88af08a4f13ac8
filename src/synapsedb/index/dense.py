"""Side-by-side vectors for a filter asked again: exact search without the graph.

A selective filter over a large namespace (say 1% of 1,000,000 memories) leaves too many rows to
gather on every query (10,000 rows scattered over 1.5 GB: about 5 ms) and too few for the graph
(which must over-fetch about 100x and search at an ef over 1,000). The second time the same
filter is asked at the present, its rows' vectors are copied once into one contiguous block;
later queries scan that block (one matrix-vector product over memory read in order: about 0.5 ms
for 10,000 rows here), so the answer is exact and fast.

Why a block stays right while the namespace changes: catalog rows never change their content,
metadata or vector (a new version is a new row; an erasure reloads the namespace into a new
catalog, and the blocks go with the old one), and a row invisible at the present never becomes
visible at a later present. So the rows a filter kept when the block was built are a superset of
the rows before that point it keeps at any later present. Each query intersects the block's rows
with its own allowed mask, and scans the rows written since exactly. A block whose newer rows
outgrow it is rebuilt. Queries into the past (``as_of`` before the block) do not use it.

Blocks are bounded per catalog (``MAX_BYTES``, least recently used first out) and only built
where the scan is cheaper than the graph search it replaces (``ROWS_PER_EF``). Building a block
costs a gather of its rows (about 3 ms for 10,000 rows of 384 floats), more than the graph
search it saves, so a block is built only when it will be used: a filter's block goes in only if
that filter has been asked more often, recently, than each block it would push out, by more than
one ask (asks are counted per filter and halved every ``AGE_EVERY`` asks; the margin absorbs
where in a rotation the halving falls). Filters taking turns over more blocks
than the budget holds (100 buckets of 1% each, in rotation) then keep the blocks they have
instead of rebuilding one for every query; a filter that becomes hot takes its place.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

__all__ = ["AGE_EVERY", "MAX_BYTES", "ROWS_PER_EF", "DenseViews"]

MAX_BYTES = 64 << 20  # all of one catalog's blocks together
# a block pays when its rows <= this many times the ef the filtered graph search would need
# (measured here: 10,000 rows scan in about the time of a graph search at ef 200)
ROWS_PER_EF = 50
_COUNTED = 256  # filters whose asks are counted (beyond this, every count is halved)
AGE_EVERY = 1024  # asks between two halvings of every filter's count


class _Block:
    __slots__ = ("inv", "n", "nbytes", "rows", "t_us", "vecs")

    def __init__(self, rows: np.ndarray, vecs: np.ndarray, inv: np.ndarray, n: int, t_us: int):
        self.rows, self.vecs, self.inv, self.n, self.t_us = rows, vecs, inv, n, t_us
        self.nbytes = int(rows.nbytes + vecs.nbytes + inv.nbytes)


class DenseViews:
    """One catalog's blocks, by the filter's key (the allowed-mask cache's key)."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self.built = 0  # blocks built so far (an observable for tests and benchmarks)
        self._blocks: OrderedDict[Hashable, _Block] = OrderedDict()
        # recent asks by the filter's hash (a key can be long), and asks since the last halving
        self._asks: dict[int, int] = {}
        self._since_age = 0
        self._lock = threading.Lock()

    def search(
        self,
        vectors: np.ndarray,
        inv_norm: np.ndarray,
        key: Hashable,
        t_us: int,
        ok: np.ndarray,
        allowed_count: int,
        q: np.ndarray,
        k: int,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Exact cosine top ``k`` among the rows ``ok`` marks (allowed, with a vector), or None
        when no block serves this filter (the caller searches the graph): asked for the first
        time, too big for the budget, or a query into the past. ``q`` is a unit vector."""
        n = ok.shape[0]
        with self._lock:
            asks = self._ask(key)
            block = self._blocks.get(key)
            if block is not None:
                self._blocks.move_to_end(key)
        if block is None or block.t_us > t_us or n - block.n > max(block.rows.shape[0], 1024):
            block = self._build(vectors, inv_norm, key, t_us, ok, allowed_count, asks)
            if block is None:
                return None
        sims = (block.vecs @ q) * block.inv
        rows = block.rows
        live = ok[rows]
        if not live.all():  # closed or expired since the block was built
            rows, sims = rows[live], sims[live]
        if n > block.n:  # rows written since: scanned exactly
            tail = np.flatnonzero(ok[block.n :]) + block.n
            if tail.shape[0]:
                t_sims = (vectors[tail] @ q) * inv_norm[tail]
                rows, sims = np.concatenate([rows, tail]), np.concatenate([sims, t_sims])
        if rows.shape[0] > k:
            part = np.argpartition(-sims, k - 1)[:k]
            rows, sims = rows[part], sims[part]
        order = np.argsort(-sims, kind="stable")
        return rows[order], sims[order]

    def _build(
        self,
        vectors: np.ndarray,
        inv_norm: np.ndarray,
        key: Hashable,
        t_us: int,
        ok: np.ndarray,
        allowed_count: int,
        asks: int,
    ) -> _Block | None:
        need = allowed_count * (vectors.shape[1] * vectors.itemsize + 12)
        if asks < 2 or need > self.max_bytes:  # a filter asked once is not worth a block
            return None
        with self._lock:
            if not self._admits(key, need, asks):
                return None
        rows = np.flatnonzero(ok)
        block = _Block(rows, vectors[rows], inv_norm[rows], ok.shape[0], t_us)
        with self._lock:
            old = self._blocks.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            while self._blocks and self.nbytes + block.nbytes > self.max_bytes:
                _, out = self._blocks.popitem(last=False)
                self.nbytes -= out.nbytes
            self._blocks[key] = block
            self.nbytes += block.nbytes
            self.built += 1
        return block

    def _ask(self, key: Hashable) -> int:
        """Count one ask of ``key`` (under the lock); its recent asks, this one included."""
        h = hash(key)
        asks = self._asks.get(h, 0) + 1
        self._asks[h] = asks
        self._since_age += 1
        if self._since_age >= AGE_EVERY or len(self._asks) > _COUNTED:
            self._asks = {f: c >> 1 for f, c in self._asks.items() if c > 1}
            self._since_age = 0
            asks = self._asks.get(h, 0)
        return asks

    def _admits(self, key: Hashable, need: int, asks: int) -> bool:
        """Whether a block of ``need`` bytes for ``key`` (asked ``asks`` times recently) may go
        in (under the lock): every block it would push out, least recently used first, was
        asked at least two times fewer recently."""
        free = self.max_bytes - self.nbytes
        old = self._blocks.get(key)
        if old is not None:
            free += old.nbytes
        for other, block in self._blocks.items():
            if free >= need:
                return True
            if other == key:
                continue
            if self._asks.get(hash(other), 0) + 1 >= asks:
                return False
            free += block.nbytes
        return free >= need
