"""Internal version records: what the engine keeps in memory and what storage rows hold.

A record is never mutated once committed; a change appends a new record to the chain. Public
objects (:mod:`synapsedb.types`) are built from records at read time, so callers never share
mutable state with the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import orjson

from ..ids import format_event_id
from ..storage.base import (
    EventInsert,
    EventRow,
    FactInsert,
    FactRow,
    MemoryInsert,
    MemoryRow,
    row_maker,
)
from ..times import to_datetime
from ..types import Event, Fact, Memory

if TYPE_CHECKING:
    from ..index.catalog import Catalog

__all__ = ["EventRec", "FactRec", "MemRec"]

# every write builds one of these per version: from a tuple, at C speed (the constructor is a
# Python call with a parameter per field, several times the cost); the fields in their order
_MEMORY_INSERT = row_maker(MemoryInsert)
_FACT_INSERT = row_maker(FactInsert)
_EVENT_INSERT = row_maker(EventInsert)


class MemRec:
    """One committed version of a memory."""

    __slots__ = (
        "agent",
        "cat",
        "content",
        "created_us",
        "deleted",
        "entity",
        "erased",
        "expires_us",
        "id",
        "meta_json",
        "norm_key",
        "pinned",
        "row",
        "salience",
        "sys_us",
        "text_flags",
        "ts_us",
        "ttl",
        "type",
        "vec",
        "version",
    )

    def __init__(
        self,
        id: str,
        version: int,
        sys_us: int,
        created_us: int,
        entity: str,
        type: str,
        content: str,
        meta_json: str,
        vec: np.ndarray | None,
        salience: float,
        ts_us: int,
        agent: str | None,
        pinned: bool,
        ttl: float | None,
        expires_us: int | None,
        deleted: bool,
    ) -> None:
        self.id = id
        self.version = version
        self.sys_us = sys_us
        self.created_us = created_us
        self.entity = entity
        self.type = type
        self.content = content
        self.meta_json = meta_json
        self.vec = vec
        self.salience = salience
        self.ts_us = ts_us
        self.agent = agent
        self.pinned = pinned
        self.ttl = ttl
        self.expires_us = expires_us
        self.deleted = deleted
        self.erased = False  # content removed by an erasure (forget purge)
        # Set when applied to the namespace catalog, which then holds the vector (vec -> None).
        self.row = -1
        self.cat: Catalog | None = None
        # the text as dedup compares it (normalized; a digest when long), computed on first use
        self.norm_key: str | None = None
        # what the learned re-ranking tests of the text (query/rerank.py), on first use
        self.text_flags = -1

    def visible_at(self, t_us: int) -> bool:
        """Whether this record, being the latest version at ``t_us``, shows at ``t_us``."""
        return (
            not self.deleted
            and not self.erased
            and (self.expires_us is None or t_us < self.expires_us)
        )

    def vector(self) -> np.ndarray | None:
        """The embedding: pending records hold it; committed ones read it from the catalog."""
        if self.vec is not None:
            return self.vec
        return self.cat.vector(self.row) if self.cat is not None else None

    @property
    def nbytes(self) -> int:
        vec = self.vector()
        return len(self.content) + len(self.meta_json) + (vec.nbytes if vec is not None else 0)

    def to_row(self, ns: str) -> MemoryInsert:
        return _MEMORY_INSERT(
            (
                ns,
                self.id,
                self.version,
                self.sys_us,
                self.created_us,
                self.entity,
                self.type,
                self.content,
                self.meta_json,
                None if (vec := self.vector()) is None else vec.tobytes(),
                self.salience,
                self.ts_us,
                self.agent,
                int(self.pinned),
                self.ttl,
                self.expires_us,
                int(self.deleted),
            )
        )

    @classmethod
    def from_row(cls, row: MemoryRow) -> MemRec:
        emb = row.embedding
        vec = None if emb is None else np.frombuffer(emb, dtype=np.float32)
        rec = cls(
            row.id,
            row.version,
            row.sys_us,
            row.created_us,
            row.entity,
            row.type,
            row.content,
            row.metadata,
            vec,
            row.salience,
            row.ts_us,
            row.agent,
            bool(row.pinned),
            row.ttl,
            row.expires_us,
            bool(row.deleted),
        )
        rec.erased = bool(row.erased)
        return rec

    def to_public(self) -> Memory:
        vec = self.vector()
        if vec is not None:
            vec = vec.copy()
            vec.setflags(write=False)
        return Memory(
            id=self.id,
            entity=self.entity,
            content=self.content,
            type=self.type,
            metadata=orjson.loads(self.meta_json),
            salience=self.salience,
            ts=to_datetime(self.ts_us),
            agent=self.agent,
            pinned=self.pinned,
            ttl=self.ttl,
            expires_at=None if self.expires_us is None else to_datetime(self.expires_us),
            version=self.version,
            created_at=to_datetime(self.created_us),
            recorded_at=to_datetime(self.sys_us),
            deleted=self.deleted,
            embedding=vec,
            erased=self.erased,
        )


class FactRec:
    """One committed version of a KV fact."""

    __slots__ = (
        "agent",
        "created_us",
        "deleted",
        "entity",
        "erased",
        "expires_us",
        "key",
        "sys_us",
        "ttl",
        "value_json",
        "version",
    )

    def __init__(
        self,
        entity: str,
        key: str,
        version: int,
        sys_us: int,
        created_us: int,
        value_json: str,
        agent: str | None,
        ttl: float | None,
        expires_us: int | None,
        deleted: bool,
    ) -> None:
        self.entity = entity
        self.key = key
        self.version = version
        self.sys_us = sys_us
        self.created_us = created_us
        self.value_json = value_json
        self.agent = agent
        self.ttl = ttl
        self.expires_us = expires_us
        self.deleted = deleted
        self.erased = False

    def visible_at(self, t_us: int) -> bool:
        return (
            not self.deleted
            and not self.erased
            and (self.expires_us is None or t_us < self.expires_us)
        )

    def to_row(self, ns: str) -> FactInsert:
        return _FACT_INSERT(
            (
                ns,
                self.entity,
                self.key,
                self.version,
                self.sys_us,
                self.created_us,
                self.value_json,
                self.agent,
                self.ttl,
                self.expires_us,
                int(self.deleted),
            )
        )

    @classmethod
    def from_row(cls, row: FactRow) -> FactRec:
        rec = cls(
            row.entity,
            row.key,
            row.version,
            row.sys_us,
            row.created_us,
            row.value,
            row.agent,
            row.ttl,
            row.expires_us,
            bool(row.deleted),
        )
        rec.erased = bool(row.erased)
        return rec

    def to_public(self) -> Fact:
        return Fact(
            entity=self.entity,
            key=self.key,
            value=orjson.loads(self.value_json),
            version=self.version,
            agent=self.agent,
            ttl=self.ttl,
            expires_at=None if self.expires_us is None else to_datetime(self.expires_us),
            created_at=to_datetime(self.created_us),
            recorded_at=to_datetime(self.sys_us),
            deleted=self.deleted,
            erased=self.erased,
        )


class EventRec:
    """One stream entry. ``(ms, seq)`` is its sortable id."""

    __slots__ = (
        "agent",
        "content",
        "data_json",
        "entity",
        "erased",
        "memory_id",
        "ms",
        "seq",
        "stream",
        "sys_us",
        "ts_us",
    )

    def __init__(
        self,
        stream: str,
        ms: int,
        seq: int,
        sys_us: int,
        entity: str,
        ts_us: int,
        agent: str | None,
        content: str,
        data_json: str | None,
        memory_id: str | None,
    ) -> None:
        self.stream = stream
        self.ms = ms
        self.seq = seq
        self.sys_us = sys_us
        self.entity = entity
        self.ts_us = ts_us
        self.agent = agent
        self.content = content
        self.data_json = data_json
        self.memory_id = memory_id
        self.erased = False

    @property
    def key(self) -> tuple[int, int]:
        return (self.ms, self.seq)

    def to_row(self, ns: str) -> EventInsert:
        return _EVENT_INSERT(
            (
                ns,
                self.stream,
                self.ms,
                self.seq,
                self.sys_us,
                self.entity,
                self.ts_us,
                self.agent,
                self.content,
                self.data_json,
                self.memory_id,
            )
        )

    @classmethod
    def from_row(cls, row: EventRow) -> EventRec:
        rec = cls(
            row.stream,
            row.ms,
            row.seq,
            row.sys_us,
            row.entity,
            row.ts_us,
            row.agent,
            row.content,
            row.data,
            row.memory_id,
        )
        rec.erased = bool(row.erased)
        return rec

    def to_public(self) -> Event:
        return Event(
            id=format_event_id(self.ms, self.seq),
            stream=self.stream,
            entity=self.entity,
            content=self.content,
            data=None if self.data_json is None else orjson.loads(self.data_json),
            ts=to_datetime(self.ts_us),
            agent=self.agent,
            recorded_at=to_datetime(self.sys_us),
            memory_id=self.memory_id,
        )
