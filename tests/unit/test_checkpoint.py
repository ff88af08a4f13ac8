"""Checkpoints: a namespace opened from its checkpoint answers exactly as one replayed from
the log, before and after new writes; a checkpoint the log no longer agrees with is dropped."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import synapsedb
from synapsedb.engine import checkpoint
from synapsedb.engine.stored import Chains, RowRecords
from synapsedb.index.catalog import Catalog

DIM = 16
N = 1500


def _open(path: Path, **kw: Any) -> synapsedb.Database:
    base = {
        "embedder": None,
        "durability": "os",
        "checkpoint_min_rows": 1,
        "background_maintenance": False,
    }
    return synapsedb.open(path, **{**base, **kw})


def _vectors(n: int = N, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def _fill(db: synapsedb.Database, x: np.ndarray) -> list[Any]:
    """Memories of every shape: metadata of several kinds, agents, types, pins, TTLs, speaker
    labels, updates, tombstones, re-written deleted ids, memories without a vector."""
    mem = db.namespace("n")
    items = []
    for i in range(x.shape[0]):
        item: dict[str, Any] = {
            "entity": f"user:{i % 9}",
            "content": (
                f"Alice: note {i} about tea {i % 13}"
                if i % 4 == 0
                else f"note {i} about coffee {i % 11}"
            ),
            "metadata": {
                "b": i % 10,
                "tag": ["x", "y", None][i % 3],
                "f": i / 7,
                "deep": {"k": [i % 5, "v"]},
                "big": 2**60 + i,
            }
            if i % 6
            else {},
            "type": ["note", "event"][i % 2],
            "agent": None if i % 5 == 0 else f"agent-{i % 3}",
            "pinned": i % 17 == 0,
            "salience": (i % 10) / 10,
        }
        if i % 23 != 0:
            item["embedding"] = x[i]
        if i % 50 == 0:
            item["ttl"] = 3600.0
        items.append(item)
    written = mem.write_many(items)
    for i in range(0, x.shape[0], 97):
        mem.update(written[i].id, {"content": f"updated {i} about tea", "embedding": -x[i]})
    for i in range(5, x.shape[0], 211):
        mem.delete(written[i].id)
    mem.set("user:1", "plan", "gold")
    mem.append("user:1", "called about the invoice")
    return written


def _answers(db: synapsedb.Database, x: np.ndarray, written: list[Any]) -> list[Any]:
    """What a client can ask, at the present and in the past."""
    mem = db.namespace("n")
    past = mem.get(written[1].id).recorded_at
    out: list[Any] = []
    filters: list[Any] = [
        None,
        {"b": 3},
        {"tag": "y"},
        {"b": {"$lt": 4}},
        {"f": {"$gt": 100}},
        {"deep.k": 2},
        {"type": "event"},
        {"agent": "agent-1"},
        {"pinned": True},
        {"entity": "user:4"},
    ]
    for j in range(12):
        q = x[(j * 37) % x.shape[0]]
        for flt in filters:
            hits = mem.query(embedding=q, k=6, mode="vector", filter=flt, dedup=False)
            out.append([(h.id, round(h.score, 5), h.content, h.metadata) for h in hits])
        out.append([(h.id, h.content) for h in mem.query(text=f"tea {j}", k=6, mode="keyword")])
        out.append([h.id for h in mem.query(embedding=q, text="coffee", k=6, as_of=past)])
        out.append([h.id for h in mem.query(embedding=q, k=6, include_ended=True)])
        out.append(
            [
                h.id
                for h in mem.query(
                    text="what did alice say about tea", k=6, mode="keyword", valid_at=past
                )
            ]
        )
    for i in (0, 5, 97, 194, 211, 1000):
        out.append(
            [(v.version, v.content, v.deleted, v.metadata) for v in mem.history(written[i].id)]
        )
    out.append(sorted(m.id for m in mem.memories("user:3")))
    out.append(mem.entities())
    out.append(mem.stats().memories)
    out.append(mem.facts("user:1")[0].value)
    return out


def test_a_namespace_opened_from_its_checkpoint_answers_as_its_log_does(tmp_path: Path) -> None:
    x = _vectors()
    with _open(tmp_path / "d") as db:
        written = _fill(db, x)
        before = _answers(db, x, written)
    assert (tmp_path / "d" / "indexes" / "n.ckpt").exists()
    with _open(tmp_path / "d") as db:
        state = db._state("n")
        assert state is not None
        assert isinstance(state.mems, Chains) and isinstance(state.catalog.recs, RowRecords)
        assert _answers(db, x, written) == before
        restored = state.catalog
    with _open(tmp_path / "d", checkpoints=False) as db:
        state = db._state("n")
        assert state is not None and isinstance(state.mems, dict)
        assert _answers(db, x, written) == before
        _same_catalog(restored, state.catalog)
        _same_records(restored, state.catalog, state)


def _same_catalog(a: Catalog, b: Catalog) -> None:
    n = b.n
    assert a.n == n
    for name in (
        "from_us",
        "to_us",
        "exp_us",
        "ts_us",
        "salience",
        "entity",
        "type",
        "agent",
        "pinned",
        "has_vec",
        "live",
        "label",
    ):
        assert np.array_equal(getattr(a, name)[:n], getattr(b, name)[:n]), name
    # a write of one row and a replay in batches round the norm apart in the last bit
    assert np.allclose(a.inv_norm[:n], b.inv_norm[:n], rtol=1e-6, atol=0)
    assert a.vectors is not None and b.vectors is not None
    assert np.array_equal(a.vectors[:n], b.vectors[:n])
    assert a.entities.names == b.entities.names and a.types.names == b.types.names
    assert a.agents.names == b.agents.names and a.labels.names == b.labels.names
    assert a.label_words == b.label_words
    assert (a.latest_us, a.n_ttl) == (b.latest_us, b.n_ttl)
    assert {k: {kk: list(v) for kk, v in bucket.items()} for k, bucket in a.meta_post.items()} == {
        k: {kk: list(v) for kk, v in bucket.items()} for k, bucket in b.meta_post.items()
    }
    assert {e: list(line.rows) for e, line in a.timelines.lines.items()} == {
        e: list(line.rows) for e, line in b.timelines.lines.items()
    }
    assert list(a.timelines.lines) == list(b.timelines.lines)


_FIELDS = (
    "id",
    "version",
    "sys_us",
    "created_us",
    "entity",
    "type",
    "content",
    "meta_json",
    "salience",
    "ts_us",
    "agent",
    "pinned",
    "ttl",
    "expires_us",
    "deleted",
    "erased",
    "row",
)


def _same_records(a: Catalog, b: Catalog, replayed: Any) -> None:
    for r in range(b.n):
        ra, rb = a.recs[r], b.recs[r]
        assert [getattr(ra, f) for f in _FIELDS] == [getattr(rb, f) for f in _FIELDS]
        assert ra.cat is a and np.array_equal(ra.vector(), rb.vector())  # type: ignore[arg-type]
    chains = a.recs[0].cat  # the restored catalog's state is reached through its records
    assert chains is a
    assert len(a.recs) == len(b.recs) == b.n


def test_writes_after_the_open_and_versions_after_the_mark(tmp_path: Path) -> None:
    """Versions committed after the checkpoint (by a session that wrote no checkpoint) are
    replayed on top of it; writes after an open from a checkpoint (new memories, updates and
    deletes of checkpointed ones, more rows than the vectors' room) answer as a replay."""
    x = _vectors(N + 700)
    d = tmp_path / "d"
    with _open(d) as db:
        written = _fill(db, x[:N])
    with _open(d, checkpoints=False) as db:  # after the mark, and no new checkpoint
        mem = db.namespace("n")
        written += mem.write_many(
            [
                {"entity": "user:2", "content": f"late {i}", "embedding": x[N + i]}
                for i in range(300)
            ]
        )
        mem.update(written[3].id, {"content": "changed after the mark"})
    with _open(d) as db:
        mem = db.namespace("n")
        state = db._state("n")
        assert state is not None and isinstance(state.mems, Chains)
        written += mem.write_many(
            [
                {"entity": f"user:{i % 3}", "content": f"later {i}", "embedding": x[N + 300 + i]}
                for i in range(400)
            ]
        )
        mem.update(written[7].id, {"content": "changed after the open", "embedding": x[0]})
        mem.delete(written[9].id)
        mem.update(written[N + 10].id, {"metadata": {"b": 99}})
        got = _answers(db, x, written)
        assert mem.query(embedding=x[0], k=1, mode="vector").hits[0].id == written[7].id
    with _open(d, checkpoints=False) as db:
        assert _answers(db, x, written) == got
    with _open(d) as db:  # the checkpoint written at the last close
        assert _answers(db, x, written) == got


def test_large_sections_are_mapped_and_the_vectors_grow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "MAP_BYTES", 0)  # every section mapped or viewed
    x = _vectors(N + 3000)
    d = tmp_path / "d"
    with _open(d) as db:
        written = _fill(db, x[:N])
    with _open(d) as db:
        state = db._state("n")
        assert state is not None and state.catalog.vec_rows is not None
        mem = db.namespace("n")
        for lo in range(N, N + 3000, 1000):  # past the room left after the vectors: it grows
            written += mem.write_many(
                [
                    {"entity": "user:5", "content": f"more {i}", "embedding": x[i]}
                    for i in range(lo, lo + 1000)
                ]
            )
        assert state.catalog.vec_rows.capacity >= N + 3000
        got = _answers(db, x, written)
    with _open(d, checkpoints=False) as db:
        assert _answers(db, x, written) == got
    with _open(d) as db:  # the vectors copied from the mapped file and the added rows
        assert _answers(db, x, written) == got


