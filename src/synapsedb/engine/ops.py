"""Write operations. Each ``plan`` runs serialized (in the commit leader): checks first, then
emits records.

Input is already validated (:mod:`synapsedb.validation`); what is checked here depends on state:
existence, compare-and-set versions, the namespace's embedding dimension, stream ids.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import orjson

from ..errors import NotFoundError, QuotaExceededError, ValidationError, VersionConflictError
from ..ids import format_event_id, new_memory_id
from ..storage.base import ErasureInsert, Purge
from ..validation import MemoryInput
from .records import EventRec, FactRec, MemRec
from .writer import Op, Tx

__all__ = [
    "AppendEvent",
    "DeleteFact",
    "DeleteMemory",
    "ForgetEntity",
    "PurgeExpired",
    "SetFact",
    "UpdateMemory",
    "WriteMemories",
    "alias_of",
]

ERASED = "erased:"


def alias_of(subject: str) -> str:
    """What stands in an erased row for the entity whose keyed hash is ``subject``."""
    return ERASED + subject


def _expires(now_us: int, ttl: float | None) -> int | None:
    return None if ttl is None else now_us + round(ttl * 1_000_000)


Space = tuple[int, str] | None


def _auto_vector_fits(vec: np.ndarray | None, source: str, space: Space) -> bool:
    """Whether an automatic vector (made by the database's embedder, decided before the op was
    queued) still belongs here. A concurrent write may meanwhile have given the namespace
    caller vectors: then the memory is stored without an automatic vector, as documented."""
    return vec is None or source == "caller" or space is None or space[1] != "caller"


def _check_space(ns: str, vec: np.ndarray | None, source: str, space: Space, field: str) -> Space:
    """The namespace's vector space after accepting ``vec``: the first vector fixes the
    dimension and what produced it (an embedder's name or "caller"). Caller vectors of the
    right dimension are always accepted; an embedder's vectors only in its own namespaces."""
    if vec is None:
        return space
    if space is None:
        return int(vec.shape[0]), source
    if vec.shape[0] != space[0]:
        raise ValidationError(
            f"{field}: namespace {ns!r} holds {space[0]}-dimensional embeddings, "
            f"got {vec.shape[0]}",
            field=field,
            limit=space[0],
        )
    if source != "caller" and source != space[1]:
        raise ValidationError(
            f"{field}: namespace {ns!r} holds vectors from {space[1]!r}, not from {source!r}",
            field=field,
        )
    return space


def _check_quota(tx: Tx, ns: str, new: int, nbytes: int) -> None:
    """Policy ``reject``: refuse a write that would take the hot tier over its quota."""
    state = tx.states.get(ns)
    if state is None or state.config.policy != "reject":
        return
    cfg = state.config
    pending = tx.new_live.get(ns, (0, 0))
    if cfg.max_hot is not None and state.live + pending[0] + new > cfg.max_hot:
        raise QuotaExceededError(
            f"namespace {ns!r}: {state.live + pending[0] + new} memories would exceed "
            f"max_hot={cfg.max_hot} (policy reject); nothing was written",
            field="max_hot",
            limit=cfg.max_hot,
        )
    if cfg.max_bytes is not None and state.hot_bytes + pending[1] + nbytes > cfg.max_bytes:
        raise QuotaExceededError(
            f"namespace {ns!r}: {state.hot_bytes + pending[1] + nbytes} bytes would exceed "
            f"max_bytes={cfg.max_bytes} (policy reject); nothing was written",
            field="max_bytes",
            limit=cfg.max_bytes,
        )
    tx.new_live[ns] = (pending[0] + new, pending[1] + nbytes)


def _current_memory(tx: Tx, ns: str, mid: str) -> MemRec:
    rec = tx.latest_memory(ns, mid)
    if rec is None or not rec.visible_at(tx.now_us):
        raise NotFoundError(f"memory {mid!r} not found in namespace {ns!r}", id=mid, namespace=ns)
    return rec


def _check_version(expected: int | None, actual: int, what: str) -> None:
    if expected is not None and expected != actual:
        raise VersionConflictError(
            f"{what}: expected version {expected}, current version is {actual}",
            expected=expected,
            actual=actual,
        )


class _Prior(NamedTuple):
    """The latest version of a memory id as a write of a new version sees it."""

    version: int
    created_us: int
    entity: str


class WriteMemories(Op):
    """Insert memories (or new versions of given ids) atomically: all or none."""

    __slots__ = ("items", "ns", "prefixes")

    def __init__(self, ns: str, items: list[MemoryInput], prefixes: list[str]) -> None:
        super().__init__(len(items))
        self.ns, self.items, self.prefixes = ns, items, prefixes

    def plan(self, tx: Tx) -> list[MemRec]:
        ns, now = self.ns, tx.now_us
        old_space = space = tx.space(ns)
        seen: dict[str, _Prior] = {}  # the version each id of the batch takes
        plans: list[tuple[str, int, int]] = []
        for item, prefix in zip(self.items, self.prefixes, strict=True):
            if not _auto_vector_fits(item.vec, item.source, space):
                item.vec = None
            space = _check_space(ns, item.vec, item.source, space, f"{prefix}embedding")
            if item.id is None:
                plans.append((new_memory_id(now), 1, now))
                continue
            prior = seen.get(item.id)
            if prior is None:
                prev = tx.latest_memory(ns, item.id)
                prior = _Prior(prev.version, prev.created_us, prev.entity) if prev else None
            if prior is not None and prior.entity != item.entity:
                raise ValidationError(
                    f"{prefix}id: memory {item.id!r} is about entity {prior.entity!r}, "
                    f"not {item.entity!r}",
                    field=f"{prefix}id",
                )
            version, created = (prior.version + 1, prior.created_us) if prior else (1, now)
            seen[item.id] = _Prior(version, created, item.entity)
            plans.append((item.id, version, created))
        new = sum(1 for _mid, version, _c in plans if version == 1)
        _check_quota(tx, ns, new, sum(len(it.content) + len(it.meta_json) for it in self.items))
        if space is not None and space != old_space:
            tx.set_space(ns, space)
        out = []
        for item, (mid, version, created) in zip(self.items, plans, strict=True):
            rec = MemRec(
                mid,
                version,
                now,
                created,
                item.entity,
                item.type,
                item.content,
                item.meta_json,
                item.vec,
                item.salience,
                now if item.ts_us is None else item.ts_us,
                item.agent,
                item.pinned,
                item.ttl,
                _expires(now, item.ttl),
                False,
            )
            tx.add_memory(ns, rec)
            out.append(rec)
        return out


class UpdateMemory(Op):
    __slots__ = ("agent", "changes", "if_version", "mid", "ns")

    def __init__(
        self, ns: str, mid: str, changes: dict[str, Any], if_version: int | None, agent: str | None
    ) -> None:
        super().__init__()
        self.ns, self.mid, self.changes = ns, mid, changes
        self.if_version, self.agent = if_version, agent

    def plan(self, tx: Tx) -> MemRec:
        ns, now, ch = self.ns, tx.now_us, self.changes
        prev = _current_memory(tx, ns, self.mid)
        _check_version(self.if_version, prev.version, f"memory {self.mid!r}")
        old_space = tx.space(ns)
        source = ch.get("vec_source", "caller")
        if not _auto_vector_fits(ch.get("vec"), source, old_space):
            ch = {k: v for k, v in ch.items() if k != "vec"}  # keep the previous vector
        vec = ch["vec"] if "vec" in ch else prev.vector()
        space = _check_space(ns, ch.get("vec"), source, old_space, "embedding")
        if "ttl" in ch:
            ttl, expires = ch["ttl"], _expires(now, ch["ttl"])
        else:
            ttl, expires = prev.ttl, prev.expires_us
        meta_json = ch.get("meta_json", prev.meta_json)
        if "bounds" in ch:  # valid time: merged with the previous version's, checked again
            meta_json = ch["bounds"].apply(prev.meta_json, ch.get("meta_json"))
        if space is not None and space != old_space:
            tx.set_space(ns, space)
        rec = MemRec(
            self.mid,
            prev.version + 1,
            now,
            prev.created_us,
            prev.entity,
            ch.get("type", prev.type),
            ch.get("content", prev.content),
            meta_json,
            vec,
            ch.get("salience", prev.salience),
            ch.get("ts_us", prev.ts_us),
            ch.get("agent", self.agent),
            ch.get("pinned", prev.pinned),
            ttl,
            expires,
            False,
        )
        tx.add_memory(ns, rec)
        return rec


class DeleteMemory(Op):
    __slots__ = ("agent", "if_version", "mid", "ns")

    def __init__(self, ns: str, mid: str, if_version: int | None, agent: str | None) -> None:
        super().__init__()
        self.ns, self.mid, self.if_version, self.agent = ns, mid, if_version, agent

    def plan(self, tx: Tx) -> MemRec:
        prev = _current_memory(tx, self.ns, self.mid)
        _check_version(self.if_version, prev.version, f"memory {self.mid!r}")
        rec = MemRec(
            prev.id,
            prev.version + 1,
            tx.now_us,
            prev.created_us,
            prev.entity,
            prev.type,
            prev.content,
            prev.meta_json,
            prev.vector(),
            prev.salience,
            prev.ts_us,
            self.agent,
            prev.pinned,
            prev.ttl,
            prev.expires_us,
            True,
        )
        tx.add_memory(self.ns, rec)
        return rec


class SetFact(Op):
    __slots__ = ("agent", "entity", "if_version", "key", "ns", "ttl", "value_json")

    def __init__(
        self,
        ns: str,
        entity: str,
        key: str,
        value_json: str,
        if_version: int | None,
        ttl: float | None,
        agent: str | None,
    ) -> None:
        super().__init__()
        self.ns, self.entity, self.key, self.value_json = ns, entity, key, value_json
        self.if_version, self.ttl, self.agent = if_version, ttl, agent

    def plan(self, tx: Tx) -> FactRec:
        now = tx.now_us
        prev = tx.latest_fact(self.ns, self.entity, self.key)
        live = prev is not None and prev.visible_at(now)
        current = prev.version if prev is not None and live else 0
        _check_version(self.if_version, current, f"fact {self.entity!r}/{self.key!r}")
        created = prev.created_us if prev is not None and live else now
        rec = FactRec(
            self.entity,
            self.key,
            (prev.version + 1) if prev else 1,
            now,
            created,
            self.value_json,
            self.agent,
            self.ttl,
            _expires(now, self.ttl),
            False,
        )
        tx.add_fact(self.ns, rec)
        return rec


class DeleteFact(Op):
    __slots__ = ("agent", "entity", "if_version", "key", "ns")

    def __init__(
        self, ns: str, entity: str, key: str, if_version: int | None, agent: str | None
    ) -> None:
        super().__init__()
        self.ns, self.entity, self.key, self.if_version, self.agent = (
            ns,
            entity,
            key,
            if_version,
            agent,
        )

    def plan(self, tx: Tx) -> FactRec:
        prev = tx.latest_fact(self.ns, self.entity, self.key)
        if prev is None or not prev.visible_at(tx.now_us):
            raise NotFoundError(
                f"fact {self.entity!r}/{self.key!r} not found in namespace {self.ns!r}",
                entity=self.entity,
                key=self.key,
            )
        _check_version(self.if_version, prev.version, f"fact {self.entity!r}/{self.key!r}")
        rec = FactRec(
            self.entity,
            self.key,
            prev.version + 1,
            tx.now_us,
            prev.created_us,
            prev.value_json,
            self.agent,
            prev.ttl,
            prev.expires_us,
            True,
        )
        tx.add_fact(self.ns, rec)
        return rec


class AppendEvent(Op):
    """Append to a stream and, when ``memory`` is given, add the searchable ``event`` memory."""

    __slots__ = ("data_json", "item", "ns", "searchable", "stream")

    def __init__(
        self, ns: str, stream: str, memory: MemoryInput, data_json: str | None, searchable: bool
    ) -> None:
        super().__init__(2 if searchable else 1)
        self.ns, self.stream, self.data_json = ns, stream, data_json
        self.item, self.searchable = memory, searchable

    def plan(self, tx: Tx) -> tuple[EventRec, MemRec | None]:
        ns, now, item = self.ns, tx.now_us, self.item
        old_space = tx.space(ns)
        if not _auto_vector_fits(item.vec, item.source, old_space):
            item.vec = None
        space = _check_space(
            ns, item.vec if self.searchable else None, item.source, old_space, "embedding"
        )
        if self.searchable:
            _check_quota(tx, ns, 1, len(item.content) + len(item.meta_json))
        ms, seq = now // 1000, 0
        tail = tx.stream_tail(ns, self.stream)
        if tail is not None and ms <= tail[0]:
            ms, seq = tail[0], tail[1] + 1
        ts_us = now if item.ts_us is None else item.ts_us
        mrec = None
        if self.searchable:
            meta = orjson.loads(item.meta_json)
            meta["stream"] = self.stream
            meta["event_id"] = format_event_id(ms, seq)
            if space is not None and space != old_space:
                tx.set_space(ns, space)
            mrec = MemRec(
                new_memory_id(now),
                1,
                now,
                now,
                item.entity,
                "event",
                item.content,
                orjson.dumps(meta).decode(),
                item.vec,
                item.salience,
                ts_us,
                item.agent,
                item.pinned,
                item.ttl,
                _expires(now, item.ttl),
                False,
            )
            tx.add_memory(ns, mrec)
        erec = EventRec(
            self.stream,
            ms,
            seq,
            now,
            item.entity,
            ts_us,
            item.agent,
            item.content,
            self.data_json,
            mrec.id if mrec else None,
        )
        tx.add_event(ns, erec)
        return erec, mrec


class ForgetEntity(Op):
    """Forget everything about an entity: tombstones (history keeps it) or, with ``purge``,
    erasure of every version's content, vectors, fact values and event payloads, leaving an
    audit row (who, when, how many; the entity only as a keyed hash).

    A purge leaves no name behind: in the skeleton rows the entity becomes ``erased:<keyed
    hash>`` (:func:`alias_of`), and each of its fact keys and each stream that held only its
    events gets a keyed hash of its own (salted afresh for each purge, so a later purge of the
    same names cannot collide with this one). ``hide`` is the keyed hash."""

    __slots__ = ("agent", "entity", "hide", "ns", "purge", "subject")

    def __init__(
        self,
        ns: str,
        entity: str,
        purge: bool,
        agent: str | None,
        subject: str,
        hide: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__(2)
        self.ns, self.entity, self.purge, self.agent = ns, entity, purge, agent
        self.subject, self.hide = subject, hide

    def _erasure(self, tx: Tx) -> Purge:
        """The names to replace: every fact key of the entity, and every stream named after it
        or holding only its events (and events already erased), this batch's included."""
        ns, entity, salt = self.ns, self.entity, secrets.token_hex(8)
        hide = self.hide
        assert hide is not None, "a purge needs the keyed hash"
        state = tx.states.get(ns)
        keys = set(state.entity_facts.get(entity, ())) if state is not None else set()
        keys.update(rec.key for n, rec in tx.facts if n == ns and rec.entity == entity)
        # stream -> (only the entity's or erased events, at least one of the entity's)
        about: dict[str, tuple[bool, bool]] = {}
        if state is not None:
            for name, evs in list(state.streams.items()):
                about[name] = (
                    all(e.entity == entity or e.erased for e in evs),
                    any(e.entity == entity for e in evs),
                )
        for n, erec in tx.events:
            if n == ns:
                only, mine = about.get(erec.stream, (True, False))
                is_mine = erec.entity == entity
                about[erec.stream] = (only and is_mine, mine or is_mine)
        streams = [
            name for name, (only, mine) in about.items() if (only and mine) or name == entity
        ]
        return Purge(
            ns,
            entity,
            alias_of(self.subject),
            keys={k: alias_of(hide(f"\0key\0{entity}\0{k}\0{salt}")) for k in sorted(keys)},
            streams={s: alias_of(hide(f"\0stream\0{s}\0{salt}")) for s in sorted(streams)},
        )

    def _erased_ids(self, tx: Tx, erasure: Purge) -> frozenset[str]:
        """The memories the purge erases (as storage selects them): the entity's, hot or
        cold, and the searchable twins of its events and of the erased streams' events."""
        ns, entity = self.ns, self.entity
        state = tx.states.get(ns)

        def about(rec: EventRec) -> bool:
            return rec.entity == entity or rec.stream == entity or rec.stream in erasure.streams

        ids = {rec.id for n, rec in tx.mems if n == ns and rec.entity == entity}
        ids.update(
            erec.memory_id
            for n, erec in tx.events
            if n == ns and erec.memory_id is not None and about(erec)
        )
        if state is not None:
            ids.update(state.entity_mems.get(entity, ()))
            ids.update(state.cold_by_entity.get(entity, ()))
            for evs in list(state.streams.values()):
                ids.update(e.memory_id for e in evs if e.memory_id is not None and about(e))
        return frozenset(ids)

    def plan(self, tx: Tx) -> dict[str, int]:
        ns, entity, now = self.ns, self.entity, tx.now_us
        state = tx.states.get(ns)
        mids = list(state.entity_mems.get(entity, ())) if state is not None else []
        keys = list(state.entity_facts.get(entity, ())) if state is not None else []
        if self.purge:
            events = 0
            if state is not None:
                for name, evs in list(state.streams.items()):
                    events += sum(1 for e in evs if e.entity == entity or name == entity)
            counts = {
                "memories": len(mids),
                "versions": sum(len(state.mems[m]) for m in mids) if state is not None else 0,
                "facts": len(keys),
                "events": events,
            }
            erasure = self._erasure(tx)
            tx.batch.purges.append(erasure)
            tx.purged.append((ns, entity, self._erased_ids(tx, erasure)))
            tx.batch.erasures.append(
                ErasureInsert(ns, now, self.agent, self.subject, orjson.dumps(counts).decode())
            )
            tx.reloads.append(ns)
            return counts
        n_mem = n_fact = 0
        for mid in mids:
            prev = tx.latest_memory(ns, mid)
            if prev is None or not prev.visible_at(now):
                continue
            tx.add_memory(
                ns,
                MemRec(
                    prev.id,
                    prev.version + 1,
                    now,
                    prev.created_us,
                    prev.entity,
                    prev.type,
                    prev.content,
                    prev.meta_json,
                    prev.vector(),
                    prev.salience,
                    prev.ts_us,
                    self.agent,
                    prev.pinned,
                    prev.ttl,
                    prev.expires_us,
                    True,
                ),
            )
            n_mem += 1
        for key in keys:
            frec = tx.latest_fact(ns, entity, key)
            if frec is None or not frec.visible_at(now):
                continue
            tx.add_fact(
                ns,
                FactRec(
                    entity,
                    key,
                    frec.version + 1,
                    now,
                    frec.created_us,
                    frec.value_json,
                    self.agent,
                    frec.ttl,
                    frec.expires_us,
                    True,
                ),
            )
            n_fact += 1
        return {"memories": n_mem, "versions": 0, "facts": n_fact, "events": 0}


class PurgeExpired(Op):
    """Erase memories and facts whose TTL ran out at least ``grace_us`` ago (``as_of`` reads
    before their expiry see them until then). With ``dry_run`` it only reports."""

    __slots__ = ("dry_run", "grace_us", "ns")

    def __init__(self, ns: str, grace_us: int, dry_run: bool) -> None:
        super().__init__(0 if dry_run else 1)
        self.ns, self.grace_us, self.dry_run = ns, grace_us, dry_run

    def plan(self, tx: Tx) -> tuple[list[str], list[tuple[str, str]]]:
        state = tx.states.get(self.ns)
        if state is None:
            return [], []
        cutoff = tx.now_us - self.grace_us
        mems = [
            mid
            for mid, chain in list(state.mems.items())
            if not (last := chain[-1]).erased
            and not last.deleted
            and last.expires_us is not None
            and last.expires_us <= cutoff
        ]
        mems += [mid for mid, exp in list(state.cold_expiry.items()) if exp <= cutoff]
        facts = [
            key
            for key, chain in list(state.facts.items())
            if not (flast := chain[-1]).erased
            and not flast.deleted
            and flast.expires_us is not None
            and flast.expires_us <= cutoff
        ]
        if not self.dry_run and (mems or facts):
            tx.batch.expired_memories.extend((self.ns, mid) for mid in mems)
            tx.batch.expired_facts.extend((self.ns, e, k) for e, k in facts)
            tx.reloads.append(self.ns)
        return mems, facts
