"""SynapseSaver beyond the conformance suite: time travel with ``as_of``, deletes that keep
(or erase) history, large checkpoints over several facts, and hostile configs."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from synapsedb import ValidationError
from synapsedb.integrations.langgraph import SynapseSaver

from .conftest import Backend


def put(
    saver: Any,
    thread: str,
    parent: dict[str, Any] | None,
    values: dict[str, Any],
    step: int,
    ns: str = "",
    cid: str | None = None,
) -> Any:
    cp = empty_checkpoint()
    if cid is not None:
        cp["id"] = cid
    cp["channel_values"] = values
    cp["channel_versions"] = {k: step + 1 for k in values}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    return saver.put(config, cp, {"source": "loop", "step": step}, cp["channel_versions"])


def test_get_tuple_as_of_answers_what_the_thread_held_then(backend: Backend) -> None:
    saver = SynapseSaver(backend.db)
    thread: Any = {"configurable": {"thread_id": "t1"}}
    c1 = put(saver, "t1", None, {"messages": ["hi"]}, 0)
    saver.put_writes(c1, [("messages", "pending reply")], "task-1")
    t1 = backend.clock.now_us() / 1e6
    backend.clock.advance(10)
    c2 = put(saver, "t1", c1, {"messages": ["hi", "hello"]}, 1)
    t2 = backend.clock.now_us() / 1e6
    backend.clock.advance(10)

    then = saver.get_tuple_as_of(thread, t1)
    assert then is not None and then.config == c1
    assert then.checkpoint["channel_values"] == {"messages": ["hi"]}
    assert then.pending_writes == [("task-1", "messages", "pending reply")]
    assert saver.get_tuple_as_of(thread, t1 - 5) is None  # before the first
    now = saver.get_tuple(thread)
    assert now is not None and now.config == c2 and now.parent_config == c1
    assert [t.config for t in saver.list(thread, as_of=t1)] == [c1]

    saver.delete_thread("t1")
    assert saver.get_tuple(thread) is None and list(saver.list(thread)) == []
    kept = saver.get_tuple_as_of(thread, t2)  # deletes are tombstones: the past stays
    assert kept is not None and kept.config == c2
    assert kept.checkpoint["channel_values"] == {"messages": ["hi", "hello"]}


@pytest.mark.asyncio
async def test_async_time_travel(backend: Backend) -> None:
    saver = SynapseSaver(backend.db)
    c1 = put(saver, "t", None, {"x": 1}, 0)
    t1 = backend.clock.now_us() / 1e6
    backend.clock.advance(1)
    put(saver, "t", c1, {"x": 2}, 1)
    thread: Any = {"configurable": {"thread_id": "t"}}
    got = await saver.aget_tuple_as_of(thread, t1)
    assert got is not None and got.checkpoint["channel_values"] == {"x": 1}
    listed = [t async for t in saver.alist(thread, as_of=t1)]
    assert [t.config for t in listed] == [c1]


def test_erase_on_delete_leaves_nothing_to_travel_to(backend: Backend) -> None:
    saver = SynapseSaver(backend.db, erase_on_delete=True)
    c1 = put(saver, "gone", None, {"secret": "s3cret"}, 0)
    t1 = backend.clock.now_us() / 1e6
    backend.clock.advance(1)
    saver.delete_thread("gone")
    gone: Any = {"configurable": {"thread_id": "gone"}}
    assert saver.get_tuple_as_of(gone, t1) is None
    assert c1["configurable"]["thread_id"] == "gone"


def test_large_checkpoints_and_writes_span_several_facts(backend: Backend) -> None:
    saver = SynapseSaver(backend.db, chunk_chars=4096)
    big = {"blob": "x" * 50_000, "items": list(range(5_000))}
    c1 = put(saver, "big", None, big, 0)
    saver.put_writes(c1, [("blob", "y" * 20_000)], "task")
    saver.put_writes(c1, [("blob", "z" * 20_000)], "task")  # same (task, idx): kept first
    got = saver.get_tuple(c1)
    assert got is not None and got.checkpoint["channel_values"] == big
    assert got.pending_writes == [("task", "blob", "y" * 20_000)]
    copy_of = SynapseSaver(backend.db)
    copy_of.copy_thread("big", "big-copy")
    copied: Any = {"configurable": {"thread_id": "big-copy"}}
    again = copy_of.get_tuple(copied)
    assert again is not None and again.checkpoint["channel_values"] == big
    assert again.pending_writes == got.pending_writes


def test_same_answers_as_in_memory_saver(backend: Backend) -> None:
    def scenario(saver: Any) -> list[Any]:
        c1 = put(saver, "p", None, {"a": 1}, 0, cid="cp-0001")
        c2 = put(saver, "p", c1, {"a": 2, "b": "x"}, 1, cid="cp-0002")
        put(saver, "p", None, {"c": 3}, 0, ns="child:1", cid="cp-0003")
        saver.put_writes(c2, [("a", 5), ("b", "y")], "t2", "~path")
        saver.put_writes(c2, [("a", 6)], "t1", "~path")
        rows = [
            (
                t.config,
                t.checkpoint["channel_values"],
                t.metadata["step"],
                t.parent_config,
                t.pending_writes,
            )
            for t in saver.list({"configurable": {"thread_id": "p", "checkpoint_ns": ""}})
        ]
        latest = saver.get_tuple({"configurable": {"thread_id": "p", "checkpoint_ns": "child:1"}})
        return [rows, latest.checkpoint["channel_values"], len(list(saver.list(None)))]

    assert scenario(SynapseSaver(backend.db)) == scenario(InMemorySaver())


def test_hostile_configs_are_validation_errors(backend: Backend) -> None:
    saver = SynapseSaver(backend.db)
    good = put(saver, "ok", None, {"v": 1}, 0)
    cases: list[tuple[Any, str]] = [
        (lambda: saver.get_tuple({"configurable": {}}), "configurable.thread_id"),
        (lambda: saver.get_tuple({}), "configurable.thread_id"),  # type: ignore[typeddict-item]
        (lambda: saver.get_tuple({"configurable": {"thread_id": ""}}), "thread_id"),
        (lambda: saver.get_tuple({"configurable": {"thread_id": ["x"]}}), "thread_id"),
        (
            lambda: saver.put_writes({"configurable": {"thread_id": "ok"}}, [("a", 1)], "t"),
            "configurable.checkpoint_id",
        ),
        (
            lambda: saver.get_tuple({"configurable": {"thread_id": "ok", "checkpoint_ns": 5}}),
            "configurable.checkpoint_ns",
        ),
        (lambda: list(saver.list(good, filter=["step"])), "filter"),  # type: ignore[arg-type]
        (lambda: saver.prune(["ok"], strategy="everything"), "strategy"),
        (lambda: SynapseSaver(backend.db, chunk_chars=10), "chunk_chars"),
        (lambda: SynapseSaver(object()), "db"),
    ]
    for call, field in cases:
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.details["field"] == field, (field, info.value)
    long_id = "t" * 1000  # too long for a name: hashed, and still works
    c = put(saver, long_id, None, {"v": 2}, 0)
    got = saver.get_tuple(c)
    assert got is not None and got.checkpoint["channel_values"] == {"v": 2}
    assert saver.get_tuple(good) is not None
