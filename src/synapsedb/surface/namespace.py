"""What a namespace is, local or remote: :class:`NamespaceAPI`, written once.

``synapsedb.open(path).namespace(name)`` (the engine's ``Namespace``) and
``synapsedb.connect(url).namespace(name)`` (the client's ``RemoteNamespace``) both derive from
this protocol, so mypy holds every signature of both to it, and the signatures and docstrings
live here alone (``help(ns.query)`` shows this text on either side). The async twin
(:mod:`.aio`) is generated from this module (``tools/gen_surface.py``).

Everything lives inside exactly one namespace; nothing crosses namespaces. Reads take
``as_of=`` (ISO-8601, epoch seconds or datetime) and then return exactly what was visible at
that system time: later versions hidden, earlier versions as they were, things deleted later
still there, things created later absent. One positional argument of ``get``, ``delete`` and
``history`` is a memory id; an entity and a key address a KV fact.

Each method that travels over HTTP has a row in :data:`synapsedb.surface.operations.OPERATIONS`
(its route, scope and fields); adding a parameter is a line here, a field in that row, and
the engine's code (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, overload

from ..times import TimeLike
from ..types import (
    AuditEntry,
    Event,
    Fact,
    Forgotten,
    Lineage,
    MaintenanceReport,
    Memory,
    MemoryAccess,
    NamespaceConfig,
    QueryResult,
    Recalled,
    Remembered,
    Snapshot,
    Stats,
)
from .cache import CacheAPI
from .sessions import SessionsAPI

__all__ = ["NamespaceAPI"]


class NamespaceAPI(Protocol):
    """One namespace of a database, embedded or remote: memories, KV facts, streams, retrieval,
    lineage, the memory loop, lifecycle, and the conversation sessions (:attr:`sessions`) and
    semantic cache (:attr:`cache`) kept in it."""

    __slots__ = ()

    name: str

    @property
    def sessions(self) -> SessionsAPI:
        """The conversation sessions of this namespace (:class:`SessionsAPI`): the session
        routes' operations, with TTLs judged by the database's clock."""
        ...

    @property
    def cache(self) -> CacheAPI:
        """The semantic cache of this namespace (:class:`CacheAPI`)."""
        ...

    # -- memories ----------------------------------------------------------------------------------

    def write(
        self, entity: str, memory: str | Mapping[str, Any], *, agent: str | None = None
    ) -> Memory:
        """Store a memory about ``entity``: a content string or a dict of fields.

        Fields: ``content`` (required), ``type`` (default ``fact``), ``metadata``, ``embedding``,
        ``salience`` (0..1, default 0.5), ``ts`` (event time, default now), ``agent``,
        ``pinned``, ``ttl`` (seconds), ``id`` (writing an existing id adds a version),
        ``valid_from``/``valid_to`` (when it was true in the world: any time form, stored in
        ``metadata`` as epoch seconds; ``valid_to`` must be after ``valid_from``)."""
        ...

    def write_many(
        self,
        items: Sequence[Mapping[str, Any] | tuple[str, str | Mapping[str, Any]]],
        *,
        agent: str | None = None,
    ) -> list[Memory]:
        """Store many memories in one transaction: all or none.

        Each item is ``{"entity": ..., <fields as for write>}`` or ``(entity, memory)``."""
        ...

    def update(
        self,
        id: str,
        changes: Mapping[str, Any],
        *,
        if_version: int | None = None,
        agent: str | None = None,
    ) -> Memory:
        """Add a new version of memory ``id`` with ``changes`` applied (other fields kept;
        ``metadata`` is replaced whole). ``if_version`` makes it a compare-and-set.

        ``valid_from``/``valid_to`` set the valid interval (None removes a bound). Replacing
        ``metadata`` keeps the previous version's ``valid_from``/``valid_to`` unless the new
        metadata or the changes name them: when a thing was true does not change with its
        annotations. ``update(id, {"valid_to": T})`` closes the interval."""
        ...

    @overload
    def get(self, id: str, /, *, as_of: TimeLike | None = None) -> Memory: ...
    @overload
    def get(self, entity: str, key: str, /, *, as_of: TimeLike | None = None) -> Fact: ...
    def get(
        self, target: str, key: str | None = None, /, *, as_of: TimeLike | None = None
    ) -> Memory | Fact:
        """``get(id)``: a memory. ``get(entity, key)``: a KV fact. NotFoundError if absent."""
        ...

    def memories(
        self,
        entity: str | None = None,
        *,
        types: Iterable[str] | None = None,
        as_of: TimeLike | None = None,
        limit: int = 100,
        valid_at: TimeLike | None = None,
        before: str | None = None,
    ) -> list[Memory]:
        """Memories visible at ``as_of`` (default now), newest event time first; with
        ``valid_at``, only those true then (``valid_from`` <= T < ``valid_to``, an absent
        bound open), as ``query(valid_at=)`` filters them. ``before`` pages: pass the id of
        the last memory of one page to get the ones after it in this order (older)."""
        ...

    @overload
    def delete(
        self, id: str, /, *, if_version: int | None = None, agent: str | None = None
    ) -> Memory: ...
    @overload
    def delete(
        self, entity: str, key: str, /, *, if_version: int | None = None, agent: str | None = None
    ) -> Fact: ...
    def delete(
        self,
        target: str,
        key: str | None = None,
        /,
        *,
        if_version: int | None = None,
        agent: str | None = None,
    ) -> Memory | Fact:
        """Delete a memory (``delete(id)``) or a KV fact (``delete(entity, key)``).

        Leaves a tombstone: ``history`` and ``as_of`` reads before the deletion still see it.
        Returns the tombstone version."""
        ...

    @overload
    def history(self, id: str, /, *, as_of: TimeLike | None = None) -> list[Memory]: ...
    @overload
    def history(self, entity: str, key: str, /, *, as_of: TimeLike | None = None) -> list[Fact]: ...
    def history(
        self, target: str, key: str | None = None, /, *, as_of: TimeLike | None = None
    ) -> list[Memory] | list[Fact]:
        """Every version (tombstones included) of a memory or KV fact, oldest first, each with
        the agent that wrote it and when (``recorded_at``). ``as_of`` cuts the list at T."""
        ...

    def accesses(self, ids: Sequence[str]) -> list[MemoryAccess]:
        """How often each memory of ``ids`` (at most 1,000; one id alone is a list of one) was
        read, by id or as a search hit, and when last: salience's frequency and recency. Ids
        that are no memory of the namespace are left out; a memory never read has count 0."""
        ...

    # -- KV facts ----------------------------------------------------------------------------------

    def set(
        self,
        entity: str,
        key: str,
        value: Any,
        *,
        if_version: int | None = None,
        ttl: float | None = None,
        agent: str | None = None,
    ) -> Fact:
        """Set the JSON ``value`` of fact ``key`` about ``entity`` (a new version).

        ``if_version=N`` succeeds only if the current version is N (0: only if absent), else
        VersionConflictError. ``ttl`` in seconds."""
        ...

    def facts(self, entity: str, *, as_of: TimeLike | None = None) -> list[Fact]:
        """Every KV fact about ``entity`` visible at ``as_of``, sorted by key."""
        ...

    # -- streams -----------------------------------------------------------------------------------

    def append(
        self,
        entity: str,
        event: str | Mapping[str, Any],
        *,
        stream: str | None = None,
        agent: str | None = None,
        searchable: bool = True,
    ) -> Event:
        """Append an event to ``stream`` (default: the entity's own stream) and, unless
        ``searchable=False``, store it as a memory of type ``event`` too.

        ``event`` is text or a dict: ``content`` (required), ``data`` (JSON object kept on the
        event), ``ts``, ``agent``, ``salience``, ``metadata``, ``embedding``, ``pinned``,
        ``ttl`` (the last five apply to the memory)."""
        ...

    def events(
        self,
        stream: str,
        *,
        start: str | None = None,
        end: str | None = None,
        after: str | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        limit: int = 100,
        order: Literal["asc", "desc"] = "asc",
        as_of: TimeLike | None = None,
    ) -> list[Event]:
        """Read a stream. By id: ``start``/``end`` inclusive (``"<ms>-<seq>"`` or ``"<ms>"``),
        ``after`` exclusive (for tailing). By event time: ``since`` <= ts < ``until``.
        ``order="desc"`` gives newest first; ``limit`` applies after ordering."""
        ...

    # -- retrieval ---------------------------------------------------------------------------------

    def query(
        self,
        text: str | None = None,
        *,
        embedding: Sequence[float] | None = None,
        entity: str | None = None,
        filter: Mapping[str, Any] | None = None,
        k: int = 10,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        as_of: TimeLike | None = None,
        valid_at: TimeLike | None = None,
        min_score: float | None = None,
        types: Iterable[str] | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        dedup: bool = True,
        explain: bool = False,
        agent: str | None = None,
        tiers: Sequence[str] | None = None,
        include_ended: bool = False,
    ) -> QueryResult:
        """Find memories by meaning and keywords, inside filters, as of any moment.

        ``text`` is embedded (when an embedder is configured) and matched by BM25; an
        ``embedding`` given by the caller is used as is. An entity named in the text (a token
        like ``user:4321`` that exists in the namespace) scopes the search to that entity and is
        not searched as text; ``entity=`` wins. ``filter`` uses the filter language
        (docs/concepts.md); ``types``, ``since`` <= ts < ``until`` are shorthands. Near-identical
        hits (cosine >= 0.95, or the same text) collapse into the best one (``duplicates``).
        ``as_of`` is what was known then (system time); ``valid_at`` keeps the memories true
        then (valid time: ``valid_from`` <= T < ``valid_to``, an absent bound open). Without
        ``valid_at``, a memory whose valid time ended (``valid_to`` at or before the read's
        time: replaced by an update) is left out; ``include_ended=True`` keeps it."""
        ...

    # -- lineage and audit -------------------------------------------------------------------------

    def record_answer(
        self,
        answer_id: str,
        query_ids: Sequence[str],
        *,
        agent: str | None = None,
        text: str | None = None,
        cited: Sequence[str] | None = None,
        entities: Sequence[str] | None = None,
    ) -> Lineage:
        """Tie an answer to the queries (``query_id`` of each QueryResult) and memories behind
        it; ``cited`` names the memories the answer actually used, ``entities`` (at most
        MAX_ANSWER_ENTITIES) those it is about: ``forget(entity=..., purge=True)`` of any of
        them erases its text, as of an answer built on their memories. Returns its lineage."""
        ...

    def lineage(self, answer_id: str) -> Lineage:
        """The queries behind an answer, with every memory version they returned and the
        answer's citations, each with its content as it was then (or ``erased``)."""
        ...

    def audit(
        self,
        entity: str | None = None,
        *,
        agent: str | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        limit: int = 1000,
    ) -> list[AuditEntry]:
        """Who wrote and read what, when (oldest first): writes, updates, deletes, fact sets,
        appends, queries, answers and erasures, optionally about one entity or by one agent."""
        ...

    def snapshot(self, entity: str, *, as_of: TimeLike | None = None) -> Snapshot:
        """Everything known about ``entity`` at ``as_of`` (default now): its KV facts, its
        memories and the stream events about it, as they were then."""
        ...

    # -- the memory loop ---------------------------------------------------------------------------

    def remember(
        self,
        messages: Any,
        *,
        entity: str,
        session: str | None = None,
        agent: str | None = None,
        memories: Sequence[Mapping[str, Any]] | None = None,
        wait: bool = False,
    ) -> Remembered:
        """Store conversation turns in the session's stream and extract typed memories from
        them (``fact``, ``preference``, ``procedure``, ``episode``) with the configured LLM:
        queued and run in the background, or inline with ``wait=True``. Each extracted memory
        is resolved against the entity's similar memories as ADD/UPDATE/DELETE/NOOP
        (docs/memory-loop.md). ``memories`` are memories the caller extracted itself."""
        ...

    def recall(
        self,
        messages_or_text: Any,
        *,
        entity: str | None = None,
        budget_tokens: int | None = None,
        k: int | None = None,
        threshold: float | None = None,
        rewrite: str | None = None,
        agent: str | None = None,
    ) -> Recalled:
        """The memories a conversation's last user turn needs, over a similarity threshold,
        rendered as a context block within ``budget_tokens`` (docs/memory-loop.md)."""
        ...

    # -- lifecycle ---------------------------------------------------------------------------------

    def forget(
        self,
        id: str | None = None,
        *,
        entity: str | None = None,
        purge: bool = False,
        agent: str | None = None,
    ) -> Forgotten:
        """Forget a memory (``forget(id)``: a tombstone; history keeps it) or everything about
        an entity (``forget(entity=...)``: tombstones for its memories and facts).

        With ``purge=True`` (entity only), erase instead: every version's content, metadata and
        vector, every fact value and stream payload about the entity is removed from the
        database files (the WAL is checkpointed and truncated) and from memory, and so are the
        texts of logged queries that named it or returned its memories and of answers built
        on them. Version skeletons stay, marked erased, so history, audit and lineage can say
        an erasure happened; in them the entity, its fact keys and its streams appear only as
        keyed hashes, and the erasure record keeps who, when and how many. ``pending`` in the
        result: another reader kept the WAL from being truncated in time; maintenance retries
        (docs/lifecycle.md#erasure)."""
        ...

    def maintain(self, *, dry_run: bool = False) -> MaintenanceReport:
        """Run maintenance now: demote the lowest-salience unpinned memories over the hot
        quota (policy ``evict``), promote cold memories accessed ``promote_after`` times, erase
        memories and KV facts whose TTL ran out more than ``ttl_grace_s`` ago, and persist
        access statistics. ``dry_run=True`` reports every move with its score and reason and
        changes nothing. The background thread does this every ``maintenance_interval_s``."""
        ...

    @property
    def config(self) -> NamespaceConfig:
        """The namespace's lifecycle settings (defaults until ``configure`` is called)."""
        ...

    def configure(self, **changes: Any) -> NamespaceConfig:
        """Change lifecycle settings (see ``NamespaceConfig``): quotas ``max_hot``,
        ``max_bytes``, ``max_writes_per_s``, ``policy`` (``evict``/``reject``), salience
        weights ``recency``, ``frequency``, ``importance``, ``impact``, ``half_life_days``,
        ``promote_after``, ``cold_fallback``. Durable; returns the new settings."""
        ...

    def export(self) -> Iterator[dict[str, Any]]:
        """Every stored row of the namespace as JSON-ready records, for ``import_records`` on
        another database (or server): nothing is lost, history and lineage included."""
        ...

    def import_records(self, records: Iterable[dict[str, Any]]) -> int:
        """Write an ``export()`` stream into this namespace, which must be empty, in one
        transaction (all or nothing). Returns the number of memory versions imported."""
        ...

    # -- overview ----------------------------------------------------------------------------------

    def entities(
        self,
        *,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """Entities with at least one memory (hot or cold) or KV fact visible at ``as_of``,
        sorted by name. A page: ``prefix`` keeps names starting with it, ``after`` names sorting
        strictly after it (pass the last name of one page to get the next), ``limit`` at most
        that many (1 to 10,000; all of them when None)."""
        ...

    def streams(
        self,
        *,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """Streams with at least one event committed at or before ``as_of``, sorted by name (a
        stream whose every event was erased is not listed). A page, as ``entities``: ``prefix``
        keeps names starting with it, ``after`` names sorting strictly after it (the last name
        of one page gives the next), ``limit`` at most that many (1 to 10,000; all when None)."""
        ...

    def stats(self) -> Stats:
        """Counts by type, versions, bytes (content, metadata, vectors, values, events)."""
        ...
