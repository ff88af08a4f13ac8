"""Purge leaves nothing that identifies the entity in any file of the data directory, and says
when it could not finish because another reader held the WAL."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import synapsedb
from synapsedb import ManualClock

ENTITY = "user:zq4321"
KEY = "zq_card_on_file"
STREAM = "zq-billing-calls"
CONTENT = "kumquat-sapphire-7781"
META = "ocelot-meta-5512"
VALUE = "lantern-value-9034"
EVENT = "marimba-event-6650"
DATA = "quinoa-data-3127"
ANSWER = "harbor-answer-4409"
NEEDLES = (ENTITY, KEY, STREAM, CONTENT, META, VALUE, EVENT, DATA, ANSWER)


def found(directory: Path, needles: tuple[str, ...] = NEEDLES) -> dict[str, list[str]]:
    """Which needles occur in the raw bytes of which files (database, -wal, -shm, indexes...)."""
    out: dict[str, list[str]] = {}
    for path in sorted(directory.rglob("*")):
        if not path.is_file():
            continue
        raw = path.read_bytes()
        for needle in needles:
            if needle.encode() in raw:
                out.setdefault(needle, []).append(str(path.relative_to(directory)))
    return out


def test_purge_leaves_no_name_key_stream_content_or_answer_in_any_file(tmp_path: Path) -> None:
    d = tmp_path / "d"
    clock = ManualClock()
    with synapsedb.open(d, clock=clock, background_maintenance=False, hnsw_threshold=2) as db:
        mem = db.namespace("acme", agent="intake")
        m1 = mem.write(ENTITY, {"content": f"Card ending {CONTENT}", "metadata": {"n": META}})
        mem.update(m1.id, {"content": f"Card {CONTENT} replaced"})
        cold = mem.write(ENTITY, {"content": f"old note {CONTENT}", "salience": 0.0})
        mem.set(ENTITY, KEY, {"number": VALUE})
        mem.append(ENTITY, {"content": f"Called about {EVENT}", "data": {"raw": DATA}})
        mem.append(ENTITY, f"billing {EVENT}", stream=STREAM)
        mem.append(ENTITY, f"shared {EVENT}", stream="shared-desk")
        other = mem.write("user:9", {"content": "Unrelated customer prefers email", "pinned": True})
        kept_event = mem.append("user:9", "asked about invoices", stream="shared-desk")
        mem.set("user:9", "plan", "gold")
        mem.configure(max_hot=mem.stats().memories - 1, policy="evict")
        assert mem.maintain().demoted[0][0] == cold.id  # one of its memories is on disk only
        named = mem.query(f"what did {ENTITY} say")  # names the entity (scoped to it)
        hit = mem.query(f"card {CONTENT}", k=3)  # returns its memories without naming it
        assert m1.id in {h.id for h in hit}
        mem.record_answer("ans-1", [hit.query_id], text=f"It is {ANSWER}", cited=[m1.id])
        db.wait_for_indexes(30)
        before = found(d)
        assert {CONTENT, ENTITY, KEY, STREAM, VALUE, EVENT, DATA} <= set(before)  # it was there
        clock.advance(5)

        out = mem.forget(entity=ENTITY, purge=True, agent="dpo")
        assert out.purged and not out.pending
        assert found(d) == {}  # while open: database, -wal and -shm
        # still answers every read, without the name
        assert mem.get(other.id).content.startswith("Unrelated")
        assert [e.id for e in mem.events("shared-desk")] == [kept_event.id]
        assert mem.facts("user:9")[0].value == "gold"
        assert ENTITY not in mem.entities() and STREAM not in mem.streams()
        assert mem.streams() == ["shared-desk"]
        skeleton = mem.history(m1.id)
        assert all(v.erased and v.entity.startswith("erased:") for v in skeleton)
        assert all(ENTITY not in v.entity for v in skeleton)
        lin = mem.lineage("ans-1")
        assert lin.erased and lin.text is None
        assert [(c.id, c.version) for c in lin.cited] == [(m1.id, 2)]  # what it cited stays
        assert lin.queries[0].text is None and lin.queries[0].request == {"erased": True}
        logged = {q.query_id: q for q in mem.lineage("ans-1").queries}
        assert hit.query_id in logged
        # audit by name still finds the skeletons and the erasure, through the keyed hash
        actions = {e.action for e in mem.audit(entity=ENTITY)}
        assert {"write", "update", "set", "append", "erase"} <= actions
        assert named.query_id  # (its text named the entity: erased above, checked by bytes)
    assert found(d) == {}  # and after close
    with synapsedb.open(d, background_maintenance=False) as db:  # the rows still load
        mem = db.namespace("acme")
        assert mem.memories(ENTITY) == [] and mem.get(other.id).pinned
    assert found(d) == {}


def test_purging_the_same_names_again_does_not_collide(tmp_path: Path) -> None:
    clock = ManualClock()
    with synapsedb.open(tmp_path / "d", clock=clock, embedder=None) as db:
        mem = db.namespace("acme")
        for round_ in range(3):  # same entity, key and stream each time, same millisecond too
            mem.set(ENTITY, KEY, round_)
            mem.append(ENTITY, f"event {round_}", stream=STREAM)
            out = mem.forget(entity=ENTITY, purge=True)
            assert (out.facts, out.events) == (1, 1)
        assert mem.facts(ENTITY) == [] and mem.events(STREAM) == []
        mem.set(ENTITY, KEY, "back")  # the names are free again
        assert mem.get(ENTITY, KEY).version == 1
    assert set(found(tmp_path / "d", (ENTITY, KEY, STREAM))) == {ENTITY, KEY}  # the new fact


def test_purge_erases_the_entity_from_the_query_embedding_cache(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", background_maintenance=False) as db:
        mem = db.namespace("acme")
        mem.write(ENTITY, "likes tea")
        mem.write("user:9", "likes coffee")
        mem.query(f"what does {ENTITY} drink")
        mem.query("coffee drinkers", mode="vector")
        misses = db.embedding.cache_misses
        mem.forget(entity=ENTITY, purge=True)
        mem.query("coffee drinkers", mode="vector")  # other texts stay cached
        assert db.embedding.cache_misses == misses
        mem.query(f"what does {ENTITY} drink", mode="vector")  # this one was dropped
        assert db.embedding.cache_misses == misses + 1


def test_purge_is_reported_pending_while_a_reader_holds_the_wal(tmp_path: Path) -> None:
    """A second SQLite connection holding a read transaction keeps the WAL from being
    truncated: the purge must say so, and maintenance must finish it once the reader goes."""
    d = tmp_path / "d"
    clock = ManualClock()
    settings = {"background_maintenance": False, "embedder": None, "erasure_wait_ms": 50}
    with synapsedb.open(d, clock=clock, **settings) as db:
        mem = db.namespace("acme")
        mem.write(ENTITY, f"Card {CONTENT}")
        reader = sqlite3.connect(d / "synapse.db", isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM memory_versions").fetchone()  # holds a snapshot
            clock.advance(1)
            out = mem.forget(entity=ENTITY, purge=True)
            assert out.purged and out.pending and db.erasure_pending
            assert mem.memories(ENTITY) == []  # gone from every read already
            assert CONTENT in found(d)  # and honestly still in a file
            db.maintain()
            assert db.erasure_pending  # the reader is still there: still pending
        finally:
            reader.close()
        db.maintain()  # the retry maintenance makes (also in the background)
        assert not db.erasure_pending
        assert found(d) == {}


def test_a_pending_erasure_survives_a_restart(tmp_path: Path) -> None:
    d = tmp_path / "d"
    settings = {"background_maintenance": False, "embedder": None, "erasure_wait_ms": 50}
    reader = None
    try:
        with synapsedb.open(d, **settings) as db:
            mem = db.namespace("acme")
            mem.write(ENTITY, f"Card {CONTENT}")
            reader = sqlite3.connect(d / "synapse.db", isolation_level=None)
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM memory_versions").fetchone()
            assert mem.forget(entity=ENTITY, purge=True).pending
        with synapsedb.open(d, **settings) as db:  # the WAL is still held: still pending
            assert db.erasure_pending
            reader.close()
            reader = None
            db.maintain()
            assert not db.erasure_pending
        assert found(d) == {}
    finally:
        if reader is not None:
            reader.close()


def test_a_purge_leaves_nothing_in_a_checkpoint(tmp_path: Path) -> None:
    """A namespace opened from its checkpoint (indexes/<ns>.ckpt holds its texts, names and
    vectors) and purged: the checkpoint is gone before the erasure commits, and the one
    written at close holds nothing of the entity."""
    from synapsedb.engine.stored import Chains

    d = tmp_path / "d"
    kw: dict[str, Any] = {
        "checkpoint_min_rows": 1,
        "background_maintenance": False,
        "hnsw_threshold": 2,
    }
    with synapsedb.open(d, **kw) as db:
        mem = db.namespace("acme", agent="intake")
        m1 = mem.write(ENTITY, {"content": f"Card ending {CONTENT}", "metadata": {"n": META}})
        mem.update(m1.id, {"content": f"Card {CONTENT} replaced"})
        other = mem.write("user:9", {"content": "Unrelated customer prefers email"})
        db.wait_for_indexes(30)
    assert {CONTENT, ENTITY, META} <= set(found(d / "indexes"))  # the checkpoint holds them
    with synapsedb.open(d, **kw) as db:
        mem = db.namespace("acme", agent="intake")
        state = db._state("acme")
        assert state is not None and isinstance(state.mems, Chains)  # opened from it
        assert mem.get(m1.id).content == f"Card {CONTENT} replaced"
        out = mem.forget(entity=ENTITY, purge=True, agent="dpo")
        assert out.purged and not out.pending
        assert found(d) == {}
        assert mem.get(other.id).content.startswith("Unrelated")
    assert found(d) == {}
    assert (d / "indexes" / "acme.ckpt").exists()  # written again, without the entity
    with synapsedb.open(d, **kw) as db:
        mem = db.namespace("acme")
        assert mem.memories(ENTITY) == [] and mem.get(other.id).content.startswith("Unrelated")
    assert found(d) == {}


def test_a_purge_by_an_open_without_checkpoints_deletes_an_earlier_one(tmp_path: Path) -> None:
    """An open with checkpoints off still deletes the checkpoint an earlier open left: it holds
    what the erasure removes from the log."""
    d = tmp_path / "d"
    kw: dict[str, Any] = {"checkpoint_min_rows": 1, "background_maintenance": False}
    with synapsedb.open(d, **kw) as db:
        mem = db.namespace("acme", agent="intake")
        mem.write(ENTITY, {"content": f"Card ending {CONTENT}", "metadata": {"n": META}})
        mem.write("user:9", {"content": "Unrelated customer prefers email"})
    assert CONTENT in found(d / "indexes")
    with synapsedb.open(d, **kw, checkpoints=False) as db:
        mem = db.namespace("acme", agent="intake")
        assert mem.forget(entity=ENTITY, purge=True, agent="dpo").purged
        assert found(d) == {}
    assert found(d) == {} and not (d / "indexes" / "acme.ckpt").exists()


def test_a_purge_deletes_the_partial_file_of_a_killed_checkpoint_write(tmp_path: Path) -> None:
    """A process killed while it wrote a checkpoint leaves <namespace>.ckpt.tmp, texts and all;
    a later purge deletes it with the checkpoint."""
    d = tmp_path / "d"
    kw: dict[str, Any] = {"checkpoint_min_rows": 1, "background_maintenance": False}
    with synapsedb.open(d, **kw) as db:
        mem = db.namespace("acme", agent="intake")
        mem.write(ENTITY, {"content": f"Card ending {CONTENT}", "metadata": {"n": META}})
        mem.write("user:9", {"content": "Unrelated customer prefers email"})
    ckpt = d / "indexes" / "acme.ckpt"
    partial = ckpt.with_name("acme.ckpt.tmp")
    partial.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2 + 4096])
    assert CONTENT in found(partial.parent) or ENTITY in found(partial.parent)
    with synapsedb.open(d, **kw) as db:
        mem = db.namespace("acme", agent="intake")
        assert mem.forget(entity=ENTITY, purge=True, agent="dpo").purged
        assert found(d) == {}
    assert found(d) == {} and not partial.exists()
