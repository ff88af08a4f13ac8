"""Reads of a namespace, at now or as of any moment (the ``_Reads`` mixin).

Every read takes ``as_of=`` and returns what was visible at that system time. Memories come
from the in-memory state when hot and from storage when cold; KV facts and stream events are
always in memory. ``entities``, ``streams`` and ``stats`` give the overview.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, overload

from ..errors import NotFoundError, ValidationError
from ..storage.base import MemoryRow
from ..times import TimeLike, to_datetime, to_us
from ..types import Event, Fact, Memory, MemoryAccess, Snapshot, Stats
from ..validation import check_entity, check_id_list, check_key, check_types
from ..validtime import valid_at_filter, valid_at_matches, valid_at_seconds
from .handle import NamespaceHandle
from .inputs import check_limit, check_memory_id, event_id_range
from .lifecycle import touch
from .lineage import snapshot
from .records import FactRec, MemRec
from .state import NamespaceState, version_at

MAX_ACCESS_IDS = 1000  # memories per accesses() call

__all__: list[str] = []


class _Reads(NamespaceHandle):
    """``get``, ``memories``, ``history``, ``facts``, ``snapshot``, ``events``, ``entities``,
    ``streams`` and ``stats``."""

    __slots__ = ()

    def _chain(self, state: NamespaceState | None, mid: str) -> list[MemRec]:
        """A memory's versions: from memory when hot, from storage when cold."""
        if state is None:
            return []
        chain = state.mems.get(mid)
        if chain is not None:
            return chain
        if mid in state.cold:
            return [
                MemRec.from_row(r) for r in self._core.storage.read_memory_chain(self.name, mid)
            ]
        return []

    def _touch(self, state: NamespaceState | None, mids: Iterable[str]) -> None:
        touch(state, mids, self._core.now_us())

    # -- memories and KV facts ----------------------------------------------------------------

    @overload
    def get(self, id: str, /, *, as_of: TimeLike | None = None) -> Memory: ...
    @overload
    def get(self, entity: str, key: str, /, *, as_of: TimeLike | None = None) -> Fact: ...
    def get(
        self, target: str, key: str | None = None, /, *, as_of: TimeLike | None = None
    ) -> Memory | Fact:
        t = self._time(as_of)
        state = self._core.state(self.name)
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
        mid = check_memory_id(target)
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
        valid_at: TimeLike | None = None,
        before: str | None = None,
    ) -> list[Memory]:
        t = self._time(as_of)
        limit = check_limit(limit)
        if entity is not None:
            entity = check_entity(entity)
        wanted = check_types(types)
        valid = None if valid_at is None else valid_at_filter(valid_at_seconds(valid_at))
        state = self._core.state(self.name)
        if state is None:
            return []
        recs: Iterable[MemRec] = state.memories_at(t, entity)
        cold = list(state.cold if entity is None else state.cold_by_entity.get(entity, ()))
        if cold:
            recs = list(recs)
            for chain in _chains(self._core.storage.read_memory_chains(self.name, cold)):
                rec = version_at(chain, t)
                if rec is not None and rec.visible_at(t):
                    recs.append(rec)
        if wanted is not None:
            recs = (r for r in recs if r.type in wanted)
        if valid is not None:
            recs = (r for r in recs if valid_at_matches(valid, r.meta_json))
        if before is not None:
            bound = self._page_bound(state, before, t)
            recs = (r for r in recs if (r.ts_us, r.id) < bound)
        top = heapq.nlargest(limit, recs, key=lambda r: (r.ts_us, r.id))
        return [r.to_public() for r in top]

    def _page_bound(self, state: NamespaceState, before: Any, t: int) -> tuple[int, str]:
        """The (event time, id) a ``before=`` cursor stands for: the memory's version at ``t``
        (or its first version, if it was written after ``t``), even if since forgotten."""
        if not isinstance(before, str) or not before:
            raise ValidationError(f"before: expected a memory id, got {before!r}", field="before")
        mid = before
        chain = self._chain(state, mid)
        if not chain:
            raise NotFoundError(
                f"before: memory {mid!r} not found in namespace {self.name!r}",
                field="before",
                id=mid,
            )
        rec = version_at(chain, t) or chain[0]
        return (rec.ts_us, rec.id)

    @overload
    def history(self, id: str, /, *, as_of: TimeLike | None = None) -> list[Memory]: ...
    @overload
    def history(self, entity: str, key: str, /, *, as_of: TimeLike | None = None) -> list[Fact]: ...
    def history(
        self, target: str, key: str | None = None, /, *, as_of: TimeLike | None = None
    ) -> list[Memory] | list[Fact]:
        t = self._time(as_of)
        state = self._core.state(self.name)
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
        mid = check_memory_id(target)
        chain = self._chain(state, mid)
        out = [r.to_public() for r in chain if r.sys_us <= t]
        if not out:
            raise NotFoundError(
                f"memory {mid!r} not found in namespace {self.name!r}", id=mid, namespace=self.name
            )
        return out

    def accesses(self, ids: Sequence[str]) -> list[MemoryAccess]:
        ids = check_id_list([ids] if isinstance(ids, str) else ids, "ids", MAX_ACCESS_IDS)
        state = self._core.state(self.name)
        if state is None:
            return []
        out = []
        for mid in ids:
            if mid not in state.mems and mid not in state.cold:
                continue  # not a memory of this namespace (erased chains included)
            count, last_us = state.access.get(mid, (0, 0))
            out.append(MemoryAccess(mid, count, to_datetime(last_us) if count else None))
        return out

    def facts(self, entity: str, *, as_of: TimeLike | None = None) -> list[Fact]:
        t = self._time(as_of)
        entity = check_entity(entity)
        state = self._core.state(self.name)
        if state is None:
            return []
        return [r.to_public() for r in sorted(state.facts_at(entity, t), key=lambda r: r.key)]

    def snapshot(self, entity: str, *, as_of: TimeLike | None = None) -> Snapshot:
        entity, t = check_entity(entity), self._time(as_of)
        return snapshot(
            self._core.state(self.name),
            entity,
            t,
            lambda e, when: self.facts(e, as_of=when),
            lambda e, when: self.memories(e, as_of=when, limit=10_000),
        )

    # -- streams --------------------------------------------------------------------------------

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
        t = self._time(as_of)
        stream = check_entity(stream, "stream")
        limit = check_limit(limit)
        if order not in ("asc", "desc"):
            raise ValidationError(f"order: expected 'asc' or 'desc', got {order!r}", field="order")
        lo, hi = event_id_range(start, end, after)
        lo_ts = None if since is None else to_us(since, "since")
        hi_ts = None if until is None else to_us(until, "until")
        state = self._core.state(self.name)
        if state is None:
            return []
        by_time = lo_ts is not None or hi_ts is not None
        bound = None if by_time else limit
        recs = state.events_in(
            stream,
            lo,
            hi,
            t,
            newest=bound if order == "desc" else None,
            oldest=bound if order == "asc" else None,
        )
        if by_time:
            recs = [
                e
                for e in recs
                if (lo_ts is None or e.ts_us >= lo_ts) and (hi_ts is None or e.ts_us < hi_ts)
            ]
        if order == "desc":
            recs.reverse()
        return [e.to_public() for e in recs[:limit]]

    # -- overview -------------------------------------------------------------------------------

    def entities(
        self,
        *,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        t = self._time(as_of)
        limit = _page_args(prefix, after, limit, "an entity name")
        state = self._core.state(self.name)
        if state is None:
            return []
        names = set(state.entity_mems) | set(state.entity_facts) | set(state.cold_by_entity)
        return _page(
            names,
            prefix,
            after,
            limit,
            lambda name: state.entity_exists_at(name, t) or self._cold_entity_at(state, name, t),
        )

    def _cold_entity_at(self, state: NamespaceState, entity: str, t: int) -> bool:
        """Whether one of ``entity``'s cold memories is visible at ``t`` (read from storage)."""
        ids = list(state.cold_by_entity.get(entity, ()))
        if not ids:
            return False
        for chain in _chains(self._core.storage.read_memory_chains(self.name, ids)):
            rec = version_at(chain, t)
            if rec is not None and rec.visible_at(t):
                return True
        return False

    def streams(
        self,
        *,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        t = self._time(as_of)
        limit = _page_args(prefix, after, limit, "a stream name")
        state = self._core.state(self.name)
        if state is None:
            return []
        streams = state.streams

        def committed(name: str) -> bool:
            evs = streams.get(name)
            return (
                evs is not None
                and bool(evs)
                and evs[0].sys_us <= t
                and not all(e.erased for e in evs)
            )

        # list(): a copy, since an append may add a stream meanwhile
        return _page(list(streams), prefix, after, limit, committed)

    def stats(self) -> Stats:
        state = self._core.state(self.name)
        if state is None:
            return Stats(self.name, 0, {}, 0, 0, 0, 0, 0, 0, 0, None)
        t = self._core.now_us()
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


def _chains(rows: list[MemoryRow]) -> list[list[MemRec]]:
    """Group storage rows (any order of ids, versions ascending per id) into version chains."""
    by_id: dict[str, list[MemRec]] = {}
    for row in rows:
        rec = MemRec.from_row(row)
        by_id.setdefault(rec.id, []).append(rec)
    for chain in by_id.values():
        chain.sort(key=lambda r: r.version)
    return list(by_id.values())


def _page(
    names: Iterable[str],
    prefix: str | None,
    after: str | None,
    limit: int | None,
    keep: Callable[[str], bool],
) -> list[str]:
    """A page of ``names``: those starting with ``prefix`` and sorting after ``after``, in
    order, for which ``keep`` holds (it is asked only until ``limit`` are kept)."""
    picked = sorted(
        n
        for n in names
        if (prefix is None or n.startswith(prefix)) and (after is None or n > after)
    )
    out: list[str] = []
    for name in picked:
        if keep(name):
            out.append(name)
            if limit is not None and len(out) >= limit:
                break
    return out


def _page_args(prefix: Any, after: Any, limit: Any, what: str) -> int | None:
    """A page's arguments checked as ``entities`` checks them: ``prefix`` and ``after`` strings
    (``after`` is ``what``), ``limit`` 1 to 10,000 or None. The limit, checked."""
    limit = None if limit is None else check_limit(limit)
    if prefix is not None and not isinstance(prefix, str):
        raise ValidationError(f"prefix: expected a string, got {prefix!r}", field="prefix")
    if after is not None and not isinstance(after, str):
        raise ValidationError(f"after: expected {what}, got {after!r}", field="after")
    return limit
