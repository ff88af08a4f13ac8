"""langgraph's own store tests (libs/checkpoint/tests/test_store.py and the sqlite/postgres
store tests), ported: every scenario runs on SynapseStore (embedded and over HTTP) and on
InMemoryStore with the same inputs, and the answers must be equal.

Where LangGraph's stores disagree among themselves, the comparison says so: without a query,
InMemoryStore returns items in insertion order and the SQL stores newest ``updated_at`` first
(SynapseStore does the latter), so query-less searches are compared as sets (and pages by
their union). Scores are compared to 1e-5 (SynapseDB keeps float32 vectors)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from synapsedb.integrations.langgraph import SynapseStore

from .conftest import Backend, TrigramEmbeddings


def norm(result: Any) -> Any:
    """Comparable form: items as (namespace, key, value[, score])."""
    if isinstance(result, SearchItem):
        return (tuple(result.namespace), result.key, result.value, result.score)
    if isinstance(result, Item):
        return (tuple(result.namespace), result.key, result.value)
    if isinstance(result, list):
        return [norm(r) for r in result]
    if isinstance(result, tuple):
        return tuple(norm(r) for r in result)
    return result


def same(a: Any, b: Any) -> bool:
    """Equal, floats to 1e-5 (scores from float32 vectors against float64 ones)."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-5
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b) and type(a) is type(b)


def as_set(results: list[Any]) -> list[Any]:
    return sorted(norm(results), key=repr)


def both(
    backend: Backend,
    scenario: Callable[[BaseStore], Any],
    index: dict[str, Any] | None = None,
) -> tuple[Any, Any]:
    ours = SynapseStore(backend.db, "parity", index=index)  # type: ignore[arg-type]
    ref = InMemoryStore(index=index)  # type: ignore[arg-type]
    return scenario(ours), scenario(ref)


def index_config(embeddings: TrigramEmbeddings, fields: list[str] | None = None) -> dict[str, Any]:
    cfg: dict[str, Any] = {"dims": embeddings.dims, "embed": embeddings}
    if fields is not None:
        cfg["fields"] = fields
    return cfg


NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]


def test_list_namespaces(backend: Backend) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        for i, ns in enumerate(NAMESPACES):
            store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
        return [
            store.list_namespaces(prefix=("a", "b")),
            store.list_namespaces(suffix=("f",)),
            store.list_namespaces(prefix=("a",), suffix=("f",)),
            store.list_namespaces(prefix=("a", "b"), max_depth=3),
            store.list_namespaces(prefix=("a", "b"), limit=2),
            store.list_namespaces(prefix=("a", "b"), offset=2),
            store.list_namespaces(prefix=("a", "*", "f")),
            store.list_namespaces(suffix=("*", "f")),
            store.list_namespaces(prefix=("nonexistent",)),
            store.list_namespaces(prefix=("users", "123")),
            store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")),
            store.list_namespaces(max_depth=2),
            store.list_namespaces(),
            store.batch([ListNamespacesOp((MatchCondition("suffix", ("*",)),), 1, 3, 1)]),
        ]

    ours, ref = both(backend, scenario)
    assert same(ours, ref), (ours, ref)
    assert ours[0] == [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]


def test_list_namespaces_pagination_and_empty(backend: Backend) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        out: list[Any] = [store.list_namespaces()]
        for i in range(20):
            store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": i})
        out += [
            store.list_namespaces(prefix=("namespace",), limit=5, offset=o) for o in (0, 5, 15, 25)
        ]
        return out

    ours, ref = both(backend, scenario)
    assert same(ours, ref), (ours, ref)
    assert ours[0] == [] and ours[-1] == []


def test_namespaces_labels_are_checked_as_langgraph_does(backend: Backend) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        out: list[Any] = []
        for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
            with pytest.raises(InvalidNamespaceError):
                store.put(bad, "foo", {"foo": "bar"})
            out.append(bad)
        store.put(("foo", "langgraph", "foo"), "bar", {"foo": "bar"})
        out.append(norm(store.get(("foo", "langgraph", "foo"), "bar")))
        store.batch([PutOp(("langgraph", "foo"), "bar", {"x": 1})])  # past the public put
        out.append(norm(store.search(("langgraph", "foo"))))
        store.delete(("langgraph", "foo"), "bar")
        out.append(store.get(("langgraph", "foo"), "bar"))
        out.append(store.list_namespaces(prefix=("foo",)))
        return out

    ours, ref = both(backend, scenario)
    assert same(ours, ref), (ours, ref)


