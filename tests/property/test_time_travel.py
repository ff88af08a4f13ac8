"""Time travel, checked against a plain in-memory model with a Hypothesis state machine.

The machine drives one namespace through memory writes (new ids and new versions of existing
ids, single and batched), updates, deletes, KV sets (with and without compare-and-set) and
deletes, stream appends, TTLs, clock steps (0 included: many changes at one system time) and
restarts. After every step the current state is compared with the model, and the rule
``check_as_of`` compares every read at a time T picked among the commit and expiry times (and
just before/after them, and between them).

Model semantics: a change committed at system time S is visible to ``as_of=T`` iff S <= T; the
latest such version wins (ties at one S go to the higher version); a tombstone hides it; a TTL
given at S hides it for T >= S + ttl, with ttl rounded to the nearest microsecond (the way every
other seconds value is converted: ``as_of`` floats, ``ManualClock.advance``).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import synapsedb
from synapsedb import (
    Database,
    Event,
    Fact,
    ManualClock,
    Memory,
    NotFoundError,
    ValidationError,
    VersionConflictError,
)
from synapsedb.times import format_us, to_datetime, to_us

NS = "time-travel"
AGENT = "tt-agent"
ENTITIES = ("alice", "bob")
KEYS = ("plan", "city", "mood")
STREAMS = ("s1", "s2")
NEVER_ID = "never-written"
LIMIT = 10_000

# TTLs in whole milliseconds up to 5 s, plus round decimals people actually type.
TTLS = st.one_of(
    st.none(),
    st.integers(1, 5_000).map(lambda ms: ms / 1000),
    st.sampled_from([0.5, 1.0, 2.0, 3.0, 4.1]),
)
# Clock steps in microseconds: 0 (same system time), sub-millisecond (same event-id ms or
# not), and up to a few seconds (past TTL expiries).
STEPS = st.one_of(
    st.just(0),
    st.sampled_from([1, 999, 1_000, 250_000, 1_000_000, 3_000_000]),
    st.integers(1, 5_000_000),
)
VALUES = st.one_of(
    st.none(),
    st.integers(-1000, 1000),
    st.text(alphabet="abcxyz", max_size=6),
    st.lists(st.booleans(), max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 9), max_size=2),
)
CAS = st.sampled_from(["none", "right", "wrong"])


def expiry(sys_us: int, ttl: float | None) -> int | None:
    """When a TTL given at ``sys_us`` hides the thing: S + ttl, to the nearest microsecond."""
    return None if ttl is None else sys_us + round(ttl * 1_000_000)


def dt(us: int | None) -> datetime | None:
    return None if us is None else to_datetime(us)


# -- the model --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemV:
    id: str
    version: int
    sys_us: int
    created_us: int
    entity: str
    type: str
    content: str
    metadata: dict[str, Any]
    ts_us: int
    ttl: float | None
    expires_us: int | None
    deleted: bool = False

    def visible_at(self, t: int) -> bool:
        return not self.deleted and (self.expires_us is None or t < self.expires_us)

    def view(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.version,
            self.entity,
            self.type,
            self.content,
            self.metadata,
            dt(self.ts_us),
            AGENT,
            self.ttl,
            dt(self.expires_us),
            dt(self.created_us),
            dt(self.sys_us),
            self.deleted,
        )


@dataclass(frozen=True)
class FactV:
    entity: str
    key: str
    version: int
    sys_us: int
    created_us: int
    value: Any
    ttl: float | None
    expires_us: int | None
    deleted: bool = False

    def visible_at(self, t: int) -> bool:
        return not self.deleted and (self.expires_us is None or t < self.expires_us)

    def view(self) -> tuple[Any, ...]:
        return (
            self.entity,
            self.key,
            self.value,
            self.version,
            AGENT,
            self.ttl,
            dt(self.expires_us),
            dt(self.created_us),
            dt(self.sys_us),
            self.deleted,
        )


@dataclass(frozen=True)
class EventV:
    key: tuple[int, int]
    stream: str
    entity: str
    content: str
    data: dict[str, Any]
    sys_us: int
    memory_id: str | None

    @property
    def id(self) -> str:
        return f"{self.key[0]}-{self.key[1]}"

    def view(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.stream,
            self.entity,
            self.content,
            self.data,
            dt(self.sys_us),
            AGENT,
            dt(self.sys_us),
            self.memory_id,
        )


def mem_view(m: Memory) -> tuple[Any, ...]:
    return (
        m.id,
        m.version,
        m.entity,
        m.type,
        m.content,
        m.metadata,
        m.ts,
        m.agent,
        m.ttl,
        m.expires_at,
        m.created_at,
        m.recorded_at,
        m.deleted,
    )


def fact_view(f: Fact) -> tuple[Any, ...]:
    return (
        f.entity,
        f.key,
        f.value,
        f.version,
        f.agent,
        f.ttl,
        f.expires_at,
        f.created_at,
        f.recorded_at,
        f.deleted,
    )


def event_view(e: Event) -> tuple[Any, ...]:
    return (e.id, e.stream, e.entity, e.content, e.data, e.ts, e.agent, e.recorded_at, e.memory_id)


def latest_at(chain: list[Any], t: int) -> Any:
    """The last version committed at or before ``t`` (chains are in commit order)."""
    for v in reversed(chain):
        if v.sys_us <= t:
            return v
    return None


def visible_at(chain: list[Any], t: int) -> Any:
    v = latest_at(chain, t)
    return v if v is not None and v.visible_at(t) else None


# -- the machine -----------------------------------------------------------------------------


class TimeTravelMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="synapsedb-tt-")
        self.clock = ManualClock()
        self.start_us = self.clock.now_us()
        self.db = self._open()
        self.mem = self.db.namespace(NS, agent=AGENT)
        self.mems: dict[str, list[MemV]] = {}
        self.facts: dict[tuple[str, str], list[FactV]] = {}
        self.streams: dict[str, list[EventV]] = {}
        self.last_commit = 0
        self.counter = 0

    def _open(self) -> Database:
        # embedder="none": vectors play no part in time travel, and local embedding per write
        # would make every example many times slower
        return synapsedb.open(self.dir, clock=self.clock, durability="os", embedder="none")

    def teardown(self) -> None:
        try:
            self.db.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------------

    def _n(self) -> int:
        self.counter += 1
        return self.counter

    def _commit_time(self) -> int:
        """System time the next commit gets: max(clock, last commit)."""
        return max(self.clock.now_us(), self.last_commit)

    def _now(self) -> int:
        return max(self.clock.now_us(), self.last_commit)

    def _committed(self, s: int) -> None:
        self.last_commit = max(self.last_commit, s)

    def _live_mem(self, mid: str) -> MemV | None:
        chain = self.mems.get(mid)
        if not chain:
            return None
        last = chain[-1]
        return last if last.visible_at(self._now()) else None

    def _live_fact(self, entity: str, key: str) -> FactV | None:
        chain = self.facts.get((entity, key))
        if not chain:
            return None
        last = chain[-1]
        return last if last.visible_at(self._now()) else None

    def _cas(self, data: st.DataObject, current: int) -> tuple[int | None, bool]:
        """``(if_version, should_succeed)`` for a compare-and-set mode drawn from ``data``."""
        mode = data.draw(CAS, label="cas")
        if mode == "none":
            return None, True
        if mode == "right":
            return current, True
        wrong = data.draw(st.integers(0, current + 2).filter(lambda v: v != current), label="bad")
        return wrong, False

    # -- memories --------------------------------------------------------------------------------

    def _written(
        self, mid: str, entity: str, s: int, item: dict[str, Any], type_: str = "fact"
    ) -> MemV:
        """Record a write of ``item`` to ``mid`` at ``s``: a new chain or its next version
        (over a tombstone or an expired version too; ``created_at`` stays version 1's)."""
        ttl = item.get("ttl")
        chain = self.mems.setdefault(mid, [])
        prev = chain[-1] if chain else None
        v = MemV(
            id=mid,
            version=prev.version + 1 if prev else 1,
            sys_us=s,
            created_us=prev.created_us if prev else s,
            entity=entity,
            type=type_,
            content=item["content"],
            metadata=item.get("metadata", {}),
            ts_us=s,
            ttl=ttl,
            expires_us=expiry(s, ttl),
        )
        chain.append(v)
        return v

    def _memory(self, n: int, ttl: float | None, **extra: Any) -> dict[str, Any]:
        item: dict[str, Any] = {"content": f"memory {n}", "metadata": {"n": n}, **extra}
        if ttl is not None:
            item["ttl"] = ttl
        return item

    @rule(entity=st.sampled_from(ENTITIES), ttl=TTLS, explicit=st.booleans())
    def write_new(self, entity: str, ttl: float | None, explicit: bool) -> None:
        n = self._n()
        item = self._memory(n, ttl, **({"id": f"m{n}"} if explicit else {}))
        s = self._commit_time()
        got = self.mem.write(entity, item)
        self._committed(s)
        assert got.id == item.get("id", got.id) and got.id not in self.mems
        assert mem_view(got) == self._written(got.id, entity, s, item).view()

    @precondition(lambda self: self.mems)
    @rule(data=st.data(), ttl=TTLS)
    def write_existing_id(self, data: st.DataObject, ttl: float | None) -> None:
        """Writing an existing id adds a version, even over a tombstone or an expired one."""
        mid = data.draw(st.sampled_from(list(self.mems)), label="id")
        entity = self.mems[mid][0].entity
        item = self._memory(self._n(), ttl, id=mid)
        s = self._commit_time()
        got = self.mem.write(entity, item)
        self._committed(s)
        assert mem_view(got) == self._written(mid, entity, s, item).view()

    @precondition(lambda self: self.mems)
    @rule(data=st.data())
    def write_existing_id_wrong_entity(self, data: st.DataObject) -> None:
        mid = data.draw(st.sampled_from(list(self.mems)), label="id")
        other = next(e for e in ENTITIES if e != self.mems[mid][0].entity)
        with pytest.raises(ValidationError):
            self.mem.write(other, {"id": mid, "content": "wrong entity"})

    @rule(data=st.data(), size=st.integers(1, 4), poison=st.booleans())
    def write_many(self, data: st.DataObject, size: int, poison: bool) -> None:
        """One batch, one system time. Items are new memories (auto or explicit id) or new
        versions of ids written before or earlier in the batch, so one id may get several
        versions at one system time. A poisoned batch (an item names a known id with the wrong
        entity) writes nothing at all."""
        known = {mid: chain[0].entity for mid, chain in self.mems.items()}
        items: list[dict[str, Any]] = []
        for _ in range(size):
            n = self._n()
            kind = data.draw(st.sampled_from(["auto", "explicit", "known"]), label="kind")
            ttl = data.draw(TTLS, label="ttl")
            if kind == "known" and known:
                mid = data.draw(st.sampled_from(list(known)), label="id")
                items.append(self._memory(n, ttl, id=mid, entity=known[mid]))
                continue
            entity = data.draw(st.sampled_from(ENTITIES), label="entity")
            if kind == "explicit":
                known[f"m{n}"] = entity
                items.append(self._memory(n, ttl, id=f"m{n}", entity=entity))
            else:
                items.append(self._memory(n, ttl, entity=entity))
        if poison and known:
            mid = data.draw(st.sampled_from(list(known)), label="poison id")
            other = next(e for e in ENTITIES if e != known[mid])
            at = data.draw(st.integers(0, len(items)), label="poison at")
            items.insert(at, {"entity": other, "id": mid, "content": "wrong entity"})
            with pytest.raises(ValidationError):
                self.mem.write_many(items)
            return
        s = self._commit_time()
        got = self.mem.write_many(items)
        self._committed(s)
        assert len(got) == len(items)
        for item, m in zip(items, got, strict=True):
            assert m.id == item.get("id", m.id)
            if "id" not in item:
                assert m.id not in self.mems
            assert mem_view(m) == self._written(m.id, item["entity"], s, item).view()

    @precondition(lambda self: self.mems)
    @rule(
        data=st.data(),
        fields=st.sets(st.sampled_from(["content", "metadata", "ttl"]), min_size=1),
        ttl=TTLS,
    )
    def update(self, data: st.DataObject, fields: set[str], ttl: float | None) -> None:
        mid = data.draw(st.sampled_from(list(self.mems)), label="id")
        n = self._n()
        changes: dict[str, Any] = {}
        if "content" in fields:
            changes["content"] = f"updated {n}"
        if "metadata" in fields:
            changes["metadata"] = {"n": n, "updated": True}
        if "ttl" in fields:
            changes["ttl"] = ttl  # None clears the TTL
        prev = self._live_mem(mid)
        if prev is None:  # deleted or expired: nothing to update
            with pytest.raises(NotFoundError):
                self.mem.update(mid, changes, if_version=data.draw(st.none() | st.integers(0, 9)))
            return
        if_version, ok = self._cas(data, prev.version)
        if not ok:
            with pytest.raises(VersionConflictError) as err:
                self.mem.update(mid, changes, if_version=if_version)
            assert (err.value.expected, err.value.actual) == (if_version, prev.version)
            return
        s = self._commit_time()
        got = self.mem.update(mid, changes, if_version=if_version)
        self._committed(s)
        v = replace(
            prev,
            version=prev.version + 1,
            sys_us=s,
            content=changes.get("content", prev.content),
            metadata=changes.get("metadata", prev.metadata),
        )
        if "ttl" in changes:  # a new TTL counts from this update; no "ttl" keeps the expiry
            v = replace(v, ttl=ttl, expires_us=expiry(s, ttl))
        self.mems[mid].append(v)
        assert mem_view(got) == v.view()

    @precondition(lambda self: self.mems)
    @rule(data=st.data())
    def delete_memory(self, data: st.DataObject) -> None:
        mid = data.draw(st.sampled_from(list(self.mems)), label="id")
        prev = self._live_mem(mid)
        if prev is None:
            with pytest.raises(NotFoundError):
                self.mem.delete(mid)
            return
        if_version, ok = self._cas(data, prev.version)
        if not ok:
            with pytest.raises(VersionConflictError) as err:
                self.mem.delete(mid, if_version=if_version)
            assert (err.value.expected, err.value.actual) == (if_version, prev.version)
            return
        s = self._commit_time()
        got = self.mem.delete(mid, if_version=if_version)
        self._committed(s)
        v = replace(prev, version=prev.version + 1, sys_us=s, deleted=True)
        self.mems[mid].append(v)
        assert mem_view(got) == v.view()

    # -- KV facts --------------------------------------------------------------------------------

    @rule(
        data=st.data(),
        entity=st.sampled_from(ENTITIES),
        key=st.sampled_from(KEYS),
        value=VALUES,
        ttl=TTLS,
    )
    def set_fact(
        self, data: st.DataObject, entity: str, key: str, value: Any, ttl: float | None
    ) -> None:
        """A new version; ``if_version`` must name the live version (0: absent, which includes
        deleted and expired). ``created_at`` restarts when the fact was absent."""
        live = self._live_fact(entity, key)
        current = live.version if live is not None else 0
        if_version, ok = self._cas(data, current)
        if not ok:
            with pytest.raises(VersionConflictError) as err:
                self.mem.set(entity, key, value, if_version=if_version, ttl=ttl)
            assert (err.value.expected, err.value.actual) == (if_version, current)
            return
        s = self._commit_time()
        got = self.mem.set(entity, key, value, if_version=if_version, ttl=ttl)
        self._committed(s)
        chain = self.facts.setdefault((entity, key), [])
        v = FactV(
            entity=entity,
            key=key,
            version=chain[-1].version + 1 if chain else 1,
            sys_us=s,
            created_us=live.created_us if live is not None else s,
            value=value,
            ttl=ttl,
            expires_us=expiry(s, ttl),
        )
        chain.append(v)
        assert fact_view(got) == v.view()

    @rule(data=st.data(), entity=st.sampled_from(ENTITIES), key=st.sampled_from(KEYS))
    def delete_fact(self, data: st.DataObject, entity: str, key: str) -> None:
        prev = self._live_fact(entity, key)
        if prev is None:
            with pytest.raises(NotFoundError):
                self.mem.delete(entity, key)
            return
        if_version, ok = self._cas(data, prev.version)
        if not ok:
            with pytest.raises(VersionConflictError) as err:
                self.mem.delete(entity, key, if_version=if_version)
            assert (err.value.expected, err.value.actual) == (if_version, prev.version)
            return
        s = self._commit_time()
        got = self.mem.delete(entity, key, if_version=if_version)
        self._committed(s)
        v = replace(prev, version=prev.version + 1, sys_us=s, deleted=True)
        self.facts[(entity, key)].append(v)
        assert fact_view(got) == v.view()

    # -- streams ---------------------------------------------------------------------------------

    @rule(
        stream=st.sampled_from(STREAMS),
        entity=st.sampled_from(ENTITIES),
        searchable=st.booleans(),
        ttl=TTLS,
    )
    def append(self, stream: str, entity: str, searchable: bool, ttl: float | None) -> None:
        """Ids are ``<ms>-<seq>``: the commit's millisecond, or the tail's plus a sequence
        number when that is not later. ``ttl`` applies to the searchable memory only."""
        n = self._n()
        event: dict[str, Any] = {"content": f"event {n}", "data": {"n": n}}
        if ttl is not None:
            event["ttl"] = ttl
        s = self._commit_time()
        got = self.mem.append(entity, event, stream=stream, searchable=searchable)
        self._committed(s)
        events = self.streams.setdefault(stream, [])
        key = (s // 1000, 0)
        if events and key[0] <= events[-1].key[0]:
            key = (events[-1].key[0], events[-1].key[1] + 1)
        assert got.id == f"{key[0]}-{key[1]}"
        if searchable:
            assert got.memory_id is not None and got.memory_id not in self.mems
            item = {**event, "metadata": {"stream": stream, "event_id": got.id}}
            self._written(got.memory_id, entity, s, item, type_="event")
        else:
            assert got.memory_id is None
        ev = EventV(key, stream, entity, event["content"], {"n": n}, s, got.memory_id)
        events.append(ev)
        assert event_view(got) == ev.view()

    # -- time and restarts -----------------------------------------------------------------------

    @rule(us=STEPS)
    def advance_clock(self, us: int) -> None:
        self.clock.advance(us=us)

    @rule()
    def reopen(self) -> None:
        """Close and reopen the data directory: everything must come back identically."""
        before = self._snapshot()
        self.db.close()
        self.db = self._open()
        self.mem = self.db.namespace(NS, agent=AGENT)
        assert self._snapshot() == before

    def _snapshot(self) -> tuple[Any, ...]:
        mem = self.mem
        return (
            self.db.namespaces(),
            mem.stats(),
            {mid: mem.history(mid) for mid in self.mems},
            {k: mem.history(*k) for k in self.facts},
            {s: mem.events(s, limit=LIMIT) for s in STREAMS},
            sorted(mem.memories(limit=LIMIT), key=lambda m: m.id),
        )

    # -- checks ----------------------------------------------------------------------------------

    @invariant()
    def current_state_matches(self) -> None:
        self._check_at(self._now(), None)
        self._check_stats()

    @rule(data=st.data())
    def check_as_of(self, data: st.DataObject) -> None:
        times = {self.start_us - 1_000_000, self.start_us - 1, self._now() + 60_000_000}
        for chain in [*self.mems.values(), *self.facts.values()]:
            for v in chain:
                times.update((v.sys_us - 1, v.sys_us, v.sys_us + 1))
                if v.expires_us is not None:
                    times.update((v.expires_us - 1, v.expires_us, v.expires_us + 1))
        for events in self.streams.values():
            for e in events:
                times.update((e.sys_us - 1, e.sys_us, e.sys_us + 1))
        ordered = sorted(times)
        t = data.draw(
            st.sampled_from(ordered) | st.integers(ordered[0], ordered[-1]), label="as_of us"
        )
        form = data.draw(st.sampled_from(["datetime", "naive", "iso", "epoch"]), label="form")
        as_of: Any
        if form == "naive":
            as_of = to_datetime(t).replace(tzinfo=None)
        elif form == "iso":
            as_of = format_us(t)
        elif form == "epoch" and to_us(t / 1e6, "as_of") == t:
            as_of = t / 1e6
        else:
            as_of = to_datetime(t)
        self._check_at(t, as_of)

    def _check_at(self, t: int, as_of: Any) -> None:
        """Every read at ``as_of`` (``t`` microseconds; None means now) equals the model's."""
        mem = self.mem
        # memories: get, history, memories (all and per entity)
        for mid in [*self.mems, NEVER_ID]:
            chain = self.mems.get(mid, [])
            want = visible_at(chain, t)
            if want is None:
                with pytest.raises(NotFoundError):
                    mem.get(mid, as_of=as_of)
            else:
                assert mem_view(mem.get(mid, as_of=as_of)) == want.view(), (mid, t)
            hist = [v.view() for v in chain if v.sys_us <= t]
            if hist:
                assert [mem_view(m) for m in mem.history(mid, as_of=as_of)] == hist, (mid, t)
            else:
                with pytest.raises(NotFoundError):
                    mem.history(mid, as_of=as_of)
        live = [v for chain in self.mems.values() if (v := visible_at(chain, t)) is not None]
        got = mem.memories(as_of=as_of, limit=LIMIT)
        assert [m.id for m in got] == [
            v.id for v in sorted(live, key=lambda v: (v.ts_us, v.id), reverse=True)
        ], t
        assert {(m.id, m.version, m.content) for m in got} == {
            (v.id, v.version, v.content) for v in live
        }, t
        for entity in ENTITIES:
            assert {m.id for m in mem.memories(entity, as_of=as_of, limit=LIMIT)} == {
                v.id for v in live if v.entity == entity
            }, (entity, t)
        # KV facts: get, history, facts
        live_facts: dict[str, list[FactV]] = {e: [] for e in ENTITIES}
        for entity in ENTITIES:
            for key in KEYS:
                chain = self.facts.get((entity, key), [])
                fwant = visible_at(chain, t)
                if fwant is None:
                    with pytest.raises(NotFoundError):
                        mem.get(entity, key, as_of=as_of)
                else:
                    live_facts[entity].append(fwant)
                    got_fact = mem.get(entity, key, as_of=as_of)
                    assert fact_view(got_fact) == fwant.view(), (entity, key, t)
                fhist = [v.view() for v in chain if v.sys_us <= t]
                if fhist:
                    assert [fact_view(f) for f in mem.history(entity, key, as_of=as_of)] == fhist
                else:
                    with pytest.raises(NotFoundError):
                        mem.history(entity, key, as_of=as_of)
            assert [fact_view(f) for f in mem.facts(entity, as_of=as_of)] == [
                v.view() for v in sorted(live_facts[entity], key=lambda v: v.key)
            ], (entity, t)
        # streams
        for stream in STREAMS:
            want_events = [e.view() for e in self.streams.get(stream, []) if e.sys_us <= t]
            got_events = mem.events(stream, as_of=as_of, limit=LIMIT)
            assert [event_view(e) for e in got_events] == want_events, (stream, t)
        assert mem.streams(as_of=as_of) == sorted(
            s for s, evs in self.streams.items() if evs[0].sys_us <= t
        )
        # entities: anything with a visible memory or fact
        assert mem.entities(as_of=as_of) == sorted(
            {v.entity for v in live} | {e for e, fs in live_facts.items() if fs}
        )

    def _check_stats(self) -> None:
        now = self._now()
        live = [v for chain in self.mems.values() if (v := visible_at(chain, now)) is not None]
        live_facts = [
            v for chain in self.facts.values() if (v := visible_at(chain, now)) is not None
        ]
        by_type: dict[str, int] = {}
        for v in live:
            by_type[v.type] = by_type.get(v.type, 0) + 1
        stats = self.mem.stats()
        got = (
            stats.memories,
            stats.memories_by_type,
            stats.memory_versions,
            stats.entities,
            stats.facts,
            stats.fact_versions,
            stats.streams,
            stats.events,
            stats.dim,
        )
        assert got == (
            len(live),
            dict(sorted(by_type.items())),
            sum(len(c) for c in self.mems.values()),
            len({v.entity for v in live} | {v.entity for v in live_facts}),
            len(live_facts),
            sum(len(c) for c in self.facts.values()),
            len(self.streams),
            sum(len(evs) for evs in self.streams.values()),
            None,
        )


def test_ttl_expiry_is_exact_to_the_microsecond(tmp_path: Path) -> None:
    """Regression: expiry once truncated ``ttl * 1_000_000``, so ``ttl=4.1``
    (4.1 * 1e6 == 4099999.9999999995) expired 1 us early. Seconds are rounded everywhere."""
    clock = ManualClock()
    with synapsedb.open(tmp_path / "d", clock=clock, durability="os", embedder="none") as db:
        mem = db.namespace(NS)
        s = clock.now_us()
        m = mem.write("alice", {"content": "short-lived", "ttl": 4.1})
        f = mem.set("alice", "otp", "123456", ttl=4.1)
        assert m.expires_at == to_datetime(s + 4_100_000)
        assert f.expires_at == to_datetime(s + 4_100_000)
        assert mem.get(m.id, as_of=to_datetime(s + 4_099_999)).content == "short-lived"
        assert mem.get("alice", "otp", as_of=to_datetime(s + 4_099_999)).value == "123456"
        with pytest.raises(NotFoundError):
            mem.get(m.id, as_of=to_datetime(s + 4_100_000))


def test_time_travel_matches_model() -> None:
    run_state_machine_as_test(
        TimeTravelMachine,
        settings=settings(
            max_examples=100, stateful_step_count=50, deadline=None, report_multiple_bugs=False
        ),
    )


@pytest.mark.slow
def test_time_travel_matches_model_long() -> None:
    run_state_machine_as_test(
        TimeTravelMachine,
        settings=settings(
            max_examples=1_000, stateful_step_count=80, deadline=None, report_multiple_bugs=False
        ),
    )
