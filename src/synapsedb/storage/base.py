"""The storage protocol: the engine owns semantics, a backend persists rows and loads them back.

A backend commits a :class:`Batch` in one transaction, durably under its durability policy
before returning, and loads every row at startup. It raises :class:`StorageError` on failure,
having written nothing of the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from typing import Any, NamedTuple, Protocol, TypeVar, cast, runtime_checkable

__all__ = [
    "BATCH_COLUMNS",
    "AccessRow",
    "AnswerInsert",
    "AnswerRefs",
    "AnswerRow",
    "Batch",
    "Changes",
    "CheckpointMark",
    "ErasureInsert",
    "ErasureRow",
    "EventInsert",
    "EventRow",
    "FactInsert",
    "FactRow",
    "LoadedRows",
    "MemoryInsert",
    "MemoryRow",
    "NamespaceRow",
    "NamespaceUpsert",
    "Purge",
    "QueryInsert",
    "QueryRow",
    "SharedStorage",
    "Storage",
    "TierMark",
    "TierRow",
    "named_rows",
    "row_maker",
]

Row = tuple[Any, ...]  # any row, for code that walks every kind alike (NUL checks, messages)

# -- named rows ----------------------------------------------------------------------------------
# Every row that crosses the seam has a named type: a NamedTuple, so it costs what a tuple costs
# and binds positionally to a backend's statement, and the engine reads it by field name. The
# ``...Insert``/``...Upsert`` rows are what a Batch writes; the ``...Row`` rows are what a
# backend reads back (the stored columns, ``erased`` included). Times are microseconds; JSON
# columns hold JSON text; flags are 0 or 1. The field types are those of a well-formed row: a
# backend returns what is stored, and the engine's loader checks every loaded row before it
# trusts one.


class NamespaceUpsert(NamedTuple):
    """A namespace, or its vector space (dim, embedder) set; its config goes by ``configs``."""

    name: str
    created_us: int
    dim: int | None
    embedder: str | None


class NamespaceRow(NamedTuple):
    name: str
    created_us: int
    dim: int | None
    embedder: str | None
    config: str | None  # JSON object, or None: the defaults


class MemoryInsert(NamedTuple):
    """One version of a memory."""

    ns: str
    id: str
    version: int
    sys_us: int
    created_us: int
    entity: str
    type: str
    content: str
    metadata: str  # JSON object
    embedding: bytes | None  # float32, the namespace's dim
    salience: float
    ts_us: int
    agent: str | None
    pinned: int
    ttl: float | None
    expires_us: int | None
    deleted: int


class MemoryRow(NamedTuple):
    """A stored memory version (loaded, followed, or read as a cold chain)."""

    ns: str
    id: str
    version: int
    sys_us: int
    created_us: int
    entity: str
    type: str
    content: str
    metadata: str
    embedding: bytes | None
    salience: float
    ts_us: int
    agent: str | None
    pinned: int
    ttl: float | None
    expires_us: int | None
    deleted: int
    erased: int  # 1: an erasure or expiry took its content


class FactInsert(NamedTuple):
    """One version of a KV fact."""

    ns: str
    entity: str
    key: str
    version: int
    sys_us: int
    created_us: int
    value: str  # JSON value
    agent: str | None
    ttl: float | None
    expires_us: int | None
    deleted: int


class FactRow(NamedTuple):
    ns: str
    entity: str
    key: str
    version: int
    sys_us: int
    created_us: int
    value: str
    agent: str | None
    ttl: float | None
    expires_us: int | None
    deleted: int
    erased: int


class EventInsert(NamedTuple):
    """One stream entry; ``(ms, seq)`` is its id."""

    ns: str
    stream: str
    ms: int
    seq: int
    sys_us: int
    entity: str
    ts_us: int
    agent: str | None
    content: str
    data: str | None  # JSON object
    memory_id: str | None  # its searchable twin


class EventRow(NamedTuple):
    ns: str
    stream: str
    ms: int
    seq: int
    sys_us: int
    entity: str
    ts_us: int
    agent: str | None
    content: str
    data: str | None
    memory_id: str | None
    erased: int


class QueryInsert(NamedTuple):
    """One row of the query log (lineage)."""

    ns: str
    id: str
    sys_us: int
    agent: str | None
    text: str | None
    request: str  # JSON object
    hits: str  # JSON [[memory id, version, score], ...]


class QueryRow(NamedTuple):
    """A logged query as lineage and audit read it (its namespace is the one asked about)."""

    id: str
    sys_us: int
    agent: str | None
    text: str | None
    request: str
    hits: str


class AnswerInsert(NamedTuple):
    """A recorded answer: the queries and memories behind it."""

    ns: str
    id: str
    sys_us: int
    agent: str | None
    text: str | None
    query_ids: str  # JSON [query id, ...]
    cited: str  # JSON [[memory id, version], ...]
    memories: str  # JSON [[memory id, version], ...]: every memory behind it
    entities: str = "[]"  # JSON [entity, ...] it is about: a purge of any takes its text


class AnswerRow(NamedTuple):
    id: str
    sys_us: int
    agent: str | None
    text: str | None
    query_ids: str
    cited: str
    memories: str
    erased: int  # 1: a purge took its text
    entities: str = "[]"  # JSON [entity, ...]; an erased one is its keyed hash


class AnswerRefs(NamedTuple):
    """What a load needs of an answer: the memories it was built on (their impact)."""

    ns: str
    id: str
    memories: str


class TierMark(NamedTuple):
    """A tier move as a load needs it: the last one of an id is its tier."""

    ns: str
    id: str
    tier: str  # "hot" or "cold"


class TierRow(NamedTuple):
    """A tier move as audit reads it."""

    id: str
    sys_us: int
    tier: str
    score: float | None
    reason: str


class AccessRow(NamedTuple):
    """A memory's access statistics (column ``count``: a field may not shadow tuple.count)."""

    ns: str
    id: str
    accesses: int
    last_us: int


