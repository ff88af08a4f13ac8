"""The namespace handle: every read and write of memories, KV facts and streams.

Everything lives inside exactly one namespace; nothing crosses namespaces. Reads take
``as_of=`` (ISO-8601, epoch seconds or datetime) and then return exactly what was visible at
that system time: later versions hidden, earlier versions as they were, things deleted later
still there, things created later absent.

One rule keeps ``get``, ``delete`` and ``history`` short: one positional argument is a memory
id; an entity and a key address a KV fact.

:class:`Namespace` is assembled from parts, one concept per module: writes of memories, facts
and events (``writes``), reads and time travel (``reads``), argument parsing (``inputs``), and
here retrieval, forgetting, lifecycle, export/import, lineage and audit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ValidationError
from ..times import TimeLike, to_datetime, to_us
from ..types import (
    AuditEntry,
    Forgotten,
    Lineage,
    MaintenanceReport,
    NamespaceConfig,
    QueryResult,
    Recalled,
    Remembered,
    Snapshot,
)
from ..validation import check_agent, check_entity, check_id, check_id_list
from .core import MemoryLoopSeam
from .inputs import MAX_LIMIT, check_limit, check_memory_id
from .lifecycle import ConfigureNamespace, MoveTiers, check_config, plan_moves
from .lineage import RecordAnswer, audit, lineage, snapshot
from .ops import DeleteMemory, ForgetEntity, PurgeExpired
from .reads import _Reads
from .retrieval import run_query
from .transfer import ImportNamespace, export_records, import_batch
from .writes import _Writes

if TYPE_CHECKING:
    from .database import Database

__all__ = ["MAX_LIMIT", "Namespace"]


class Namespace(_Writes, _Reads):
    """Handle on one namespace of a :class:`~synapsedb.engine.database.Database`.

    It binds the database's :class:`~synapsedb.engine.core.EngineCore` once, here, and every
    method calls the core directly."""

    __slots__ = ("_agent", "_core", "_db", "name")

    def __init__(self, db: Database, name: str, agent: str | None) -> None:
        self._db = db  # the query path (retrieval.run_query) still takes the database
        self._core = db.core
        self.name = name
        self._agent = agent

    def __repr__(self) -> str:
        return f"<synapsedb.Namespace {self.name!r}>"

    # -- retrieval ------------------------------------------------------------------------------

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
    ) -> QueryResult:
        """Find memories by meaning and keywords, inside filters, as of any moment.

        ``text`` is embedded (when an embedder is configured) and matched by BM25; an
        ``embedding`` given by the caller is used as is. An entity named in the text (a token
        like ``user:4321`` that exists in the namespace) scopes the search to that entity and is
        not searched as text; ``entity=`` wins. ``filter`` uses the filter language
        (docs/concepts.md); ``types``, ``since`` <= ts < ``until`` are shorthands. Near-identical
        hits (cosine >= 0.95, or the same text) collapse into the best one (``duplicates``).
        ``as_of`` is what was known then (system time); ``valid_at`` keeps the memories true
        then (valid time: ``valid_from`` <= T < ``valid_to``, an absent bound open).
        """
        return run_query(
            self._db, self.name, self._time(as_of), text=text, embedding=embedding,
            entity=entity, filter=filter, k=k, mode=mode, min_score=min_score, types=types,
            since=since, until=until, dedup=dedup, explain=explain, valid_at=valid_at,
            agent=self._agent_for(agent), tiers=tiers,
        )  # fmt: skip

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
        (docs/lifecycle.md#erasure).
        """
        who = self._agent_for(agent)
        if not isinstance(purge, bool):
            raise ValidationError("purge: expected true or false", field="purge")
        if (id is None) == (entity is None):
            raise ValidationError("forget: pass a memory id or entity=, not both", field="id")
        if id is not None:
            if purge:
                raise ValidationError(
                    "purge: erasure works on a whole entity; use forget(entity=..., purge=True)",
                    field="purge",
                )
            tomb = self._core.submit(DeleteMemory(self.name, check_memory_id(id), None, who))
            return Forgotten(id, False, 1, 0, 0, 0, to_datetime(tomb.sys_us))
        entity = check_entity(entity)
        state = self._core.state(self.name)
        cold = sorted(state.cold_by_entity.get(entity, ())) if state is not None else []
        if cold and not purge:  # tombstones need the memories hot (a purge reaches disk anyway)
            self._before_write(1, cold)
        cold_versions = (
            len(self._core.storage.read_memory_chains(self.name, cold)) if cold and purge else 0
        )
        op = ForgetEntity(self.name, entity, purge, who, self._core.subject_of(entity),
                          self._core.subject_of)  # fmt: skip
        counts = self._core.submit(op)
        pending = False
        if purge:
            counts["memories"] += len(cold)
            counts["versions"] += cold_versions
            self._core.embedding.forget_texts(self.name, entity)
            pending = self._core.erasure_pending
        return Forgotten(entity, purge, counts["memories"], counts["versions"], counts["facts"],
                         counts["events"], to_datetime(self._core.now_us()),
                         pending)  # fmt: skip

    def maintain(self, *, dry_run: bool = False) -> MaintenanceReport:
        """Run maintenance now: demote the lowest-salience unpinned memories over the hot
        quota (policy ``evict``), promote cold memories accessed ``promote_after`` times, erase
        memories and KV facts whose TTL ran out more than ``ttl_grace_s`` ago, and persist
        access statistics. ``dry_run=True`` reports every move with its score and reason and
        changes nothing. The background thread does this every ``maintenance_interval_s``."""
        if not isinstance(dry_run, bool):
            raise ValidationError("dry_run: expected true or false", field="dry_run")
        state = self._core.state(self.name)
        moves = plan_moves(state, state.config, self._core.now_us()) if state is not None else []
        if not dry_run and state is not None and (moves or state.access_dirty):
            state.access_dirty = False  # (a concurrent access re-sets it: persisted next time)
            access = [(self.name, m, c, t) for m, (c, t) in list(state.access.items())]
            self._core.submit(MoveTiers(self.name, moves, access))
        mems: list[str] = []
        facts: list[tuple[str, str]] = []
        has_ttl = state is not None and (
            state.catalog.n_ttl > 0
            or bool(state.cold_expiry)
            or any(c[-1].expires_us for c in list(state.facts.values()))
        )
        if has_ttl:  # nothing can expire in a namespace without TTLs: no commit for it
            grace_us = self._core.settings.ttl_grace_s * 1_000_000
            mems, facts = self._core.submit(PurgeExpired(self.name, grace_us, dry_run))
        report = MaintenanceReport(
            self.name, dry_run, to_datetime(self._core.now_us()), sorted(mems), sorted(facts),
            demoted=[(m, s, r) for m, t, s, r in moves if t == "cold"],
            promoted=[(m, r) for m, t, _s, r in moves if t == "hot"],
        )  # fmt: skip
        if not dry_run:
            self._core.observers.emit(self._core.observers.maintain, report)
        return report

    @property
    def config(self) -> NamespaceConfig:
        """The namespace's lifecycle settings (defaults until ``configure`` is called)."""
        state = self._core.state(self.name)
        return state.config if state is not None else NamespaceConfig()

    def configure(self, **changes: Any) -> NamespaceConfig:
        """Change lifecycle settings (see ``NamespaceConfig``): quotas ``max_hot``,
        ``max_bytes``, ``max_writes_per_s``, ``policy`` (``evict``/``reject``), salience
        weights ``recency``, ``frequency``, ``importance``, ``impact``, ``half_life_days``,
        ``promote_after``, ``cold_fallback``. Durable; returns the new settings."""
        cfg = check_config(self.config, changes)
        return self._core.submit(ConfigureNamespace(self.name, cfg))

    def export(self) -> Iterator[dict[str, Any]]:
        """Every stored row of the namespace as JSON-ready records, for ``import_records`` on
        another database (or server): nothing is lost, history and lineage included."""
        self._core.flush_log()
        return export_records(self._core.storage, self.name)

    def import_records(self, records: Iterable[dict[str, Any]]) -> int:
        """Write an ``export()`` stream into this namespace, which must be empty, in one
        transaction (all or nothing). Returns the number of memory versions imported."""
        data = import_batch(self.name, records, self._core.settings, self._core.now_us())
        return int(self._core.submit(ImportNamespace(self.name, data)))

    # -- the memory loop (synapsedb.agentic, through the Database.memory_loop seam) ----------

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
        (docs/agentic.md). ``memories`` are memories the caller extracted itself."""
        return self._loop().remember(self, messages, entity=entity, session=session,
                                     agent=self._agent_for(agent), memories=memories,
                                     wait=wait)  # fmt: skip

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
        rendered as a context block within ``budget_tokens`` (docs/agentic.md)."""
        return self._loop().recall(self, messages_or_text, entity=entity,
                                   budget_tokens=budget_tokens, k=k, threshold=threshold,
                                   rewrite=rewrite, agent=self._agent_for(agent))  # fmt: skip

    def _loop(self) -> MemoryLoopSeam:
        loop = self._core.memory_loop
        if loop is None:
            raise ValidationError(
                "remember/recall: this database has no memory loop; open it with "
                "synapsedb.open() or set db.memory_loop = synapsedb.agentic.MemoryLoop(...)",
                field="memory_loop",
            )
        return loop

    # -- lineage and audit -----------------------------------------------------------------------

    def record_answer(
        self,
        answer_id: str,
        query_ids: Sequence[str],
        *,
        agent: str | None = None,
        text: str | None = None,
        cited: Sequence[str] | None = None,
    ) -> Lineage:
        """Tie an answer to the queries (``query_id`` of each QueryResult) and memories behind
        it; ``cited`` names the memories the answer actually used. Returns its lineage."""
        answer_id = check_id(answer_id, "answer_id")
        qids = check_id_list(query_ids, "query_ids", MAX_LIMIT)
        cites = check_id_list(cited or [], "cited", MAX_LIMIT)
        if text is not None and not isinstance(text, str):
            raise ValidationError("text: expected a string", field="text")
        op = RecordAnswer(self.name, answer_id, qids, cites, self._agent_for(agent), text,
                          self._core.storage)  # fmt: skip
        self._core.submit(op)
        return self.lineage(answer_id)

    def lineage(self, answer_id: str) -> Lineage:
        """The queries behind an answer, with every memory version they returned and the
        answer's citations, each with its content as it was then (or ``erased``)."""
        return lineage(self._core.storage, self._core.state(self.name), self.name,
                       check_id(answer_id, "answer_id"))  # fmt: skip

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
        self._core.flush_log()
        return audit(
            self._core.storage, self._core.state(self.name), self.name,
            entity=None if entity is None else check_entity(entity),
            agent=None if agent is None else check_agent(agent),
            since_us=0 if since is None else to_us(since, "since"),
            until_us=(1 << 62) if until is None else to_us(until, "until"),
            limit=check_limit(limit), subject_of=self._core.subject_of,
        )  # fmt: skip

    def snapshot(self, entity: str, *, as_of: TimeLike | None = None) -> Snapshot:
        """Everything known about ``entity`` at ``as_of`` (default now): its KV facts, its
        memories and the stream events about it, as they were then."""
        entity, t = check_entity(entity), self._time(as_of)
        return snapshot(
            self._core.state(self.name), entity, t,
            lambda e, when: self.facts(e, as_of=when),
            lambda e, when: self.memories(e, as_of=when, limit=10_000),
        )  # fmt: skip
