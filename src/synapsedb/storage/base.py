"""The storage protocol: the engine owns semantics, a backend persists rows and loads them back.

A backend commits a :class:`Batch` in one transaction, durably under its durability policy
before returning, and loads every row at startup. It raises :class:`StorageError` on failure,
having written nothing of the batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Batch", "LoadedRows", "Storage"]

Row = tuple[Any, ...]


@dataclass(slots=True)
class Batch:
    """Rows to commit together. Row layouts are the column orders in ``sqlite.SCHEMA``."""

    namespaces: list[Row] = field(default_factory=list)  # (name, created_us, dim, embedder)
    memories: list[Row] = field(default_factory=list)
    facts: list[Row] = field(default_factory=list)
    events: list[Row] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.namespaces) + len(self.memories) + len(self.facts) + len(self.events)


@dataclass(slots=True)
class LoadedRows:
    """Everything a backend holds, as row iterators ordered for replay (oldest version first)."""

    namespaces: Iterator[Row]
    memory_rows: dict[str, int]  # per namespace: memory versions that are not tombstones
    memories: Iterator[Row]
    facts: Iterator[Row]
    events: Iterator[Row]


class Storage(Protocol):
    def load(self) -> LoadedRows: ...

    def commit(self, batch: Batch) -> None: ...

    def close(self) -> None: ...
