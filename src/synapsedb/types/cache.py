"""The value objects of the semantic cache, the same embedded and over HTTP (the remote client
decodes the server's answers into these very classes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["CacheEntry", "CacheHit", "CacheStats", "ScopeStats"]


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """A stored entry: its id (a memory id), the scope (function or tool name) and key text
    it was stored under, its tags, who stored it and when, and when it expires."""

    id: str
    scope: str
    key: str
    tags: list[str]
    agent: str | None
    stored_at: datetime
    expires_at: datetime | None
    ttl: float | None


@dataclass(frozen=True, slots=True)
class CacheHit:
    """A lookup that hit: the cached ``value`` (JSON) and the entry behind it. ``key`` is the
    key the entry was stored under, which may be a paraphrase of the one looked up; ``score``
    is the cosine similarity of the two keys' embeddings."""

    id: str
    scope: str
    key: str
    value: Any
    score: float
    tags: list[str]
    agent: str | None
    stored_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class ScopeStats:
    """Counts for one scope since the process (embedded) or the server started."""

    hits: int = 0
    misses: int = 0
    stores: int = 0


@dataclass(frozen=True, slots=True)
class CacheStats:
    """A namespace's cache: ``entries`` stored now (unexpired), and lookups (``hits``,
    ``misses``), ``stores`` and entries ``invalidated`` since the process that serves it
    started (the embedded database's, or the server's), also per scope (at most 1,000 scopes
    are named; the rest count under ``"(other)"``)."""

    namespace: str
    entries: int
    hits: int
    misses: int
    stores: int
    invalidated: int
    hit_rate: float | None
    scopes: dict[str, ScopeStats] = field(default_factory=dict)
