"""Rows as the engine builds them (the named rows of storage.base.Batch), for the contract suite:
small builders with defaults, so each test names only the columns it is about."""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from synapsedb.storage.base import (
    AnswerInsert,
    EventInsert,
    FactInsert,
    MemoryInsert,
    NamespaceUpsert,
    QueryInsert,
)

Row = tuple[Any, ...]

# times near the edges the engine uses (microseconds): year 1 .. 9999 fit in a signed 64-bit int
EARLY_US = -62_135_596_800_000_000
LATE_US = 253_402_300_799_999_999


def vector(seed: int, dim: int = 4) -> bytes:
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32).tobytes()


def namespace(
    name: str, created_us: int = 1, dim: int | None = 4, embedder: str = "caller"
) -> NamespaceUpsert:
    return NamespaceUpsert(name, created_us, dim, embedder)


def memory(
    ns: str,
    mid: str,
    version: int = 1,
    sys_us: int = 1_000,
    *,
    entity: str = "alice",
    content: str = "alice likes green tea",
    mtype: str = "note",
    metadata: str = '{"source":"chat"}',
    embedding: bytes | None = None,
    salience: float = 0.5,
    created_us: int | None = None,
    ts_us: int | None = None,
    agent: str | None = "intake",
    pinned: int = 0,
    ttl: float | None = None,
    expires_us: int | None = None,
    deleted: int = 0,
) -> MemoryInsert:
    return MemoryInsert(
        ns,
        mid,
        version,
        sys_us,
        sys_us if created_us is None else created_us,
        entity,
        mtype,
        content,
        metadata,
        vector(zlib.crc32(mid.encode())) if embedding is None else embedding,
        salience,
        sys_us if ts_us is None else ts_us,
        agent,
        pinned,
        ttl,
        expires_us,
        deleted,
    )


def fact(
    ns: str,
    entity: str,
    key: str,
    version: int = 1,
    sys_us: int = 1_000,
    *,
    value: str = '"green tea"',
    agent: str | None = "intake",
    ttl: float | None = None,
    expires_us: int | None = None,
    deleted: int = 0,
) -> FactInsert:
    return FactInsert(
        ns, entity, key, version, sys_us, sys_us, value, agent, ttl, expires_us, deleted
    )


def event(
    ns: str,
    stream: str,
    ms: int,
    seq: int = 0,
    *,
    entity: str = "alice",
    content: str = "alice asked for tea",
    data: str | None = '{"cups":2}',
    memory_id: str | None = None,
    agent: str | None = "intake",
) -> EventInsert:
    return EventInsert(
        ns, stream, ms, seq, ms * 1000, entity, ms * 1000, agent, content, data, memory_id
    )


def query(
    ns: str,
    qid: str,
    sys_us: int,
    *,
    text: str | None = "what does alice drink",
    hits: str = "[]",
    request: str = '{"text":"what does alice drink"}',
) -> QueryInsert:
    return QueryInsert(ns, qid, sys_us, "reader", text, request, hits)


def answer(
    ns: str,
    aid: str,
    sys_us: int,
    *,
    text: str | None = "Alice drinks tea.",
    query_ids: str = "[]",
    memories: str = "[]",
    entities: str = "[]",
) -> AnswerInsert:
    return AnswerInsert(ns, aid, sys_us, "writer", text, query_ids, "[]", memories, entities)


def loaded(row: Row, erased: int = 0) -> Row:
    """A written row as load() gives it back: with its ``erased`` flag last."""
    return (*row, erased)


def by_namespace(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """Rows grouped by their namespace (first column), each group in the order given: the
    order load() promises is commit order within a namespace."""
    out: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        out[row[0]].append(tuple(row))
    return dict(out)
