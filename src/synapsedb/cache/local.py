"""The semantic cache over one namespace of an open database, built on the namespace's public
API only: an entry is a memory (type ``cache``, entity ``synapsedb:cache:<scope>``, its key
text as content, so the database's embedder embeds it) plus a KV fact of the same entity
holding the value; both carry the entry's TTL.

A lookup is one filtered vector query (the scope's entity, type ``cache``, the key's exact
signature, cosine at least the threshold, k=1) and one in-memory fact read. The server's
cache routes call this class; so does :class:`~synapsedb.cache.SemanticCache` over an
embedded database.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from ..engine import Database, Namespace
from ..errors import NotFoundError, ValidationError
from ..surface import CacheAPI
from ..types import Fact, Memory
from .counters import counters_for
from .keying import (
    ENTITY_PREFIX,
    TYPE,
    check_key,
    check_params,
    check_scope,
    check_tag,
    check_tags,
    check_threshold,
    check_ttl_s,
    check_value,
    entity_of,
    entry_id,
    normalize,
    scope_of,
    signature,
)
from .records import CacheEntry, CacheHit, CacheStats

__all__ = ["DEFAULT_THRESHOLD", "DEFAULT_TTL_S", "LocalCache"]

# Chosen by bench/bench_cache.py on the dev half of its paraphrase set with all-MiniLM-L6-v2
# (the threshold with the most hits at a false-hit rate of at most 1%); docs/cache.md.
DEFAULT_THRESHOLD = 0.74
DEFAULT_TTL_S = 3600.0
_PAGE = 1000  # entries deleted per round of an invalidation by tag or prefix


class LocalCache(CacheAPI):
    """The cache of namespace ``namespace`` of ``db`` (an open engine Database): ``ns.cache``
    of an embedded namespace, and what the server's cache routes run."""

    __slots__ = ("counters", "db", "mem")

    def __init__(self, db: Database, namespace: str, *, agent: str | None = None) -> None:
        self.db = db
        self.mem: Namespace = db.namespace(namespace, agent=agent)
        self.counters = counters_for(db)

    @property
    def namespace(self) -> str:
        return self.mem.name

    def lookup(
        self,
        key: str,
        *,
        scope: str = "default",
        params: Any = None,
        threshold: float | None = None,
        match_literals: bool = True,
        agent: str | None = None,
    ) -> CacheHit | None:
        """The entry of ``scope`` whose key means the same as ``key`` (cosine at least
        ``threshold``) with the same exact signature (literals, ``params``), or None."""
        key, scope = check_key(key), check_scope(scope)
        sig = signature(key, check_params(params), match_literals=_flag(match_literals))
        thr = check_threshold(DEFAULT_THRESHOLD if threshold is None else threshold)
        # no types=[TYPE]: the scope's entity and the signature (metadata only entries have)
        # already select entries, and a type mask is a pass over every row (0.4 ms at 30k)
        res = self.mem.query(
            key,
            entity=entity_of(scope),
            mode="vector",
            k=1,
            filter={"cache.sig": sig},
            min_score=thr,
            dedup=False,
            agent=agent,
        )
        hit = None
        if res.hits:
            h = res.hits[0]
            try:
                fact = self.mem.get(h.entity, h.id)
            except NotFoundError:  # expired or invalidated between the two reads: a miss
                fact = None
            if fact is not None:
                meta = h.metadata.get("cache") or {}
                hit = CacheHit(
                    h.id,
                    scope,
                    h.content,
                    fact.value,
                    float(h.score),
                    list(meta.get("tags") or []),
                    h.agent,
                    fact.recorded_at,
                    fact.expires_at,
                )
        if hit is None:
            self.counters.miss(self.namespace, scope)
        else:
            self.counters.hit(self.namespace, scope)
        return hit

    def store(
        self,
        key: str,
        value: Any,
        *,
        scope: str = "default",
        params: Any = None,
        ttl: float | None = None,
        tags: Sequence[str] | None = None,
        match_literals: bool = True,
        agent: str | None = None,
    ) -> CacheEntry:
        """Store ``value`` (JSON) under ``key`` in ``scope`` for ``ttl`` seconds. The same key
        (same words up to case and spacing, same params) replaces its entry."""
        key, scope = check_key(key), check_scope(scope)
        raw = check_value(value)
        sig = signature(key, check_params(params), match_literals=_flag(match_literals))
        ttl_s, tag_list = check_ttl_s(DEFAULT_TTL_S if ttl is None else ttl), check_tags(tags)
        eid, entity = entry_id(scope, key, sig), entity_of(scope)
        # the value first: a lookup that finds the memory then finds its value
        fact: Fact = self.mem.set(entity, eid, orjson.loads(raw), ttl=ttl_s, agent=agent)
        memory: Memory = self.mem.write(
            entity,
            {
                "id": eid,
                "content": key,
                "type": TYPE,
                "salience": 0.0,
                "ttl": ttl_s,
                "metadata": {"cache": {"sig": sig, "key": normalize(key), "tags": tag_list}},
            },
            agent=agent,
        )
        self.counters.stored(self.namespace, scope)
        return CacheEntry(
            eid, scope, key, tag_list, memory.agent, fact.recorded_at, fact.expires_at, ttl_s
        )

    def invalidate(
        self,
        key: str | None = None,
        *,
        scope: str | None = None,
        params: Any = None,
        tag: str | None = None,
        prefix: str | None = None,
        match_literals: bool = True,
        agent: str | None = None,
    ) -> int:
        """Remove entries; returns how many. ``key``: that key's entry in ``scope`` (exact
        words up to case and spacing, and ``params``); ``tag``: every entry with the tag;
        ``prefix``: every entry whose key starts with it (case and spacing folded);
        ``tag`` and ``prefix`` within ``scope`` when given; ``scope`` alone: the scope's
        entries."""
        given = [n for n, v in (("key", key), ("tag", tag), ("prefix", prefix)) if v is not None]
        if len(given) > 1:
            raise ValidationError(
                f"{given[1]}: give one of key, tag, prefix (or only scope)", field=given[1]
            )
        if params is not None and key is None:
            raise ValidationError("params: only with key", field="params")
        if not given and scope is None:
            raise ValidationError(
                "scope: give key, tag, prefix or scope (clear() removes every entry)",
                field="scope",
            )
        scope = None if scope is None else check_scope(scope)
        if key is not None:
            key = check_key(key)
            sig = signature(key, check_params(params), match_literals=_flag(match_literals))
            n = self._delete(
                [(entity_of(scope or "default"), entry_id(scope or "default", key, sig))], agent
            )
        elif tag is not None:
            n = self._delete_where({"cache.tags": {"$contains": check_tag(tag)}}, scope, agent)
        elif prefix is not None:
            p = normalize(check_key(prefix, "prefix"))
            flt = {"cache.key": {"$gte": p, "$lt": p + "\U0010ffff"}}
            n = self._delete_where(flt, scope, agent)
        else:
            assert scope is not None
            n = self.mem.forget(entity=entity_of(scope), agent=agent).memories
        self.counters.invalidated(self.namespace, n)
        return n

    def clear(self, *, agent: str | None = None) -> int:
        """Remove every entry of every scope; returns how many."""
        n = 0
        for entity in self.mem.entities():
            if entity.startswith(ENTITY_PREFIX):
                n += self.mem.forget(entity=entity, agent=agent).memories
        self.counters.invalidated(self.namespace, n)
        return n

    def stats(self) -> CacheStats:
        """Entries stored now, and the counts of this process (see CacheStats)."""
        entries = self.mem.stats().memories_by_type.get(TYPE, 0) if self._exists() else 0
        scopes = self.counters.scopes(self.namespace)
        hits = sum(s.hits for s in scopes.values())
        misses = sum(s.misses for s in scopes.values())
        stores = sum(s.stores for s in scopes.values())
        rate = hits / (hits + misses) if hits + misses else None
        return CacheStats(
            self.namespace,
            entries,
            hits,
            misses,
            stores,
            self.counters.invalidations(self.namespace),
            rate,
            scopes,
        )

    def _exists(self) -> bool:
        return self.namespace in set(self.db.namespaces())

    def _delete_where(self, flt: dict[str, Any], scope: str | None, agent: str | None) -> int:
        n = 0
        entity = None if scope is None else entity_of(scope)
        while True:
            res = self.mem.query(
                None, entity=entity, types=[TYPE], filter=flt, k=_PAGE, dedup=False, agent=agent
            )
            found = [(h.entity, h.id) for h in res.hits if scope_of(h.entity) is not None]
            if not found:
                return n
            n += self._delete(found, agent)

    def _delete(self, entries: list[tuple[str, str]], agent: str | None) -> int:
        """Tombstone each entry's memory and value; concurrent deletes share group commits."""

        def one(entry: tuple[str, str]) -> int:
            entity, eid = entry
            with contextlib.suppress(NotFoundError):
                self.mem.delete(entity, eid, agent=agent)
            try:
                self.mem.delete(eid, agent=agent)
            except NotFoundError:
                return 0
            return 1

        if len(entries) == 1:
            return one(entries[0])
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="synapsedb-cache") as pool:
            return sum(pool.map(one, entries))


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(
            f"match_literals: expected true or false, got {value!r}", field="match_literals"
        )
    return value
