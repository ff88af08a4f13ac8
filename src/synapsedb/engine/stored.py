"""The memory versions of a namespace's checkpoint, read on demand instead of held as objects.

A namespace loaded from a checkpoint (checkpoint.py) does not build a :class:`MemRec` per
version: its catalog columns and vectors come from the checkpoint, and its records are built
when something asks for them (a query's hits, a write's predecessor, a read by id). Three views
stand in for the containers the engine otherwise fills while it replays the log:

- :class:`RowRecords` for ``Catalog.recs`` (row -> the version that row holds);
- :class:`Chains` for ``NamespaceState.mems`` (memory id -> its versions, oldest first);
- :class:`EntityIds` for ``NamespaceState.entity_mems`` (entity -> its memory ids).

Each behaves as the list or dict it replaces for everything the engine does with it. What the
checkpoint holds is never changed; versions committed after the load live beside it (appended
rows, chains and id lists copied out of the checkpoint when a write touches them), so a view
answers from the checkpoint for what no write has touched, and from its own objects for the
rest. Records are immutable once committed, so a record built twice is the same record twice;
built rows are kept in a bounded cache (``CACHE_ROWS``) so that hits read again are not rebuilt.

:class:`Versions` holds the checkpoint's arrays: one record per version, grouped by memory id
(each id's versions oldest first), its texts in one blob, and the ids with a sorted CRC-32
index for lookups by id.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from .records import MemRec

if TYPE_CHECKING:
    from ..index.catalog import Catalog

__all__ = ["CACHE_ROWS", "VERSION", "Chains", "EntityIds", "RowRecords", "Versions", "id_hash"]

# one record per version, in the checkpoint's version table; the flags' bits:
DELETED, ERASED, PINNED, HAS_TTL, HAS_EXPIRY, HAS_AGENT = 1, 2, 4, 8, 16, 32
VERSION = np.dtype(
    [
        ("id", "<i4"),
        ("version", "<i8"),
        ("sys_us", "<i8"),
        ("created_us", "<i8"),
        ("row", "<i4"),
        ("flags", "u1"),
        ("ttl", "<f8"),
        ("expires_us", "<i8"),
        ("type", "<i4"),
        ("agent", "<i4"),
        ("salience", "<f8"),
        ("ts_us", "<i8"),
        ("text", "<i8"),
        ("meta", "<i8"),
        ("end", "<i8"),
    ]
)
CACHE_ROWS = 65_536  # row records kept built (the cache is emptied when full)


def id_hash(mid: str) -> int:
    """The lookup hash of a memory id (stable across processes, unlike ``hash``)."""
    return zlib.crc32(mid.encode())


class Versions:
    """A checkpoint's memory versions (see the module docstring)."""

    def __init__(
        self,
        table: np.ndarray,  # VERSION records, grouped by id, each id's oldest first
        texts: np.ndarray,  # uint8: every version's content then metadata (utf-8)
        ids: np.ndarray,  # uint8: every id (utf-8), in the order of their codes
        id_off: np.ndarray,  # int64, ids + 1: where each id starts in ``ids``
        id_chain: np.ndarray,  # int64, ids + 1: where each id's versions start in ``table``
        id_entity: np.ndarray,  # int32 per id: its entity's code
        hashes: np.ndarray,  # uint32, sorted: the ids' id_hash
        by_hash: np.ndarray,  # int32: the id code of each entry of ``hashes``
        row_version: np.ndarray,  # int32 per catalog row: the version it holds
        entities: list[str],  # entity names by code, in the order of their first memory
        types: list[str],
        agents: list[str],
    ) -> None:
        self.table, self.texts, self.ids = table, texts, ids
        self.id_off, self.id_chain, self.id_entity = id_off, id_chain, id_entity
        self.hashes, self.by_hash, self.row_version = hashes, by_hash, row_version
        self.entities, self.types, self.agents = entities, types, agents

    @property
    def n_ids(self) -> int:
        return int(self.id_entity.shape[0])

    @property
    def n_rows(self) -> int:
        return int(self.row_version.shape[0])

    def id_of(self, code: int) -> str:
        return bytes(self.ids[int(self.id_off[code]) : int(self.id_off[code + 1])]).decode()

    def code_of(self, mid: str) -> int | None:
        """The code of memory id ``mid``, or None when the checkpoint does not hold it."""
        h = id_hash(mid)
        at = int(np.searchsorted(self.hashes, h))
        end = self.hashes.shape[0]
        while at < end and int(self.hashes[at]) == h:
            code = int(self.by_hash[at])
            if self.id_of(code) == mid:
                return code
            at += 1
        return None

    def text_of(self, v: int) -> str:
        """The content of version ``v`` (without building its record)."""
        rec = self.table[v]
        return bytes(self.texts[int(rec["text"]) : int(rec["meta"])]).decode()

    def record(self, v: int, mid: str | None = None, cat: Catalog | None = None) -> MemRec:
        """Version ``v`` as a record (``mid``: its id, when the caller knows it)."""
        (
            code,
            version,
            sys_us,
            created_us,
            row,
            flags,
            ttl,
            expires_us,
            type_,
            agent,
            sal,
            ts_us,
            text,
            meta,
            end,
        ) = self.table[v].item()
        blob = self.texts
        rec = MemRec(
            self.id_of(code) if mid is None else mid,
            version,
            sys_us,
            created_us,
            self.entities[int(self.id_entity[code])],
            self.types[type_],
            bytes(blob[text:meta]).decode(),
            bytes(blob[meta:end]).decode(),
            None,
            sal,
            ts_us,
            self.agents[agent] if flags & HAS_AGENT else None,
            bool(flags & PINNED),
            ttl if flags & HAS_TTL else None,
            expires_us if flags & HAS_EXPIRY else None,
            bool(flags & DELETED),
        )
        rec.erased = bool(flags & ERASED)
        if flags & DELETED:  # a tombstone names the row it closed, and holds no vector
            rec.row = row
        elif row >= 0:
            rec.row, rec.cat = row, cat
        return rec


