"""The query-embedding cache is per namespace: a cached text in one namespace is never a hit in
another, so the time a query takes tells nothing about what other tenants asked."""

from __future__ import annotations

from synapsedb import Database


def test_a_text_cached_in_one_namespace_is_not_a_hit_in_another(db: Database) -> None:
    a, b = db.namespace("tenant-a..notes"), db.namespace("tenant-b..notes")
    a.write("u", "the quarterly figures are in the shared drive")
    b.write("u", "lunch is at noon")
    cache = db.embedding
    hits, misses = cache.cache_hits, cache.cache_misses
    a.query("where are the quarterly figures", mode="vector")
    a.query("where are the quarterly figures", mode="vector")
    assert (cache.cache_hits - hits, cache.cache_misses - misses) == (1, 1)  # A: miss, then hit
    b.query("where are the quarterly figures", mode="vector")
    assert (cache.cache_hits - hits, cache.cache_misses - misses) == (1, 2)  # B: a miss
    b.query("where are the quarterly figures", mode="vector")
    assert cache.cache_hits - hits == 2  # B's own earlier query is a hit for B
