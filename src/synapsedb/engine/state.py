"""In-memory state of one namespace: version chains for memories and facts, and streams.

Only the commit leader (one writer at a time) mutates it, and only after the change is
durable; readers run concurrently. Chains only ever grow by ``list.append`` and dicts only gain keys, which are
atomic under CPython, so a reader sees either the old or the new state, never a torn one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import TypeVar

from ..index.catalog import Catalog
from ..index.hnsw import HnswIndex
from ..types import NamespaceConfig
from .records import EventRec, FactRec, MemRec

__all__ = ["NamespaceState", "version_at"]

# What resident_bytes() counts beyond the vectors and texts, measured with tracemalloc on
# namespaces of 10 to 1,000 memories (tests/unit/test_residency.py keeps the estimate within
# a factor of two of what a loaded namespace really takes):
STATE_BYTES = 32 * 1024  # a namespace's own objects: its state, catalog, indexes, codes
ROW_BYTES = 600  # per memory version: its record, catalog columns, postings, keywords
FACT_BYTES = 500  # per fact key (its chain and record)
EVENT_BYTES = 400  # per event
COLD_BYTES = 150  # per cold memory (its id and entity)

R = TypeVar("R", MemRec, FactRec)


def version_at(chain: list[R], t_us: int) -> R | None:
    """The latest version committed at or before ``t_us`` (tombstones included), or None."""
    for rec in reversed(chain):
        if rec.sys_us <= t_us:
            return rec
    return None


class NamespaceState:
    __slots__ = (
        "access",
        "access_dirty",
        "catalog",
        "cold",
        "cold_access",
        "cold_by_entity",
        "cold_expiry",
        "config",
        "created_us",
        "dim",
        "embedder",
        "entity_facts",
        "entity_mems",
        "events",
        "facts",
        "hnsw",
        "hot_bytes",
        "impact",
        "live",
        "mems",
        "name",
        "stream_keys",
        "streams",
    )  # fmt: skip

    def __init__(
        self, name: str, created_us: int, dim: int | None = None, embedder: str | None = None
    ) -> None:
        self.name = name
        self.created_us = created_us
        self.dim = dim
        # what produced the vectors: an embedder's name, or "caller" (vectors given by writers)
        self.embedder = embedder
        self.mems: dict[str, list[MemRec]] = {}
        self.catalog = Catalog(dim)
        self.hnsw: HnswIndex | None = None  # set by the indexer for large namespaces
        self.impact: dict[str, int] = {}  # memory id -> recorded answers it stood behind
        self.config = NamespaceConfig()
        # lifecycle: accesses (count, last access), cold memories (id -> entity) and the
        # accesses each cold memory got since its demotion (promotion after promote_after)
        self.access: dict[str, tuple[int, int]] = {}
        self.access_dirty = False  # accesses not yet persisted
        self.cold: dict[str, str] = {}
        self.cold_by_entity: dict[str, set[str]] = {}
        self.cold_access: dict[str, int] = {}
        self.cold_expiry: dict[str, int] = {}  # cold memories with a TTL: id -> expires_us
        self.live = 0  # hot memories whose latest version is not a tombstone (quota count)
        self.hot_bytes = 0
        self.entity_mems: dict[str, list[str]] = {}
        self.facts: dict[tuple[str, str], list[FactRec]] = {}
        self.entity_facts: dict[str, list[str]] = {}
        self.streams: dict[str, list[EventRec]] = {}
        # parallel sorted (ms, seq) keys per stream, for bisecting by id
        self.stream_keys: dict[str, list[tuple[int, int]]] = {}
        self.events = 0  # events in all streams (only add_event adds one; none is removed)

    # -- applying committed changes (writer thread only) --------------------------------------

    def add_memory(self, rec: MemRec) -> None:
        self.add_memories([rec])

    def add_memories(self, recs: list[MemRec], prevs: list[MemRec | None] | None = None) -> None:
        """Apply committed memory versions in commit order (catalog first, so a reader that
        reaches a record through its chain finds it fully indexed). ``prevs``: the version
        each one supersedes, when the caller knows them already (the loader does)."""
        tips: dict[str, MemRec] = {}
        items: list[tuple[MemRec, MemRec | None]] = []
        live, hot_bytes = 0, 0
        mems = self.mems
        for i, rec in enumerate(recs):
            if prevs is not None:
                prev = prevs[i]
            else:
                prev = tips.get(rec.id)
                if prev is None:
                    chain = mems.get(rec.id)
                    prev = chain[-1] if chain else None
                tips[rec.id] = rec
            items.append((rec, prev))
            # sizes before the catalog takes the vector: a pending record holds its own
            if not rec.deleted and not rec.erased:
                live += 1
                vec = rec.vec
                hot_bytes += (
                    len(rec.content) + len(rec.meta_json) + (0 if vec is None else vec.nbytes)
                )
            if prev is not None and not prev.deleted and not prev.erased:
                live -= 1
                hot_bytes -= prev.nbytes
        self.catalog.add_many(items)
        self.live += live
        self.hot_bytes += hot_bytes
        for rec in recs:
            chain = self.mems.get(rec.id)
            if chain is None:
                self.mems[rec.id] = [rec]
                ids = self.entity_mems.get(rec.entity)
                if ids is None:
                    self.entity_mems[rec.entity] = [rec.id]
                else:
                    ids.append(rec.id)
            else:
                chain.append(rec)

    def add_fact(self, rec: FactRec) -> None:
        k = (rec.entity, rec.key)
        chain = self.facts.get(k)
        if chain is None:
            self.facts[k] = [rec]
            keys = self.entity_facts.get(rec.entity)
            if keys is None:
                self.entity_facts[rec.entity] = [rec.key]
            else:
                keys.append(rec.key)
        else:
            chain.append(rec)

    def add_event(self, rec: EventRec) -> None:
        self.events += 1
        events = self.streams.get(rec.stream)
        if events is None:
            # keys first: a reader that finds the stream must find its keys
            self.stream_keys[rec.stream] = [rec.key]
            self.streams[rec.stream] = [rec]
        else:
            self.stream_keys[rec.stream].append(rec.key)
            events.append(rec)

    # -- accounting ----------------------------------------------------------------------------

    def resident_bytes(self) -> int:
        """An estimate of the memory this state holds, from its counts (constant time): what
        the residency budget counts (engine/residency.py)."""
        cat = self.catalog
        vec = 4 * (cat.dim or 0)
        text = max(0, self.hot_bytes - self.live * vec)  # contents and metadata
        graph = 0
        hnsw = self.hnsw
        if hnsw is not None:  # hnswlib's own copy of each vector, and its links
            graph = hnsw.count * (vec + 8 * hnsw.m + 64)
        return (STATE_BYTES + cat.n * (vec + ROW_BYTES) + text + graph
                + len(self.facts) * FACT_BYTES + self.events * EVENT_BYTES
                + len(self.cold) * COLD_BYTES)  # fmt: skip

    def drop(self) -> None:
        """Break the references between this state's parts (the catalog lists the records,
        each record points back at the catalog for its vector), so that dropping the state
        frees its memory at once instead of at the next full garbage collection, which in a
        process of millions of objects comes gigabytes later. Only for a state nothing
        reads any more (residency.py checks)."""
        self.catalog.recs.clear()  # (in place: a deferred keyword index reads this list)

    # -- reads ---------------------------------------------------------------------------------

    def memory_at(self, mid: str, t_us: int) -> MemRec | None:
        chain = self.mems.get(mid)
        if chain is None:
            return None
        rec = version_at(chain, t_us)
        return rec if rec is not None and rec.visible_at(t_us) else None

    def fact_at(self, entity: str, key: str, t_us: int) -> FactRec | None:
        chain = self.facts.get((entity, key))
        if chain is None:
            return None
        rec = version_at(chain, t_us)
        return rec if rec is not None and rec.visible_at(t_us) else None

    def memories_at(self, t_us: int, entity: str | None = None) -> Iterator[MemRec]:
        """Every memory visible at ``t_us``, optionally only those about ``entity``."""
        if entity is None:
            chains: Iterator[list[MemRec]] = iter(list(self.mems.values()))
        else:
            mems = self.mems
            chains = (mems[m] for m in list(self.entity_mems.get(entity, ())))
        for chain in chains:
            rec = version_at(chain, t_us)
            if rec is not None and rec.visible_at(t_us):
                yield rec

    def facts_at(self, entity: str, t_us: int) -> Iterator[FactRec]:
        for key in list(self.entity_facts.get(entity, ())):
            rec = self.fact_at(entity, key, t_us)
            if rec is not None:
                yield rec

    def events_in(
        self,
        stream: str,
        lo: tuple[int, int],
        hi: tuple[int, int],
        t_us: int,
        *,
        newest: int | None = None,
        oldest: int | None = None,
    ) -> list[EventRec]:
        """Events with ``lo <= id <= hi`` committed at or before ``t_us``, oldest first; with
        ``newest``, only the last ``newest`` of them, found from the end (the tail of a long
        stream costs what the tail of a short one does); with ``oldest``, only the first
        ``oldest``, reading no further than they reach."""
        keys = self.stream_keys.get(stream)
        if not keys:
            return []
        events = self.streams[stream]
        n = min(len(keys), len(events))
        i = bisect.bisect_left(keys, lo, 0, n)
        j = bisect.bisect_right(keys, hi, 0, n)
        if oldest is not None:
            head: list[EventRec] = []
            for k in range(i, j):
                if len(head) >= oldest:
                    break
                e = events[k]
                if e.sys_us <= t_us and not e.erased:
                    head.append(e)
            return head
        if newest is None:
            return [e for e in events[i:j] if e.sys_us <= t_us and not e.erased]
        out: list[EventRec] = []
        for k in range(j - 1, i - 1, -1):
            if len(out) >= newest:
                break
            e = events[k]
            if e.sys_us <= t_us and not e.erased:
                out.append(e)
        out.reverse()
        return out

    def stream_tail(self, stream: str) -> tuple[int, int] | None:
        keys = self.stream_keys.get(stream)
        return keys[-1] if keys else None

    def entity_exists_at(self, entity: str, t_us: int) -> bool:
        if any(True for _ in self.memories_at(t_us, entity)):
            return True
        return any(True for _ in self.facts_at(entity, t_us))
