"""The semantic cache of a namespace, local or remote: :class:`CacheAPI` (``ns.cache``).

Entries are JSON values stored under a key text in a scope (a function or tool name); a
lookup finds the entry of the scope whose key means the same (cosine similarity of the keys'
embeddings at least ``threshold``) with the same exact signature: the numbers and identifiers
in the key (with ``match_literals``) and ``params`` (docs/cache.md). Over HTTP each call is
one request that the server runs whole, counted in its ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..types import CacheEntry, CacheHit, CacheStats

__all__ = ["CacheAPI"]


class CacheAPI(Protocol):
    """The semantic cache of one namespace."""

    __slots__ = ()

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
        """The entry of ``scope`` whose key means what ``key`` means, or None (a miss).
        ``threshold``: the least cosine similarity of the two keys (None: the default,
        0.74)."""
        ...

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
        """Cache ``value`` (any JSON value) under ``key`` in ``scope`` for ``ttl`` seconds
        (None: the default, an hour); the same key stored again replaces the entry."""
        ...

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
        """Remove the entry of ``key`` (in ``scope``, default ``"default"``), or every entry
        with ``tag``, or whose key starts with ``prefix`` (in ``scope`` when given), or every
        entry of ``scope``; returns how many were removed."""
        ...

    def clear(self, *, agent: str | None = None) -> int:
        """Remove every entry of every scope; returns how many."""
        ...

    def stats(self) -> CacheStats:
        """Entries stored now; hits, misses, stores and invalidations counted by the process
        that runs the lookups (this one embedded, the server's over HTTP)."""
        ...
