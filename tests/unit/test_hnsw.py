from __future__ import annotations

from pathlib import Path

import numpy as np

import synapsedb


def clustered(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((40, dim))
    x = centers[rng.integers(0, 40, n)] + 0.3 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def open_db(path: Path) -> synapsedb.Database:
    return synapsedb.open(path, durability="os", hnsw_threshold=500)


def test_graph_search_agrees_with_exact_and_sees_new_writes(tmp_path: Path) -> None:
    vecs = clustered(6000)  # above the 4,096 allowed rows that are always searched exactly
    with open_db(tmp_path / "d") as db:
        mem = db.namespace("big")
        written = mem.write_many(
            [
                {
                    "entity": f"u{i % 30}",
                    "content": f"m{i}",
                    "embedding": v,
                    "metadata": {"b": i % 100},
                }
                for i, v in enumerate(vecs)
            ]
        )
        assert db.wait_for_indexes(timeout=120)
        state = db._state("big")
        assert state is not None and state.hnsw is not None and state.hnsw.count == 6000
        queries = clustered(50, seed=1)
        before = state.hnsw.searches
        overlap = []
        for q in queries:
            got = {h.id for h in mem.query(embedding=q, mode="vector", k=10, dedup=False)}
            sims = vecs @ q
            exact = {written[i].id for i in np.argsort(-sims)[:10]}
            overlap.append(len(got & exact) / 10)
        assert np.mean(overlap) >= 0.95
        assert state.hnsw.searches >= before + 50  # answered by the graph, not the exact scan
        # a 1% filter still yields k hits (exact path), a 50% filter goes through the graph
        assert len(mem.query(embedding=queries[0], filter={"b": 3}, k=10, mode="vector")) == 10
        half = mem.query(embedding=queries[0], filter={"b": {"$lt": 50}}, k=10, mode="vector")
        assert len(half) == 10 and all(h.metadata["b"] < 50 for h in half)
        # a new write is searchable at once (rows after the graph's prefix are scanned exactly)
        fresh = mem.write("u0", {"content": "fresh", "embedding": queries[1]})
        assert mem.query(embedding=queries[1], mode="vector", k=1).hits[0].id == fresh.id
        # an update hides the old version at once, although the graph still holds it
        target = written[int(np.argmax(vecs @ queries[2]))]
        mem.update(target.id, {"embedding": -queries[2]})
        top = mem.query(embedding=queries[2], mode="vector", k=5)
        assert target.id not in {h.id for h in top}


def test_saved_graph_is_reloaded_and_a_stale_one_ignored(tmp_path: Path) -> None:
    vecs = clustered(1200, seed=2)
    with open_db(tmp_path / "d") as db:
        db.namespace("big").write_many(
            [{"entity": "u", "content": f"m{i}", "embedding": v} for i, v in enumerate(vecs)]
        )
        assert db.wait_for_indexes(timeout=120)
    assert (tmp_path / "d" / "indexes" / "big.hnsw").exists()
    with open_db(tmp_path / "d") as db:
        state = db._state("big")
        assert state is not None and state.hnsw is not None
        assert state.hnsw.count == 1200  # loaded, not rebuilt
        res = db.namespace("big").query(embedding=vecs[5], mode="vector", k=1)
        assert res.hits[0].content == "m5"
    # corrupt the saved graph: the database must ignore it and rebuild
    (tmp_path / "d" / "indexes" / "big.hnsw").write_bytes(b"garbage")
    with open_db(tmp_path / "d") as db:
        assert db.wait_for_indexes(timeout=120)
        res = db.namespace("big").query(embedding=vecs[7], mode="vector", k=1)
        assert res.hits[0].content == "m7"
