"""Rebuilding the in-memory state from stored rows, so that one bad row never stops a server.

Rows come back in commit order and each is checked before it is applied: column types, JSON
that parses to the right shape, times a datetime can hold, version chains that increase,
vectors of the namespace's dimension, a configuration the ``configure`` parser accepts. A row
that fails makes its namespace *unavailable*: the namespace's state is dropped, its reads and
writes answer StorageError, the problem is reported (table, namespace, the row's key, what is
wrong and how to repair it), and every other namespace loads and serves as usual. Skipping
only the row instead would serve a namespace that silently lacks data, and a write after a
skipped version would collide with it on disk.

System times are checked against this server's clock: a row recorded more than
:data:`MAX_LEAD_US` after "now" (say, imported with a forged time before imports were checked)
makes its namespace unavailable, so it cannot drag the commit clock of every namespace into
the future. The latest system time of the namespaces that loaded starts the commit clock.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import orjson

from ..config import MAX_DIM
from ..errors import ValidationError
from ..storage.base import EventRow, FactRow, LoadedRows, MemoryRow, NamespaceRow
from ..times import EARLIEST_US, LATEST_US, format_us
from .checkpoint import Restored
from .lifecycle import parse_config
from .records import EventRec, FactRec, MemRec
from .state import NamespaceState
from .unavailable import Unloadable

__all__ = [
    "EARLIEST_US",
    "IMPORT_MAX_COUNTER",
    "IMPORT_MAX_EVENT_PART",
    "LATEST_US",
    "MAX_DIM",
    "MAX_LEAD_US",
    "MAX_STORED_INT",
    "Loaded",
    "Unloadable",
    "load_states",
]

# How far ahead of this server's clock a stored system time may be (clocks drift; NTP steps).
MAX_LEAD_US = 86_400_000_000

# -- bounds: the one set, shared with import (transfer.py imports these), so that whatever an
# import accepts, this loader loads.
# Versions, access counts and event id parts as stored (the bound every release so far loaded).
MAX_STORED_INT = LATEST_US
# What an import may bring, well under MAX_STORED_INT: the writes after an import add one to a
# version, a count or an event seq, and must never carry a row past what loads. 2^53 - 1 is
# also the largest integer every JSON reader holds exactly.
IMPORT_MAX_COUNTER = (1 << 53) - 1  # memory and fact versions, access counts
IMPORT_MAX_EVENT_PART = 10**15 - 1  # an event id's ms and seq: 15 digits (ids.parse_event_id)


@dataclass(slots=True)
class Loaded:
    states: dict[str, NamespaceState] = field(default_factory=dict)
    last_us: int = 0  # the latest system time of the namespaces that loaded
    unavailable: dict[str, Unloadable] = field(default_factory=dict)


_R = TypeVar("_R", FactRow, EventRow)

# Each loaded row is unpacked whole, in its fields' order: a NamedTuple's field read is a
# descriptor lookup, and 18 of them per memory row cost nearly twice the unpacking.
# The orders unpacked below, checked against the rows' fields when this module loads:
_UNPACKED: dict[type[MemoryRow | FactRow | EventRow], tuple[str, ...]] = {
    MemoryRow: ("ns", "id", "version", "sys_us", "created_us", "entity", "type", "content",
                "metadata", "embedding", "salience", "ts_us", "agent", "pinned", "ttl",
                "expires_us", "deleted", "erased"),
    FactRow: ("ns", "entity", "key", "version", "sys_us", "created_us", "value", "agent", "ttl",
              "expires_us", "deleted", "erased"),
    EventRow: ("ns", "stream", "ms", "seq", "sys_us", "entity", "ts_us", "agent", "content",
               "data", "memory_id", "erased"),
}  # fmt: skip
for _cls, _order in _UNPACKED.items():
    if _cls._fields != _order:  # pragma: no cover - caught by any test run
        raise ImportError(f"loader: unpacks {_order}, {_cls.__name__} has {_cls._fields}")


class _Bad(Exception):
    """A row that cannot be loaded; the message says why."""


def load_states(
    rows: LoadedRows, now_us: int, restored: Mapping[str, Restored] | None = None
) -> Loaded:
    """Check and apply every row; a namespace with a bad row is left out and reported. A
    namespace in ``restored`` starts from its checkpoint (``rows`` then hold its memory
    versions after the checkpoint's mark only)."""
    return _Loader(now_us, restored or {}).run(rows)


# -- column checks (storage form) -------------------------------------------------------------


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _int(value: Any, what: str, lo: int = EARLIEST_US, hi: int = LATEST_US) -> int:
    """An integer column within ``lo..hi`` (by default, a time a datetime can hold)."""
    if type(value) is not int:
        raise _Bad(f"{what}: expected an integer, got {_show(value)}")
    if not lo <= value <= hi:
        raise _Bad(f"{what}: {value} is outside {lo}..{hi}")
    return value


def _text(value: Any, what: str) -> str:
    if type(value) is not str:
        raise _Bad(f"{what}: expected text, got {_show(value)}")
    return value


def _opt_text(value: Any, what: str) -> str | None:
    return None if value is None else _text(value, what)


def _number(value: Any, what: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise _Bad(f"{what}: expected a finite number, got {_show(value)}")
    return value  # type: ignore[no-any-return]


def _flag(value: Any, what: str) -> int:
    if value not in (0, 1) or type(value) is not int:
        raise _Bad(f"{what}: expected 0 or 1, got {_show(value)}")
    return value


def _json(value: Any, what: str, kind: type) -> Any:
    try:
        out = orjson.loads(_text(value, what))
    except orjson.JSONDecodeError as exc:
        raise _Bad(f"{what}: not JSON ({exc})") from None
    if not isinstance(out, kind):
        raise _Bad(f"{what}: expected a JSON {'object' if kind is dict else 'array'}")
    return out


def _sql(value: Any) -> str:
    """``value`` as an SQL literal (for the repair statement)."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bytes):
        return "x'" + value.hex() + "'"
    return "NULL" if value is None else repr(value)


def _where(**cols: Any) -> str:
    return " AND ".join(
        f"{k} IS NULL" if v is None else f"{k} = {_sql(v)}" for k, v in cols.items()
    )


_Keyed = MemoryRow | FactRow | EventRow  # a row of a version log, selected by ns and keys


def _row_where(row: _Keyed, keys: tuple[str, ...]) -> str:
    """The condition selecting ``row`` (``ns``, then its columns ``keys``): built only for a
    row that is reported, not for every row loaded."""
    return _where(ns=row.ns, **{key: getattr(row, key) for key in keys})


class _Loader:
    def __init__(self, now_us: int, restored: Mapping[str, Restored]) -> None:
        self.now_us = now_us
        self.restored = restored
        self.horizon = now_us + MAX_LEAD_US
        self.out = Loaded()
        self.last: dict[str, int] = {}

    # -- bookkeeping ------------------------------------------------------------------------------

    def bad(self, ns: Any, table: str, where: str, reason: str) -> None:
        key = ns if isinstance(ns, str) else repr(ns)
        if key not in self.out.unavailable:
            self.out.unavailable[key] = Unloadable(table, key, where, reason)
        self.out.states.pop(key, None)

    def sys_time(self, ns: str, value: Any, what: str) -> int:
        us = _int(value, what, 0, LATEST_US)
        if us > self.horizon:
            raise _Bad(
                f"{what}: {format_us(us)} is later than this server's clock "
                f"({format_us(self.now_us)}) by more than a day"
            )
        if us > self.last.get(ns, 0):
            self.last[ns] = us
        return us

    def state(self, table: str, row: _Keyed, keys: tuple[str, ...]) -> NamespaceState | None:
        """The namespace of ``row`` (being loaded), or None when it is (or just became)
        unavailable."""
        ns = row.ns
        state = self.out.states.get(ns)
        if state is None and ns not in self.out.unavailable:
            self.bad(
                ns, table, _row_where(row, keys), "the namespace has no row in table namespaces"
            )
        return state

    def apply(
        self,
        rows: Iterable[_R],
        table: str,
        keys: tuple[str, ...],
        check: Callable[[NamespaceState, _R], Any],
        add: Callable[[NamespaceState, Any], None],
    ) -> None:
        """Each row of ``table`` checked into a record and added to its namespace, one at a
        time; a bad row makes its namespace unavailable. ``keys``: the columns after ``ns``
        that select a row."""
        for row in rows:
            state = self.state(table, row, keys)
            if state is None:
                continue
            try:
                rec = check(state, row)
            except _Bad as exc:
                self.bad(row.ns, table, _row_where(row, keys), str(exc))
                continue
            add(state, rec)

    # -- tables -----------------------------------------------------------------------------------

    def run(self, rows: LoadedRows) -> Loaded:
        out = self.out
        for row in rows.namespaces:
            self.namespace(row)
        tiers: dict[tuple[str, str], str] = {}
        for move in rows.tiers:  # the last move of a memory decides its tier
            if move.tier not in ("hot", "cold"):
                self.bad(move.ns, "tiers", _where(ns=move.ns, id=move.id, tier=move.tier),
                         f"tier: expected 'hot' or 'cold', got {_show(move.tier)}")  # fmt: skip
            tiers[(move.ns, move.id)] = move.tier
        cold = {key for key, tier in tiers.items() if tier == "cold"}
        for access in rows.access:
            ns = access.ns
            state = out.states.get(ns)
            if state is None:
                continue
            try:
                count = _int(access.accesses, "count", 0, MAX_STORED_INT)
                state.access[access.id] = (count, self.sys_time(ns, access.last_us, "last_us"))
            except _Bad as exc:
                self.bad(ns, "access", _where(ns=ns, id=access.id), str(exc))
        n_cold = Counter(ns for ns, _ in cold)
        for name, state in out.states.items():
            state.catalog.reserve(max(0, rows.memory_rows.get(name, 0) - n_cold[name]))
        self.memories(rows, cold)
        self.apply(rows.facts, "fact_versions", ("entity", "key", "version"), self.fact,
                   NamespaceState.add_fact)  # fmt: skip
        self.apply(rows.events, "events", ("stream", "ms", "seq"), self.event,
                   NamespaceState.add_event)  # fmt: skip
        for answer in rows.answers:
            state = out.states.get(answer.ns)
            if state is None:
                continue
            try:
                pairs = _json(answer.memories, "memories", list)
                mids = [p[0] for p in pairs if _pair(p)]
                if len(mids) != len(pairs):
                    raise _Bad("memories: expected [[memory id, version], ...]")
            except _Bad as exc:
                self.bad(answer.ns, "answers", _where(ns=answer.ns, id=answer.id), str(exc))
                continue
            for mid in mids:
                state.impact[mid] = state.impact.get(mid, 0) + 1
        for state in out.states.values():
            state.catalog.trim()
        out.last_us = max((self.last.get(ns, 0) for ns in out.states), default=0)
        return out

    def namespace(self, row: NamespaceRow) -> None:
        name, dim = row.name, row.dim
        where = _where(name=name)
        try:
            _text(name, "name")
            self.sys_time(name, row.created_us, "created_us")
            if dim is not None:
                _int(dim, "dim", 1, MAX_DIM)
            _opt_text(row.embedder, "embedder")
            try:
                cfg = parse_config(row.config)
            except (ValidationError, orjson.JSONDecodeError, TypeError) as exc:
                raise _Bad(f"config: {getattr(exc, 'message', exc)}") from None
        except _Bad as exc:
            self.bad(name, "namespaces", where, str(exc))
            return
        state = NamespaceState(name, row.created_us, dim, row.embedder)
        base = self.restored.get(name)
        if base is not None:  # its checkpoint (checked against the log and the row's dim)
            base.install(state)
            self.last[name] = max(self.last.get(name, 0), base.mark_us)
        else:
            state.catalog.defer_keywords()  # built on first need, not for every namespace
        state.config = cfg
        self.out.states[name] = state

    def memories(self, rows: LoadedRows, cold: set[tuple[str, str]]) -> None:
        """Memory versions in commit order, applied to the catalog in per-namespace runs.

        A row whose columns all have the everyday form (checked in one expression) becomes a
        record at once; any other row takes :meth:`memory`, which checks every column and
        says what is wrong. Repeated strings (entities, types, agents) are shared."""
        batch: list[MemRec] = []
        prevs: list[MemRec | None] = []  # the version each one of the batch supersedes
        tips: dict[str, MemRec] = {}  # the batch's latest version of each id
        batch_ns: str | None = None
        state: NamespaceState | None = None
        keys = ("id", "version")
        shared: dict[str, str] = {}
        share = shared.setdefault
        horizon = min(self.horizon, LATEST_US)
        vec_bytes = -1  # a vector's size in the namespace of the run
        top = 0  # the latest system time taken by the quick path in the run
        frombuffer, f32 = np.frombuffer, np.float32
        for row in rows.memories:
            # every field at once, in _UNPACKED order
            (ns, mid, version, sys_us, created_us, entity, type_, content, meta, emb, sal, ts_us,
             agent, pinned, ttl, expires_us, deleted, erased) = row  # fmt: skip
            if ns != batch_ns or len(batch) >= 4096:
                self.flush(batch_ns, batch, prevs)
                if batch_ns is not None and top > self.last.get(batch_ns, 0):
                    self.last[batch_ns] = top
                top = 0
                batch, prevs, batch_ns = [], [], ns
                tips.clear()
                state = self.state("memory_versions", row, keys)
                vec_bytes = -1 if state is None or state.dim is None else 4 * state.dim
            if state is None:
                continue
            try:
                if cold and (ns, mid) in cold:  # on disk only: remember its id and entity
                    self.cold_row(state, row)
                    continue
                prev = tips.get(mid)
                if prev is None:
                    chain = state.mems.get(mid)
                    prev = chain[-1] if chain else None
                if (
                    type(mid) is str
                    and type(version) is int
                    and 1 <= version <= MAX_STORED_INT
                    and type(sys_us) is int
                    and 0 <= sys_us <= horizon
                    and type(created_us) is int
                    and 0 <= created_us <= LATEST_US
                    and type(entity) is str
                    and type(type_) is str
                    and type(content) is str
                    and meta == "{}"
                    and (emb is None or (type(emb) is bytes and len(emb) == vec_bytes))
                    and type(sal) is float
                    and sal - sal == 0.0  # finite
                    and type(ts_us) is int
                    and EARLIEST_US <= ts_us <= LATEST_US
                    and (agent is None or type(agent) is str)
                    and type(pinned) is int
                    and (pinned == 0 or pinned == 1)
                    and ttl is None
                    and expires_us is None
                    and deleted == 0
                    and type(deleted) is int
                    and erased == 0
                    and type(erased) is int
                    and (prev is None or (version > prev.version and entity == prev.entity))
                ):
                    if sys_us > top:
                        top = sys_us
                    rec = MemRec(mid, version, sys_us, created_us, share(entity, entity),
                                 share(type_, type_), content, "{}",
                                 None if emb is None else frombuffer(emb, f32), sal, ts_us,
                                 None if agent is None else share(agent, agent), pinned == 1,
                                 None, None, False)  # fmt: skip
                else:
                    rec = self.memory(state, row, prev)
            except _Bad as exc:
                self.bad(ns, "memory_versions", _row_where(row, keys), str(exc))
                batch, prevs, state = [], [], None
                continue
            batch.append(rec)
            prevs.append(prev)
            tips[mid] = rec
        self.flush(batch_ns, batch, prevs)
        if batch_ns is not None and top > self.last.get(batch_ns, 0):
            self.last[batch_ns] = top

    def flush(self, ns: str | None, batch: list[MemRec], prevs: list[MemRec | None]) -> None:
        state = self.out.states.get(ns) if ns is not None else None
        if state is None or not batch:
            return
        try:
            state.add_memories(batch, prevs)
        except Exception as exc:  # checked rows should not fail; if one does, say where
            first, last = batch[0], batch[-1]
            self.bad(ns, "memory_versions",
                     f"ns = {_sql(ns)} AND rowid BETWEEN (SELECT rowid FROM memory_versions "
                     f"WHERE {_where(ns=ns, id=first.id, version=first.version)}) AND "
                     f"(SELECT rowid FROM memory_versions "
                     f"WHERE {_where(ns=ns, id=last.id, version=last.version)})",
                     f"applying these rows failed: {exc!r}")  # fmt: skip

    def cold_row(self, state: NamespaceState, row: MemoryRow) -> None:
        ns, mid, entity = row.ns, _text(row.id, "id"), _text(row.entity, "entity")
        self.sys_time(ns, row.sys_us, "sys_us")
        known = state.cold.get(mid)
        if known is None:
            state.cold[mid] = entity
            state.cold_by_entity.setdefault(entity, set()).add(mid)
        elif known != entity:
            raise _Bad(f"entity: {_show(entity)}, but earlier versions are about {_show(known)}")
        expires_us, erased = row.expires_us, _flag(row.erased, "erased")
        if expires_us is not None and not erased:  # the latest version's expiry wins
            state.cold_expiry[mid] = _int(expires_us, "expires_us")
        else:
            state.cold_expiry.pop(mid, None)

    def memory(self, state: NamespaceState, row: MemoryRow, prev: MemRec | None) -> MemRec:
        (ns, mid, version, sys_us, created_us, entity, type_, content, meta, emb, sal, ts_us,
         agent, pinned, ttl, expires_us, deleted, erased) = row  # fmt: skip
        _text(mid, "id")
        _int(version, "version", 1, MAX_STORED_INT)
        self.sys_time(ns, sys_us, "sys_us")
        _int(created_us, "created_us", 0, LATEST_US)
        _text(entity, "entity")
        if prev is not None:
            if version <= prev.version:
                raise _Bad(f"version: {version} after version {prev.version} of the same memory")
            if entity != prev.entity:
                raise _Bad(f"entity: {_show(entity)}, but earlier versions are about "
                           f"{_show(prev.entity)}")  # fmt: skip
        _text(type_, "type")
        _text(content, "content")
        if meta != "{}":
            _json(meta, "metadata", dict)
        if emb is not None:
            if type(emb) is not bytes:
                raise _Bad(f"embedding: expected a blob of float32, got {_show(emb)}")
            if state.dim is None:
                raise _Bad("embedding: the namespace row has no dim")
            if len(emb) != 4 * state.dim:
                raise _Bad(f"embedding: {len(emb)} bytes, the namespace's dim {state.dim} "
                           f"needs {4 * state.dim}")  # fmt: skip
        _number(sal, "salience")
        _int(ts_us, "ts_us")
        _opt_text(agent, "agent")
        _flag(pinned, "pinned")
        if ttl is not None:
            _number(ttl, "ttl")
        if expires_us is not None:
            _int(expires_us, "expires_us")
        _flag(deleted, "deleted")
        _flag(erased, "erased")
        vec = None if emb is None else np.frombuffer(emb, dtype=np.float32)
        rec = MemRec(mid, version, sys_us, created_us, entity, type_, content, meta, vec,
                     float(sal), ts_us, agent, bool(pinned), ttl, expires_us,
                     bool(deleted))  # fmt: skip
        rec.erased = bool(erased)
        return rec

    def fact(self, state: NamespaceState, row: FactRow) -> FactRec:
        (ns, entity, key, version, sys_us, created_us, value, agent, ttl, expires_us, deleted,
         erased) = row  # fmt: skip
        _text(entity, "entity")
        _text(key, "key")
        _int(version, "version", 1, MAX_STORED_INT)
        chain = state.facts.get((entity, key))
        if chain and version <= chain[-1].version:
            raise _Bad(f"version: {version} after version {chain[-1].version} of the same fact")
        self.sys_time(ns, sys_us, "sys_us")
        _int(created_us, "created_us", 0, LATEST_US)
        _json(value, "value", object)  # any JSON value
        _opt_text(agent, "agent")
        if ttl is not None:
            _number(ttl, "ttl")
        if expires_us is not None:
            _int(expires_us, "expires_us")
        rec = FactRec(entity, key, version, sys_us, created_us, value, agent, ttl, expires_us,
                      bool(_flag(deleted, "deleted")))  # fmt: skip
        rec.erased = bool(_flag(erased, "erased"))
        return rec

    def event(self, state: NamespaceState, row: EventRow) -> EventRec:
        (ns, stream, ms, seq, sys_us, entity, ts_us, agent, content, data, memory_id,
         erased) = row  # fmt: skip
        _text(stream, "stream")
        key = (_int(ms, "ms", 0, MAX_STORED_INT), _int(seq, "seq", 0, MAX_STORED_INT))
        tail = state.stream_tail(stream)
        if tail is not None and key <= tail:
            raise _Bad(f"id: {ms}-{seq} after {tail[0]}-{tail[1]} in the same stream")
        self.sys_time(ns, sys_us, "sys_us")
        _text(entity, "entity")
        _int(ts_us, "ts_us")
        _opt_text(agent, "agent")
        _text(content, "content")
        if data is not None:
            _json(data, "data", dict)
        _opt_text(memory_id, "memory_id")
        rec = EventRec(stream, ms, seq, sys_us, entity, ts_us, agent, content, data,
                       memory_id)  # fmt: skip
        rec.erased = bool(_flag(erased, "erased"))
        return rec


def _pair(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and type(value[0]) is str
        and type(value[1]) is int
    )
