from __future__ import annotations

import numpy as np
import pytest

import synapsedb
from synapsedb import ManualClock, Namespace, NotFoundError, ValidationError, VersionConflictError


def test_seed_calls_work_as_written(mem: Namespace) -> None:
    m = mem.write(
        "user:4321",
        {
            "content": "Refund requested for order #1458 last week",
            "salience": 0.9,
            "ts": "2025-10-24T10:00:00Z",
        },
    )
    assert m.entity == "user:4321"
    assert m.salience == 0.9
    assert m.ts.isoformat() == "2025-10-24T10:00:00+00:00"
    assert m.type == "fact"
    assert m.agent == "intake"
    plain = mem.write("user:4321", "plain text")
    assert plain.content == "plain text"
    ev = mem.append("user:4321", "Refund confirmed delivered on 10/28.")
    assert ev.memory_id is not None
    stored = mem.get(ev.memory_id)
    assert stored.type == "event"
    assert stored.metadata == {"stream": "user:4321", "event_id": ev.id}
    assert {x.id for x in mem.memories("user:4321")} == {m.id, plain.id, ev.memory_id}


def test_update_makes_a_new_version_and_keeps_unchanged_fields(
    mem: Namespace, clock: ManualClock
) -> None:
    m = mem.write("u", {"content": "a", "metadata": {"k": 1}, "salience": 0.2, "pinned": True})
    clock.advance(1)
    m2 = mem.update(m.id, {"content": "b"}, agent="resolution")
    assert (m2.version, m2.content, m2.metadata, m2.salience, m2.pinned) == (
        2,
        "b",
        {"k": 1},
        0.2,
        True,
    )
    assert m2.agent == "resolution"
    assert m2.created_at == m.created_at
    assert m2.recorded_at > m.recorded_at
    assert mem.get(m.id).content == "b"
    assert [v.content for v in mem.history(m.id)] == ["a", "b"]
    assert [v.agent for v in mem.history(m.id)] == ["intake", "resolution"]


def test_compare_and_set_on_update_and_delete(mem: Namespace) -> None:
    m = mem.write("u", "a")
    with pytest.raises(VersionConflictError) as err:
        mem.update(m.id, {"content": "b"}, if_version=2)
    assert (err.value.expected, err.value.actual) == (2, 1)
    assert mem.update(m.id, {"content": "b"}, if_version=1).version == 2
    with pytest.raises(VersionConflictError):
        mem.delete(m.id, if_version=1)
    assert mem.get(m.id).content == "b"


def test_delete_leaves_a_tombstone_and_as_of_still_sees_it(
    mem: Namespace, clock: ManualClock
) -> None:
    m = mem.write("u", "secret plan")
    before = clock.now_us() / 1e6
    clock.advance(5)
    tomb = mem.delete(m.id, agent="resolution")
    assert tomb.deleted and tomb.version == 2
    with pytest.raises(NotFoundError):
        mem.get(m.id)
    assert mem.get(m.id, as_of=before).content == "secret plan"
    assert [v.deleted for v in mem.history(m.id)] == [False, True]
    assert mem.memories("u") == []
    with pytest.raises(NotFoundError):
        mem.delete(m.id)


def test_rewriting_an_existing_id_adds_a_version(mem: Namespace) -> None:
    m = mem.write("u", {"id": "order-1458", "content": "requested"})
    m2 = mem.write("u", {"id": "order-1458", "content": "refunded"})
    assert (m.id, m.version, m2.version) == ("order-1458", 1, 2)
    with pytest.raises(ValidationError) as err:
        mem.write("other", {"id": "order-1458", "content": "x"})
    assert err.value.field == "id"


def test_write_many_is_all_or_nothing(mem: Namespace) -> None:
    good = [{"entity": f"user:{i}", "content": f"fact {i}"} for i in range(5)]
    out = mem.write_many([*good, ("user:9", "pair form")])
    assert len(out) == 6 and out[-1].entity == "user:9"
    bad = [*good, {"entity": "user:x", "content": "y" * (1024 * 1024 + 1)}]
    with pytest.raises(ValidationError) as err:
        mem.write_many(bad)
    assert err.value.field == "items[5].content"
    assert err.value.details["limit"] == 1024 * 1024
    assert mem.stats().memories == 6


