"""SynapseVectorStore under LlamaIndex's own ``VectorStoreIndex``, on an embedded database and
through a real HTTP server, after the patterns of llama-index-core's tests/vector_stores
(test_simple.py: add, query top-k, every filter operator and condition, delete by ref_doc_id,
get_nodes, delete_nodes, clear). llama-index-core ships no shared vector-store suite, so the
reference is its own ``SimpleVectorStore``: the same documents, vectors and filters must give
the same nodes. Vectors come from SynapseDB's real local model (SynapseEmbedding)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core", reason="the llamaindex extra is not installed")

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

import synapsedb
from synapsedb.errors import ValidationError
from synapsedb.integrations.llamaindex_vectors import (
    SynapseEmbedding,
    SynapseVectorStore,
)
from synapsedb.server import create_app
from tests.support.live_server import serve

DOCS = [
    (
        "refund-1458",
        "Refund requested for order #1458: the blender arrived broken.",
        {"channel": "email", "priority": 3, "tags": ["refund", "damaged"], "agent": "intake"},
    ),
    (
        "refund-1460",
        "Refund confirmed for order #1460, money back within five days.",
        {"channel": "chat", "priority": 2, "tags": ["refund"], "agent": "resolution"},
    ),
    (
        "ship-1471",
        "Order #1471 shipped by express courier, tracking number sent.",
        {"channel": "email", "priority": 1, "tags": ["shipping"], "agent": "logistics"},
    ),
    (
        "ship-1475",
        "Order #1475 is delayed at the warehouse because of a storm.",
        {"channel": "phone", "priority": 2, "tags": ["shipping", "delay"], "agent": "logistics"},
    ),
    (
        "pref-42",
        "The customer prefers to be contacted by email, never by phone.",
        {"channel": "email", "priority": 1, "tags": [], "agent": "intake"},
    ),
    (
        "pref-43",
        "Customer asks for invoices in PDF with the company's VAT number.",
        {"channel": "chat", "priority": 1, "tags": ["billing"]},
    ),
]


def documents() -> list[Document]:
    return [Document(text=text, id_=doc_id, metadata=meta) for doc_id, text, meta in DOCS]


@pytest.fixture(scope="module")
def embed_model() -> SynapseEmbedding:
    return SynapseEmbedding()


@pytest.fixture(scope="module", params=["embedded", "http"])
def handle(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    path = tmp_path_factory.mktemp("li-vectors") / "d"
    with synapsedb.open(path, durability="os", llm=None, background_maintenance=False) as db:
        if request.param == "embedded":
            yield db
        else:
            with serve(create_app(db)) as url, synapsedb.connect(url) as client:
                yield client


@pytest.fixture
def store(handle: Any) -> SynapseVectorStore:
    """A store of its own per test: a new namespace."""
    return SynapseVectorStore(handle.namespace(f"t{uuid.uuid4().hex[:12]}"))


def build(store: Any, embed_model: SynapseEmbedding) -> VectorStoreIndex:
    ctx = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(
        documents(), storage_context=ctx, embed_model=embed_model
    )


def ids_of(index: VectorStoreIndex, text: str, k: int, filters: Any = None) -> list[str]:
    nodes = index.as_retriever(similarity_top_k=k, filters=filters).retrieve(text)
    return [n.node.ref_doc_id for n in nodes]


def test_a_vector_store_index_builds_and_queries(store: Any, embed_model: Any) -> None:
    index = build(store, embed_model)
    assert ids_of(index, "was the broken blender refunded?", 1) == ["refund-1458"]
    assert ids_of(index, "where is my parcel, it is late", 1) == ["ship-1475"]
    email = MetadataFilters(filters=[MetadataFilter(key="channel", value="email")])
    assert ids_of(index, "how to reach the customer", 6, email) == [
        "pref-42",
        "ship-1471",
        "refund-1458",
    ]
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=2, filters=email)
    answer = engine.query("was the broken blender refunded?")  # MockLLM: a stand-in LLM
    assert next(n.node.ref_doc_id for n in answer.source_nodes) == "refund-1458"
    node = answer.source_nodes[0].node
    assert node.metadata["tags"] == ["refund", "damaged"] and "blender" in node.get_content()


def test_the_same_answers_as_simple_vector_store(store: Any, embed_model: Any) -> None:
    ours, ref = build(store, embed_model), build(SimpleVectorStore(), embed_model)
    for text in ("refund", "shipping delay storm", "invoice VAT", "contact by phone"):
        assert ids_of(ours, text, 3) == ids_of(ref, text, 3), text
        for got, want in zip(
            ours.as_retriever(similarity_top_k=6).retrieve(text),
            ref.as_retriever(similarity_top_k=6).retrieve(text),
            strict=True,
        ):
            assert got.score == pytest.approx(want.score, abs=1e-4)


F = FilterOperator
FILTERS = [
    [MetadataFilter(key="channel", value="email", operator=F.EQ)],
    [MetadataFilter(key="channel", value="email", operator=F.NE)],
    [MetadataFilter(key="priority", value=2, operator=F.GT)],
    [MetadataFilter(key="priority", value=2, operator=F.GTE)],
    [MetadataFilter(key="priority", value=2, operator=F.LT)],
    [MetadataFilter(key="priority", value=2, operator=F.LTE)],
    [MetadataFilter(key="channel", value=["chat", "phone"], operator=F.IN)],
    [MetadataFilter(key="channel", value=["chat", "phone"], operator=F.NIN)],
    [MetadataFilter(key="agent", value="intake", operator=F.NE)],  # an absent key passes !=
    [MetadataFilter(key="agent", value=["intake"], operator=F.NIN)],  # and nin
    [MetadataFilter(key="agent", value=["intake", "logistics"], operator=F.IN)],
    [MetadataFilter(key="tags", value="refund", operator=F.CONTAINS)],
    [MetadataFilter(key="agent", value="ist", operator=F.TEXT_MATCH)],
    [MetadataFilter(key="tags", value=["delay", "damaged"], operator=F.ANY)],
    [MetadataFilter(key="tags", value=["shipping", "delay"], operator=F.ALL)],
    [MetadataFilter(key="tags", value=None, operator=F.IS_EMPTY)],
    [MetadataFilter(key="agent", value=None, operator=F.IS_EMPTY)],
]


@pytest.mark.parametrize(
    "condition", [FilterCondition.AND, FilterCondition.OR, FilterCondition.NOT]
)
def test_every_filter_as_simple_vector_store_reads_it(
    store: Any, embed_model: Any, condition: FilterCondition
) -> None:
    ours, ref = build(store, embed_model), build(SimpleVectorStore(), embed_model)
    cases = [*FILTERS, [FILTERS[0][0], FILTERS[4][0]], [FILTERS[6][0], FILTERS[11][0]]]
    for case in cases:
        filters = MetadataFilters(filters=case, condition=condition)
        want = sorted(ids_of(ref, "order", 6, filters))
        assert sorted(ids_of(ours, "order", 6, filters)) == want, (condition, case)


def test_nested_filters(store: Any, embed_model: Any) -> None:
    """Which SimpleVectorStore does not take: (channel is email) and (priority 3 or no agent)."""
    index = build(store, embed_model)
    inner = MetadataFilters(
        filters=[
            MetadataFilter(key="priority", value=3),
            MetadataFilter(key="agent", value=None, operator=F.IS_EMPTY),
        ],
        condition=FilterCondition.OR,
    )
    both = MetadataFilters(filters=[MetadataFilter(key="channel", value="chat"), inner])
    assert ids_of(index, "order", 6, both) == ["pref-43"]


def test_delete_by_document_get_and_clear(store: Any, embed_model: Any) -> None:
    index = build(store, embed_model)
    before = store.client.memories(store.entity, limit=100)[0].recorded_at
    index.delete_ref_doc("refund-1458")
    assert "refund-1458" not in ids_of(index, "broken blender refund", 6)
    then = store.query(
        VectorStoreQuery(
            query_str="broken blender refund",
            similarity_top_k=1,
            mode=VectorStoreQueryMode.TEXT_SEARCH,
        ),
        as_of=before,
    )
    assert then.nodes[0].ref_doc_id == "refund-1458"  # time travel still sees it

    email = MetadataFilters(filters=[MetadataFilter(key="channel", value="email")])
    assert sorted(n.ref_doc_id for n in store.get_nodes(filters=email)) == ["pref-42", "ship-1471"]
    some = [n.node_id for n in store.get_nodes()]
    assert len(some) == 5
    picked = store.get_nodes(node_ids=[some[2], "nowhere", some[0]])
    assert [n.node_id for n in picked] == [some[2], some[0]]
    assert picked[0].get_content() and picked[0].metadata.get("channel")
    emails = {n.node_id for n in store.get_nodes(filters=email)}
    one_each = [next(i for i in some if i in emails), next(i for i in some if i not in emails)]
    store.delete_nodes(node_ids=one_each, filters=email)  # only the first passes the filter
    assert {n.node_id for n in store.get_nodes()} == set(some) - {one_each[0]}
    store.clear()
    assert store.get_nodes() == []
    assert ids_of(index, "order", 6) == []


def test_modes_and_what_is_refused(store: Any, embed_model: Any) -> None:
    build(store, embed_model)
    vector = embed_model.get_query_embedding("parcel delayed by a storm")
    for mode in (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.HYBRID):
        got = store.query(
            VectorStoreQuery(
                query_embedding=vector, query_str="storm delay", similarity_top_k=1, mode=mode
            )
        )
        assert got.nodes[0].ref_doc_id == "ship-1475" and len(got.similarities) == 1
    words = store.query(
        VectorStoreQuery(
            query_str="VAT invoices", similarity_top_k=1, mode=VectorStoreQueryMode.TEXT_SEARCH
        )
    )
    assert words.nodes[0].ref_doc_id == "pref-43"
    with pytest.raises(ValidationError) as exc:
        store.query(
            VectorStoreQuery(
                query_embedding=vector, similarity_top_k=1, mode=VectorStoreQueryMode.MMR
            )
        )
    assert exc.value.field == "mode"
    loose = MetadataFilters(
        filters=[MetadataFilter(key="agent", value="INT", operator=F.TEXT_MATCH_INSENSITIVE)]
    )
    with pytest.raises(ValidationError) as exc:
        store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=1, filters=loose))
    assert exc.value.field == "filters[0].operator"
    with pytest.raises(ValidationError) as exc:
        SynapseVectorStore(store.client, entity="")
    assert exc.value.field == "entity"


def test_nodes_without_vectors_are_embedded_by_the_database(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", durability="os", llm=None) as db:
        store = SynapseVectorStore(db.namespace("plain"))
        from llama_index.core.schema import TextNode

        store.add(
            [
                TextNode(text="The customer prefers email", id_="n1"),
                TextNode(text="Order #9 shipped today", id_="n2"),
            ]
        )
        got = store.query(
            VectorStoreQuery(query_str="how to contact the customer", similarity_top_k=1)
        )
        assert got.ids == ["n1"]
