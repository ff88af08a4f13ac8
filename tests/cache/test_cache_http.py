"""The semantic cache over HTTP, against a real server on loopback: tenants cannot reach or
detect each other's entries, scopes are enforced, counts reach /metrics, the async client
and async @cacheable work, and bad input is a 422 naming the field."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import synapsedb
from synapsedb.cache import SemanticCache, cacheable
from synapsedb.client import RemoteDatabase
from synapsedb.client.asyncio import AsyncRemoteDatabase
from synapsedb.errors import ForbiddenError, ValidationError
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore
from tests.support.live_server import serve


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    path = tmp_path_factory.mktemp("cache-http") / "d"
    db = synapsedb.open(path, durability="os", background_maintenance=False)
    keys = KeyStore(path)
    tok = {
        name: keys.create(tenant, scopes)[1]
        for name, tenant, scopes in [
            ("a", "tenant-a", ["read", "write", "admin"]),
            ("a_read", "tenant-a", ["read"]),
            ("b", "tenant-b", ["read", "write", "admin"]),
        ]
    }
    with serve(create_app(db, keys)) as url:
        yield {"url": url, "tok": tok}
    db.close()


def remote(server: dict[str, Any], who: str) -> RemoteDatabase:
    return RemoteDatabase(server["url"], api_key=server["tok"][who])


def test_another_tenant_cannot_reach_or_detect_entries(server: dict[str, Any]) -> None:
    a, b = remote(server, "a"), remote(server, "b")
    ca, cb = SemanticCache(a, "support", agent="knowledge"), SemanticCache(b, "support")
    ca.store("refund policy documents", ["A's policy.md"], scope="search_docs", tags=["p"])
    assert ca.lookup("documents about the refund policy", scope="search_docs") is not None
    # B, same namespace name, same key: nothing; its stats count nothing of A's
    assert cb.lookup("refund policy documents", scope="search_docs") is None
    assert cb.stats().entries == 0
    assert cb.invalidate(tag="p") == 0 and cb.clear() == 0
    # nor through the namespace's ordinary routes (the entry is a memory of A's namespace)
    assert b.namespace("support").memories("synapsedb:cache:search_docs") == []
    # A still has it; B's entry of the same key is B's own
    cb.store("refund policy documents", ["B's"], scope="search_docs")
    hit = ca.lookup("refund policy documents", scope="search_docs")
    assert hit is not None and hit.value == ["A's policy.md"]
    hit_b = cb.lookup("refund policy documents", scope="search_docs")
    assert hit_b is not None and hit_b.value == ["B's"]
    stats = ca.stats()
    assert stats.namespace == "support" and stats.entries == 1  # the public name
    a.close()
    b.close()


def test_scopes_metrics_and_errors(server: dict[str, Any]) -> None:
    a, reader = remote(server, "a"), remote(server, "a_read")
    cache = SemanticCache(a, "metered")
    cache.store("weather in Paris", {"c": 18}, scope="weather")
    assert SemanticCache(reader, "metered").lookup("Paris weather", scope="weather") is not None
    with pytest.raises(ForbiddenError):  # a read key may look up, not store
        SemanticCache(reader, "metered").store("weather in Rome", 1, scope="weather")
    assert cache.lookup("weather in Rome", scope="weather") is None
    with pytest.raises(ValidationError) as exc:
        cache.store("weather in Oslo", 1, scope="weather", ttl=-5)
    assert exc.value.details["field"] == "ttl"
    url, tok = server["url"], server["tok"]
    body = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {tok['a']}"}).text
    assert 'synapsedb_cache_lookups_total{namespace="metered",result="hit"} 1.0' in body
    assert 'synapsedb_cache_lookups_total{namespace="metered",result="miss"} 1.0' in body
    assert 'synapsedb_cache_stores_total{namespace="metered"} 1.0' in body
    assert "tenant-a" not in body
    other = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {tok['b']}"}).text
    assert 'namespace="metered"' not in other
    r = httpx.post(
        f"{url}/v1/namespaces/metered/cache:lookup",
        json={"key": 5},
        headers={"Authorization": f"Bearer {tok['a']}"},
    )
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "key"
    r = httpx.post(
        f"{url}/v1/namespaces/metered/cache:invalidate",
        json={"all": True, "tag": "x"},
        headers={"Authorization": f"Bearer {tok['a']}"},
    )
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "tag"
    a.close()
    reader.close()


def test_async_client_and_async_cacheable(server: dict[str, Any]) -> None:
    async def main() -> list[Any]:
        db = AsyncRemoteDatabase(server["url"], api_key=server["tok"]["a"])
        cache = SemanticCache(db, "async-ns")
        assert cache.is_async
        calls = []

        @cacheable(ttl=60, cache=cache)
        async def search_docs(query: str) -> list[str]:
            calls.append(query)
            return [f"doc about {query}"]

        out = [
            await search_docs("refund policy documents"),
            await search_docs("documents about the refund policy"),
        ]
        stats = await cache.stats()
        await db.close()
        return [out, calls, stats.hits, stats.stores]

    out, calls, hits, stores = asyncio.run(main())
    assert out[0] == out[1] == ["doc about refund policy documents"]
    assert calls == ["refund policy documents"] and (hits, stores) == (1, 1)


def test_a_plain_function_cannot_use_an_async_cache(server: dict[str, Any], tmp_path: Path) -> None:
    cache = SemanticCache(AsyncRemoteDatabase(server["url"], api_key=server["tok"]["a"]), "x")

    @cacheable(cache=cache)
    def f(query: str) -> str:
        return query

    with pytest.raises(ValidationError) as exc:
        f("hello")
    assert exc.value.details["field"] == "cache"
