"""Acknowledged == durable == visible under concurrent writes and queries (issue 10, item 4).

Two tenants (namespaces), each with memory writers (writes, batches and compare-and-set
updates), a fact writer running ``if_version`` chains, and keyword, hybrid and vector queries
with metadata filters, all at once; the background indexer builds HNSW graphs meanwhile.
Concurrent keyword queries used to make the writer raise ``BufferError`` after the commit:
durable writes answered as failed, invisible, a fact's in-memory version behind the disk, and
the failure spread through group commit to the other tenant. Here every call must succeed,
and after a reopen the disk must hold exactly what was acknowledged, as it was acknowledged.

Embeddings come from a small feature-hashing embedder (defined here) so the test is about
concurrency, not model speed.
"""

from __future__ import annotations

import sys
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import synapsedb
from synapsedb import Database

TENANTS = ("tenant-1", "tenant-2")
WORDS = ("parcel", "refund", "invoice", "courier", "address", "delay", "warehouse", "label")
PRELOAD = 1200  # memories per tenant before the threads start


class HashEmbedder:
    """Deterministic bag-of-words vectors by feature hashing (32 dimensions, unit norm)."""

    name = "test-feature-hash-32"
    dim = 32

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                h = zlib.crc32(word.encode())
                out[i, h % self.dim] += 1.0 if h & 0x100 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


