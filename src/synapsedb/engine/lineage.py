"""Lineage and audit: the query log, recorded answers, and who wrote and read what, when.

Every query is logged (agent, text, request, the hits' ids, versions and scores). To keep queries
at millisecond cost, log rows wait in a small in-memory buffer and are committed with the next
group commit (or by the background flusher within about a second); ``record_answer`` commits in
the same transaction as every query logged before it, so an answer never points at an unlogged
query. The log holds ids and versions, never copies of content: ``lineage`` shows each memory
version's content from the version history, so it stays right after the memory changes, and
says ``erased`` after a purge. A purge also erases the text and request of logged queries that
named the entity or returned its memories, and the text of answers built on its memories or
about it (``record_answer(entities=...)``; the answer keeps its id, time, agent, queries and
cited versions, and says ``erased``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import NotFoundError, SynapseError, ValidationError
from ..storage.base import AnswerInsert, QueryInsert
from ..storage.erasure import erase_query_row, names_entity
from ..times import to_datetime, to_us
from ..types import AuditEntry, Fact, Lineage, LoggedQuery, Memory, MemoryRef, Snapshot
from .ops import alias_of
from .records import EventRec, FactRec, MemRec
from .state import NamespaceState
from .writer import Op, Tx

if TYPE_CHECKING:
    from ..storage.base import QueryRow, Row, Storage

__all__ = ["Flush", "QueryLog", "RecordAnswer", "audit", "lineage", "snapshot"]

INF = 1 << 62


PURGE_MEMORY_S = 120.0  # how long a purge is remembered for the rows of queries in flight


class QueryLog:
    """Rows of the query log waiting for the next commit.

    A query still running when a purge commits logs its row after the purge rewrote the
    stored log. So each purge is remembered here (in memory only, for ``PURGE_MEMORY_S``, far
    longer than any query runs: the name, the erased memory ids, when the purge became
    visible), and :meth:`drain` erases such a row exactly as the purge erased the stored ones
    (:func:`~synapsedb.storage.erasure.names_entity`,
    :func:`~synapsedb.storage.erasure.erase_query_row`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._rows: list[QueryInsert] = []
        self._lock = threading.Lock()
        self._clock = clock
        # (namespace, entity, erased memory ids, visible_us, forget at clock())
        self._purges: list[tuple[str, str, frozenset[str], int, float]] = []

    def remember_purge(self, ns: str, entity: str, ids: frozenset[str], visible_us: int) -> None:
        """A purge of ``entity`` in ``ns`` became visible to readers at ``visible_us``: every
        query that started before then may still log a row naming it."""
        with self._lock:
            self._purges.append((ns, entity, ids, visible_us, self._clock() + PURGE_MEMORY_S))

    def add(self, row: Row) -> int:
        """Buffer one row (a :class:`QueryInsert`, or a tuple of its layout)."""
        query = QueryInsert._make(row)
        with self._lock:
            self._rows.append(query)
            return len(self._rows)

    def drain(self) -> list[QueryInsert]:
        with self._lock:
            rows, self._rows = self._rows, []
            if self._purges:
                now = self._clock()
                self._purges = [p for p in self._purges if p[4] > now]
                rows = [self._erased(row) for row in rows]
            return rows

    def _erased(self, row: QueryInsert) -> QueryInsert:
        for p_ns, entity, ids, visible_us, _until in self._purges:
            if (
                p_ns == row.ns
                and names_entity(row.text, row.request, row.hits, entity, ids)
                and _started_before(row.request, row.sys_us, visible_us)
            ):
                return erase_query_row(row)
        return row

    def requeue(self, rows: list[QueryInsert]) -> None:
        """Put back rows whose commit failed (they go out with the next one)."""
        with self._lock:
            self._rows[:0] = rows

    def __len__(self) -> int:
        return len(self._rows)


def _started_before(request: str | None, sys_us: int, visible_us: int) -> bool:
    """Whether the query behind a log row may have read the namespace before
    ``visible_us``. A present-time query's ``as_of`` is when it started (at most its log
    time ``sys_us``); an explicit ``as_of`` says nothing about when the query ran, so one
    after its log time counts as in flight too (and one before ``visible_us`` does anyway)."""
    try:
        t = to_us(orjson.loads(request or "{}")["as_of"], "as_of")
    except (KeyError, TypeError, ValueError, SynapseError):
        return True  # no readable start: treat it as in flight
    return t <= visible_us or t > sys_us


class Flush(Op):
    """Commits whatever is buffered (the query log) without changing anything else."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0)

    def plan(self, tx: Tx) -> None:
        return None


def _hits_of(rows: Iterable[QueryRow | QueryInsert]) -> dict[str, list[list[Any]]]:
    """Each logged query's hits: [[memory id, version, score], ...] by query id."""
    return {row.id: orjson.loads(row.hits) for row in rows}


class RecordAnswer(Op):
    """Ties an answer to the queries and memories behind it (one durable row)."""

    __slots__ = ("agent", "answer_id", "cited", "entities", "ns", "query_ids", "storage", "text")

    def __init__(
        self,
        ns: str,
        answer_id: str,
        query_ids: list[str],
        cited: list[str],
        agent: str | None,
        text: str | None,
        storage: Storage,
        entities: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.ns, self.answer_id, self.query_ids, self.cited = ns, answer_id, query_ids, cited
        self.agent, self.text, self.storage = agent, text, storage
        self.entities = entities or []

    def plan(self, tx: Tx) -> list[tuple[str, int]]:
        ns = self.ns
        if self.storage.read_answer(ns, self.answer_id) is not None or any(
            r.ns == ns and r.id == self.answer_id for r in tx.batch.answers
        ):
            raise ValidationError(
                f"answer_id: answer {self.answer_id!r} is already recorded", field="answer_id"
            )
        pending = _hits_of(r for r in tx.batch.queries if r.ns == ns)
        stored = _hits_of(
            self.storage.read_queries(ns, [q for q in self.query_ids if q not in pending])
        )
        hits = {**stored, **pending}
        for qid in self.query_ids:
            if qid not in hits:
                raise NotFoundError(
                    f"query_ids: query {qid!r} is not in the query log of namespace {ns!r}",
                    field="query_ids",
                    id=qid,
                )
        behind: dict[str, int] = {}
        for qid in self.query_ids:
            for mid, version, _score in hits[qid]:
                behind.setdefault(mid, version)
        cited: list[list[Any]] = []
        for mid in self.cited:
            version = behind.get(mid)
            if version is None:
                rec = tx.latest_memory(ns, mid)
                if rec is None:
                    raise NotFoundError(
                        f"cited: memory {mid!r} not found in namespace {ns!r}",
                        field="cited",
                        id=mid,
                    )
                version = rec.version
                behind[mid] = version
            cited.append([mid, version])
        memories = [[mid, v] for mid, v in behind.items()]
        tx.impacts.extend((ns, mid) for mid in behind)
        tx.batch.answers.append(
            AnswerInsert(
                ns,
                self.answer_id,
                tx.now_us,
                self.agent,
                self.text,
                orjson.dumps(self.query_ids).decode(),
                orjson.dumps(cited).decode(),
                orjson.dumps(memories).decode(),
                orjson.dumps(self.entities).decode(),
            )
        )
        return [(mid, v) for mid, v in behind.items()]


def _version(
    state: NamespaceState | None, mid: str, version: int, storage: Storage | None = None
) -> MemRec | None:
    """Version ``version`` of memory ``mid``: from memory when hot, from storage when cold."""
    chain = state.mems.get(mid) if state is not None else None
    if not chain and state is not None and storage is not None and mid in state.cold:
        chain = [MemRec.from_row(r) for r in storage.read_memory_chain(state.name, mid)]
    if not chain:
        return None
    for rec in chain:
        if rec.version == version:
            return rec
    return None


def _ref(
    state: NamespaceState | None,
    mid: str,
    version: int,
    score: float | None,
    storage: Storage | None = None,
) -> MemoryRef:
    rec = _version(state, mid, version, storage)
    if rec is None or rec.erased:
        return MemoryRef(mid, version, rec.entity if rec else None, None, score, erased=True)
    return MemoryRef(mid, version, rec.entity, rec.content, score)


def logged_query(state: NamespaceState | None, row: QueryRow, storage: Storage) -> LoggedQuery:
    return LoggedQuery(
        query_id=row.id,
        agent=row.agent,
        text=row.text,
        request=orjson.loads(row.request),
        recorded_at=to_datetime(row.sys_us),
        hits=[_ref(state, mid, v, s, storage) for mid, v, s in orjson.loads(row.hits)],
    )


def lineage(storage: Storage, state: NamespaceState | None, ns: str, answer_id: str) -> Lineage:
    row = storage.read_answer(ns, answer_id)
    if row is None:
        raise NotFoundError(
            f"answer {answer_id!r} not found in namespace {ns!r}", field="answer_id", id=answer_id
        )
    qids = orjson.loads(row.query_ids)
    by_id = {r.id: r for r in storage.read_queries(ns, qids)}
    return Lineage(
        answer_id=row.id,
        agent=row.agent,
        text=row.text,
        recorded_at=to_datetime(row.sys_us),
        queries=[logged_query(state, by_id[q], storage) for q in qids if q in by_id],
        cited=[_ref(state, mid, v, None, storage) for mid, v in orjson.loads(row.cited)],
        erased=bool(row.erased),
        entities=orjson.loads(row.entities),
    )


WRITE_ACTIONS = frozenset(("write", "update", "delete", "set", "unset", "append"))


def change_entry(rec: MemRec | FactRec | EventRec) -> AuditEntry:
    """The audit entry of one stored version: a memory write, update or delete, a fact set or
    unset, or a stream append."""
    at = to_datetime(rec.sys_us)
    if isinstance(rec, MemRec):
        action = "delete" if rec.deleted else ("write" if rec.version == 1 else "update")
        return AuditEntry(at, rec.agent, action, rec.entity, rec.id, rec.version)
    if isinstance(rec, FactRec):
        action = "unset" if rec.deleted else "set"
        return AuditEntry(at, rec.agent, action, rec.entity, rec.key, rec.version)
    return AuditEntry(at, rec.agent, "append", rec.entity, f"{rec.stream}/{rec.ms}-{rec.seq}")


def changes_of(tx: Tx) -> dict[str, list[AuditEntry]]:
    """What one committed batch changed, per namespace, in the order it was planned, less
    what a purge in the same batch erased (storage erases those rows in the same commit)."""
    purges = tx.batch.purges

    def erased(ns: str, rec: MemRec | FactRec | EventRec) -> bool:
        return any(
            p.ns == ns
            and (
                rec.entity == p.entity
                or (
                    isinstance(rec, EventRec)
                    and (rec.stream == p.entity or rec.stream in p.streams)
                )
            )
            for p in purges
        )

    out: dict[str, list[AuditEntry]] = {}
    planned: list[tuple[str, MemRec | FactRec | EventRec]] = [*tx.mems, *tx.facts, *tx.events]
    for ns, rec in planned:
        if not (purges and erased(ns, rec)):
            out.setdefault(ns, []).append(change_entry(rec))
    return out


def audit(
    storage: Storage,
    state: NamespaceState | None,
    ns: str,
    *,
    entity: str | None,
    agent: str | None,
    since_us: int,
    until_us: int,
    limit: int,
    subject_of: Any,
) -> list[AuditEntry]:
    """Who wrote and read what, when: oldest first, at most ``limit`` entries. After a purge
    the entity's rows name it only by its alias; asking by name finds them through it."""
    out: list[tuple[int, AuditEntry]] = []
    alias = None if entity is None else alias_of(subject_of(entity))

    def keep(at: int, who: str | None, about: Iterable[str | None]) -> bool:
        if not since_us <= at < until_us or (agent is not None and who != agent):
            return False
        if entity is None:
            return True
        names = set(about)
        return entity in names or alias in names

    if state is not None:
        chains: list[list[MemRec] | list[FactRec] | list[EventRec]] = [
            *state.mems.values(),
            *state.facts.values(),
            *state.streams.values(),
        ]
        for chain in chains:  # memory versions, fact versions, stream events
            out.extend(
                (r.sys_us, change_entry(r)) for r in chain if keep(r.sys_us, r.agent, (r.entity,))
            )

    def entities_of(pairs: Iterable[list[Any]]) -> set[str | None]:
        return {(_version(state, p[0], p[1]) or _Unknown).entity for p in pairs}

    for q in storage.scan_queries(ns, since_us, until_us):
        req = orjson.loads(q.request)
        about = entities_of(orjson.loads(q.hits)) | {req.get("entity")}
        if keep(q.sys_us, q.agent, about):
            scoped = req.get("entity")
            out.append(
                (q.sys_us, AuditEntry(to_datetime(q.sys_us), q.agent, "query", scoped, q.id))
            )
    for a in storage.scan_answers(ns, since_us, until_us):
        if keep(a.sys_us, a.agent, entities_of(orjson.loads(a.memories))):
            out.append((a.sys_us, AuditEntry(to_datetime(a.sys_us), a.agent, "answer", None, a.id)))
    for t in storage.scan_tiers(ns, since_us, until_us):
        moved = state.cold.get(t.id) if state is not None else None
        if moved is None and state is not None and t.id in state.mems:
            moved = state.mems[t.id][-1].entity
        if keep(t.sys_us, None, (moved,)):
            action = "demote" if t.tier == "cold" else "promote"
            note = t.reason if t.score is None else f"score {t.score}: {t.reason}"
            out.append(
                (
                    t.sys_us,
                    AuditEntry(to_datetime(t.sys_us), None, action, moved, f"{t.id} ({note})"),
                )
            )
    for e in storage.scan_erasures(ns, since_us, until_us):
        if entity is not None and e.subject != subject_of(entity):
            continue
        if keep(e.sys_us, e.agent, (entity,)):
            out.append(
                (
                    e.sys_us,
                    AuditEntry(
                        to_datetime(e.sys_us),
                        e.agent,
                        "erase",
                        entity,
                        f"subject:{e.subject} {e.counts}",
                    ),
                )
            )
    out.sort(key=lambda x: x[0])
    return [e for _, e in out[:limit]]


class _Unknown:
    entity = None


def snapshot(
    state: NamespaceState | None,
    entity: str,
    t: int,
    facts: Callable[[str, datetime], list[Fact]],
    memories: Callable[[str, datetime], list[Memory]],
) -> Snapshot:
    """The entity's facts, memories and stream events as they were at system time ``t``;
    ``facts`` and ``memories`` read the namespace's (``Namespace.facts``/``memories``) as of
    a time."""
    events: list[EventRec] = []
    if state is not None:
        for name in list(state.streams):
            events.extend(
                e for e in state.events_in(name, (0, 0), (INF, INF), t) if e.entity == entity
            )
    events.sort(key=lambda e: (e.ms, e.seq))
    when = to_datetime(t)
    return Snapshot(
        entity=entity,
        as_of=when,
        facts=facts(entity, when),
        memories=memories(entity, when),
        events=[e.to_public() for e in events],
    )