def test_get_put_update_delete(backend: Backend) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        ns = ("users", "u1")
        out = [store.get(ns, "missing")]
        store.put(ns, "k", {"name": "Ada", "tags": ["x", "y"], "n": {"deep": [1, 2.5, None]}})
        out.append(norm(store.get(ns, "k")))
        store.put(ns, "k", {"name": "Ada Lovelace"})
        out.append(norm(store.get(ns, "k")))
        out.append(norm(store.get(("users",), "k")))  # a prefix is another namespace
        store.delete(ns, "k")
        store.delete(ns, "never-there")
        out.append(store.get(ns, "k"))
        return out

    ours, ref = both(backend, scenario)
    assert same(ours, ref), (ours, ref)
    assert ours[1][2]["n"] == {"deep": [1, 2.5, None]}


def test_list_namespaces_lists_only_namespaces_with_items(backend: Backend) -> None:
    """A known InMemoryStore artefact, where the SQL stores and SynapseStore agree: its
    ``get`` creates an empty namespace and a delete leaves one, and both stay listed."""
    store = SynapseStore(backend.db, "parity")
    ref = InMemoryStore()
    for s in (store, ref):
        s.get(("ghost",), "k")
        s.put(("users", "u1"), "k", {"v": 1})
        s.delete(("users", "u1"), "k")
        s.put(("kept",), "k", {"v": 1})
    assert store.list_namespaces() == [("kept",)]
    assert ref.list_namespaces() == [("ghost",), ("kept",), ("users", "u1")]


FILTER_DOCS = [
    ("d1", {"color": "red", "score": 4.5, "meta": {"kind": "fruit", "n": 1}, "tags": ["a", "b"]}),
    ("d2", {"color": "red", "score": 3.0, "meta": {"kind": "car", "n": 2}, "tags": ["a"]}),
    ("d3", {"color": "green", "score": 4.0, "meta": {"kind": "fruit", "n": 3}}),
    ("d4", {"color": "blue", "score": 3.5, "flag": True}),
]
FILTERS: list[dict[str, Any]] = [
    {"color": "red"},
    {"color": "red", "score": 3.0},
    {"score": {"$gt": 3.2}},
    {"score": {"$gte": 4.0}, "color": "green"},
    {"score": {"$lt": 4.0}},
    {"score": {"$lte": 4.0, "$gt": 3.0}},
    {"color": {"$ne": "red"}},
    {"color": {"$eq": "blue"}},
    {"meta": {"kind": "fruit"}},
    {"meta": {"kind": "fruit", "n": 3}},
    {"tags": ["a", "b"]},
    {"tags": ["b", "a"]},
    {"flag": True},
    {"missing": None},
    {"color": "purple"},
]


def test_search_filters(backend: Backend) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        for key, value in FILTER_DOCS:
            store.put(("docs",), key, value)
        store.put(("other",), "d9", {"color": "red", "score": 9.0})
        return [as_set(store.search(("docs",), filter=f)) for f in FILTERS]

    ours, ref = both(backend, scenario)
    assert same(ours, ref), (ours, ref)
    assert [len(r) for r in ours[:3]] == [2, 1, 3]


def test_search_across_prefixes_and_pages(backend: Backend) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        for i in range(12):
            store.put(("p", f"s{i % 3}"), f"k{i:02d}", {"i": i, "even": i % 2 == 0})
        pages = [store.search(("p",), limit=5, offset=o) for o in (0, 5, 10)]
        return [
            as_set(store.search(())),
            as_set(store.search(("p", "s1"))),
            as_set(store.search(("p",), filter={"even": True}, limit=100)),
            [len(p) for p in pages],
            as_set([it for p in pages for it in p]),
            as_set(store.search(("p",), limit=0)),
            as_set(store.search(("q",))),
        ]

    ours, ref = both(backend, scenario)
    assert same(ours, ref), (ours, ref)
    assert ours[3] == [5, 5, 2] and len(ours[4]) == 12


VECTOR_DOCS = [
    ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
    ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
    ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
    ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
]