class RowRecords(Sequence[MemRec]):
    """``Catalog.recs`` of a namespace loaded from a checkpoint: rows the checkpoint holds are
    built on demand, rows added since are the records themselves (``append``)."""

    def __init__(self, versions: Versions, cat: Catalog) -> None:
        self._versions = versions
        self._cat = cat
        self._base = versions.n_rows
        self._tail: list[MemRec] = []
        self._cache: dict[int, MemRec] = {}

    def __len__(self) -> int:
        return self._base + len(self._tail)

    @overload
    def __getitem__(self, row: int) -> MemRec: ...
    @overload
    def __getitem__(self, row: slice) -> list[MemRec]: ...
    def __getitem__(self, row: int | slice) -> MemRec | list[MemRec]:
        if isinstance(row, slice):
            return [self[r] for r in range(*row.indices(len(self)))]
        if row < 0:
            row += len(self)
        if row >= self._base:
            return self._tail[row - self._base]
        if row < 0:
            raise IndexError(row)
        rec = self._cache.get(row)
        if rec is None:
            v = self._versions
            rec = v.record(int(v.row_version[row]), cat=self._cat)
            cache = self._cache
            if len(cache) >= CACHE_ROWS:
                cache.clear()
            cache[row] = rec
        return rec

    def __iter__(self) -> Iterator[MemRec]:
        for r in range(len(self)):
            yield self[r]

    def append(self, rec: MemRec) -> None:
        self._tail.append(rec)

    def clear(self) -> None:
        """Hold no record any more (a state being taken apart: state.py ``drop``)."""
        self._tail.clear()
        self._cache.clear()
        self._base = 0

    def contents(self, start: int, stop: int) -> list[str]:
        """The content of rows ``[start, stop)``, read without building their records."""
        v, base = self._versions, self._base
        out = [v.text_of(int(v.row_version[r])) for r in range(start, min(stop, base))]
        out += [rec.content for rec in self._tail[max(0, start - base) : max(0, stop - base)]]
        return out


