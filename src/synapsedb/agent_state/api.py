"""The Agent Memory API's ``AgentMemoryAPI`` over a SynapseDB database, embedded or remote.

``AgentMemoryAPI(config, database)`` takes a data directory, an ``http(s)://`` URL, or an open
``Database`` / ``RemoteDatabase``; every call goes through the public namespace API, so it
means the same in process and over HTTP. docs/agent-state.md maps the original API's concepts.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import synapsedb

from ..clock import Clock, SystemClock
from ..errors import (
    MemoryAPIError,
    MemoryMaintenanceError,
    MemoryRetrievalError,
    MemoryStoreError,
    NotFoundError,
    SynapseError,
    ValidationError,
)
from ..times import TimeLike, format_us, to_us
from ..validation import check_entity
from . import similar
from .config import MemoryConfig, check_ttl
from .records import (
    MEMORY_TYPES,
    check_priority,
    check_state,
    check_step,
    memory_payload,
    to_record,
    with_accesses,
)
from .results import ResultCache
from .scan import PAGE, collect
from .space import (
    MemorySpace,
    attribute_filter,
    attribute_match,
    check_tiers,
    lookup_path,
    type_list,
)
from .tiers import TierReport, apply_moves, plan_tiers

__all__ = ["AgentMemoryAPI"]

log = logging.getLogger("synapsedb.agent_state")
DEFAULT_DATABASE = "agent-memory-data"
# retrieve_by_importance reads the memories at or above each threshold in turn until k are
# found: with priorities spread over [0, 1] the first reads about 1% of them
IMPORTANCE_LADDER = (0.99, 0.9, 0.5)


@contextmanager
def _failing(kind: type[MemoryAPIError], what: str) -> Iterator[None]:
    """Bad input and absent things keep their class; other failures of the store or the
    connection become the Agent Memory API's exception ``kind``, chained, with the cause's code."""
    try:
        yield
    except (ValidationError, NotFoundError, MemoryAPIError):
        raise
    except SynapseError as err:
        raise kind(f"{what}: {err.message}", cause=err.code, **err.details) from err


def _rename(err: ValidationError, field: str) -> ValidationError:
    """An engine error about the stored metadata, told in terms of the caller's argument."""
    where = err.field or ""
    if where.startswith("metadata.data"):
        where = field + where[len("metadata.data") :]
    elif where.startswith("metadata"):
        where = field
    message = err.message.replace(err.field or "\0", where) if err.field else err.message
    details = {k: v for k, v in err.details.items() if k != "field"}
    return ValidationError(message, field=where or field, **details)


_SHARED: dict[str, list[Any]] = {}  # data directory -> [Database, users]: one per process
_SHARED_LOCK = threading.Lock()


def _open_shared(path: str | os.PathLike[str], kwargs: dict[str, Any]) -> Any:
    """Code written for the original API builds several ``AgentMemoryAPI()`` on one store; a data directory can
    be open once per process, so API objects on the same directory share its Database."""
    key = os.path.realpath(os.fspath(path))
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is not None and not entry[0].closed:
            entry[1] += 1
            return entry[0]
        db = synapsedb.open(path, **kwargs)
        _SHARED[key] = [db, 1]
        return db


def _close_shared(db: Any) -> None:
    with _SHARED_LOCK:
        for key, entry in list(_SHARED.items()):
            if entry[0] is db:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _SHARED[key]
        db.close()


