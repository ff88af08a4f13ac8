from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import synapsedb
from synapsedb import ManualClock, Namespace, NotFoundError, ValidationError

MARK = "zebra-sapphire-4471"


def files_contain(directory: Path, needle: str) -> list[str]:
    return [
        str(p.relative_to(directory))
        for p in directory.rglob("*")
        if p.is_file() and needle.encode() in p.read_bytes()
    ]


def test_forget_one_memory_leaves_a_tombstone(mem: Namespace, clock: ManualClock) -> None:
    m = mem.write("u", "forget me")
    t = clock.now_us() / 1e6
    clock.advance(1)
    out = mem.forget(m.id, agent="resolution")
    assert (out.target, out.purged, out.memories) == (m.id, False, 1)
    with pytest.raises(NotFoundError):
        mem.get(m.id)
    assert mem.get(m.id, as_of=t).content == "forget me"
    assert [v.deleted for v in mem.history(m.id)] == [False, True]


def test_forget_an_entity_tombstones_memories_and_facts(mem: Namespace) -> None:
    mem.write("user:1", "a")
    mem.write("user:1", "b")
    mem.set("user:1", "k", 1)
    mem.append("user:1", "an event stays in the stream")
    keep = mem.write("user:2", "other")
    out = mem.forget(entity="user:1")
    assert (out.memories, out.facts, out.purged) == (3, 1, False)  # 2 memories + the event's
    assert mem.memories("user:1") == [] and mem.facts("user:1") == []
    assert [e.content for e in mem.events("user:1")] == ["an event stays in the stream"]
    assert mem.get(keep.id).content == "other"


def test_purge_erases_the_entity_from_memory_and_from_the_files(tmp_path: Path) -> None:
    d = tmp_path / "d"
    clock = ManualClock()
    with synapsedb.open(d, clock=clock) as db:
        mem = db.namespace("acme", agent="intake")
        m1 = mem.write(
            "user:4321", {"content": f"Card ending {MARK} on file", "metadata": {"note": MARK}}
        )
        mem.update(m1.id, {"content": f"Card {MARK} replaced"})
        mem.set("user:4321", "card", {"number": MARK})
        mem.append("user:4321", {"content": f"Called about {MARK}", "data": {"raw": MARK}})
        other = mem.write("user:9", "Unrelated customer prefers email")
        res = mem.query(f"card {MARK}", agent="knowledge")
        mem.record_answer("ans-1", [res.query_id], agent="resolution")
        assert files_contain(d, MARK)  # it was there
        clock.advance(5)
        out = mem.forget(entity="user:4321", purge=True, agent="dpo")
        assert out.purged and (out.memories, out.versions, out.facts, out.events) == (2, 3, 1, 1)
        # gone from every read, at any moment
        assert mem.memories("user:4321", as_of=clock.now_us() / 1e6 - 2) == []
        assert mem.facts("user:4321") == [] and mem.events("user:4321") == []
        assert all(h.entity != "user:4321" for h in mem.query("card replaced on file"))
        with pytest.raises(NotFoundError):
            mem.get(m1.id)
        hist = mem.history(m1.id)
        assert [v.erased for v in hist] == [True, True] and {v.content for v in hist} == {""}
        lin = mem.lineage("ans-1")
        assert all(h.erased and h.content is None for h in lin.queries[0].hits if h.id == m1.id)
        assert lin.queries[0].text is None  # the query named the erased subject
        erase = [e for e in mem.audit(entity="user:4321") if e.action == "erase"]
        assert len(erase) == 1 and erase[0].agent == "dpo"
        assert mem.get(other.id).content.startswith("Unrelated")
        assert mem.query("prefers email").hits[0].id == other.id
    # the text is gone from the database files, WAL included
    assert files_contain(d, MARK) == []
    conn = sqlite3.connect(d / "synapse.db")
    (subject, counts) = conn.execute("SELECT subject, counts FROM erasures").fetchone()
    conn.close()
    assert "user:4321" not in subject and "4321" not in counts
    with synapsedb.open(d) as db:  # and it stays erased after a restart
        mem = db.namespace("acme")
        assert mem.memories("user:4321") == [] and mem.history(m1.id)[0].erased
        assert mem.get(other.id).content.startswith("Unrelated")


def test_purge_drops_the_saved_vector_graph(tmp_path: Path) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    with synapsedb.open(tmp_path / "d", durability="os", embedder=None, hnsw_threshold=100) as db:
        mem = db.namespace("big")
        mem.write_many(
            [
                {
                    "entity": f"user:{i % 3}",
                    "content": f"note {i}",
                    "embedding": rng.standard_normal(8),
                }
                for i in range(300)
            ]
        )
        assert db.wait_for_indexes(60)
    graph = tmp_path / "d" / "indexes" / "big.hnsw"
    assert graph.exists()
    with synapsedb.open(tmp_path / "d", durability="os", embedder=None, hnsw_threshold=100) as db:
        mem = db.namespace("big")
        mem.forget(entity="user:0", purge=True)
        assert not graph.exists()
        assert db.wait_for_indexes(60)
        q = rng.standard_normal(8)
        assert all(h.entity != "user:0" for h in mem.query(embedding=q, mode="vector", k=50))
        assert mem.stats().memories == 200


def test_forget_arguments(mem: Namespace) -> None:
    m = mem.write("u", "x")
    with pytest.raises(ValidationError):
        mem.forget()
    with pytest.raises(ValidationError):
        mem.forget(m.id, entity="u")
    with pytest.raises(ValidationError) as err:
        mem.forget(m.id, purge=True)
    assert err.value.field == "purge"
    assert mem.forget(entity="nobody", purge=True).memories == 0


def test_stats_count_the_streams_that_streams_lists(mem: Namespace) -> None:
    """A stream whose every event was erased by a purge is neither listed nor counted."""
    mem.append("user:9", "said something", stream="user:9")
    mem.append("user:1", "said hello", stream="lobby")
    assert mem.stats().streams == 2
    mem.forget(entity="user:9", purge=True)
    assert mem.streams() == ["lobby"]
    assert mem.stats().streams == len(mem.streams()) == 1