def test_vector_search_with_filters(backend: Backend, embeddings: TrigramEmbeddings) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        for key, value in VECTOR_DOCS:
            store.put(("test",), key, value)
        return [
            norm(store.search(("test",), query="apple", filter={"color": "red"})),
            norm(store.search(("test",), query="car", filter={"color": "red"})),
            norm(store.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})),
            norm(
                store.search(
                    ("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"}
                )
            ),
            norm(store.search(("test",), query="apple")),
        ]

    ours, ref = both(backend, scenario, index_config(embeddings, ["text"]))
    assert same(ours, ref), (ours, ref)
    assert [r[1] for r in ours[0]] == ["doc1", "doc2"]
    assert [r[1] for r in ours[3]] == ["doc3"]


def test_vector_update_and_index_false(backend: Backend, embeddings: TrigramEmbeddings) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        store.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
        store.put(("test",), "doc2", {"text": "something about dogs"})
        store.put(("test",), "doc3", {"text": "text about birds"})
        before = norm(store.search(("test",), query="Zany Xerxes"))
        store.put(("test",), "doc1", {"text": "new text about dogs"})
        after = norm(store.search(("test",), query="Zany Xerxes"))
        store.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
        unindexed = norm(store.search(("test",), query="new text about dogs", limit=3))
        tail = norm(store.search(("test",), query="new text about dogs", limit=10))
        return [before, after, unindexed, tail]

    ours, ref = both(backend, scenario, index_config(embeddings))
    assert same(ours, ref), (ours, ref)
    before, after, unindexed, tail = ours
    assert before[0][1] == "doc1"
    assert dict((r[1], r[3]) for r in after)["doc1"] < before[0][3]
    assert "doc4" not in [r[1] for r in unindexed]
    assert tail[-1] == (("test",), "doc4", {"text": "new text about dogs"}, None)


def test_vector_pagination_and_edge_queries(
    backend: Backend, embeddings: TrigramEmbeddings
) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        for i in range(5):
            store.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
        return [
            norm(store.search(("test",), query="test", limit=2)),
            norm(store.search(("test",), query="test", limit=2, offset=2)),
            norm(store.search(("test",), query="test", limit=10)),
            as_set(store.search(("test",), query="")),
            as_set(store.search(("test",), query=None)),
            norm(store.search(("test",), query="test " * 100)),
            norm(store.search(("test",), query="test!@#$%^&*()")),
        ]

    ours, ref = both(backend, scenario, index_config(embeddings, ["text"]))
    assert same(ours, ref), (ours, ref)
    assert len(ours[2]) == 5 and ours[0][0][1] != ours[1][0][1]


def test_index_paths_many_texts_and_per_put_fields(
    backend: Backend, embeddings: TrigramEmbeddings
) -> None:
    fields = ["title", "chapters[*].text", "meta.{summary,note}"]

    def scenario(store: BaseStore) -> list[Any]:
        store.put(
            ("books",),
            "b1",
            {
                "title": "Ocean tides",
                "chapters": [{"text": "moon pulls water"}, {"text": "storms and waves"}],
                "meta": {"summary": "the sea", "note": "blue"},
            },
        )
        store.put(
            ("books",),
            "b2",
            {"title": "Mountain goats", "chapters": [], "meta": {"summary": "high peaks"}},
        )
        store.put(
            ("books",), "b3", {"title": "ignored", "body": "waves crash on rocks"}, index=["body"]
        )
        store.put(("books", "nested"), "b4", {"title": "Waves of sound"})
        return [
            norm(store.search(("books",), query="waves")),
            norm(store.search(("books",), query="peaks and goats", limit=2)),
            norm(store.search(("books", "nested"), query="waves")),
        ]

    ours, ref = both(backend, scenario, index_config(embeddings, fields))
    assert same(ours, ref), (ours, ref)
    assert {r[1] for r in ours[0]} == {"b1", "b2", "b3", "b4"}


def test_whole_value_is_embedded_by_default(
    backend: Backend, embeddings: TrigramEmbeddings
) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        store.put(("x",), "a", {"food": "pizza", "city": "Naples"})
        store.put(("x",), "b", {"food": "sushi", "city": "Tokyo"})
        return [norm(store.search(("x",), query="pizza in naples"))]

    ours, ref = both(backend, scenario, index_config(embeddings))
    assert same(ours, ref), (ours, ref)
    assert ours[0][0][1] == "a"


