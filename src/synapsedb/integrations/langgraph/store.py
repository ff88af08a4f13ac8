"""``SynapseStore``: LangGraph's ``BaseStore`` over one SynapseDB namespace, embedded
(``synapsedb.open``) or remote (``synapsedb.connect``).

The mapping (docs/integrations/langgraph.md):

- an item ``(namespace, key) -> value`` is the KV fact ``(lgs:<labels>, key)`` whose JSON value
  is ``{"value", "ns", "ttl", "ix", "u"}``: the item's value, its labels, its TTL in minutes,
  how many index entries it has and, after a TTL refresh, its ``updated_at``. ``created_at``
  is the fact's (the first set since it last did not exist), ``updated_at`` its last
  ``recorded_at``. Every put is a new version, so ``get_as_of`` reads an item as it was;
- a TTL is the fact's ``ttl`` (LangGraph's minutes times 60), so expiry is SynapseDB's: the
  item leaves reads at once and is erased after ``ttl_grace_s``; ``refresh_on_read`` sets the
  fact again with the same TTL (compare-and-set, so a concurrent put wins);
- the semantic index is one memory per embedded text (:mod:`.index`), searched inside
  SynapseDB by cosine similarity;
- ``list_namespaces`` reads SynapseDB's entity list (the namespaces with a live item).

A batch runs its reads first, then its puts (the last put of a (namespace, key) wins), like
``InMemoryStore``. ``abatch`` runs ``batch`` in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from ...errors import NotFoundError, ValidationError, VersionConflictError
from ...times import TimeLike
from ...validation import MAX_TTL_S, dump_json
from .filters import check_filter, check_match_path, matches, path_matches
from .index import Index, index_memories, ranked_hits
from .naming import (
    check_labels,
    check_store_key,
    decode_namespace,
    encode_namespace,
    index_memory_id,
)

__all__ = ["SynapseStore"]

DEFAULT_MAX_VALUE_BYTES = 65536  # SynapseDB's default max_value_bytes (the server's is unknown)


class SynapseStore(BaseStore):
    """LangGraph's long-term memory store on SynapseDB.

    ``db`` is ``synapsedb.open(path)`` or ``synapsedb.connect(url)``; ``namespace`` the
    SynapseDB namespace that holds the store (give each store its own). ``index`` is
    LangGraph's index config ``{"dims", "embed", "fields"}``; without ``embed`` SynapseDB's
    own embedder embeds the texts. ``ttl`` is LangGraph's TTL config ``{"default_ttl"
    (minutes), "refresh_on_read"}``. ``agent`` is recorded as the writer of every change.
    """

    supports_ttl = True

    def __init__(
        self,
        db: Any,
        namespace: str = "langgraph",
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        agent: str | None = "langgraph",
    ) -> None:
        if not hasattr(db, "namespace") or asyncio.iscoroutinefunction(getattr(db, "close", None)):
            raise ValidationError(
                "db: expected a database from synapsedb.open() or synapsedb.connect() (the "
                "async methods run it in a worker thread)",
                field="db",
            )
        self._ns = db.namespace(namespace, agent=agent)
        self.namespace = namespace
        self._index = Index(index) if index is not None else None
        self.index_config = dict(index) if index is not None else None
        self.ttl_config = _check_ttl_config(ttl)
        settings = getattr(db, "settings", None)
        self._max_value = int(getattr(settings, "max_value_bytes", DEFAULT_MAX_VALUE_BYTES))

    def __repr__(self) -> str:
        return f"<SynapseStore {self.namespace!r}>"

    # -- BaseStore --------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op.namespace, op.key, op.refresh_ttl)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif isinstance(op, PutOp):
                puts[(check_labels(op.namespace), check_store_key(op.key))] = op
            else:
                raise ValidationError(
                    f"ops[{i}]: unknown operation {type(op).__name__}", field=f"ops[{i}]"
                )
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- time travel ------------------------------------------------------------------------------

    def get_as_of(self, namespace: tuple[str, ...], key: str, as_of: TimeLike) -> Item | None:
        """The item as it was at system time ``as_of`` (SynapseDB's time travel), or None if
        it did not exist then; expired items are as they were (no TTL refresh)."""
        entity, key = self._address(namespace, key)
        if entity is None:
            return None
        try:
            fact = self._ns.get(entity, key, as_of=as_of)
        except NotFoundError:
            return None
        return _item(fact)

    async def aget_as_of(
        self, namespace: tuple[str, ...], key: str, as_of: TimeLike
    ) -> Item | None:
        return await asyncio.to_thread(self.get_as_of, namespace, key, as_of)

    # -- operations -------------------------------------------------------------------------------

    def _address(self, namespace: Any, key: Any) -> tuple[str | None, str]:
        """(entity, key) of an item to read; entity None when no item can be stored there."""
        check_labels(namespace)
        if not isinstance(key, str):
            raise ValidationError(f"key: expected a string, got {type(key).__name__}", field="key")
        try:
            return encode_namespace(namespace), check_store_key(key)
        except ValidationError:  # too long or empty: nothing can be stored under it
            return None, key

    def _get(self, namespace: tuple[str, ...], key: str, refresh: bool) -> Item | None:
        entity, key = self._address(namespace, key)
        if entity is None:
            return None
        try:
            fact = self._ns.get(entity, key)
        except NotFoundError:
            return None
        item = _item(fact)
        if item is not None and refresh:
            self._refresh(fact)
        return item

    def _refresh(self, fact: Any) -> None:
        wrapped = fact.value
        minutes = wrapped.get("ttl")
        if not minutes:
            return
        updated = wrapped.get("u") or fact.recorded_at.isoformat()
        try:
            self._ns.set(
                fact.entity,
                fact.key,
                {**wrapped, "u": updated},
                ttl=minutes * 60,
                if_version=fact.version,
            )
        except (VersionConflictError, NotFoundError):
            return  # written or deleted meanwhile: that write decides the expiry
        for i in range(int(wrapped.get("ix") or 0)):
            with contextlib.suppress(NotFoundError):  # expired meanwhile
                self._ns.update(index_memory_id(fact.entity, fact.key, i), {"ttl": minutes * 60})

    def _put(self, op: PutOp) -> None:
        entity = encode_namespace(op.namespace)
        labels = check_labels(op.namespace)
        key = check_store_key(op.key)
        try:
            old = self._ns.get(entity, key)
        except NotFoundError:
            old = None
        old_ix = int(old.value.get("ix") or 0) if old is not None and _item(old) else 0
        if op.value is None:
            if old is not None:
                with contextlib.suppress(NotFoundError):  # expired or deleted meanwhile
                    self._ns.delete(entity, key)
            self._drop_index(entity, key, 0, old_ix)
            return
        if not isinstance(op.value, Mapping):
            raise ValidationError(
                f"value: expected a dict, got {type(op.value).__name__}", field="value"
            )
        value = dict(op.value)
        minutes = _check_ttl(op.ttl, "ttl")
        ttl_s = None if minutes is None else minutes * 60
        overhead = len(dump_json(list(labels), "namespace", 1 << 20)) + 128
        dump_json(value, "value", self._max_value - overhead)
        entries: list[Any] = []
        vectors = None
        if self._index is not None and op.index is not False:
            paths = None if op.index is None else list(op.index)
            entries = self._index.entries(value, paths)
            vectors = self._index.vectors([e.text for e in entries])
        wrapped = {"value": value, "ns": list(labels), "ttl": minutes, "ix": len(entries)}
        self._ns.set(entity, key, wrapped, ttl=ttl_s)
        if entries:
            self._ns.write_many(index_memories(entity, labels, key, entries, vectors, ttl_s))
        self._drop_index(entity, key, len(entries), old_ix)

    def _drop_index(self, entity: str, key: str, start: int, stop: int) -> None:
        for i in range(start, stop):
            with contextlib.suppress(NotFoundError):  # expired or already gone
                self._ns.delete(index_memory_id(entity, key, i))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = check_labels(op.namespace_prefix, "namespace_prefix")
        flt = check_filter(op.filter)
        limit, offset = _count(op.limit, "limit"), _count(op.offset, "offset")
        candidates: list[tuple[Item, Any, int]] = []  # (item, fact, index entries)
        totals: dict[str, int] = {}  # index entries of every live item, per entity
        for entity in self._ns.entities():
            labels = decode_namespace(entity)
            if labels is None or labels[: len(prefix)] != prefix:
                continue
            total = 0
            for fact in self._ns.facts(entity):
                item = _item(fact, labels)
                if item is None:
                    continue
                ix = int(fact.value.get("ix") or 0)
                total += ix
                if matches(item.value, flt):
                    candidates.append((item, fact, ix))
            totals[entity] = total
        if op.query and self._index is not None:
            chosen = self._rank(op.query, prefix, candidates, totals, limit, offset)
        else:
            candidates.sort(key=lambda c: (-c[0].updated_at.timestamp(), c[0].namespace, c[0].key))
            chosen = [(None, item, fact) for item, fact, _ in candidates[offset : offset + limit]]
        if op.refresh_ttl:
            for _, _, fact in chosen:
                self._refresh(fact)
        return [
            SearchItem(
                item.namespace, item.key, item.value, item.created_at, item.updated_at, score
            )
            for score, item, _ in chosen
        ]

    def _rank(
        self,
        query: str,
        prefix: tuple[str, ...],
        candidates: list[tuple[Item, Any, int]],
        totals: dict[str, int],
        limit: int,
        offset: int,
    ) -> list[tuple[float | None, Item, Any]]:
        """Best first by cosine, then the items without index entries (as InMemoryStore)."""
        assert self._index is not None
        by_addr = {(fact.entity, fact.key): (item, fact) for item, fact, _ in candidates}
        wanted = {(fact.entity, fact.key): ix for _, fact, ix in candidates}
        kept: list[tuple[float | None, Item, Any]] = []
        seen: set[tuple[str, str]] = set()
        for score, entity, key in ranked_hits(
            self._ns, self._index, query, prefix, wanted, totals, offset + limit
        ):
            if (entity, key) in seen:
                continue
            rank = len(seen)
            seen.add((entity, key))
            if rank >= offset + limit:
                break
            if rank >= offset:
                item, fact = by_addr[(entity, key)]
                kept.append((score, item, fact))
        scoreless = [(item, fact) for item, fact, ix in candidates if not ix]
        if scoreless and len(kept) < limit:
            kept.extend((None, item, fact) for item, fact in scoreless[: limit - len(kept)])
        return kept

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = []
        for i, cond in enumerate(op.match_conditions or ()):
            kind = getattr(cond, "match_type", None)
            if kind not in ("prefix", "suffix"):
                raise ValidationError(
                    f"match_conditions[{i}].match_type: expected 'prefix' or 'suffix', "
                    f"got {kind!r}",
                    field=f"match_conditions[{i}].match_type",
                )
            conditions.append((kind, check_match_path(cond.path, f"match_conditions[{i}].path")))
        depth = op.max_depth
        if depth is not None and (
            isinstance(depth, bool) or not isinstance(depth, int) or depth < 1
        ):
            raise ValidationError(
                f"max_depth: expected a positive integer, got {depth!r}", field="max_depth"
            )
        limit, offset = _count(op.limit, "limit"), _count(op.offset, "offset")
        found: set[tuple[str, ...]] = set()
        for entity in self._ns.entities():
            labels = decode_namespace(entity)
            if labels is None or not all(path_matches(k, p, labels) for k, p in conditions):
                continue
            found.add(labels if depth is None else labels[:depth])
        return sorted(found)[offset : offset + limit]


def _item(fact: Any, labels: tuple[str, ...] | None = None) -> Item | None:
    """The LangGraph item of a store fact (None for a fact this store did not write);
    ``labels`` when the caller already decoded the entity."""
    wrapped = fact.value
    if not isinstance(wrapped, Mapping) or not isinstance(wrapped.get("value"), Mapping):
        return None
    labels = labels if labels is not None else decode_namespace(fact.entity)
    if labels is None:
        return None
    updated = wrapped.get("u")
    return Item(
        value=dict(wrapped["value"]),
        key=fact.key,
        namespace=labels,
        created_at=fact.created_at,
        updated_at=datetime.fromisoformat(updated) if updated else fact.recorded_at,
    )


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(
            f"{field}: expected a non-negative integer, got {value!r}", field=field
        )
    return value


def _check_ttl(minutes: Any, field: str) -> float | None:
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not minutes > 0:
        raise ValidationError(
            f"{field}: expected a positive number of minutes, got {minutes!r}", field=field
        )
    if minutes * 60 > MAX_TTL_S:
        raise ValidationError(
            f"{field}: {minutes!r} minutes, over the limit of {MAX_TTL_S // 60} (100 years)",
            field=field,
            limit=MAX_TTL_S // 60,
        )
    return float(minutes)


def _check_ttl_config(ttl: Any) -> TTLConfig | None:
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise ValidationError("ttl: expected an object (default_ttl, refresh_on_read)", field="ttl")
    allowed = {"default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired"}
    for name in ttl:
        if name not in allowed:
            raise ValidationError(
                f"ttl.{name}: unknown field; allowed: {', '.join(sorted(allowed))}",
                field=f"ttl.{name}",
            )
    _check_ttl(ttl.get("default_ttl"), "ttl.default_ttl")
    refresh = ttl.get("refresh_on_read", True)
    if not isinstance(refresh, bool):
        raise ValidationError(
            f"ttl.refresh_on_read: expected true or false, got {refresh!r}",
            field="ttl.refresh_on_read",
        )
    return TTLConfig(**ttl)  # type: ignore[typeddict-item]