class ErasureInsert(NamedTuple):
    """The audit row of an erasure: a keyed hash of the subject, never its name."""

    ns: str
    sys_us: int
    agent: str | None
    subject: str
    counts: str  # JSON object


class ErasureRow(NamedTuple):
    sys_us: int
    agent: str | None
    subject: str
    counts: str


_R = TypeVar("_R", bound=tuple[Any, ...])


def named_rows(cls: type[_R], rows: Iterable[Iterable[Any]]) -> Iterator[_R]:
    """``rows`` (a backend's result rows) as ``cls`` rows: a tuple copy each, no Python call
    per row (loads). The backend's SELECT lists ``cls``'s fields in order."""
    return cast(Iterator[_R], map(tuple.__new__, repeat(cls), rows))


def row_maker(cls: type[_R]) -> Callable[[Iterable[Any]], _R]:
    """Builds a ``cls`` from a backend's result row: ``cls._make`` without its length check,
    for loads (a tuple's cost per row). The backend's SELECT lists ``cls``'s fields in order."""
    return cast(Callable[[Iterable[Any]], _R], partial(tuple.__new__, cls))


# the column of each position of a Batch's row lists (for messages about a row's values)
BATCH_COLUMNS: dict[str, tuple[str, ...]] = {
    "namespaces": NamespaceUpsert._fields,
    "memories": MemoryInsert._fields,
    "facts": FactInsert._fields,
    "events": EventInsert._fields,
    "queries": QueryInsert._fields,
    "answers": AnswerInsert._fields,
    "configs": ("config", "ns"),
    "tiers": ("ns", "id", "sys_us", "tier", "score", "reason"),
    "access": ("ns", "id", "count", "last_us"),
    "erasures": ErasureInsert._fields,
}


@dataclass(frozen=True, slots=True)
class Purge:
    """Erase an entity from a namespace (forget purge), leaving no name behind.

    Content, metadata, vectors, fact values and event payloads about ``entity`` are erased;
    the version rows stay as skeletons in which the entity's name is replaced by ``alias`` (its
    keyed hash), each fact key by ``keys[key]`` and each stream in ``streams`` by its
    replacement. Logged queries that name the entity or returned its memories lose their text
    and request; recorded answers built on its memories (or naming it, or about it) lose their
    text, and in their entities the name becomes ``alias``.
    """

    ns: str
    entity: str
    alias: str
    keys: dict[str, str] = field(default_factory=dict)
    streams: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Batch:
    """Rows to commit together, as the named rows above (an import brings plain tuples of the
    same layouts: backends bind every row positionally)."""

    namespaces: list[NamespaceUpsert] = field(default_factory=list)
    memories: list[MemoryInsert] = field(default_factory=list)
    facts: list[FactInsert] = field(default_factory=list)
    events: list[EventInsert] = field(default_factory=list)
    queries: list[QueryInsert] = field(default_factory=list)  # the query log (lineage)
    answers: list[AnswerInsert] = field(default_factory=list)
    purges: list[Purge] = field(default_factory=list)  # entities to erase
    # expired past their grace period: (namespace, memory id) and (namespace, entity, key)
    expired_memories: list[tuple[str, str]] = field(default_factory=list)
    expired_facts: list[tuple[str, str, str]] = field(default_factory=list)
    # imported erased skeletons: (namespace, stream, ms, seq) and (namespace, answer id)
    erased_events: list[tuple[str, str, int, int]] = field(default_factory=list)
    erased_answers: list[tuple[str, str]] = field(default_factory=list)
    # (config JSON, namespace); tier moves (ns, id, sys_us, tier, score, reason); access counts
    configs: list[tuple[str, str]] = field(default_factory=list)
    tiers: list[tuple[str, str, int, str, float | None, str]] = field(default_factory=list)
    access: list[tuple[str, str, int, int]] = field(default_factory=list)  # AccessRow layout
    erasures: list[ErasureInsert] = field(default_factory=list)

    def __len__(self) -> int:
        return (
            len(self.namespaces)
            + len(self.memories)
            + len(self.facts)
            + len(self.events)
            + len(self.queries)
            + len(self.answers)
            + len(self.purges)
            + len(self.erasures)
            + len(self.expired_memories)
            + len(self.expired_facts)
            + len(self.erased_events)
            + len(self.erased_answers)
            + len(self.configs)
            + len(self.tiers)
            + len(self.access)
        )