class AgentMemoryAPI:
    """The Agent Memory API: states, actions and interactions of agents by step, in
    three tiers, searched by step, clock time, attributes, similarity, meaning and importance.

    ``database`` (default ``config.database``): a data directory (opened embedded with
    ``open_kwargs``), an ``http(s)://`` URL (``synapsedb.connect``), or an open database. A
    database this object opened is closed by :meth:`close`.
    """

    def __init__(
        self,
        config: MemoryConfig | None = None,
        database: Any = None,
        *,
        clock: Clock | None = None,
        writer: str | None = None,
        **open_kwargs: Any,
    ) -> None:
        self.config = config if config is not None else MemoryConfig()
        if not isinstance(self.config, MemoryConfig):
            raise ValidationError("config: expected a MemoryConfig", field="config")
        target = database if database is not None else self.config.database
        if target is None:
            target = os.environ.get("SYNAPSEDB_AGENT_DATABASE") or DEFAULT_DATABASE
        self._owns = isinstance(target, str | os.PathLike)
        if isinstance(target, str) and target.startswith(("http://", "https://")):
            self.db = synapsedb.connect(target, **open_kwargs)
        elif isinstance(target, str | os.PathLike):
            self.db = _open_shared(target, open_kwargs)
        elif hasattr(target, "namespace"):
            self.db = target
        else:
            raise ValidationError(
                "database: expected a path, an http(s) URL or an open database", field="database"
            )
        self.clock: Clock = clock or getattr(self.db, "clock", None) or SystemClock()
        self.ns = self.db.namespace(self.config.namespace, agent=writer)
        if self.config.hot_limit is not None:
            with _failing(MemoryAPIError, "configure"):
                self.ns.configure(max_hot=self.config.hot_limit, policy="evict")
        self.cache = ResultCache(self.config.cache_ttl, self.config.cache_size)
        self._stores: dict[str, int] = {}
        self._lock = threading.Lock()
        self.maintenance_failures = 0

    def close(self) -> None:
        """Close the database if this object opened it (a data directory shared by several
        API objects of this process closes with the last of them)."""
        if self._owns:
            self._owns = False
            if isinstance(self.db, synapsedb.Database):
                _close_shared(self.db)
            else:
                self.db.close()

    def __enter__(self) -> AgentMemoryAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now_s(self) -> float:
        return self.clock.now_us() / 1_000_000

    # -- storing ---------------------------------------------------------------------------------

    def _store(
        self, agent_id: Any, kind: str, data: Any, step: Any, priority: Any, field: str
    ) -> str:
        agent = check_entity(agent_id, "agent_id")
        if hasattr(data, "as_dict") and not isinstance(data, Mapping):
            data = data.as_dict()
        state = check_state(data, field)
        payload = memory_payload(kind, state, check_step(step), check_priority(priority))
        with _failing(MemoryStoreError, f"store_agent_{kind}"):
            try:
                mid = str(self.ns.write(agent, payload).id)
            except ValidationError as err:
                raise _rename(err, field) from None
        self.cache.invalidate(agent)
        self._after_store(agent)
        return mid

    def _after_store(self, agent: str) -> None:
        every = self.config.cleanup_interval
        if not every:
            return
        with self._lock:
            n = self._stores[agent] = self._stores.get(agent, 0) + 1
        if n % every == 0:
            try:
                self._maintain(agent, TierReport())
            except SynapseError as err:  # the store itself succeeded: say so, count it
                self.maintenance_failures += 1
                log.warning("agent memory: maintenance of %r failed: %s", agent, err)

    def store_agent_state(
        self, agent_id: str, state_data: Any, step_number: int, priority: float = 1.0
    ) -> str:
        """Store an agent's state (a JSON object, or an ``AgentState``) at a step; returns the
        memory id. ``priority`` 0..1 is its importance."""
        return self._store(agent_id, "state", state_data, step_number, priority, "state_data")

    def store_agent_interaction(
        self, agent_id: str, interaction_data: Any, step_number: int, priority: float = 1.0
    ) -> str:
        """Store an interaction (a JSON object) at a step; returns the memory id."""
        return self._store(
            agent_id, "interaction", interaction_data, step_number, priority, "interaction_data"
        )

    def store_agent_action(
        self, agent_id: str, action_data: Any, step_number: int, priority: float = 1.0
    ) -> str:
        """Store an action (a JSON object, an ``ActionData`` or ``ActionResult``) at a step;
        returns the memory id."""
        return self._store(agent_id, "action", action_data, step_number, priority, "action_data")

    # -- retrieving ------------------------------------------------------------------------------

    def get_memory_space(self, agent_id: str) -> MemorySpace:
        """One agent's memory, for the Agent Memory API's ``MemorySpace`` calls."""
        return MemorySpace(self, check_entity(agent_id, "agent_id"))

    def _cached(self, agent: str, key: Any, compute: Any) -> Any:
        with _failing(MemoryRetrievalError, str(key[0])):
            return with_accesses(self.ns, self.cache.get_or_compute(agent, key, compute))

    def _all(
        self, agent: str, flt: Mapping[str, Any] | None, types: list[str] | None, cold: bool = False
    ) -> list[Any]:
        return collect(self.ns, agent, flt, types=types, cold=cold)

    def retrieve_by_time_range(
        self,
        agent_id: str,
        start_step: int | None = None,
        end_step: int | None = None,
        memory_type: str | None = None,
        *,
        start_time: TimeLike | None = None,
        end_time: TimeLike | None = None,
    ) -> list[dict[str, Any]]:
        """Memories from ``start_step`` to ``end_step`` (both included; either open), and/or
        stored from ``start_time`` (included) to ``end_time`` (excluded) by the clock; in step
        order, then time."""
        agent = check_entity(agent_id, "agent_id")
        types = type_list(memory_type)
        rng: dict[str, Any] = {}
        if start_step is not None:
            rng["$gte"] = check_step(start_step, "start_step")
        if end_step is not None:
            rng["$lte"] = check_step(end_step, "end_step")
        flt: dict[str, Any] = {"step": rng} if rng else {}
        if start_time is not None:
            flt["ts"] = {"$gte": format_us(to_us(start_time, "start_time"))}
        if end_time is not None:
            flt.setdefault("ts", {})["$lt"] = format_us(to_us(end_time, "end_time"))

        def run() -> list[dict[str, Any]]:
            hits = self._all(agent, flt or None, types)
            hits.sort(key=lambda h: (h.metadata["step"], h.ts, h.id))
            return [to_record(h) for h in hits]

        key = (
            "retrieve_by_time_range",
            start_step,
            end_step,
            memory_type,
            str(start_time),
            str(end_time),
        )
        return self._cached(agent, key, run)  # type: ignore[no-any-return]

    def retrieve_by_attributes(
        self, agent_id: str, attributes: Mapping[str, Any], memory_type: str | None = None
    ) -> list[dict[str, Any]]:
        """Memories whose data holds every attribute (``{"action_type": "trade"}``; a dotted
        name or a nested object reaches nested fields; a list value must equal the stored
        list), newest step first."""
        agent = check_entity(agent_id, "agent_id")
        flt = attribute_filter(attributes)
        types = type_list(memory_type)

        def run() -> list[dict[str, Any]]:
            hits = [
                h
                for h in self._all(agent, flt, types)
                if attribute_match(h.metadata.get("data"), attributes)
            ]
            hits.sort(key=lambda h: (-h.metadata["step"], h.id))
            return [to_record(h) for h in hits]

        key = ("retrieve_by_attributes", repr(sorted(attributes.items())), memory_type)
        return self._cached(agent, key, run)  # type: ignore[no-any-return]

    def retrieve_by_importance(
        self,
        agent_id: str,
        k: int = 10,
        memory_type: str | None = None,
        *,
        min_importance: float = 0.0,
    ) -> list[dict[str, Any]]:
        """The ``k`` most important memories (their stored priority; newer steps first among
        equals), at least ``min_importance``."""
        agent = check_entity(agent_id, "agent_id")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"k: expected a positive integer, got {k!r}", field="k")
        floor = check_priority(min_importance)
        types = type_list(memory_type)

        def run() -> list[dict[str, Any]]:
            # the k best all lie at or above any threshold that k memories reach: try high
            # thresholds first (few memories to read), down to the caller's floor
            for threshold in [t for t in IMPORTANCE_LADDER if t > floor] + [floor]:
                hits = self._all(agent, {"importance": {"$gte": threshold}}, types)
                if len(hits) >= k:
                    break
            hits.sort(key=lambda h: (-h.metadata["importance"], -h.metadata["step"], h.id))
            return [to_record(h) for h in hits[:k]]

        key = ("retrieve_by_importance", k, memory_type, floor)
        return self._cached(agent, key, run)  # type: ignore[no-any-return]

    def retrieve_by_location(
        self,
        agent_id: str,
        point: Sequence[float] | None = None,
        radius: float | None = None,
        memory_type: str | None = None,
        *,
        box: Sequence[Sequence[float]] | None = None,
        field: str = "position",
    ) -> list[dict[str, Any]]:
        """Memories whose data ``field`` (``[x, y]`` or ``[x, y, z]``) lies within ``radius``
        of ``point`` (nearest first, each with its ``distance``), or inside ``box`` (two
        opposite corners; newest step first): the filter language's ``$near`` / ``$within``,
        inside the search."""
        agent = check_entity(agent_id, "agent_id")
        if not isinstance(field, str) or not field or field.startswith("$"):
            raise ValidationError("field: expected a field name such as 'position'", field="field")
        if (point is None) == (box is None):
            raise ValidationError("point: pass point and radius, or box=", field="point")
        path = f"data.{field}"
        flt: dict[str, Any]
        if box is not None:
            flt = {path: {"$within": {"box": box}}}
        else:
            flt = {path: {"$near": {"point": point, "radius": radius}}}
        types = type_list(memory_type)

        def run() -> list[dict[str, Any]]:
            hits = self._all(agent, flt, types)
            out = []
            for h in hits:
                rec = to_record(h)
                if point is not None:
                    _, pos = lookup_path(h.metadata.get("data"), field)
                    rec["distance"] = (
                        sum((a - b) ** 2 for a, b in zip(pos, point, strict=True)) ** 0.5
                    )
                out.append(rec)
            if point is not None:
                out.sort(key=lambda r: (r["distance"], -r["step_number"]))
            else:
                out.sort(key=lambda r: (-r["step_number"], r["memory_id"]))
            return out

        key = ("retrieve_by_location", repr(point), radius, repr(box), field, memory_type)
        return self._cached(agent, key, run)  # type: ignore[no-any-return]

    def retrieve_similar_states(
        self,
        agent_id: str,
        query_state: Mapping[str, Any],
        k: int = 5,
        memory_type: str | None = None,
    ) -> list[dict[str, Any]]:
        """The ``k`` memories whose data is nearest to ``query_state`` by value (numbers
        scaled, categories encoded, nested fields flattened, text embedded:
        ``synapsedb.agent_state.similar``), nearest first, each with its ``distance``."""
        agent = check_entity(agent_id, "agent_id")
        query = check_state(query_state, "query_state")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"k: expected a positive integer, got {k!r}", field="k")
        types = type_list(memory_type)

        def run() -> list[dict[str, Any]]:
            hits = {h.id: h for h in self._all(agent, None, types)}
            cands = [(mid, h.metadata.get("data") or {}) for mid, h in hits.items()]
            ranked = similar.rank_similar(query, cands, k) if cands else []
            out = []
            for mid, dist in ranked:
                rec = to_record(hits[mid])
                rec["distance"] = dist
                out.append(rec)
            return out

        key = ("retrieve_similar_states", repr(query), k, memory_type)
        return self._cached(agent, key, run)  # type: ignore[no-any-return]

    def retrieve_by_id(self, agent_id: str, memory_id: str) -> dict[str, Any]:
        """One memory of the agent as it is now (NotFoundError if it is not the agent's)."""
        agent = check_entity(agent_id, "agent_id")
        with _failing(MemoryRetrievalError, "retrieve_by_id"):
            m = self.ns.get(memory_id)
        if m.entity != agent:
            raise NotFoundError(f"memory {memory_id!r} is not agent {agent!r}'s", id=memory_id)
        with _failing(MemoryRetrievalError, "retrieve_by_id"):
            return with_accesses(self.ns, [to_record(m)])[0]

    def expand_memory(
        self, agent_id: str, memory_id: str, *, restore: bool = False
    ) -> dict[str, Any]:
        """The full detail of a compressed (IM or LTM) memory, from its STM version in the
        memory's history. ``restore=True`` also brings it back to STM (a new version)."""
        agent = check_entity(agent_id, "agent_id")
        if not isinstance(restore, bool):
            raise ValidationError("restore: expected true or false", field="restore")
        with _failing(MemoryRetrievalError, "expand_memory"):
            versions = self.ns.history(memory_id)
        live = [v for v in versions if not v.deleted and not v.erased]
        if not live or live[-1].entity != agent:
            raise NotFoundError(f"memory {memory_id!r} is not agent {agent!r}'s", id=memory_id)
        full = [v for v in live if v.metadata.get("tier") == "stm"]
        if not full:
            raise NotFoundError(
                f"memory {memory_id!r} has no full-detail version (erased?)", id=memory_id
            )
        rec = to_record(full[-1])
        rec["metadata"]["expanded_from"] = live[-1].metadata.get("tier")
        if restore and live[-1].metadata.get("tier") != "stm":
            cur = live[-1]
            meta = dict(full[-1].metadata)
            with _failing(MemoryStoreError, "expand_memory"):
                self.ns.write(
                    agent,
                    {
                        "id": cur.id,
                        "type": cur.type,
                        "ts": cur.ts.isoformat(),
                        "content": full[-1].content,
                        "metadata": meta,
                        "salience": meta["importance"],
                        "pinned": True,
                    },
                )
            self.cache.invalidate(agent)
        return rec

    # -- maintenance and statistics ---------------------------------------------------------------

    def _maintain(self, agent: str, report: TierReport) -> None:
        hits = self._all(agent, {"tier": {"$in": ["stm", "im"]}}, None)
        moves = plan_tiers(hits, self.config, self._now_s())
        apply_moves(self.ns, moves, report)
        report.agents += 1
        self.cache.invalidate(agent)

    def force_memory_maintenance(self, agent_id: str | None = None) -> dict[str, Any]:
        """Run tier maintenance now for one agent (or every agent in the namespace), then the
        engine's (hot/cold moves, TTL erasure). Returns what moved: ``{"agents", "to_im",
        "to_ltm"}``."""
        report = TierReport()
        with _failing(MemoryMaintenanceError, "force_memory_maintenance"):
            agents = (
                [check_entity(agent_id, "agent_id")] if agent_id is not None else self.ns.entities()
            )
            for agent in agents:
                self._maintain(agent, report)
            self.ns.maintain()
        return report.as_dict()

    def get_memory_statistics(self, agent_id: str) -> dict[str, Any]:
        """Counts for one agent: ``total_memories``, ``memory_type_distribution``,
        ``tier_distribution`` (stm/im/ltm), ``engine_tiers`` (hot/cold), ``step_range``,
        ``mean_importance``, and the result cache's ``cache`` hits and misses."""
        agent = check_entity(agent_id, "agent_id")
        with _failing(MemoryRetrievalError, "get_memory_statistics"):
            hits = self._all(agent, None, None)
        types = {t: 0 for t in MEMORY_TYPES}
        tiers = {"stm": 0, "im": 0, "ltm": 0}
        engine = {"hot": 0, "cold": 0}
        for h in hits:
            types[h.type] = types.get(h.type, 0) + 1
            tier = h.metadata.get("tier")
            if tier in tiers:
                tiers[tier] += 1
            engine[h.tier] = engine.get(h.tier, 0) + 1
        steps = [h.metadata["step"] for h in hits if "step" in h.metadata]
        imp = [h.metadata["importance"] for h in hits if "importance" in h.metadata]
        return {
            "agent_id": agent,
            "total_memories": len(hits),
            "memory_type_distribution": types,
            "tier_distribution": tiers,
            "engine_tiers": engine,
            "step_range": [min(steps), max(steps)] if steps else None,
            "mean_importance": sum(imp) / len(imp) if imp else None,
            "cache": {
                "hits": self.cache.hits,
                "misses": self.cache.misses,
                "entries": len(self.cache),
            },
        }

    def clear_cache(self) -> None:
        """Drop every cached retrieval result."""
        self.cache.invalidate()

    def set_cache_ttl(self, ttl: float) -> None:
        """How long retrieval results are cached, in seconds (0: no caching)."""
        self.cache.set_ttl(check_ttl(ttl))

    def _recent(self, agent: str, count: int, types: list[str] | None) -> list[dict[str, Any]]:
        """The ``count`` highest steps. The newest ``count`` stored bound it: every memory of
        the answer has a step >= the lowest step among them (else ``count`` memories would be
        above it), so one filtered scan from that step finds the answer exactly."""

        def run() -> list[dict[str, Any]]:
            if count > PAGE:
                hits = self._all(agent, None, types)
            else:
                first = list(self.ns.query(None, entity=agent, types=types, k=count, dedup=False))
                if len(first) < count:
                    hits = first
                else:
                    low = min(h.metadata["step"] for h in first)
                    hits = self._all(agent, {"step": {"$gte": low}}, types)
            hits.sort(key=lambda h: (h.metadata["step"], h.ts, h.id), reverse=True)
            return [to_record(h) for h in hits[:count]]

        return self._cached(agent, ("retrieve_recent_states", count, str(types)), run)  # type: ignore[no-any-return]

    # -- searches used by MemorySpace -------------------------------------------------------------

    def _search(
        self,
        agent: str,
        *,
        text: str | None = None,
        embedding: Sequence[float] | None = None,
        k: int,
        memory_tiers: Sequence[str] | None = None,
        types: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        wanted = check_tiers(memory_tiers)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
            raise ValidationError(
                f"k: expected an integer from 1 to 1000, got {k!r}", field="k", limit=1000
            )
        flt = None if len(wanted) == 3 else {"tier": {"$in": list(wanted)}}
        engine = ("hot", "cold") if "ltm" in wanted else ("hot",)
        mode: Literal["vector", "hybrid"] = "vector" if embedding is not None else "hybrid"
        with _failing(MemoryRetrievalError, "search"):
            try:
                res = self.ns.query(
                    text,
                    embedding=embedding,
                    entity=agent,
                    filter=flt,
                    k=k,
                    mode=mode,
                    types=types,
                    tiers=engine,
                    dedup=False,
                )
            except ValidationError as err:
                if err.field == "embedding":
                    raise ValidationError(
                        err.message.replace("embedding", "query_embedding", 1),
                        field="query_embedding",
                        limit=err.details.get("limit"),
                    ) from None
                raise
            return with_accesses(self.ns, [to_record(h, h.score) for h in res.hits])