def test_a_checkpoint_the_log_disagrees_with_is_dropped(tmp_path: Path) -> None:
    """An older version added behind its back, an erasure, a tier move, a damaged file: the
    open replays the whole log and drops the file."""
    x = _vectors(300)
    d = tmp_path / "d"
    ck = d / "indexes" / "n.ckpt"
    with _open(d) as db:
        written = _fill(db, x)
    conn = sqlite3.connect(d / "synapse.db")
    row = conn.execute("SELECT * FROM memory_versions WHERE id = ?", (written[1].id,)).fetchone()
    cols = [c[1] for c in conn.execute("PRAGMA table_info(memory_versions)")]
    fields = dict(zip(cols, row, strict=True))
    fields.update(id="imported-old", sys_us=fields["sys_us"] - 1, content="imported before")
    conn.execute(
        f"INSERT INTO memory_versions ({', '.join(fields)}) VALUES "
        f"({', '.join('?' * len(fields))})",
        list(fields.values()),
    )
    conn.commit()
    conn.close()
    with _open(d, checkpoint_min_rows=10**9) as db:  # no new checkpoint at close
        assert db.namespace("n").get("imported-old").content == "imported before"
        assert isinstance(db._state("n").mems, dict)  # type: ignore[union-attr]
    assert not ck.exists()
    for damage in ("truncate", "flip"):
        with _open(d) as db:
            db.namespace("n").write("user:1", {"content": "one more", "embedding": x[0]})
        raw = bytearray(ck.read_bytes())
        if damage == "truncate":
            raw = raw[: len(raw) // 3]
        else:
            raw[len(raw) // 2] ^= 0xFF
        ck.write_bytes(bytes(raw))
        with _open(d, checkpoint_min_rows=10**9) as db:
            state = db._state("n")
            assert state is not None and state.catalog.n > 0
            assert db.namespace("n").get("imported-old").content == "imported before"
        assert not ck.exists(), damage
    # a tier move made by a session that kept no checkpoints: the next open replays
    with _open(d) as db:
        pass
    assert ck.exists()
    with _open(d, checkpoints=False) as db:
        mem = db.namespace("n")
        mem.configure(max_hot=mem.stats().memories - 3, policy="evict")
        assert mem.maintain().demoted
        cold = {m for m, _s, _r in mem.maintain(dry_run=True).demoted} | set(db._state("n").cold)  # type: ignore[union-attr]
    with _open(d) as db:
        state = db._state("n")
        assert state is not None and isinstance(state.mems, dict) and set(state.cold) == cold


def test_an_erasure_drops_the_checkpoint_before_it_commits(tmp_path: Path) -> None:
    x = _vectors(300)
    d = tmp_path / "d"
    with _open(d) as db:
        _fill(db, x)
    ck = d / "indexes" / "n.ckpt"
    assert ck.exists()
    seen: list[bool] = []
    with _open(d) as db:
        storage = db.core.storage
        commit = storage.commit

        def watched(batch: Any) -> None:
            if batch.purges:
                seen.append(ck.exists())
            commit(batch)

        storage.commit = watched  # type: ignore[method-assign]
        db.namespace("n").forget(entity="user:4", purge=True)
        assert seen == [False]
        assert db.namespace("n").memories("user:4") == []
    assert ck.exists()  # written again at close, without the entity
    with _open(d) as db:
        assert db.namespace("n").memories("user:4") == []
        assert "user:4" not in db.namespace("n").entities()
