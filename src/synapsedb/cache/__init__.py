"""The semantic cache (docs/cache.md): results of expensive calls (a document search, a tool
call, an LLM answer) kept in a namespace, keyed by meaning, shared by all of its agents.

    from synapsedb.cache import SemanticCache, cacheable

    cache = SemanticCache(db, "acme-support", agent="knowledge")   # open() or connect()
    hit = cache.lookup("refund policy documents", scope="search_docs")
    if hit is None:
        cache.store("refund policy documents", docs, scope="search_docs", ttl=3600)
"""

from .decorator import cacheable, set_default_cache
from .front import SemanticCache
from .keying import MAX_KEY_BYTES, MAX_VALUE_BYTES
from .local import DEFAULT_THRESHOLD, DEFAULT_TTL_S
from .records import CacheEntry, CacheHit, CacheStats, ScopeStats

__all__ = [
    "DEFAULT_THRESHOLD",
    "DEFAULT_TTL_S",
    "MAX_KEY_BYTES",
    "MAX_VALUE_BYTES",
    "CacheEntry",
    "CacheHit",
    "CacheStats",
    "ScopeStats",
    "SemanticCache",
    "cacheable",
    "set_default_cache",
]
