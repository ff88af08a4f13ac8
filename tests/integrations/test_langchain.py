"""SynapseChatMessageHistory and SynapseVectorStore beyond the standard suite: message
mapping both ways (tool calls, names, content blocks, LangChain ids and extras), async methods,
interop with synapsedb.conversation.Sessions, filters on metadata, scores, as_of, the
database's own embedder, hostile input, and tenant isolation over HTTP. Each test runs on an
embedded database and through a real HTTP server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

import synapsedb
from synapsedb.conversation import Message, Sessions
from synapsedb.errors import ValidationError
from synapsedb.integrations.langchain import SynapseChatMessageHistory, SynapseVectorStore
from synapsedb.server import create_app
from tests.support.live_server import serve


def _open(path: Path, embedder: Any = None) -> synapsedb.Database:
    return synapsedb.open(
        path, durability="os", llm=None, embedder=embedder, background_maintenance=False
    )


@pytest.fixture(params=["embedded", "http"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, str | None]]:
    """(database or client, the server's URL or None)."""
    db = _open(tmp_path / "d")
    try:
        if request.param == "embedded":
            yield db, None
        else:
            with serve(create_app(db)) as url:
                client = synapsedb.connect(url)
                yield client, url
                client.close()
    finally:
        db.close()


CONVERSATION = [
    SystemMessage("You are a courteous support agent."),
    HumanMessage("Where is parcel 1458?", name="alice", id="lc-1"),
    AIMessage(
        "",
        tool_calls=[
            {
                "name": "track_parcel",
                "args": {"order": 1458, "detail": ["city"]},
                "id": "call_1",
                "type": "tool_call",
            }
        ],
        additional_kwargs={"refusal": None},
        response_metadata={"model_name": "gpt-4o", "finish_reason": "tool_calls"},
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
    ),
    ToolMessage('{"city": "Hamburg"}', tool_call_id="call_1", status="success"),
    ToolMessage(
        "tracking service down", tool_call_id="call_2", status="error", artifact={"code": 503}
    ),
    AIMessage(
        [{"type": "text", "text": "It is in Hamburg;"}, {"type": "text", "text": "rerouted."}]
    ),
    ChatMessage(role="human", content="Thanks!"),
]


def _comparable(msg: Any) -> dict[str, Any]:
    out = msg.model_dump()
    if out.get("id") is not None and not str(out["id"]).startswith("lc-"):
        out["id"] = None  # a store-given id (the session's event id)
    return out


def test_history_round_trip_keeps_every_message_type(target: tuple[Any, str | None]) -> None:
    db, _ = target
    history = SynapseChatMessageHistory("ticket-1458", db.namespace("support"))
    assert history.messages == []
    history.add_messages(CONVERSATION)
    got = history.messages
    expected = [*CONVERSATION[:-1], HumanMessage("Thanks!")]  # ChatMessage(human) is a user turn
    assert [_comparable(m) for m in got] == [_comparable(m) for m in expected]
    assert got[1].id == "lc-1" and got[0].id  # LangChain's own id kept; else the event id
    assert isinstance(got[2], AIMessage) and got[2].tool_calls[0]["args"]["detail"] == ["city"]


def test_history_speaks_openai_to_other_clients(target: tuple[Any, str | None]) -> None:
    db, _ = target
    ns = db.namespace("support")
    history = SynapseChatMessageHistory("s", ns)
    history.add_messages(CONVERSATION[:4])
    openai = [m.to_openai() for m in Sessions(ns).load("s")]
    assert openai[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "track_parcel",
                    "arguments": '{"order": 1458, "detail": ["city"]}',
                },
            }
        ],
    }
    assert openai[3] == {"role": "tool", "content": '{"city": "Hamburg"}', "tool_call_id": "call_1"}
    assert openai[1] == {"role": "user", "content": "Where is parcel 1458?", "name": "alice"}
    # and what another client wrote reads as LangChain messages
    Sessions(ns).append(
        "s",
        Message.assistant(
            tool_calls=[
                {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "not json"}}
            ]
        ),
    )
    last = history.messages[-1]
    assert isinstance(last, AIMessage) and last.tool_calls == []
    assert last.invalid_tool_calls[0]["name"] == "f" and last.invalid_tool_calls[0]["id"] == "c9"