class StoredNames(NamedTuple):
    """The namespaces a storage holds rows of (values as stored: a damaged row may hold a name
    that is not text)."""

    named: list[Any]  # table namespaces
    unnamed: list[Any]  # an ns of memory_versions, fact_versions or events, and not named


class CheckpointMark(NamedTuple):
    """What a namespace's memory log holds up to a system time ``mark``: a checkpoint of the
    namespace taken at ``mark`` still holds what the log does while all of these are unchanged
    (a version added at or before ``mark`` changes ``rows`` or ``last``, an erasure rewrites
    rows in place and changes ``erased`` or adds to ``erasures``, a tier move adds to
    ``tiers``)."""

    rows: int  # memory versions with sys_us <= mark (tombstones, cold and erased ones too)
    erased: int  # how many of those are erased
    last_id: str | None  # the id and version of the last of them (latest sys_us, then rowid)
    last_version: int
    tiers: int  # tier moves of the namespace
    erasures: int  # erasure audit rows of the namespace


@dataclass(slots=True)
class LoadedRows:
    """Everything a backend holds, as row iterators ordered for replay (oldest version first)."""

    namespaces: Iterator[NamespaceRow]
    tiers: Iterator[TierMark]  # in log order: the last row of an id is its tier
    access: Iterator[AccessRow]
    memory_rows: dict[str, int]  # per namespace: memory versions that are not tombstones
    memories: Iterator[MemoryRow]
    facts: Iterator[FactRow]
    events: Iterator[EventRow]
    answers: Iterator[AnswerRefs]  # for impact
    # a load ``since`` marks: the memory rows of those namespaces are only the ones after
    # their mark, and this is each one's CheckpointMark read from the same snapshot
    marks: dict[Any, CheckpointMark] = field(default_factory=dict)


class Storage(Protocol):
    where: str  # where the rows are, for messages (a file, or database, host and schema)

    def load(self, ns: str | None = None) -> LoadedRows:
        """Every row (or one namespace's) in commit order."""
        ...

    def export_rows(self, ns: str) -> LoadedRows:
        """Like ``load(ns)``, read completely before returning (safe next to commits)."""
        ...

    # what an open reads when it loads namespaces on first need (engine/lazy.py)
    def namespace_names(self) -> StoredNames:
        """Every namespace with a stored row: the names in table namespaces, and any other
        ``ns`` of memory_versions, fact_versions or events (rows without a namespaces row,
        which loading reports)."""
        ...

    def last_sys_us(self, until_us: int) -> int:
        """The latest system time stored at or before ``until_us`` (namespaces.created_us,
        the sys_us of memory and fact versions and events, access.last_us); 0 when none.
        Cheap: the commit clock of an open starts after it without loading any row."""
        ...

    def load_namespaces(
        self, names: Sequence[Any], since: Mapping[Any, int] | None = None
    ) -> LoadedRows:
        """Like ``load(ns)`` for every namespace of ``names`` at once (each one's rows in
        commit order), read completely from one snapshot before returning: safe from any
        thread while commits run. For a namespace in ``since`` (a checkpoint's mark: a
        system time), only its memory versions after the mark are read, and ``marks`` holds
        its :class:`CheckpointMark` at the mark, from the same snapshot."""
        ...

    def checkpoint_mark(self, ns: str, mark_us: int) -> CheckpointMark:
        """The namespace's :class:`CheckpointMark` at ``mark_us`` now (cheap: index reads)."""
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
    def read_queries(self, ns: str, ids: list[str]) -> list[QueryRow]: ...

    def scan_queries(self, ns: str, since_us: int, until_us: int) -> list[QueryRow]: ...

    def read_answer(self, ns: str, answer_id: str) -> AnswerRow | None: ...

    def read_memory_chain(self, ns: str, mid: str) -> list[MemoryRow]:
        """Every version of one memory (cold reads), oldest first."""
        ...

    def read_memory_chains(self, ns: str, ids: list[str]) -> list[MemoryRow]:
        """Every version of each memory of ``ids``, in commit order."""
        ...

    def scan_answers(self, ns: str, since_us: int, until_us: int) -> list[AnswerRow]: ...

    def scan_erasures(self, ns: str, since_us: int, until_us: int) -> list[ErasureRow]: ...

    def scan_tiers(self, ns: str, since_us: int, until_us: int) -> list[TierRow]: ...

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
    namespaces rows of every other namespace named by these changes (new ones, a new vector
    space or configuration)."""

    marks: Any  # pass to the next changes_since
    last_us: int  # the latest system time among them (0: none)
    reloads: list[str]
    namespaces: list[NamespaceRow]
    memories: list[MemoryRow]
    facts: list[FactRow]
    events: list[EventRow]


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