def test_write_many_rejects_a_dimension_mismatch_without_writing(mem: Namespace) -> None:
    items = [
        {"entity": "u", "content": "a", "embedding": [0.1] * 4},
        {"entity": "u", "content": "b", "embedding": [0.1] * 3},
    ]
    with pytest.raises(ValidationError) as err:
        mem.write_many(items)
    assert err.value.field == "items[1].embedding"
    assert mem.stats().memories == 0
    assert mem.stats().dim is None


def test_namespace_dimension_is_fixed_by_the_first_vector(mem: Namespace) -> None:
    m = mem.write("u", {"content": "a", "embedding": np.ones(8, dtype=np.float32)})
    assert m.embedding is not None and m.embedding.shape == (8,)
    assert not m.embedding.flags.writeable
    with pytest.raises(ValidationError, match="8-dimensional"):
        mem.write("u", {"content": "b", "embedding": [1.0] * 3})
    with pytest.raises(ValidationError):
        mem.update(m.id, {"embedding": [1.0] * 3})
    assert mem.stats().dim == 8


def test_memories_filters_by_type_and_orders_by_event_time(mem: Namespace) -> None:
    mem.write("u", {"content": "old", "ts": "2025-01-01T00:00:00Z", "type": "preference"})
    mem.write("u", {"content": "new", "ts": "2025-06-01T00:00:00Z", "type": "preference"})
    mem.write("u", {"content": "other", "type": "summary", "ts": "2025-07-01T00:00:00Z"})
    assert [m.content for m in mem.memories("u", types=["preference"])] == ["new", "old"]
    assert [m.content for m in mem.memories("u", limit=1)] == ["other"]
    assert mem.memories("nobody") == []


def test_namespaces_are_isolated(db: synapsedb.Database) -> None:
    a, b = db.namespace("tenant-a"), db.namespace("tenant-b")
    m = a.write("user:1", "a's secret")
    a.set("user:1", "k", 1)
    with pytest.raises(NotFoundError):
        b.get(m.id)
    with pytest.raises(NotFoundError):
        b.get("user:1", "k")
    assert b.memories() == [] and b.facts("user:1") == [] and b.entities() == []
    assert db.namespaces() == ["tenant-a"]


def test_returned_objects_do_not_alias_engine_state(mem: Namespace, db: synapsedb.Database) -> None:
    m = mem.write("u", {"content": "a", "metadata": {"tags": ["x"]}})
    m.metadata["tags"].append("mutated")
    assert mem.get(m.id).metadata == {"tags": ["x"]}
    vec = np.ones(4, dtype=np.float32)
    m2 = db.namespace("caller-vectors").write("u", {"content": "b", "embedding": vec})
    vec[0] = 42.0
    assert m2.embedding is not None and float(m2.embedding[0]) == 1.0


def test_ttl_hides_after_expiry_but_as_of_sees_it_before(
    mem: Namespace, clock: ManualClock
) -> None:
    m = mem.write("u", {"content": "temporary", "ttl": 10})
    t_written = clock.now_us() / 1e6
    assert m.expires_at is not None
    clock.advance(11)
    with pytest.raises(NotFoundError):
        mem.get(m.id)
    assert mem.get(m.id, as_of=t_written + 5).content == "temporary"
    with pytest.raises(NotFoundError):  # expired memories cannot be updated either
        mem.update(m.id, {"content": "x"})


def test_entities_lists_what_is_known(mem: Namespace, clock: ManualClock) -> None:
    t0 = clock.now_us() / 1e6
    clock.advance(1)
    mem.write("user:1", "a")
    mem.set("ticket:88", "status", "open")
    assert mem.entities() == ["ticket:88", "user:1"]
    assert mem.entities(as_of=t0) == []
