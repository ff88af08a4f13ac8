"""The storage protocol: the engine owns semantics, a backend persists rows and loads them back.

A backend commits a :class:`Batch` in one transaction, durably under its durability policy
before returning, and loads every row at startup. It raises :class:`StorageError` on failure,
having written nothing of the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["BATCH_COLUMNS", "Batch", "Changes", "LoadedRows", "Purge", "SharedStorage", "Storage"]

Row = tuple[Any, ...]

# the column of each position of a Batch's row lists (for messages about a row's values)
BATCH_COLUMNS: dict[str, tuple[str, ...]] = {
    "namespaces": ("name", "created_us", "dim", "embedder"),
    "memories": (
        "ns", "id", "version", "sys_us", "created_us", "entity", "type", "content", "metadata",
        "embedding", "salience", "ts_us", "agent", "pinned", "ttl", "expires_us", "deleted",
    ),
    "facts": (
        "ns", "entity", "key", "version", "sys_us", "created_us", "value", "agent", "ttl",
        "expires_us", "deleted",
    ),
    "events": (
        "ns", "stream", "ms", "seq", "sys_us", "entity", "ts_us", "agent", "content", "data",
        "memory_id",
    ),
    "queries": ("ns", "id", "sys_us", "agent", "text", "request", "hits"),
    "answers": ("ns", "id", "sys_us", "agent", "text", "query_ids", "cited", "memories"),
    "configs": ("config", "ns"),
    "tiers": ("ns", "id", "sys_us", "tier", "score", "reason"),
    "access": ("ns", "id", "count", "last_us"),
    "erasures": ("ns", "sys_us", "agent", "subject", "counts"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Purge:
    """Erase an entity from a namespace (forget purge), leaving no name behind.

    Content, metadata, vectors, fact values and event payloads about ``entity`` are erased;
    the version rows stay as skeletons in which the entity's name is replaced by ``alias`` (its
    keyed hash), each fact key by ``keys[key]`` and each stream in ``streams`` by its
    replacement. Logged queries that name the entity or returned its memories lose their text
    and request; recorded answers built on its memories (or naming it) lose their text.
    """

    ns: str
    entity: str
    alias: str
    keys: dict[str, str] = field(default_factory=dict)
    streams: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Batch:
    """Rows to commit together. Row layouts are the column orders in ``sqlite.SCHEMA``."""

    namespaces: list[Row] = field(default_factory=list)  # (name, created_us, dim, embedder)
    memories: list[Row] = field(default_factory=list)
    facts: list[Row] = field(default_factory=list)
    events: list[Row] = field(default_factory=list)
    queries: list[Row] = field(default_factory=list)  # the query log (lineage)
    answers: list[Row] = field(default_factory=list)
    purges: list[Purge] = field(default_factory=list)  # entities to erase
    # expired past their grace period: (namespace, memory id) and (namespace, entity, key)
    expired_memories: list[tuple[str, str]] = field(default_factory=list)
    expired_facts: list[tuple[str, str, str]] = field(default_factory=list)
    # imported erased skeletons: (namespace, stream, ms, seq) and (namespace, answer id)
    erased_events: list[tuple[str, str, int, int]] = field(default_factory=list)
    erased_answers: list[tuple[str, str]] = field(default_factory=list)
    configs: list[Row] = field(default_factory=list)  # (config JSON, namespace)
    tiers: list[Row] = field(default_factory=list)  # (ns, id, sys_us, tier, score, reason)
    access: list[Row] = field(default_factory=list)  # (ns, id, count, last_us)
    erasures: list[Row] = field(default_factory=list)  # (ns, sys_us, agent, subject, counts)

    def __len__(self) -> int:
        return (
            len(self.namespaces) + len(self.memories) + len(self.facts) + len(self.events)
            + len(self.queries) + len(self.answers) + len(self.purges) + len(self.erasures)
            + len(self.expired_memories) + len(self.expired_facts)
            + len(self.erased_events) + len(self.erased_answers)
            + len(self.configs) + len(self.tiers) + len(self.access)
        )  # fmt: skip


@dataclass(slots=True)
class LoadedRows:
    """Everything a backend holds, as row iterators ordered for replay (oldest version first)."""

    namespaces: Iterator[Row]  # (name, created_us, dim, embedder, config JSON)
    tiers: Iterator[Row]  # (ns, id, tier) in log order: the last row of an id is its tier
    access: Iterator[Row]  # (ns, id, count, last_us)
    memory_rows: dict[str, int]  # per namespace: memory versions that are not tombstones
    memories: Iterator[Row]
    facts: Iterator[Row]
    events: Iterator[Row]
    answers: Iterator[Row]  # (ns, answer id, JSON [[memory id, version], ...]) for impact


class Storage(Protocol):
    where: str  # where the rows are, for messages (a file, or database, host and schema)

    def load(self, ns: str | None = None) -> LoadedRows:
        """Every row (or one namespace's) in commit order."""
        ...

    def export_rows(self, ns: str) -> LoadedRows:
        """Like ``load(ns)``, read completely before returning (safe next to commits)."""
        ...

    def commit(self, batch: Batch) -> None:
        """Commit ``batch`` in one transaction. A batch that erases (purges, expired rows) is
        then flushed out of any log the backend keeps; when that cannot be done at once (a
        reader holds the log), the erasure stays pending: see :meth:`finish_erasure`."""
        ...

    @property
    def erasure_pending(self) -> bool:
        """Whether erased content may still be in a log file (pending a checkpoint)."""
        ...

    def finish_erasure(self, wait_ms: int) -> bool:
        """Try to complete a pending erasure, waiting up to ``wait_ms`` for readers; returns
        True when nothing is pending any more."""
        ...

    # lineage and audit reads (rare, never on the query path)
    def read_queries(self, ns: str, ids: list[str]) -> list[Row]: ...

    def scan_queries(self, ns: str, since_us: int, until_us: int) -> list[Row]: ...

    def read_answer(self, ns: str, answer_id: str) -> Row | None: ...

    def read_memory_chain(self, ns: str, mid: str) -> list[Row]:
        """Every version of one memory (cold reads), oldest first, as load() rows minus ns."""
        ...

    def read_memory_chains(self, ns: str, ids: list[str]) -> list[Row]: ...

    def scan_answers(self, ns: str, since_us: int, until_us: int) -> list[Row]: ...

    def scan_erasures(self, ns: str, since_us: int, until_us: int) -> list[Row]: ...

    def scan_tiers(self, ns: str, since_us: int, until_us: int) -> list[Row]: ...

    # the database itself
    @property
    def schema_version(self) -> int:
        """The version of the stored schema (its migrations applied so far)."""
        ...

    def count_rows(self) -> dict[str, int]:
        """Rows in namespaces, memory_versions, fact_versions and events."""
        ...

    def secret(self) -> bytes:
        """The 32-byte key that makes erased names' aliases unguessable (keyed hashes), the
        same for every process on this storage: created once, atomically, then read."""
        ...

    def repair_command(self, statement: str) -> str:
        """A shell command an operator can run to apply ``statement`` (SQL) to this storage."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Changes:
    """What other processes committed to a shared storage since ``marks`` were taken: rows as
    :meth:`Storage.load` gives them, in commit order; ``reloads``: namespaces whose stored rows
    changed in place (an erasure, a tier move), to be loaded afresh; ``namespaces``: the
    namespaces rows (name, created_us, dim, embedder, config) of every other namespace named
    by these changes (new ones, a new vector space or configuration)."""

    marks: Any  # pass to the next changes_since
    last_us: int  # the latest system time among them (0: none)
    reloads: list[str]
    namespaces: list[Row]
    memories: list[Row]
    facts: list[Row]
    events: list[Row]


@runtime_checkable
class SharedStorage(Protocol):
    """A storage that several SynapseDB processes use at once (PostgreSQL): each one follows
    the others' commits. SQLite is not one: a data directory's lock admits one process."""

    def follow_marks(self) -> Any:
        """Where the stored rows end now (take it before :meth:`Storage.load`: rows committed
        in between come back from the next :meth:`changes_since` as well)."""
        ...

    def changes_since(self, marks: Any) -> Changes:
        """Everything committed after ``marks``, read from one snapshot."""
        ...

    def exclusive(self) -> AbstractContextManager[None]:
        """Hold off every other process's commits: the writer catches up, plans and commits
        one batch inside, so its plan sees every committed version."""
        ...

    def listen(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` (from a thread of the storage's) soon after another process
        commits, and after a lost connection is replaced, until :meth:`Storage.close`."""
        ...
