"""The semantic cache embedded: hits by meaning, scopes, the exact signature, TTL,
invalidation, counts, and every bad input refused with the field and the limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from synapsedb import Database, ManualClock, ValidationError
from synapsedb.cache import DEFAULT_THRESHOLD, SemanticCache, cacheable, set_default_cache
from synapsedb.cache.keying import MAX_KEY_BYTES, MAX_TAGS, MAX_VALUE_BYTES, SEMANTIC_CHARS


@pytest.fixture
def cache(db: Database) -> SemanticCache:
    return SemanticCache(db, "acme-support", agent="knowledge")


def test_a_paraphrase_hits_the_entry_another_agent_stored(db: Database) -> None:
    b = SemanticCache(db, "acme-support", agent="knowledge")
    docs = [{"id": "policy.md", "text": "Refunds within 30 days"}]
    entry = b.store("refund policy documents", docs, scope="search_docs", tags=["policy"])
    assert entry.agent == "knowledge" and entry.tags == ["policy"] and entry.ttl == 3600
    other_agent = SemanticCache(db, "acme-support", agent="resolution")
    hit = other_agent.lookup("documents about our refund policy", scope="search_docs")
    assert hit is not None and hit.value == docs and hit.key == "refund policy documents"
    assert DEFAULT_THRESHOLD <= hit.score < 1 and hit.agent == "knowledge" and hit.id == entry.id
    # another tool's scope, an unrelated question, another namespace: misses
    assert other_agent.lookup("documents about our refund policy", scope="search_web") is None
    assert other_agent.lookup("how do I reset my password", scope="search_docs") is None
    assert (
        SemanticCache(db, "globex").lookup("refund policy documents", scope="search_docs") is None
    )


def test_numbers_in_the_key_must_match(cache: SemanticCache, db: Database) -> None:
    cache.store("refund policy for order 123", {"order": 123}, scope="policy")
    hit = cache.lookup("what is the refund policy on order #123", scope="policy")
    assert hit is not None and hit.value == {"order": 123}
    assert cache.lookup("refund policy for order 456", scope="policy") is None
    assert cache.lookup("refund policy for order 123 and 456", scope="policy") is None
    loose = SemanticCache(db, cache.namespace, match_literals=False)
    loose.store("refund policy for order 123", 1, scope="loose")
    assert loose.lookup("refund policy for order 456", scope="loose") is not None


def test_params_must_match_exactly(cache: SemanticCache) -> None:
    cache.store("top documents about refunds", ["a"], scope="s", params={"k": 5})
    assert cache.lookup("top documents about refunds", scope="s", params={"k": 5}) is not None
    assert cache.lookup("top documents about refunds", scope="s", params={"k": 6}) is None
    assert cache.lookup("top documents about refunds", scope="s") is None


def test_long_keys_are_matched_exactly(cache: SemanticCache) -> None:
    base = "summarise this support conversation. " * 40
    assert len(base) > SEMANTIC_CHARS
    cache.store(base + "The customer wants a refund.", "answer A", scope="llm")
    assert cache.lookup(base + "The customer wants an exchange.", scope="llm") is None
    hit = cache.lookup("  " + (base + "The customer wants a refund.").upper(), scope="llm")
    assert hit is not None and hit.value == "answer A"


def test_the_same_key_replaces_its_entry_and_null_is_a_value(cache: SemanticCache) -> None:
    first = cache.store("Refund  policy", 1, scope="s")
    second = cache.store("refund policy", None, scope="s")
    assert first.id == second.id
    hit = cache.lookup("refund policy", scope="s")
    assert hit is not None and hit.value is None
    assert cache.stats().entries == 1


def test_entries_expire_with_their_ttl(db: Database, clock: ManualClock) -> None:
    cache = SemanticCache(db, "acme-support", ttl=60)
    cache.store("refund policy documents", "docs", scope="s")
    cache.store("shipping policy documents", "ship", scope="s", ttl=600)
    clock.advance(61)
    assert cache.lookup("refund policy documents", scope="s") is None
    assert cache.lookup("shipping policy documents", scope="s") is not None
    assert cache.stats().entries == 1


def test_invalidation_by_key_tag_prefix_scope_and_all(cache: SemanticCache) -> None:
    cache.store("refund policy documents", 1, scope="docs", tags=["policy", "refunds"])
    cache.store("shipping policy documents", 2, scope="docs", tags=["policy"])
    cache.store("refund status of order 88", 3, scope="orders", tags=["refunds"])
    cache.store("weather in Paris", 4, scope="web")
    cache.store("weather in Berlin", 5, scope="web")
    cache.store("track parcel", 6, scope="post")
    assert cache.invalidate("REFUND policy  documents", scope="docs") == 1
    assert cache.invalidate("refund policy documents", scope="docs") == 0
    assert cache.lookup("shipping policy documents", scope="docs") is not None
    assert cache.invalidate(tag="refunds") == 1  # the orders entry; docs' one is gone already
    assert cache.lookup("refund status of order 88", scope="orders") is None
    assert cache.invalidate(prefix="Weather in P", scope="web") == 1
    assert cache.lookup("weather in Berlin", scope="web") is not None
    assert cache.invalidate(scope="web") == 1
    assert cache.stats().entries == 2
    assert cache.clear() == 2
    assert cache.lookup("shipping policy documents", scope="docs") is None
    assert cache.stats().entries == 0 and cache.stats().invalidated == 6


def test_stats_count_hits_misses_and_stores_per_scope(db: Database) -> None:
    cache = SemanticCache(db, "acme-support")
    assert cache.lookup("anything", scope="a") is None  # no namespace yet: nothing counted
    assert cache.stats().misses == 0 and cache.stats().entries == 0
    cache.store("refund policy documents", 1, scope="a")
    cache.lookup("documents about the refund policy", scope="a")
    cache.lookup("password reset", scope="a")
    cache.lookup("refund policy documents", scope="b")
    again = SemanticCache(db, "acme-support")  # counts belong to the database, not the handle
    st = again.stats()
    assert (st.entries, st.hits, st.misses, st.stores) == (1, 1, 2, 1)
    assert st.hit_rate == pytest.approx(1 / 3)
    assert st.scopes["a"].hits == 1 and st.scopes["b"].misses == 1


def test_a_lookup_is_a_logged_query_of_its_agent(cache: SemanticCache, db: Database) -> None:
    cache.store("refund policy documents", 1, scope="s")
    cache.lookup("refund policy documents", scope="s", agent="intake")
    reads = [e for e in db.namespace("acme-support").audit() if e.agent == "intake"]
    assert reads and reads[-1].action == "query"


@pytest.mark.parametrize(
    ("call", "field", "limit"),
    [
        (lambda c: c.lookup("", scope="s"), "key", None),
        (lambda c: c.lookup(7, scope="s"), "key", None),
        (lambda c: c.lookup("x" * (MAX_KEY_BYTES + 1), scope="s"), "key", MAX_KEY_BYTES),
        (lambda c: c.lookup("a\x00b", scope="s"), "key", None),
        (lambda c: c.lookup("k", scope="bad scope!"), "scope", 128),
        (lambda c: c.lookup("k", scope="s" * 129), "scope", 128),
        (lambda c: c.lookup("k", threshold=0), "threshold", 1),
        (lambda c: c.lookup("k", threshold=1.5), "threshold", 1),
        (lambda c: c.lookup("k", threshold=float("nan")), "threshold", 1),
        (lambda c: c.lookup("k", params={"x": {1, 2}}), "params.x", None),
        (lambda c: c.store("k", "v" * MAX_VALUE_BYTES), "value", MAX_VALUE_BYTES),
        (lambda c: c.store("k", {1: "a"}), "value", None),
        (lambda c: c.store("k", float("inf")), "value", None),
        (lambda c: c.store("k", object()), "value", None),
        (lambda c: c.store("k", 1, ttl=0), "ttl", None),
        (lambda c: c.store("k", 1, ttl=1e12), "ttl", 3_153_600_000),
        (lambda c: c.store("k", 1, tags="policy"), "tags", None),
        (lambda c: c.store("k", 1, tags=[f"t{i}" for i in range(MAX_TAGS + 1)]), "tags", MAX_TAGS),
        (lambda c: c.store("k", 1, tags=["ok", "no spaces"]), "tags[1]", 64),
        (lambda c: c.invalidate(), "scope", None),
        (lambda c: c.invalidate("k", tag="t"), "tag", None),
        (lambda c: c.invalidate(tag="t", params={"k": 1}), "params", None),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    cache: SemanticCache, call: Any, field: str, limit: int | None
) -> None:
    cache.store("seed entry", 1, scope="s")
    with pytest.raises(ValidationError) as exc:
        call(cache)
    assert exc.value.details["field"] == field
    if limit is not None:
        assert exc.value.details["limit"] == limit and str(limit) in exc.value.message
    assert cache.stats().entries == 1  # nothing written


def test_cacheable_keys_by_arguments_and_scopes_by_function(cache: SemanticCache) -> None:
    calls: list[tuple[str, int]] = []

    @cacheable(ttl=60, cache=cache)
    def search_docs(query: str, k: int = 3) -> tuple[str, int]:
        calls.append((query, k))
        return (f"docs for {query}", k)

    @cacheable(ttl=60, cache=cache)
    def search_web(query: str, k: int = 3) -> str:
        calls.append((query, -k))
        return f"web for {query}"

    first = search_docs("refund policy documents")
    assert first == ["docs for refund policy documents", 3]  # as JSON carries it, hit or miss
    assert search_docs("documents about the refund policy") == first
    assert search_docs("documents about the refund policy", k=4)[1] == 4  # k is exact
    assert search_web("refund policy documents") == "web for refund policy documents"
    assert len(calls) == 3
    assert search_docs.cache_invalidate("refund policy documents") == 1
    search_docs("refund policy documents")
    assert len(calls) == 4
    assert search_docs.cache_clear() == 2
    assert search_docs.cache_scope.endswith("search_docs")


def test_cacheable_async_and_the_default_cache(cache: SemanticCache) -> None:
    calls = []

    @cacheable(ttl=30, name="tools.lookup_order")
    async def lookup_order(customer: str, order: int) -> dict[str, Any]:
        calls.append(order)
        await asyncio.sleep(0)
        return {"order": order, "status": "refunded"}

    with pytest.raises(ValidationError) as exc:
        asyncio.run(lookup_order("refund status for user 4321", 1458))
    assert exc.value.details["field"] == "cache" and calls == []
    token = set_default_cache(cache)
    try:
        assert (
            asyncio.run(lookup_order("refund status for user 4321", 1458))["status"] == "refunded"
        )
        assert asyncio.run(lookup_order("status of the refund of user 4321", 1458))["order"] == 1458
        assert asyncio.run(lookup_order("refund status for user 4321", 1459))["order"] == 1459
        assert calls == [1458, 1459]
        assert cache.stats().scopes["tools.lookup_order"].hits == 1
    finally:
        set_default_cache(None)
        del token


def test_cacheable_refuses_results_that_are_not_json_unless_fail_open(
    cache: SemanticCache,
) -> None:
    @cacheable(cache=cache)
    def odd(query: str) -> Any:
        return {1, 2}

    @cacheable(cache=cache, fail_open=True)
    def tolerant(query: str) -> Any:
        return {1, 2}

    with pytest.raises(ValidationError) as exc:
        odd("refund policy")
    assert exc.value.details["field"] == "result"
    assert tolerant("refund policy") == {1, 2}


def test_cacheable_checks_its_arguments() -> None:
    with pytest.raises(ValidationError):
        cacheable(ttl=-1)
    with pytest.raises(ValidationError) as exc:

        @cacheable(semantic=["missing"])
        def f(query: str) -> str:
            return query

    assert exc.value.details["field"] == "semantic"