def test_history_clear_hides_but_time_travel_keeps(target: tuple[Any, str | None]) -> None:
    db, _ = target
    ns = db.namespace("support")
    history = SynapseChatMessageHistory("s", ns)
    history.add_user_message("hello")
    history.add_ai_message("hi there")
    before = Sessions(ns).load("s")[-1].ts
    history.clear()
    assert history.messages == []
    assert [m.content for m in Sessions(ns).load("s", as_of=before)] == ["hello", "hi there"]
    other = SynapseChatMessageHistory("other", ns)
    other.add_user_message("separate")
    assert history.messages == [] and [m.content for m in other.messages] == ["separate"]


def test_history_rejects_bad_input_and_stores_nothing(target: tuple[Any, str | None]) -> None:
    db, _ = target
    history = SynapseChatMessageHistory("s", db.namespace("support"))
    history.add_user_message("kept")
    cases: list[tuple[list[Any], str]] = [
        ([HumanMessage("ok"), FunctionMessage(content="x", name="f")], "messages[1].role"),
        ([HumanMessage("ok"), ChatMessage(role="critic", content="x")], "messages[1].role"),
        ([HumanMessage("ok", name="no spaces allowed")], "messages[0].name"),
        (
            [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": None}])],
            "messages[0].tool_calls[0].id",
        ),
        ([ToolMessage("r", tool_call_id="c", artifact=object())], "messages[0].metadata"),
        ([HumanMessage("   ")], "messages[0].content"),
        (["plain text"], "messages[0]"),  # type: ignore[list-item]
    ]
    for messages, field in cases:
        with pytest.raises(ValidationError) as err:
            history.add_messages(messages)
        assert str(err.value.details.get("field", "")).startswith(field), (messages, err.value)
    with pytest.raises(ValidationError):
        history.add_messages(HumanMessage("not a list"))  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as err:
        SynapseChatMessageHistory("", db.namespace("support"))
    assert err.value.details["field"] == "session_id"
    with pytest.raises(ValidationError):
        SynapseChatMessageHistory("s")
    assert [m.content for m in history.messages] == ["kept"]


@pytest.mark.asyncio
async def test_history_async_methods(target: tuple[Any, str | None]) -> None:
    db, url = target
    ns = db.namespace("support")
    threaded = SynapseChatMessageHistory("s", ns)  # async methods in a worker thread
    await threaded.aadd_messages(CONVERSATION[:2])
    assert [m.content for m in await threaded.aget_messages()] == [
        CONVERSATION[0].content,
        CONVERSATION[1].content,
    ]
    if url is None:
        natively = SynapseChatMessageHistory("s", async_namespace=ns)
        remote = None
    else:
        remote = synapsedb.connect_async(url)
        natively = SynapseChatMessageHistory("s", async_namespace=remote.namespace("support"))
    try:
        await natively.aadd_messages([AIMessage("On its way.")])
        got = await natively.aget_messages()
        assert [type(m).__name__ for m in got] == ["SystemMessage", "HumanMessage", "AIMessage"]
        with pytest.raises(ValidationError):
            natively.messages  # noqa: B018  (only an async namespace: sync reads refused)
        await natively.aclear()
        assert await threaded.aget_messages() == []
        await threaded.aadd_messages([HumanMessage("again")])
        await threaded.aclear()
        assert threaded.messages == []
    finally:
        if remote is not None:
            await remote.close()


# -- the vector store ----------------------------------------------------------------------------

DOCS = [
    ("a", "the cat sat on the mat", {"kind": "pet", "year": 2021, "tags": ["cat", "home"]}),
    ("b", "dogs chase cats in the park", {"kind": "pet", "year": 2023, "tags": ["dog"]}),
    ("c", "interest rates rose again", {"kind": "finance", "year": 2023, "id": 7}),
    ("d", "the central bank held rates", {"kind": "finance", "year": 2024}),
]


def _store(db: Any, **kwargs: Any) -> SynapseVectorStore:
    store = SynapseVectorStore(db.namespace("docs"), DeterministicFakeEmbedding(size=16), **kwargs)
    store.add_texts([t for _, t, _ in DOCS], [m for _, _, m in DOCS], ids=[i for i, _, _ in DOCS])
    return store


def test_vector_scores_are_cosine_best_first(target: tuple[Any, str | None]) -> None:
    db, _ = target
    store = _store(db)
    hits = store.similarity_search_with_score("interest rates rose again", k=4)
    assert hits[0][0].id == "c" and hits[0][1] == pytest.approx(1.0)
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and all(-1.0 <= s <= 1.0 for s in scores)
    rel = store.similarity_search_with_relevance_scores("interest rates rose again", k=4)
    assert rel[0][1] == pytest.approx(1.0) and all(0.0 <= s <= 1.0 for _, s in rel)
    vec = DeterministicFakeEmbedding(size=16).embed_query("the cat sat on the mat")
    assert store.similarity_search_by_vector(vec, k=1)[0].id == "a"


def test_vector_filters_are_metadata_paths(target: tuple[Any, str | None]) -> None:
    db, _ = target
    store = _store(db)

    def ids(flt: dict[str, Any]) -> set[str]:
        return {d.id for d in store.similarity_search("rates", k=10, filter=flt) if d.id}

    assert ids({"kind": "finance"}) == {"c", "d"}
    assert ids({"year": {"$gte": 2023}}) == {"b", "c", "d"}
    assert ids({"$or": [{"kind": "pet", "year": 2021}, {"year": 2024}]}) == {"a", "d"}
    assert ids({"tags": {"$contains": "cat"}}) == {"a"}
    assert ids({"$not": {"kind": "pet"}}) == {"c", "d"}
    assert ids({"id": 7}) == {"c"}  # metadata["id"], not the memory id
    assert ids({"metadata.kind": "pet"}) == {"a", "b"}
    with pytest.raises(ValidationError) as err:
        store.similarity_search("x", filter={"year": {"$between": [1, 2]}})
    assert "filter" in str(err.value.details.get("field"))


def test_vector_as_of_delete_and_versions(target: tuple[Any, str | None]) -> None:
    db, _ = target
    store = _store(db)
    then = db.namespace("docs").get("a").recorded_at
    store.add_texts(["the cat moved to the sofa"], [{"kind": "pet"}], ids=["a"])
    store.delete(["b", "missing"])
    now_ids = {d.id for d in store.similarity_search("cat", k=10)}
    assert now_ids == {"a", "c", "d"}
    assert store.get_by_ids(["a"])[0].page_content == "the cat moved to the sofa"
    old = store.similarity_search("the cat sat on the mat", k=10, as_of=then)
    assert {d.id for d in old} == {"a", "b", "c", "d"}
    assert [d.page_content for d in old if d.id == "a"] == ["the cat sat on the mat"]
    assert [m.content for m in db.namespace("docs").history("a")] == [
        "the cat sat on the mat",
        "the cat moved to the sofa",
    ]


def test_vector_store_keeps_to_its_entity(target: tuple[Any, str | None]) -> None:
    db, _ = target
    store = _store(db)
    ns = db.namespace("docs")
    ns.write(
        "user:1",
        {
            "id": "u1",
            "content": "the cat sat on the mat",
            "embedding": DeterministicFakeEmbedding(size=16).embed_query("x"),
        },
    )
    other = SynapseVectorStore(ns, DeterministicFakeEmbedding(size=16), entity="archive")
    other.add_texts(["the cat sat on the mat"], ids=["z"])
    assert "u1" not in {d.id for d in store.similarity_search("cat", k=10)}
    assert (
        store.get_by_ids(["u1", "z", "a"])[0].id == "a" and len(store.get_by_ids(["u1", "z"])) == 0
    )
    store.delete(["u1", "z"])  # not this store's: left alone
    assert ns.get("u1").content == "the cat sat on the mat" and other.get_by_ids(["z"])


def test_vector_retriever_and_from_texts(target: tuple[Any, str | None]) -> None:
    db, _ = target
    store = SynapseVectorStore.from_texts(
        [t for _, t, _ in DOCS],
        DeterministicFakeEmbedding(size=16),
        [m for _, _, m in DOCS],
        ids=[i for i, _, _ in DOCS],
        namespace=db.namespace("docs"),
    )
    retriever = store.as_retriever(search_kwargs={"k": 2, "filter": {"kind": "pet"}})
    docs = retriever.invoke("the cat sat on the mat")
    assert docs[0].id == "a" and {d.metadata["kind"] for d in docs} == {"pet"}
    docs = asyncio.run(retriever.ainvoke("dogs chase cats in the park"))
    assert docs[0].id == "b"
    with pytest.raises(ValidationError):
        SynapseVectorStore.from_texts(["x"], DeterministicFakeEmbedding(size=4))


def test_vector_rejects_bad_input(target: tuple[Any, str | None]) -> None:
    db, _ = target
    ns = db.namespace("docs")
    store = SynapseVectorStore(ns, DeterministicFakeEmbedding(size=8))
    hostile: Any = store  # calls that break the type hints on purpose
    bad: list[tuple[Any, str]] = [
        (lambda: store.add_texts(["a", "b"], [{}]), "metadatas"),
        (lambda: store.add_texts(["a"], ids=["x", "y"]), "ids"),
        (lambda: store.add_texts(["a", "b"], ids=["ok", "not an id"]), "ids[1]"),
        (lambda: store.add_texts(["a"], [{"when": float("nan")}]), "metadatas[0].when"),
        (lambda: store.add_texts(["a"], bogus=1), "bogus"),
        (lambda: hostile.add_texts([3]), "texts[0]"),
        (lambda: store.delete(), "ids"),
        (lambda: hostile.delete("abc"), "ids"),
        (lambda: store.similarity_search("x", k=0), "k"),
        (lambda: hostile.similarity_search("x", filter=["kind"]), "filter"),
        (lambda: SynapseVectorStore(ns, search_mode="fuzzy"), "search_mode"),
        (lambda: SynapseVectorStore(ns, embedding=hostile), "embedding"),
    ]
    for call, field in bad:
        with pytest.raises(ValidationError) as err:
            call()
        assert err.value.details.get("field") == field, (field, err.value)
    assert store.similarity_search("a", k=5) == []  # nothing was written


def test_vector_store_with_the_databases_own_embedder(tmp_path: Path) -> None:
    db = _open(tmp_path / "d", embedder="settings")  # local all-MiniLM-L6-v2
    try:
        with serve(create_app(db)) as url:
            client = synapsedb.connect(url)
            for handle in (db, client):
                store = SynapseVectorStore(handle.namespace("own"))
                if handle is db:
                    store.add_texts(
                        [
                            "My cat sleeps all day on the sofa.",
                            "Quarterly revenue grew by eight percent.",
                            "The train to Lisbon leaves at noon.",
                        ]
                    )
                best = store.similarity_search_with_score("a sleepy kitten", k=3)
                assert best[0][0].page_content.startswith("My cat") and best[0][1] > best[1][1]
                hybrid = SynapseVectorStore(handle.namespace("own"), search_mode="hybrid")
                assert hybrid.similarity_search("train Lisbon", k=1)[0].page_content.startswith(
                    "The train"
                )
            client.close()
    finally:
        db.close()


def test_tenants_do_not_share_histories_or_documents(tmp_path: Path) -> None:
    from synapsedb.server.keys import KeyStore

    db = _open(tmp_path / "d")
    keys = KeyStore(tmp_path / "d")
    key_a = keys.create("tenant-a", ["read", "write"], None, None)[1]
    key_b = keys.create("tenant-b", ["read", "write"], None, None)[1]
    try:
        with serve(create_app(db, keys)) as url:
            a, b = synapsedb.connect(url, api_key=key_a), synapsedb.connect(url, api_key=key_b)
            SynapseChatMessageHistory("s", a.namespace("shared")).add_user_message("A's secret")
            _store(a)
            assert SynapseChatMessageHistory("s", b.namespace("shared")).messages == []
            b_store = SynapseVectorStore(b.namespace("docs"), DeterministicFakeEmbedding(size=16))
            assert b_store.similarity_search("cat", k=5) == []
            assert b_store.get_by_ids(["a", "b"]) == []
            b_store.delete(["a"])
            assert _store(a).get_by_ids(["a"])[0].page_content == "the cat sat on the mat"
            a.close()
            b.close()
    finally:
        db.close()
