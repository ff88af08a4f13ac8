"""Public value objects returned by SynapseDB: Memory, Fact, Event, Stats.

They are immutable snapshots: changing the database never changes an object you already hold,
and changing a returned ``metadata`` dict never changes the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

__all__ = [
    "BUILTIN_TYPES",
    "AuditEntry",
    "Decision",
    "Event",
    "Fact",
    "Forgotten",
    "Hit",
    "Lineage",
    "LoggedQuery",
    "MaintenanceReport",
    "Memory",
    "MemoryRef",
    "NamespaceConfig",
    "QueryResult",
    "Recalled",
    "Recollection",
    "Remembered",
    "Snapshot",
    "Stats",
]

BUILTIN_TYPES = (
    "fact",
    "event",
    "episode",
    "procedure",
    "preference",
    "summary",
    "state",
    "action",
    "interaction",
)


@dataclass(frozen=True, slots=True)
class Memory:
    """One version of a memory.

    ``ts`` is event time (when the thing happened, given by the writer); ``recorded_at`` is system
    time (when this version was committed). ``created_at`` is the system time of version 1.
    ``deleted`` is true only for the tombstone version that ``history()`` shows after a delete.
    """

    id: str
    entity: str
    content: str
    type: str
    metadata: dict[str, Any]
    salience: float
    ts: datetime
    agent: str | None
    pinned: bool
    ttl: float | None
    expires_at: datetime | None
    version: int
    created_at: datetime
    recorded_at: datetime
    deleted: bool = False
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)
    erased: bool = False  # content removed by forget(entity=..., purge=True); history only


@dataclass(frozen=True, slots=True)
class MemoryAccess:
    """How often a memory was read and when last: ``count`` reads by id and appearances as a
    search hit (what salience's frequency and recency count); ``last_access`` is None for a
    memory never read."""

    id: str
    count: int
    last_access: datetime | None


@dataclass(frozen=True, slots=True)
class Fact:
    """One version of a KV fact: a JSON value stored under (entity, key)."""

    entity: str
    key: str
    value: Any
    version: int
    agent: str | None
    ttl: float | None
    expires_at: datetime | None
    created_at: datetime
    recorded_at: datetime
    deleted: bool = False
    erased: bool = False  # value removed by forget(entity=..., purge=True); history only


@dataclass(frozen=True, slots=True)
class Event:
    """An entry of an append-only stream. ``id`` is ``"<ms>-<seq>"``, sortable and monotonic."""

    id: str
    stream: str
    entity: str
    content: str
    data: dict[str, Any] | None
    ts: datetime
    agent: str | None
    recorded_at: datetime
    memory_id: str | None


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts for one namespace at one moment."""

    namespace: str
    memories: int
    memories_by_type: dict[str, int]
    memory_versions: int
    entities: int
    facts: int
    fact_versions: int
    streams: int
    events: int
    bytes: int
    dim: int | None
    embedder: str | None = None  # what produced the vectors: a model name, or "caller"
    cold_memories: int = 0  # of ``memories``, on disk only (cold tier); the rest are hot


@dataclass(frozen=True, slots=True)
class Hit:
    """One query result: a memory version and its score.

    ``duplicates`` lists the ids of near-identical hits that were collapsed into this one;
    ``explanation`` (with ``explain=True``) holds each scoring component.
    """

    id: str
    entity: str
    content: str
    type: str
    metadata: dict[str, Any]
    ts: datetime
    version: int
    score: float
    agent: str | None = None
    salience: float = 0.5
    duplicates: tuple[str, ...] = ()
    explanation: dict[str, Any] | None = None
    tier: str = "hot"  # "cold" when it came from the cold tier (on disk only)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """What ``query`` returns: the ranked hits and the query's id (for lineage).

    Iterating, indexing and ``len`` act on ``hits``.
    """

    query_id: str
    hits: list[Hit]
    entity: str | None = None

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]


@dataclass(frozen=True, slots=True)
class MemoryRef:
    """A memory version as it was when a query returned it or an answer cited it.

    ``content`` is that version's text, even if the memory changed or was deleted since; it is
    None, with ``erased=True``, after the memory's entity was erased (forget purge).
    """

    id: str
    version: int
    entity: str | None
    content: str | None
    score: float | None = None
    erased: bool = False


@dataclass(frozen=True, slots=True)
class LoggedQuery:
    """A query as the query log recorded it: who asked what, when, and what came back."""

    query_id: str
    agent: str | None
    text: str | None
    request: dict[str, Any]
    recorded_at: datetime
    hits: list[MemoryRef]


@dataclass(frozen=True, slots=True)
class Lineage:
    """What an answer was built on: its queries and their hits, and the memories it cited."""

    answer_id: str
    agent: str | None
    text: str | None
    recorded_at: datetime
    queries: list[LoggedQuery]
    cited: list[MemoryRef]
    erased: bool = False  # the answer was built on erased memories: its text was erased
    # the entities it is about (record_answer(entities=)); an erased one reads erased:<hash>
    entities: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One thing that happened: write, update, delete, set, unset, append, query, answer,
    erase, or (by maintenance, ``agent`` None) demote and promote with score and reason."""

    at: datetime
    agent: str | None
    action: str
    entity: str | None
    target: str
    version: int | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything known about an entity at a moment: facts, memories and stream events."""

    entity: str
    as_of: datetime
    facts: list[Fact]
    memories: list[Memory]
    events: list[Event]


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What ``forget`` did: counts of what it tombstoned or (``purged``) erased.

    ``pending`` (purge only): the erasure is committed and gone from every read, but the erased
    text may still be in the database's write-ahead log because another connection was reading
    it; maintenance retries until it is gone (``Database.erasure_pending``)."""

    target: str
    purged: bool
    memories: int
    versions: int
    facts: int
    events: int
    at: datetime
    pending: bool = False


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What a maintenance pass did (or, with ``dry_run``, would do) in one namespace, and why."""

    namespace: str
    dry_run: bool
    at: datetime
    expired_memories: list[str]  # erased: their TTL ran out more than ttl_grace_s ago
    expired_facts: list[tuple[str, str]]
    demoted: list[tuple[str, float | None, str]] = field(default_factory=list)  # id, score, why
    promoted: list[tuple[str, str]] = field(default_factory=list)  # id, why


@dataclass(frozen=True, slots=True)
class NamespaceConfig:
    """Per-namespace lifecycle settings (``Namespace.configure``).

    Quotas: ``max_hot`` memories and ``max_bytes`` (content, metadata and vectors) in the hot
    tier, ``max_writes_per_s`` writes per second. Over a memory or byte quota, ``policy``
    ``"evict"`` demotes the lowest-salience unpinned memories to the cold tier (at the next
    maintenance pass, within ``maintenance_interval_s``); ``"reject"`` refuses the write with
    QuotaExceededError and writes nothing. Salience = ``recency`` * 2^(-age/half_life) +
    ``frequency`` * (1 - e^(-accesses/5)) + ``importance`` * salience + ``impact`` *
    (1 - e^(-answers/2)), where age counts from the later of event time and last access.
    """

    max_hot: int | None = None
    max_bytes: int | None = None
    max_writes_per_s: float | None = None
    policy: str = "evict"
    recency: float = 0.3
    frequency: float = 0.2
    importance: float = 0.35
    impact: float = 0.15
    half_life_days: float = 7.0
    promote_after: int = 3
    cold_fallback: bool = True


# -- the memory loop (synapsedb.memory_loop) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """What the memory loop did with one extracted memory, and why.

    ``action`` is ``ADD`` (a new memory, ``memory_id``), ``UPDATE`` (``target_id`` is closed:
    a new version of it with ``valid_to`` set; the new content is ``memory_id``), ``DELETE``
    (``target_id`` tombstoned) or ``NOOP`` (already known as ``target_id``). ``source_turns``
    are the stream event ids of the turns it came from; ``valid_from`` when it became true.
    """

    action: str
    type: str
    content: str
    reason: str
    confidence: float
    memory_id: str | None = None
    target_id: str | None = None
    source_turns: tuple[str, ...] = ()
    valid_from: datetime | None = None
    decided_by: str = "similarity"  # "llm" or "similarity"


@dataclass(frozen=True, slots=True)
class Remembered:
    """What ``remember`` did: the turns appended to the session's stream (event ids), the
    extraction job (``status``: ``queued`` until a worker ran it, ``extracted`` when it ran
    inline, ``stored`` when there was nothing to extract) and, when it ran, its decisions."""

    entity: str
    session: str
    stream: str
    turns: tuple[str, ...]
    status: str
    job: str | None = None
    decisions: tuple[Decision, ...] = ()


@dataclass(frozen=True, slots=True)
class Recollection:
    """One memory chosen by ``recall``: ``similarity`` is the calibrated similarity the
    threshold applies to (0..1), ``score`` the query's fused ranking score."""

    id: str
    entity: str
    type: str
    content: str
    similarity: float
    score: float
    ts: datetime
    valid_from: datetime | None = None


@dataclass(frozen=True, slots=True)
class Recalled:
    """What ``recall`` found for a turn: whether memory was needed at all, the query it ran
    (and who rewrote it: ``none``, ``heuristic`` or ``llm``), the memories over the threshold
    and the context block rendering them within ``budget_tokens`` (``tokens`` estimated)."""

    needed: bool
    query: str
    rewritten_by: str
    memories: tuple[Recollection, ...] = ()
    context: str = ""
    tokens: int = 0
    query_id: str | None = None
    dropped: int = 0  # hits under the threshold or over the budget
