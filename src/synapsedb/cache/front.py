"""``SemanticCache(db, namespace)``: one cache API over an embedded database
(``synapsedb.open``) or a server (``synapsedb.connect`` / ``connect_async``).

Embedded, it runs :class:`~synapsedb.cache.local.LocalCache` in this process. Over HTTP, every
call is one request to the namespace's cache routes, which run the same LocalCache in the
server (so a lookup is atomic there and counted in the server's ``/metrics``); over the async
client every method returns an awaitable.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine import Database
from ..errors import ValidationError
from ..validation import check_agent, check_namespace
from .keying import check_threshold, check_ttl_s
from .local import DEFAULT_THRESHOLD, DEFAULT_TTL_S, LocalCache
from .records import CacheEntry, CacheHit, CacheStats

__all__ = ["SemanticCache"]


class SemanticCache:
    """The semantic cache of one namespace, shared by every agent that uses the namespace.

    ``threshold`` (cosine similarity of two keys' embeddings, default
    :data:`DEFAULT_THRESHOLD`) and ``ttl`` (seconds) are this handle's defaults; each call may
    override them. ``match_literals`` (on by default) makes the numbers and identifiers in a
    key part of its exact signature; every agent sharing entries must use the same setting.
    ``agent`` is recorded as the writer of entries and the reader of lookups.
    """

    def __init__(
        self,
        db: Any,
        namespace: str,
        *,
        agent: str | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        ttl: float = DEFAULT_TTL_S,
        match_literals: bool = True,
    ) -> None:
        namespace, agent = check_namespace(namespace), check_agent(agent)
        self.threshold = check_threshold(threshold)
        self.ttl = check_ttl_s(ttl)
        if not isinstance(match_literals, bool):
            raise ValidationError("match_literals: expected true or false", field="match_literals")
        self.match_literals = match_literals
        self.namespace = namespace
        self._local: LocalCache | None = None
        self._remote: Any = None
        if isinstance(db, Database):
            self._local = LocalCache(db, namespace, agent=agent)
        else:
            handle = db.namespace(namespace, agent=agent)
            if not hasattr(handle, "cache"):
                raise ValidationError(
                    f"db: expected a database from synapsedb.open, connect or connect_async, "
                    f"got {type(db).__name__}",
                    field="db",
                )
            self._remote = handle.cache
        from ..client.asyncio import AsyncRemoteDatabase

        self.is_async = isinstance(db, AsyncRemoteDatabase)

    def __repr__(self) -> str:
        where = "embedded" if self._local is not None else "remote"
        return f"<synapsedb.SemanticCache {self.namespace!r} {where}>"

    def lookup(
        self,
        key: str,
        *,
        scope: str = "default",
        params: Any = None,
        threshold: float | None = None,
        agent: str | None = None,
    ) -> CacheHit | None:
        """The cached entry of ``scope`` whose key means what ``key`` means, or None."""
        thr = self.threshold if threshold is None else threshold
        if self._local is not None:
            return self._local.lookup(
                key,
                scope=scope,
                params=params,
                threshold=thr,
                match_literals=self.match_literals,
                agent=agent,
            )
        return self._remote.lookup(  # type: ignore[no-any-return]
            key,
            scope=scope,
            params=params,
            threshold=thr,
            match_literals=self.match_literals,
            agent=agent,
        )

    def store(
        self,
        key: str,
        value: Any,
        *,
        scope: str = "default",
        params: Any = None,
        ttl: float | None = None,
        tags: Iterable[str] | None = None,
        agent: str | None = None,
    ) -> CacheEntry:
        """Cache ``value`` (any JSON value) under ``key`` in ``scope``."""
        ttl_s = self.ttl if ttl is None else ttl
        tag_list = tags if tags is None or isinstance(tags, str) else list(tags)
        if self._local is not None:
            return self._local.store(
                key,
                value,
                scope=scope,
                params=params,
                ttl=ttl_s,
                tags=tag_list,
                match_literals=self.match_literals,
                agent=agent,
            )
        return self._remote.store(  # type: ignore[no-any-return]
            key,
            value,
            scope=scope,
            params=params,
            ttl=ttl_s,
            tags=tag_list,
            match_literals=self.match_literals,
            agent=agent,
        )

    def invalidate(
        self,
        key: str | None = None,
        *,
        scope: str | None = None,
        params: Any = None,
        tag: str | None = None,
        prefix: str | None = None,
        agent: str | None = None,
    ) -> int:
        """Remove the entry of ``key`` (in ``scope``, default ``"default"``), or every entry
        with ``tag``, or whose key starts with ``prefix`` (in ``scope`` when given), or every
        entry of ``scope``; returns how many were removed."""
        if self._local is not None:
            return self._local.invalidate(
                key,
                scope=scope,
                params=params,
                tag=tag,
                prefix=prefix,
                match_literals=self.match_literals,
                agent=agent,
            )
        return self._remote.invalidate(  # type: ignore[no-any-return]
            key,
            scope=scope,
            params=params,
            tag=tag,
            prefix=prefix,
            match_literals=self.match_literals,
            agent=agent,
        )

    def clear(self, *, agent: str | None = None) -> int:
        """Remove every entry of every scope; returns how many."""
        if self._local is not None:
            return self._local.clear(agent=agent)
        return self._remote.clear(agent=agent)  # type: ignore[no-any-return]

    def stats(self) -> CacheStats:
        """Entries stored now; hits, misses, stores and invalidations counted by the process
        that runs the lookups (this one embedded, the server's over HTTP)."""
        if self._local is not None:
            return self._local.stats()
        return self._remote.stats()  # type: ignore[no-any-return]