class Chains(MutableMapping[str, list[MemRec]]):
    """``NamespaceState.mems`` of a namespace loaded from a checkpoint: memory id -> its
    versions, oldest first. A chain asked for is built once and kept (a write appends to it);
    ids written since the load are kept as they come. Iteration follows the dict it replaces:
    the checkpoint's ids in their order, then ids added since."""

    def __init__(self, versions: Versions, rows: RowRecords) -> None:
        self._versions = versions
        self._rows = rows
        self._kept: dict[str, list[MemRec]] = {}  # chains built, and ids added since
        self._added = 0  # of _kept, ids the checkpoint does not hold

    def _build(self, code: int, mid: str) -> list[MemRec]:
        v, rows = self._versions, self._rows
        chain: list[MemRec] = []
        table = v.table
        for i in range(int(v.id_chain[code]), int(v.id_chain[code + 1])):
            row, flags = table[i][["row", "flags"]].item()
            chain.append(rows[row] if row >= 0 and not flags & DELETED else v.record(i, mid))
        return chain

    def get(self, mid: str, default: Any = None) -> Any:  # type: ignore[override]
        chain = self._kept.get(mid)
        if chain is not None:
            return chain
        code = self._versions.code_of(mid) if type(mid) is str else None
        if code is None:
            return default
        chain = self._kept.setdefault(mid, self._build(code, mid))
        return chain

    def __getitem__(self, mid: str) -> list[MemRec]:
        chain = self.get(mid)
        if chain is None:
            raise KeyError(mid)
        return chain  # type: ignore[no-any-return]

    def __contains__(self, mid: object) -> bool:
        return type(mid) is str and self.get(mid) is not None

    def __setitem__(self, mid: str, chain: list[MemRec]) -> None:
        if mid not in self._kept and self._versions.code_of(mid) is None:
            self._added += 1
        self._kept[mid] = chain

    def __delitem__(self, mid: str) -> None:
        raise TypeError("memory chains are never removed")

    def __len__(self) -> int:
        return self._versions.n_ids + self._added

    def __iter__(self) -> Iterator[str]:
        v, kept = self._versions, self._kept
        for code in range(v.n_ids):
            yield v.id_of(code)
        for mid in list(kept):
            if v.code_of(mid) is None:
                yield mid

    def values(self) -> Iterator[list[MemRec]]:  # type: ignore[override]
        """Every chain; those no write touched are built for the caller and not kept."""
        for _, chain in self.items():
            yield chain

    def items(self) -> Iterator[tuple[str, list[MemRec]]]:  # type: ignore[override]
        v, kept = self._versions, self._kept
        for code in range(v.n_ids):
            mid = v.id_of(code)
            chain = kept.get(mid)
            yield mid, (chain if chain is not None else self._build(code, mid))
        for mid, chain in list(kept.items()):
            if v.code_of(mid) is None:
                yield mid, chain


class EntityIds(MutableMapping[str, list[str]]):
    """``NamespaceState.entity_mems`` of a namespace loaded from a checkpoint: entity -> the
    ids of its memories in the order they were first written, entities in the order of their
    first memory. A list a write appends to is copied out of the checkpoint first."""

    def __init__(self, versions: Versions, off: np.ndarray, ids: np.ndarray) -> None:
        self._versions = versions
        self._names = versions.entities  # in the order of the dict this replaces
        self._codes = {name: code for code, name in enumerate(self._names)}
        self._off, self._ids = off, ids  # CSR: entity code -> id codes
        self._kept: dict[str, list[str]] = {}
        self._added: list[str] = []  # entities the checkpoint does not hold, as added

    def get(self, entity: str, default: Any = None) -> Any:  # type: ignore[override]
        ids = self._kept.get(entity)
        if ids is not None:
            return ids
        code = self._codes.get(entity) if type(entity) is str else None
        if code is None:
            return default
        id_of = self._versions.id_of
        lo, hi = int(self._off[code]), int(self._off[code + 1])
        built = [id_of(int(c)) for c in self._ids[lo:hi]]
        return self._kept.setdefault(entity, built)

    def __getitem__(self, entity: str) -> list[str]:
        ids = self.get(entity)
        if ids is None:
            raise KeyError(entity)
        return ids  # type: ignore[no-any-return]

    def __contains__(self, entity: object) -> bool:
        return type(entity) is str and (entity in self._kept or entity in self._codes)

    def __setitem__(self, entity: str, ids: list[str]) -> None:
        if entity not in self._kept and entity not in self._codes:
            self._added.append(entity)
        self._kept[entity] = ids

    def __delitem__(self, entity: str) -> None:
        raise TypeError("entities are never removed")

    def __iter__(self) -> Iterator[str]:
        yield from self._names
        yield from list(self._added)

    def __len__(self) -> int:
        return len(self._names) + len(self._added)
