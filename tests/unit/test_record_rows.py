"""Records and the storage seam's named rows: what ``to_row`` writes is read back by
``from_row`` field for field (the rows are built from tuples, so the order must match)."""

from __future__ import annotations

import numpy as np

from synapsedb.engine.records import EventRec, FactRec, MemRec
from synapsedb.storage.base import (
    EventInsert,
    EventRow,
    FactInsert,
    FactRow,
    MemoryInsert,
    MemoryRow,
)


def test_a_memory_version_round_trips_through_its_rows() -> None:
    vec = np.arange(4, dtype=np.float32)
    rec = MemRec(
        "m1",
        3,
        30,
        10,
        "alice",
        "note",
        "alice likes tea",
        '{"a":1}',
        vec,
        0.25,
        20,
        "intake",
        True,
        60.0,
        60_000_030,
        False,
    )
    row = rec.to_row("acme")
    assert type(row) is MemoryInsert and len(row) == len(MemoryInsert._fields)
    assert (
        row.ns,
        row.id,
        row.version,
        row.sys_us,
        row.created_us,
        row.entity,
        row.type,
        row.content,
        row.metadata,
        row.salience,
        row.ts_us,
        row.agent,
        row.pinned,
        row.ttl,
        row.expires_us,
        row.deleted,
    ) == (
        "acme",
        "m1",
        3,
        30,
        10,
        "alice",
        "note",
        "alice likes tea",
        '{"a":1}',
        0.25,
        20,
        "intake",
        1,
        60.0,
        60_000_030,
        0,
    )
    assert row.embedding == vec.tobytes()
    back = MemRec.from_row(MemoryRow(*row, erased=1))
    assert (
        back.id,
        back.version,
        back.entity,
        back.content,
        back.meta_json,
        back.agent,
        back.pinned,
        back.ttl,
        back.expires_us,
        back.deleted,
        back.erased,
    ) == (
        "m1",
        3,
        "alice",
        "alice likes tea",
        '{"a":1}',
        "intake",
        True,
        60.0,
        60_000_030,
        False,
        True,
    )
    assert np.array_equal(back.vector(), vec)


def test_a_fact_version_round_trips_through_its_rows() -> None:
    rec = FactRec("alice", "city", 2, 30, 10, '"Oslo"', None, None, None, True)
    row = rec.to_row("acme")
    assert type(row) is FactInsert and len(row) == len(FactInsert._fields)
    assert (
        row.ns,
        row.entity,
        row.key,
        row.version,
        row.sys_us,
        row.created_us,
        row.value,
        row.deleted,
    ) == ("acme", "alice", "city", 2, 30, 10, '"Oslo"', 1)
    back = FactRec.from_row(FactRow(*row, erased=0))
    assert (back.entity, back.key, back.version, back.value_json, back.deleted, back.erased) == (
        "alice",
        "city",
        2,
        '"Oslo"',
        True,
        False,
    )


def test_an_event_round_trips_through_its_rows() -> None:
    rec = EventRec("chat", 5, 1, 30, "alice", 20, "bot", "hello", '{"x":1}', "m9")
    row = rec.to_row("acme")
    assert type(row) is EventInsert and len(row) == len(EventInsert._fields)
    assert (
        row.ns,
        row.stream,
        row.ms,
        row.seq,
        row.sys_us,
        row.entity,
        row.ts_us,
        row.agent,
        row.content,
        row.data,
        row.memory_id,
    ) == ("acme", "chat", 5, 1, 30, "alice", 20, "bot", "hello", '{"x":1}', "m9")
    back = EventRec.from_row(EventRow(*row, erased=1))
    assert (back.stream, back.key, back.content, back.data_json, back.memory_id, back.erased) == (
        "chat",
        (5, 1),
        "hello",
        '{"x":1}',
        "m9",
        True,
    )
