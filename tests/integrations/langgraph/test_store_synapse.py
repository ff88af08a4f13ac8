"""What SynapseStore adds or decides beyond InMemoryStore: TTL (which InMemoryStore lacks),
time travel, created_at kept across updates, SynapseDB's own embedder, and hostile input."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp

import synapsedb
from synapsedb import ValidationError
from synapsedb.integrations.langgraph import SynapseStore

from .conftest import Backend, TrigramEmbeddings


def test_ttl_expires_items_and_their_index(backend: Backend, embeddings: TrigramEmbeddings) -> None:
    store = SynapseStore(
        backend.db,
        "ttl",
        index={"dims": 64, "embed": embeddings},
        ttl={"default_ttl": 2, "refresh_on_read": False},
    )
    store.put(("n",), "short", {"text": "apples"})
    store.put(("n",), "long", {"text": "apple pie"}, ttl=10)
    store.put(("n",), "forever", {"text": "apple tree"}, ttl=None)
    backend.clock.advance(3 * 60)
    assert store.get(("n",), "short") is None
    assert [r.key for r in store.search(("n",), query="apples")] == ["long", "forever"]
    assert store.list_namespaces() == [("n",)]
    backend.clock.advance(8 * 60)
    assert [r.key for r in store.search(("n",), query="apples")] == ["forever"]


def test_refresh_on_read_extends_the_ttl(backend: Backend, embeddings: TrigramEmbeddings) -> None:
    store = SynapseStore(
        backend.db,
        "ttl",
        index={"dims": 64, "embed": embeddings},
        ttl={"default_ttl": 2, "refresh_on_read": True},
    )
    store.put(("n",), "read", {"text": "kept alive by reads"})
    store.put(("n",), "idle", {"text": "left alone"})
    first = store.get(("n",), "read")
    assert first is not None
    for _ in range(3):
        backend.clock.advance(90)
        again = store.get(("n",), "read")
        assert again is not None and again.updated_at == first.updated_at  # a refresh is no update
    assert store.get(("n",), "idle", refresh_ttl=False) is None
    backend.clock.advance(90)
    assert [r.key for r in store.search(("n",), query="alive")] == ["read"]  # refreshes too
    backend.clock.advance(90)
    assert store.get(("n",), "read", refresh_ttl=False) is not None
    backend.clock.advance(121)
    assert store.get(("n",), "read") is None


def test_created_at_is_kept_across_updates_and_get_as_of(backend: Backend) -> None:
    store = SynapseStore(backend.db, "tt")
    store.put(("u",), "k", {"v": 1})
    first = store.get(("u",), "k")
    assert first is not None
    backend.clock.advance(60)
    store.put(("u",), "k", {"v": 2})
    second = store.get(("u",), "k")
    assert second is not None
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    backend.clock.advance(60)
    store.delete(("u",), "k")
    past = store.get_as_of(("u",), "k", first.updated_at)
    assert past is not None and past.value == {"v": 1}
    assert store.get_as_of(("u",), "k", second.updated_at).value == {"v": 2}  # type: ignore[union-attr]
    assert store.get(("u",), "k") is None
    backend.clock.advance(60)
    store.put(("u",), "k", {"v": 3})
    assert store.get(("u",), "k").created_at > second.created_at  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_async_get_as_of(backend: Backend) -> None:
    store = SynapseStore(backend.db, "tt")
    await store.aput(("u",), "k", {"v": 1})
    item = await store.aget(("u",), "k")
    assert item is not None
    backend.clock.advance(5)
    await store.aput(("u",), "k", {"v": 2})
    then = await store.aget_as_of(("u",), "k", item.updated_at)
    assert then is not None and then.value == {"v": 1}


def test_labels_with_separators_round_trip(backend: Backend) -> None:
    store = SynapseStore(backend.db, "odd")
    odd = [("a%2E", "b"), ("a%", "2E"), ("50%", "x y", "ünï", "lgx:"), ("a", "b")]
    for i, ns in enumerate(odd):
        store.put(ns, f"k{i}", {"i": i})
    store.batch([PutOp(("a.b",), "dot", {"i": "dot"})])  # past put's label check: a period
    assert sorted(store.list_namespaces()) == sorted([*odd, ("a.b",)])
    (dot,) = store.batch([GetOp(("a.b",), "dot")])  # get refuses a period too
    assert dot is not None and dot.value == {"i": "dot"}  # type: ignore[union-attr]
    assert store.get(("a", "b"), "dot") is None
    assert [r.key for r in store.search(("a",))] == ["k3"]
    assert {r.key for r in store.search(("a%",))} == {"k1"}


def test_hostile_inputs_are_validation_errors(backend: Backend) -> None:
    store = SynapseStore(backend.db, "hostile")
    ns = ("h",)
    cases: list[tuple[Any, str]] = [
        (lambda: store.put(ns, "k", {"big": "x" * 70_000}), "value"),
        (lambda: store.put(ns, "k", {"nan": float("nan")}), "value.nan"),
        (lambda: store.put(ns, "k", {"obj": object()}), "value.obj"),
        (lambda: store.put(ns, "k" * 300, {"v": 1}), "key"),
        (lambda: store.put(("x" * 300,), "k", {"v": 1}), "namespace"),
        (lambda: store.batch([PutOp(ns, "k", ["not", "a", "dict"])]), "value"),  # type: ignore[arg-type]
        (lambda: store.put(ns, "k", {"v": 1}, ttl=-1), "ttl"),
        (lambda: store.search(ns, filter={"score": {"$regex": "x"}}), "filter.score.$regex"),
        (lambda: store.search(ns, filter={"score": {"$gt": "3"}}), "filter.score.$gt"),
        (lambda: store.search(ns, filter={"$or": []}), "filter.$or"),
        (lambda: store.search(ns, filter=["a"]), "filter"),  # type: ignore[arg-type]
        (lambda: store.batch([SearchOp(ns, limit=-1)]), "limit"),
        (lambda: store.list_namespaces(max_depth=0), "max_depth"),
        (lambda: store.batch([SearchOp(("a", 3))]), "namespace_prefix[1]"),  # type: ignore[arg-type]
        (
            lambda: SynapseStore(backend.db, "x", ttl={"default_ttl": "soon"}),  # type: ignore[arg-type]
            "ttl.default_ttl",
        ),
        (
            lambda: SynapseStore(backend.db, "x", index={"dims": 3, "embeder": 1}),  # type: ignore[arg-type]
            "index.embeder",
        ),
        (lambda: SynapseStore(object(), "x"), "db"),
        (lambda: SynapseStore(backend.db, "Not A Namespace"), "namespace"),
    ]
    for call, field in cases:
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.details["field"] == field, (field, info.value)
    big = cases[0][0]
    with pytest.raises(ValidationError, match="over the limit"):
        big()
    assert store.search(()) == [] and store.list_namespaces() == []  # nothing was written
    assert store.get(("x" * 300,), "k") is None and store.get(ns, "k" * 300) is None


def test_synapsedb_embeds_when_the_index_has_no_embed(minilm_backend: Backend) -> None:
    store = SynapseStore(minilm_backend.db, "own", index={"dims": 384, "fields": ["text"]})
    store.put(("kb",), "cats", {"text": "Cats purr and sleep most of the day"})
    store.put(("kb",), "rust", {"text": "The borrow checker enforces ownership in Rust"})
    store.put(("kb",), "tea", {"text": "Green tea is steeped at 80 degrees"})
    hits = store.search(("kb",), query="programming language memory safety")
    assert hits[0].key == "rust" and hits[0].score is not None
    assert hits[0].score > hits[1].score  # type: ignore[operator]


def test_tenants_over_http_see_only_their_own_store(tmp_path: Any) -> None:
    """Over HTTP the API key decides the tenant: two keys, same store name, two stores."""
    from synapsedb.server import create_app
    from synapsedb.server.keys import KeyStore
    from tests.support.live_server import serve

    db = synapsedb.open(
        tmp_path / "d", embedder=None, llm=None, durability="os", background_maintenance=False
    )
    try:
        store = KeyStore(tmp_path / "d")
        keys = [store.create(t, ["read", "write", "admin"])[1] for t in ("alpha", "beta")]
        with serve(create_app(db, store)) as url:
            a, b = (synapsedb.connect(url, api_key=k) for k in keys)
            try:
                SynapseStore(a, "mem").put(("u",), "secret", {"v": "a's"})
                store_b = SynapseStore(b, "mem")
                assert store_b.get(("u",), "secret") is None
                assert store_b.search(()) == [] and store_b.list_namespaces() == []
            finally:
                a.close()
                b.close()
    finally:
        db.close()
