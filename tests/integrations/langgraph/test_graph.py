"""A small real LangGraph graph (no LLM) compiled with SynapseSaver and SynapseStore: it is
interrupted, resumed on its thread, remembers across turns, writes to the store from a node,
and its history can be read back, also as of a past moment."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from synapsedb.integrations.langgraph import SynapseSaver, SynapseStore

from .conftest import Backend, TrigramEmbeddings


class State(TypedDict):
    user: str
    notes: Annotated[list[str], operator.add]
    approved: bool


def take_note(state: State) -> dict[str, Any]:
    note = f"note {len(state['notes']) + 1} for {state['user']}"
    get_store().put(
        ("users", state["user"], "notes"), f"n{len(state['notes']) + 1}", {"text": note}
    )
    return {"notes": [note]}


def approve(state: State) -> dict[str, Any]:
    answer = interrupt({"question": f"keep {state['notes'][-1]}?"})
    return {"approved": answer == "yes"}


def build(backend: Backend, embeddings: TrigramEmbeddings) -> Any:
    graph = StateGraph(State)
    graph.add_node("take_note", take_note)
    graph.add_node("approve", approve)
    graph.add_edge(START, "take_note")
    graph.add_edge("take_note", "approve")
    graph.add_edge("approve", END)
    store = SynapseStore(
        backend.db,
        "graph-store",
        index={"dims": embeddings.dims, "embed": embeddings, "fields": ["text"]},
    )
    saver = SynapseSaver(backend.db, "graph-checkpoints")
    return graph.compile(checkpointer=saver, store=store), saver, store


def test_a_graph_resumes_its_thread_and_reads_the_store_back(
    backend: Backend, embeddings: TrigramEmbeddings
) -> None:
    app, saver, store = build(backend, embeddings)
    config: Any = {"configurable": {"thread_id": "conv-1"}}

    first = app.invoke({"user": "ada", "notes": [], "approved": False}, config)
    assert first["__interrupt__"][0].value == {"question": "keep note 1 for ada?"}
    paused = app.get_state(config)
    assert paused.next == ("approve",) and paused.values["notes"] == ["note 1 for ada"]
    t_paused = backend.clock.now_us() / 1e6
    backend.clock.advance(5)

    done = app.invoke(Command(resume="yes"), config)  # resumes where it stopped
    assert done == {"user": "ada", "notes": ["note 1 for ada"], "approved": True}
    assert app.get_state(config).next == ()

    # a second turn on the same thread keeps the state (notes accumulate)
    app.invoke({"user": "ada"}, config)
    again = app.invoke(Command(resume="no"), config)
    assert again["notes"] == ["note 1 for ada", "note 2 for ada"] and again["approved"] is False

    # another thread starts empty
    other = app.invoke(
        {"user": "bob", "notes": [], "approved": False}, {"configurable": {"thread_id": "conv-2"}}
    )
    assert other["notes"] == ["note 1 for bob"]

    # the store holds what the nodes wrote, searchable by meaning, per user
    assert [i.key for i in store.search(("users", "ada", "notes"))] == ["n2", "n1"]
    hits = store.search(("users",), query="note 2 for ada", limit=1)
    assert hits[0].key == "n2" and hits[0].namespace == ("users", "ada", "notes")
    assert store.list_namespaces(prefix=("users",)) == [
        ("users", "ada", "notes"),
        ("users", "bob", "notes"),
    ]

    # history, newest first, and the thread as it was while paused
    history = list(app.get_state_history(config))
    assert len(history) >= 6 and history[0].values["notes"] == again["notes"]
    then = saver.get_tuple_as_of(config, t_paused)
    assert then is not None
    assert then.checkpoint["channel_values"]["notes"] == ["note 1 for ada"]
    assert any(w[1] == "__interrupt__" for w in then.pending_writes or [])


@pytest.mark.asyncio
async def test_the_same_graph_async(backend: Backend, embeddings: TrigramEmbeddings) -> None:
    app, _saver, store = build(backend, embeddings)
    config: Any = {"configurable": {"thread_id": "async-1"}}
    first = await app.ainvoke({"user": "cy", "notes": [], "approved": False}, config)
    assert "__interrupt__" in first
    done = await app.ainvoke(Command(resume="yes"), config)
    assert done["approved"] is True and done["notes"] == ["note 1 for cy"]
    item = await store.aget(("users", "cy", "notes"), "n1")
    assert item is not None and item.value == {"text": "note 1 for cy"}
