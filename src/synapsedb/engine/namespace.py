"""The namespace handle: every read and write of memories, KV facts and streams.

Everything lives inside exactly one namespace; nothing crosses namespaces. Reads take
``as_of=`` (ISO-8601, epoch seconds or datetime) and then return exactly what was visible at
that system time: later versions hidden, earlier versions as they were, things deleted later
still there, things created later absent.

One rule keeps ``get``, ``delete`` and ``history`` short: one positional argument is a memory
id; an entity and a key address a KV fact.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from ..errors import NotFoundError, ValidationError
from ..ids import parse_event_id
from ..times import TimeLike, to_datetime, to_us
from ..types import (
    AuditEntry,
    Event,
    Fact,
    Forgotten,
    Lineage,
    MaintenanceReport,
    Memory,
    NamespaceConfig,
    QueryResult,
    Snapshot,
    Stats,
)
from ..validation import (
    check_agent,
    check_entity,
    check_id,
    check_id_list,
    check_key,
    check_ttl,
    check_types,
    check_version,
    dump_json,
    memory_input,
    memory_patch,
)
from .lifecycle import ConfigureNamespace, MoveTiers, check_config, plan_moves, touch
from .lineage import RecordAnswer, audit, lineage, snapshot
from .ops import (
    AppendEvent,
    DeleteFact,
    DeleteMemory,
    ForgetEntity,
    PurgeExpired,
    SetFact,
    UpdateMemory,
    WriteMemories,
)
from .records import FactRec, MemRec
from .retrieval import run_query
from .state import NamespaceState, version_at
from .transfer import ImportNamespace, export_records, import_batch

if TYPE_CHECKING:
    from .database import Database

__all__ = ["Namespace"]

MAX_LIMIT = 10_000
MAX_K = 1000
MODES = ("hybrid", "vector", "keyword")
_TRIM = ".,;:!?\"'()[]{}"
EVENT_FIELDS = frozenset(
    {"content", "data", "ts", "agent", "salience", "metadata", "embedding", "pinned", "ttl"}
)
_MAX_ID = (1 << 62, 1 << 62)


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ValidationError(
            f"limit: expected an integer from 1 to {MAX_LIMIT}, got {value!r}",
            field="limit",
            limit=MAX_LIMIT,
        )
    return value


class Namespace:
    """Handle on one namespace of a :class:`~synapsedb.engine.database.Database`."""

    __slots__ = ("_agent", "_db", "name")

    def __init__(self, db: Database, name: str, agent: str | None) -> None:
        self._db = db
        self.name = name
        self._agent = agent

    def __repr__(self) -> str:
        return f"<synapsedb.Namespace {self.name!r}>"

    # -- helpers ---------------------------------------------------------------------------------

    def _agent_for(self, agent: str | None) -> str | None:
        return self._agent if agent is None else check_agent(agent)

    def _time(self, as_of: TimeLike | None) -> int:
        return self._db._now_us() if as_of is None else to_us(as_of, "as_of")

    def _chain(self, state: NamespaceState | None, mid: str) -> list[MemRec]:
        """A memory's versions: from memory when hot, from storage when cold."""
        if state is None:
            return []
        chain = state.mems.get(mid)
        if chain is not None:
            return chain
        if mid in state.cold:
            return [MemRec.from_row(r) for r in self._db._storage.read_memory_chain(self.name, mid)]
        return []

    def _touch(self, state: NamespaceState | None, mids: Iterable[str]) -> None:
        touch(state, mids, self._db._now_us())

    def _before_write(self, n: int, ids: Iterable[str | None] = ()) -> None:
        """Rate limit, then bring cold memories that are about to change back to hot."""
        state = self._db._state(self.name)
        if state is None:
            return
        self._db.rates.take(self.name, state.config.max_writes_per_s, n)
        cold = [m for m in ids if m is not None and m in state.cold]
        if cold:
            self._db._submit(MoveTiers(self.name, [(m, "hot", None, "written") for m in cold]))

    # -- memories ---------------------------------------------------------------------------------

    def write(
        self, entity: str, memory: str | Mapping[str, Any], *, agent: str | None = None
    ) -> Memory:
        """Store a memory about ``entity``: a content string or a dict of fields.

        Fields: ``content`` (required), ``type`` (default ``fact``), ``metadata``, ``embedding``,
        ``salience`` (0..1, default 0.5), ``ts`` (event time, default now), ``agent``,
        ``pinned``, ``ttl`` (seconds), ``id`` (writing an existing id adds a version).
        """
        item = memory_input(entity, memory, self._db.settings, agent=self._agent_for(agent))
        self._before_write(1, (item.id,))
        self._db.embedding.fill(self._db._state(self.name), [item])
        (rec,) = self._db._submit(WriteMemories(self.name, [item], [""]))
        return rec.to_public()

    def write_many(
        self,
        items: Sequence[Mapping[str, Any] | tuple[str, str | Mapping[str, Any]]],
        *,
        agent: str | None = None,
    ) -> list[Memory]:
        """Store many memories in one transaction: all or none.

        Each item is ``{"entity": ..., <fields as for write>}`` or ``(entity, memory)``.
        Python's cyclic garbage collector is paused while the batch is built and applied (its
        previous state is restored): a batch allocates several objects per memory, and letting
        the collector rescan every stored record a dozen times per batch cost ~10% of
        throughput.
        """
        with _gc_paused():
            return self._write_many(items, agent)

    def _write_many(
        self,
        items: Sequence[Mapping[str, Any] | tuple[str, str | Mapping[str, Any]]],
        agent: str | None,
    ) -> list[Memory]:
        settings = self._db.settings
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
            raise ValidationError("items: expected a list of memories", field="items")
        if not items:
            return []
        if len(items) > settings.max_batch_items:
            raise ValidationError(
                f"items: {len(items)} memories, over the limit of {settings.max_batch_items} "
                "per call",
                field="items",
                limit=settings.max_batch_items,
            )
        default_agent = self._agent_for(agent)
        inputs, prefixes = [], []
        for i, raw in enumerate(items):
            prefix = f"items[{i}]."
            if isinstance(raw, tuple) and len(raw) == 2:
                entity, payload = raw
            elif isinstance(raw, Mapping):
                if "entity" not in raw:
                    raise ValidationError(f"{prefix}entity: required", field=f"{prefix}entity")
                payload = {k: v for k, v in raw.items() if k != "entity"}
                entity = raw["entity"]
            else:
                raise ValidationError(
                    f"items[{i}]: expected an object with 'entity' or an (entity, memory) pair",
                    field=f"items[{i}]",
                )
            inputs.append(
                memory_input(entity, payload, settings, agent=default_agent, prefix=prefix)
            )
            prefixes.append(prefix)
        self._before_write(len(inputs), (it.id for it in inputs))
        self._db.embedding.fill(self._db._state(self.name), inputs)
        recs = self._db._submit(WriteMemories(self.name, inputs, prefixes))
        return [r.to_public() for r in recs]

    def update(
        self,
        id: str,
        changes: Mapping[str, Any],
        *,
        if_version: int | None = None,
        agent: str | None = None,
    ) -> Memory:
        """Add a new version of memory ``id`` with ``changes`` applied (other fields kept;
        ``metadata`` is replaced whole). ``if_version`` makes it a compare-and-set."""
        patch = memory_patch(changes, self._db.settings)
        self._before_write(1, (_id(id),))
        if "content" in patch and "vec" not in patch:  # keep the vector in step with the text
            vec = self._db.embedding.embed_text(self._db._state(self.name), patch["content"])
            if vec is not None:
                patch["vec"], patch["vec_source"] = vec, self._db.embedding.model.name
        op = UpdateMemory(
            self.name, _id(id), patch, check_version(if_version, "if_version"),
            self._agent_for(agent),
        )  # fmt: skip
        return self._db._submit(op).to_public()

    @overload
    def get(self, id: str, /, *, as_of: TimeLike | None = None) -> Memory: ...
    @overload
    def get(self, entity: str, key: str, /, *, as_of: TimeLike | None = None) -> Fact: ...
    def get(
        self, target: str, key: str | None = None, /, *, as_of: TimeLike | None = None
    ) -> Memory | Fact:
        """``get(id)``: a memory. ``get(entity, key)``: a KV fact. NotFoundError if absent."""
        t = self._time(as_of)
        state = self._db._state(self.name)
        if key is not None:
            entity, key = check_entity(target), check_key(key)
            frec = state.fact_at(entity, key, t) if state is not None else None
            if frec is None:
                raise NotFoundError(
                    f"fact {entity!r}/{key!r} not found in namespace {self.name!r}",
                    entity=entity,
                    key=key,
                )
            return frec.to_public()
        mid = _id(target)
        rec = state.memory_at(mid, t) if state is not None else None
        if rec is None and state is not None and mid in state.cold:
            found = version_at(self._chain(state, mid), t)
            rec = found if found is not None and found.visible_at(t) else None
        if rec is not None:
            self._touch(state, (mid,))
        if rec is None:
            raise NotFoundError(
                f"memory {mid!r} not found in namespace {self.name!r}", id=mid, namespace=self.name
            )
        return rec.to_public()

    def memories(
        self,
        entity: str | None = None,
        *,
        types: Iterable[str] | None = None,
        as_of: TimeLike | None = None,
        limit: int = 100,
    ) -> list[Memory]:
        """Memories visible at ``as_of`` (default now), newest event time first."""
        t = self._time(as_of)
        limit = _limit(limit)
        if entity is not None:
            entity = check_entity(entity)
        wanted = check_types(types)
        state = self._db._state(self.name)
        if state is None:
            return []
        recs: Iterable[MemRec] = state.memories_at(t, entity)
        cold = list(state.cold if entity is None else state.cold_by_entity.get(entity, ()))
        if cold:
            recs = list(recs)
            for chain in _chains(self._db._storage.read_memory_chains(self.name, cold)):
                rec = version_at(chain, t)
                if rec is not None and rec.visible_at(t):
                    recs.append(rec)
        if wanted is not None:
            recs = (r for r in recs if r.type in wanted)
        top = heapq.nlargest(limit, recs, key=lambda r: (r.ts_us, r.id))
        return [r.to_public() for r in top]

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
        Returns the tombstone version.
        """
        expected = check_version(if_version, "if_version")
        who = self._agent_for(agent)
        if key is not None:
            op = DeleteFact(self.name, check_entity(target), check_key(key), expected, who)
            return self._db._submit(op).to_public()
        self._before_write(1, (_id(target),))
        return self._db._submit(DeleteMemory(self.name, _id(target), expected, who)).to_public()

    @overload
    def history(self, id: str, /, *, as_of: TimeLike | None = None) -> list[Memory]: ...
    @overload
    def history(self, entity: str, key: str, /, *, as_of: TimeLike | None = None) -> list[Fact]: ...
    def history(
        self, target: str, key: str | None = None, /, *, as_of: TimeLike | None = None
    ) -> list[Memory] | list[Fact]:
        """Every version (tombstones included) of a memory or KV fact, oldest first, each with
        the agent that wrote it and when (``recorded_at``). ``as_of`` cuts the list at T."""
        t = self._time(as_of)
        state = self._db._state(self.name)
        if key is not None:
            entity, key = check_entity(target), check_key(key)
            fchain: list[FactRec] = state.facts.get((entity, key), []) if state else []
            fout = [r.to_public() for r in fchain if r.sys_us <= t]
            if not fout:
                raise NotFoundError(
                    f"fact {entity!r}/{key!r} not found in namespace {self.name!r}",
                    entity=entity,
                    key=key,
                )
            return fout
        mid = _id(target)
        chain = self._chain(state, mid)
        out = [r.to_public() for r in chain if r.sys_us <= t]
        if not out:
            raise NotFoundError(
                f"memory {mid!r} not found in namespace {self.name!r}", id=mid, namespace=self.name
            )
        return out

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
        """
        return run_query(
            self._db, self.name, self._time(as_of), text=text, embedding=embedding,
            entity=entity, filter=filter, k=k, mode=mode, min_score=min_score, types=types,
            since=since, until=until, dedup=dedup, explain=explain,
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
            tomb = self._db._submit(DeleteMemory(self.name, _id(id), None, who))
            return Forgotten(id, False, 1, 0, 0, 0, to_datetime(tomb.sys_us))
        entity = check_entity(entity)
        state = self._db._state(self.name)
        cold = sorted(state.cold_by_entity.get(entity, ())) if state is not None else []
        if cold and not purge:  # tombstones need the memories hot (a purge reaches disk anyway)
            self._before_write(1, cold)
        cold_versions = (
            len(self._db._storage.read_memory_chains(self.name, cold)) if cold and purge else 0
        )
        op = ForgetEntity(self.name, entity, purge, who, self._db.subject_of(entity),
                          self._db.subject_of)  # fmt: skip
        counts = self._db._submit(op)
        pending = False
        if purge:
            counts["memories"] += len(cold)
            counts["versions"] += cold_versions
            self._db.embedding.forget_texts(self.name, entity)
            pending = self._db.erasure_pending
        return Forgotten(entity, purge, counts["memories"], counts["versions"], counts["facts"],
                         counts["events"], to_datetime(self._db._now_us()),
                         pending)  # fmt: skip

    def maintain(self, *, dry_run: bool = False) -> MaintenanceReport:
        """Run maintenance now: demote the lowest-salience unpinned memories over the hot
        quota (policy ``evict``), promote cold memories accessed ``promote_after`` times, erase
        memories and KV facts whose TTL ran out more than ``ttl_grace_s`` ago, and persist
        access statistics. ``dry_run=True`` reports every move with its score and reason and
        changes nothing. The background thread does this every ``maintenance_interval_s``."""
        if not isinstance(dry_run, bool):
            raise ValidationError("dry_run: expected true or false", field="dry_run")
        state = self._db._state(self.name)
        moves = plan_moves(state, state.config, self._db._now_us()) if state is not None else []
        if not dry_run and state is not None and (moves or state.access_dirty):
            state.access_dirty = False  # (a concurrent access re-sets it: persisted next time)
            access = [(self.name, m, c, t) for m, (c, t) in list(state.access.items())]
            self._db._submit(MoveTiers(self.name, moves, access))
        mems: list[str] = []
        facts: list[tuple[str, str]] = []
        has_ttl = state is not None and (
            state.catalog.n_ttl > 0
            or bool(state.cold_expiry)
            or any(c[-1].expires_us for c in list(state.facts.values()))
        )
        if has_ttl:  # nothing can expire in a namespace without TTLs: no commit for it
            grace_us = self._db.settings.ttl_grace_s * 1_000_000
            mems, facts = self._db._submit(PurgeExpired(self.name, grace_us, dry_run))
        report = MaintenanceReport(
            self.name, dry_run, to_datetime(self._db._now_us()), sorted(mems), sorted(facts),
            demoted=[(m, s, r) for m, t, s, r in moves if t == "cold"],
            promoted=[(m, r) for m, t, _s, r in moves if t == "hot"],
        )  # fmt: skip
        if not dry_run:
            self._db.observers.emit(self._db.observers.maintain, report)
        return report

    @property
    def config(self) -> NamespaceConfig:
        """The namespace's lifecycle settings (defaults until ``configure`` is called)."""
        state = self._db._state(self.name)
        return state.config if state is not None else NamespaceConfig()

    def configure(self, **changes: Any) -> NamespaceConfig:
        """Change lifecycle settings (see ``NamespaceConfig``): quotas ``max_hot``,
        ``max_bytes``, ``max_writes_per_s``, ``policy`` (``evict``/``reject``), salience
        weights ``recency``, ``frequency``, ``importance``, ``impact``, ``half_life_days``,
        ``promote_after``, ``cold_fallback``. Durable; returns the new settings."""
        cfg = check_config(self.config, changes)
        return self._db._submit(ConfigureNamespace(self.name, cfg))

    def export(self) -> Iterator[dict[str, Any]]:
        """Every stored row of the namespace as JSON-ready records, for ``import_records`` on
        another database (or server): nothing is lost, history and lineage included."""
        self._db._flush_log()
        return export_records(self._db._storage, self.name)

    def import_records(self, records: Iterable[dict[str, Any]]) -> int:
        """Write an ``export()`` stream into this namespace, which must be empty, in one
        transaction (all or nothing). Returns the number of memory versions imported."""
        data = import_batch(self.name, records, self._db.settings, self._db._now_us())
        return int(self._db._submit(ImportNamespace(self.name, data)))

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
                          self._db._storage)  # fmt: skip
        self._db._submit(op)
        return self.lineage(answer_id)

    def lineage(self, answer_id: str) -> Lineage:
        """The queries behind an answer, with every memory version they returned and the
        answer's citations, each with its content as it was then (or ``erased``)."""
        return lineage(self._db._storage, self._db._state(self.name), self.name,
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
        self._db._flush_log()
        return audit(
            self._db._storage, self._db._state(self.name), self.name,
            entity=None if entity is None else check_entity(entity),
            agent=None if agent is None else check_agent(agent),
            since_us=0 if since is None else to_us(since, "since"),
            until_us=(1 << 62) if until is None else to_us(until, "until"),
            limit=_limit(limit), subject_of=self._db.subject_of,
        )  # fmt: skip

    def snapshot(self, entity: str, *, as_of: TimeLike | None = None) -> Snapshot:
        """Everything known about ``entity`` at ``as_of`` (default now): its KV facts, its
        memories and the stream events about it, as they were then."""
        return snapshot(self, check_entity(entity), self._time(as_of))

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
        VersionConflictError. ``ttl`` in seconds.
        """
        entity, key = check_entity(entity), check_key(key)
        value_json = dump_json(value, "value", self._db.settings.max_value_bytes)
        self._before_write(1)
        op = SetFact(
            self.name, entity, key, value_json, check_version(if_version, "if_version"),
            check_ttl(ttl),
            self._agent_for(agent),
        )  # fmt: skip
        return self._db._submit(op).to_public()

    def facts(self, entity: str, *, as_of: TimeLike | None = None) -> list[Fact]:
        """Every KV fact about ``entity`` visible at ``as_of``, sorted by key."""
        t = self._time(as_of)
        entity = check_entity(entity)
        state = self._db._state(self.name)
        if state is None:
            return []
        return [r.to_public() for r in sorted(state.facts_at(entity, t), key=lambda r: r.key)]

    # -- streams --------------------------------------------------------------------------------

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
        ``ttl`` (the last five apply to the memory).
        """
        settings = self._db.settings
        entity = check_entity(entity)
        stream = entity if stream is None else check_entity(stream, "stream")
        if not isinstance(searchable, bool):
            raise ValidationError("searchable: expected true or false", field="searchable")
        data_json = None
        if isinstance(event, Mapping):
            for k in event:
                if k not in EVENT_FIELDS:
                    raise ValidationError(
                        f"{k}: unknown event field; allowed: {', '.join(sorted(EVENT_FIELDS))}",
                        field=str(k),
                    )
            data = event.get("data")
            if data is not None:
                if not isinstance(data, Mapping):
                    raise ValidationError("data: expected an object", field="data")
                data_json = dump_json(data, "data", settings.max_value_bytes)
            event = {k: v for k, v in event.items() if k != "data"}
        item = memory_input(entity, event, settings, agent=self._agent_for(agent))
        self._before_write(1)
        if searchable:
            self._db.embedding.fill(self._db._state(self.name), [item])
        erec, _ = self._db._submit(AppendEvent(self.name, stream, item, data_json, searchable))
        return erec.to_public()

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
        t = self._time(as_of)
        stream = check_entity(stream, "stream")
        limit = _limit(limit)
        if order not in ("asc", "desc"):
            raise ValidationError(f"order: expected 'asc' or 'desc', got {order!r}", field="order")
        lo = (0, 0) if start in (None, "-") else parse_event_id(start, "start")
        hi = _MAX_ID if end in (None, "+") else parse_event_id(end, "end", default_seq=1 << 62)
        if after is not None:
            a_ms, a_seq = parse_event_id(after, "after", default_seq=1 << 62)
            lo = max(lo, (a_ms, a_seq + 1))
        lo_ts = None if since is None else to_us(since, "since")
        hi_ts = None if until is None else to_us(until, "until")
        state = self._db._state(self.name)
        if state is None:
            return []
        recs = state.events_in(stream, lo, hi, t)
        if lo_ts is not None or hi_ts is not None:
            recs = [
                e
                for e in recs
                if (lo_ts is None or e.ts_us >= lo_ts) and (hi_ts is None or e.ts_us < hi_ts)
            ]
        if order == "desc":
            recs.reverse()
        return [e.to_public() for e in recs[:limit]]

    # -- overview -------------------------------------------------------------------------------

    def entities(self, *, as_of: TimeLike | None = None) -> list[str]:
        """Entities with at least one memory or KV fact visible at ``as_of``, sorted."""
        t = self._time(as_of)
        state = self._db._state(self.name)
        if state is None:
            return []
        names = set(state.entity_mems) | set(state.entity_facts)
        return sorted(e for e in names if state.entity_exists_at(e, t))

    def streams(self, *, as_of: TimeLike | None = None) -> list[str]:
        """Streams with at least one event committed at or before ``as_of``, sorted (a stream
        whose every event was erased is not listed)."""
        t = self._time(as_of)
        state = self._db._state(self.name)
        if state is None:
            return []
        return sorted(s for s, evs in list(state.streams.items())
                      if evs and evs[0].sys_us <= t and not all(e.erased for e in evs))  # fmt: skip

    def stats(self) -> Stats:
        """Counts by type, versions, bytes (content, metadata, vectors, values, events)."""
        state = self._db._state(self.name)
        if state is None:
            return Stats(self.name, 0, {}, 0, 0, 0, 0, 0, 0, 0, None)
        t = self._db._now_us()
        by_type: dict[str, int] = {}
        versions = nbytes = live = 0
        entities: set[str] = set()
        for chain in list(state.mems.values()):
            versions += len(chain)
            nbytes += sum(r.nbytes for r in chain)
            rec = version_at(chain, t)
            if rec is not None and rec.visible_at(t):
                live += 1
                by_type[rec.type] = by_type.get(rec.type, 0) + 1
                entities.add(rec.entity)
        facts = fact_versions = 0
        for (entity, _key), fchain in list(state.facts.items()):
            fact_versions += len(fchain)
            nbytes += sum(len(r.value_json) for r in fchain)
            frec = version_at(fchain, t)
            if frec is not None and frec.visible_at(t):
                facts += 1
                entities.add(entity)
        events = streams = 0
        for evs in list(state.streams.values()):
            events += len(evs)
            nbytes += sum(len(e.content) + len(e.data_json or "") for e in evs)
            streams += not all(e.erased for e in evs)  # as streams() lists them
        return Stats(
            namespace=self.name,
            memories=live + len(state.cold),
            memories_by_type=dict(sorted(by_type.items())),
            memory_versions=versions,
            entities=len(entities),
            facts=facts,
            fact_versions=fact_versions,
            streams=streams,
            events=events,
            bytes=nbytes,
            dim=state.dim,
            embedder=state.embedder if state.dim is not None else None,
            cold_memories=len(state.cold),
        )


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _chains(rows: list[tuple[Any, ...]]) -> list[list[MemRec]]:
    """Group storage rows (any order of ids, versions ascending per id) into version chains."""
    by_id: dict[str, list[MemRec]] = {}
    for row in rows:
        rec = MemRec.from_row(row)
        by_id.setdefault(rec.id, []).append(rec)
    for chain in by_id.values():
        chain.sort(key=lambda r: r.version)
    return list(by_id.values())


def _id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"id: expected a memory id string, got {value!r}", field="id")
    return value
