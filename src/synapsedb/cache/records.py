"""The semantic cache's value objects live in :mod:`synapsedb.types.cache` (wire value
types); this module keeps the old import path."""

from ..types.cache import CacheEntry, CacheHit, CacheStats, ScopeStats

__all__ = ["CacheEntry", "CacheHit", "CacheStats", "ScopeStats"]