@dataclass
class Acks:
    """What the database acknowledged, per tenant."""

    memories: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # id -> versions
    facts: dict[tuple[str, str], list[tuple[int, Any]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def memory(self, mid: str, version: int, content: str) -> None:
        with self.lock:
            self.memories.setdefault(mid, []).append((version, content))


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Switch threads far more often than the default 5 ms, for more interleavings."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def _content(tenant: str, writer: int, i: int) -> str:
    words = " ".join(WORDS[(writer + i + j) % len(WORDS)] for j in range(3))
    return f"parcel {words} note zq{tenant[-1]}w{writer}n{i}"


def _memory_writer(db: Database, tenant: str, writer: int, n: int, acks: Acks) -> None:
    mem = db.namespace(tenant, agent=f"w{writer}")
    mine: list[tuple[str, int]] = []
    i = 0
    while i < n:
        try:
            if i % 7 == 3 and mine:  # a new version of one of ours, compare-and-set
                mid, version = mine.pop(0)
                text = _content(tenant, writer, i) + " revised"
                m = mem.update(mid, {"content": text}, if_version=version)
                acks.memory(m.id, m.version, m.content)
                mine.append((m.id, m.version))
                i += 1
            elif i % 5 == 0:  # a batch of three
                items = [
                    {
                        "entity": f"user:{(i + j) % 2}",
                        "content": _content(tenant, writer, i + j),
                        "metadata": {"w": writer, "tag": WORDS[(i + j) % 4], "kind": "note"},
                    }
                    for j in range(3)
                ]
                for m in mem.write_many(items):
                    acks.memory(m.id, m.version, m.content)
                    mine.append((m.id, m.version))
                i += 3
            else:
                m = mem.write(
                    f"user:{i % 2}",
                    {
                        "content": _content(tenant, writer, i),
                        "metadata": {"w": writer, "tag": WORDS[i % 4], "kind": "note"},
                    },
                )
                acks.memory(m.id, m.version, m.content)
                mine.append((m.id, m.version))
                i += 1
        except Exception as exc:  # every failure counts; the check below lists them
            acks.errors.append(f"{tenant} memory writer {writer} at {i}: {exc!r}")
            i += 1


def _fact_writer(db: Database, tenant: str, n: int, acks: Acks) -> None:
    mem = db.namespace(tenant, agent="facts")
    versions = {f"k{j}": 0 for j in range(4)}
    for i in range(n):
        key = f"k{i % 4}"
        try:
            fact = mem.set("user:0", key, {"i": i}, if_version=versions[key])
        except Exception as exc:
            acks.errors.append(f"{tenant} fact {key} at {i}: {exc!r}")
            try:  # learn where the key really is, and go on from there
                versions[key] = mem.get("user:0", key).version
            except Exception as again:
                acks.errors.append(f"{tenant} fact {key} re-read: {again!r}")
            continue
        versions[key] = fact.version
        with acks.lock:
            acks.facts.setdefault(("user:0", key), []).append((fact.version, {"i": i}))


def _reader(db: Database, tenant: str, done: threading.Event, acks: Acks, mode: str) -> None:
    mem = db.namespace(tenant, agent=f"reader-{mode}")
    emb = HashEmbedder()
    i = 0
    while not done.is_set():
        word = WORDS[i % len(WORDS)]
        try:
            if mode == "vector":
                mem.query(
                    embedding=emb.embed([f"parcel {word}"])[0].tolist(),
                    mode="vector",
                    filter={"kind": {"$in": ["note", "other"]}},
                    k=5,
                )
            elif mode == "keyword":
                mem.query(f"parcel {word}", mode="keyword", filter={"kind": "note"}, k=5)
            else:
                mem.query(f"{word} note", k=5)  # hybrid: vectors, BM25, timelines
                mem.get("user:0", "k0") if i % 3 == 0 else None
        except Exception as exc:
            if "not found" not in str(exc):  # k0 may not be set yet
                acks.errors.append(f"{tenant} {mode} query: {exc!r}")
        i += 1


def _preload(db: Database, tenant: str, acks: Acks) -> None:
    """Enough rows that postings, metadata postings and timelines outgrow 500 entries (numpy
    copies larger ones without holding the GIL: the writer runs meanwhile)."""
    mem = db.namespace(tenant, agent="preload")
    for start in range(0, PRELOAD, 200):
        items = [
            {
                "entity": f"user:{i % 2}",
                "content": _content(tenant, 9, i),
                "metadata": {"w": 9, "tag": WORDS[i % 4], "kind": "note"},
            }
            for i in range(start, start + 200)
        ]
        for m in mem.write_many(items):
            acks.memory(m.id, m.version, m.content)


def _run(path: Path, n_memories: int, n_facts: int) -> dict[str, Acks]:
    acks = {t: Acks() for t in TENANTS}
    with synapsedb.open(
        path,
        durability="os",
        embedder=HashEmbedder(),
        hnsw_threshold=200,
        background_maintenance=False,
    ) as db:
        for tenant in TENANTS:
            _preload(db, tenant, acks[tenant])
        done = threading.Event()
        writers = [
            threading.Thread(target=_memory_writer, args=(db, t, w, n_memories, acks[t]))
            for t in TENANTS
            for w in range(2)
        ]
        writers += [
            threading.Thread(target=_fact_writer, args=(db, t, n_facts, acks[t])) for t in TENANTS
        ]
        readers = [
            threading.Thread(target=_reader, args=(db, t, done, acks[t], mode))
            for t in TENANTS
            for mode in ("keyword", "vector", "hybrid")
        ]
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join()
        done.set()
        for t in readers:
            t.join()
        for tenant in TENANTS:  # visible now, exactly as acknowledged
            _check(db, tenant, acks[tenant], lambda mem, mid: mem.get(mid))
    return acks


def _check(
    db: Database, tenant: str, acks: Acks, latest: Callable[[Any, str], Any], *, disk: bool = False
) -> None:
    mem = db.namespace(tenant)
    for mid, versions in acks.memories.items():
        version, content = max(versions)
        got = latest(mem, mid)
        assert (got.version, got.content) == (version, content), (tenant, mid)
        if disk:  # every version on disk was acknowledged, and no acknowledged one is missing
            assert [(v.version, v.content) for v in mem.history(mid)] == sorted(versions)
    for (entity, key), chain in acks.facts.items():
        if disk:
            assert [(f.version, f.value) for f in mem.history(entity, key)] == chain
        assert mem.get(entity, key).version == chain[-1][0]  # memory never fell behind
    if disk:
        stored = mem.stats()
        assert stored.memory_versions == sum(len(v) for v in acks.memories.values())
        assert stored.fact_versions == sum(len(v) for v in acks.facts.values())


def _verify(path: Path, acks: dict[str, Acks]) -> None:
    errors = [e for a in acks.values() for e in a.errors]
    assert not errors, f"{len(errors)} calls failed, e.g. {errors[:5]}"
    with synapsedb.open(
        path, durability="os", embedder=HashEmbedder(), background_maintenance=False
    ) as db:
        for tenant in TENANTS:
            _check(db, tenant, acks[tenant], lambda mem, mid: mem.history(mid)[-1], disk=True)
            for versions in list(acks[tenant].memories.values())[::50]:
                content = max(versions)[1]  # the keyword index agrees with the disk
                marker = next(w for w in content.split() if w.startswith("zq"))
                hits = db.namespace(tenant).query(marker, mode="keyword", k=1).hits
                assert [h.content for h in hits] == [content]


def test_acknowledged_writes_are_durable_and_visible(tmp_path: Path, busy_switching: None) -> None:
    acks = _run(tmp_path / "d", n_memories=120, n_facts=80)
    _verify(tmp_path / "d", acks)


@pytest.mark.slow
def test_acknowledged_writes_are_durable_and_visible_long(
    tmp_path: Path, busy_switching: None
) -> None:
    acks = _run(tmp_path / "d", n_memories=1500, n_facts=1000)
    _verify(tmp_path / "d", acks)