def test_batch_reads_see_the_state_before_its_puts(backend: Backend) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        ns = ("b",)
        store.put(ns, "k", {"v": 1})
        results = store.batch(
            [
                GetOp(ns, "k"),
                PutOp(ns, "k", {"v": 2}),
                SearchOp(ns),
                PutOp(ns, "k", {"v": 3}),  # the last put of a key wins
                PutOp(ns, "new", {"v": 4}),
                ListNamespacesOp(),
            ]
        )
        return [norm(results), norm(store.get(ns, "k")), as_set(store.search(ns))]

    ours, ref = both(backend, scenario)
    assert same(ours, ref), (ours, ref)
    assert ours[1] == (("b",), "k", {"v": 3})


@pytest.mark.asyncio
async def test_async_methods(backend: Backend, embeddings: TrigramEmbeddings) -> None:
    async def scenario(store: BaseStore) -> list[Any]:
        await asyncio.gather(*[store.aput(("test",), k, v) for k, v in VECTOR_DOCS])
        got = await asyncio.gather(store.aget(("test",), "doc1"), store.aget(("test",), "nope"))
        found = await store.asearch(("test",), query="car", filter={"color": "red"})
        await store.adelete(("test",), "doc2")
        listed = await store.alist_namespaces(prefix=("test",))
        rest = await store.asearch(("test",), query="car")
        return [norm(list(got)), norm(found), listed, norm(rest)]

    cfg = index_config(embeddings, ["text"])
    ours = await scenario(SynapseStore(backend.db, "parity", index=cfg))  # type: ignore[arg-type]
    ref = await scenario(InMemoryStore(index=cfg))  # type: ignore[arg-type]
    assert same(ours, ref), (ours, ref)
    assert [r[1] for r in ours[3]] == ["doc4", "doc1", "doc3"]


def test_more_entries_than_one_query_holds(tmp_path: Any) -> None:
    """Past SynapseDB's 1,000 hits per query, a search asks for the filtered items by key in
    groups and merges them: still the same answers as InMemoryStore (embedded only: 1,200
    puts)."""
    import synapsedb

    db = synapsedb.open(
        tmp_path / "d", embedder=None, llm=None, durability="os", background_maintenance=False
    )
    try:
        cfg = index_config(TrigramEmbeddings(jitter=0.05), ["text", "alt"])
        ours = SynapseStore(db, "many", index=cfg)  # type: ignore[arg-type]
        ref = InMemoryStore(index=cfg)  # type: ignore[arg-type]
        words = ["apple", "river", "stone", "cloud", "ember", "frost"]
        for store in (ours, ref):
            for i in range(600):
                value = {
                    "text": f"{words[i % 6]} number {i} of {i * 31 % 1009}",
                    "alt": f"{words[(i * 7) % 6]} alt {i * 17 % 613}",
                    "i": i,
                }
                store.put(("big", "s0" if i < 520 else "s1"), f"k{i:04d}", value)
            store.put(("elsewhere",), "e", {"text": "apple 1"})
        queries = [  # (prefix, query, filter, limit, offset, expected length)
            (("big",), "apple 12", {"i": {"$gte": 100}}, 7, 3, 7),  # the best 1,000 suffice
            (("big",), "frost", None, 10, 0, 10),
            (("big",), "river", {"i": {"$gte": 590}}, 20, 0, 10),  # fewer than asked: all
            (("big", "s0"), "stone", {"n": {"$ne": 1}}, 5, 0, 5),  # s0 alone is past 1,000
            (("big", "s1"), "river stone", {"i": {"$lt": 560}}, 5, 2, 5),
        ]
        for prefix, q, flt, limit, offset, length in queries:
            a = norm(ours.search(prefix, query=q, filter=flt, limit=limit, offset=offset))
            b = norm(ref.search(prefix, query=q, filter=flt, limit=limit, offset=offset))
            assert same(a, b), (q, a, b)
            assert len(a) == length
            scores = [round(r[3], 4) for r in b]
            assert len(set(scores)) == len(scores)  # no ties: the order is the scores' alone
    finally:
        db.close()
