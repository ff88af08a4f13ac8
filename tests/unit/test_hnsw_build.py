"""The HNSW builder: chunk sizing, build threads, and what a parallel build must still give."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import synapsedb
from synapsedb.errors import ValidationError
from synapsedb.index.hnsw import CHUNK_MAX, CHUNK_MIN, HOLD_S, HnswIndex, next_chunk, usable_cores


def clustered(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((40, dim))
    x = centers[rng.integers(0, 40, n)] + 0.3 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_next_chunk_follows_the_pace_within_bounds() -> None:
    # rows twice as fast as the target allows: the chunk doubles, never more than that
    assert next_chunk(128, 128, HOLD_S / 2) == 256
    assert next_chunk(128, 128, HOLD_S / 100) == 256
    # four times too slow: a quarter of the rows next time
    assert next_chunk(128, 128, 4 * HOLD_S) == 32
    # bounds
    assert next_chunk(CHUNK_MIN, CHUNK_MIN, 1000 * HOLD_S) == CHUNK_MIN
    assert next_chunk(CHUNK_MAX, CHUNK_MAX, HOLD_S / 1000) == CHUNK_MAX
    # a partial chunk (only 5 rows were waiting) is judged by its own pace, not shrunk to 10
    assert next_chunk(1000, 5, 5 * HOLD_S / 1000) == 1000
    # nothing added or no measurable time: no information, no collapse
    assert next_chunk(300, 0, 0.0) == 300
    assert next_chunk(300, 300, 0.0) == 600
    assert next_chunk(10_000, 0, 0.0) == CHUNK_MAX


def test_threads_are_capped_at_the_usable_cores_and_must_be_positive() -> None:
    assert HnswIndex(8, threads=10_000).threads == usable_cores()
    assert HnswIndex(8).threads == 1
    with pytest.raises(ValueError, match="threads"):
        HnswIndex(8, threads=0)


def test_build_threads_setting_is_validated() -> None:
    assert synapsedb.Settings().hnsw_build_threads == 2
    with pytest.raises(ValidationError) as err:
        synapsedb.Settings(hnsw_build_threads=0)
    assert err.value.field == "hnsw_build_threads"
    env = synapsedb.Settings.from_env({"SYNAPSEDB_HNSW_BUILD_THREADS": "3"})
    assert env.hnsw_build_threads == 3


def _catalog(tmp_path: Path, vecs: np.ndarray):  # type: ignore[no-untyped-def]
    """A namespace's catalog holding ``vecs`` (threshold high: no background graph)."""
    db = synapsedb.open(tmp_path / "d", durability="os", embedder=None, hnsw_threshold=10**9)
    db.namespace("big").write_many(
        [{"entity": "u", "content": f"m{i}", "embedding": v} for i, v in enumerate(vecs)]
    )
    state = db._state("big")
    assert state is not None and state.hnsw is None
    return db, state.catalog


def _exact_top(vecs: np.ndarray, q: np.ndarray, k: int) -> set[int]:
    return set(np.argsort(-(vecs @ q))[:k].tolist())


def _rescored(h: HnswIndex, vecs: np.ndarray, q: np.ndarray, k: int, ef: int) -> list[int]:
    """The graph's 2k candidates re-scored from the float32 vectors, best k (as the executor
    re-scores them: the graph's own scores come from 8-bit codes)."""
    labels, _ = h.search(q, 2 * k, ef)
    sims = vecs[labels] @ q
    return labels[np.argsort(-sims, kind="stable")[:k]].tolist()


def test_extend_adds_its_chunk_and_a_parallel_build_finds_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapsedb.index import hnsw

    monkeypatch.setattr(hnsw, "IDLE_AFTER_S", 1e9)  # one query keeps the builder paced
    vecs = clustered(3000, seed=3)
    db, cat = _catalog(tmp_path, vecs)
    try:
        h = HnswIndex(cat.dim, threads=2)
        h.chunk = 7
        h.search(vecs[0], 1, 10)  # a query came (with none, the builder would take more)
        assert h.extend(cat, cat.n) == 7 and h.count == 7  # the default chunk is h.chunk
        assert h.last_hold_s > 0
        assert h.extend(cat, 500, chunk=1000) == 493 and h.count == 500  # never past upto
        assert h.extend(cat, 500) == 0
        while h.extend(cat, cat.n):
            assert CHUNK_MIN <= h.chunk <= CHUNK_MAX
        assert h.count == cat.n == 3000
        # every row went in under its own label: its own vector finds it
        found = 0
        for i in range(0, 3000, 7):
            labels, sims = h.search(vecs[i], 2, 100)
            found += int(i in labels.tolist() and _rescored(h, vecs, vecs[i], 1, 100) == [i])
            assert sims[0] > 0.95  # as the 8-bit codes score it
        assert found >= 0.99 * len(range(0, 3000, 7))
        queries = clustered(40, seed=4)
        overlap = [
            len(set(_rescored(h, vecs, q, 10, 100)) & _exact_top(vecs, q, 10)) / 10 for q in queries
        ]
        assert np.mean(overlap) >= 0.9  # one thread: 0.95 on these rows
    finally:
        db.close()


def test_one_thread_builds_the_same_graph_from_the_same_chunks(tmp_path: Path) -> None:
    """faiss inserts a chunk's rows by level, so the graph depends on the chunks (not on the
    run): two builds with one thread and the same chunks answer alike, and odd chunk sizes
    still build a graph that finds the exact neighbours."""
    vecs = clustered(1500, seed=5)
    db, cat = _catalog(tmp_path, vecs)
    try:
        a, b, c = (HnswIndex(cat.dim, threads=1) for _ in range(3))
        for graph, sizes in ((a, [1, 3, 50, 700, 16]), (b, [1, 3, 50, 700, 16]), (c, [1000])):
            chunks = iter(sizes * 100)
            while graph.extend(cat, cat.n, chunk=next(chunks)):
                pass
        assert a.count == b.count == c.count == 1500
        overlap = []
        for q in clustered(20, seed=6):
            la, sa = a.search(q, 10, 50)
            lb, sb = b.search(q, 10, 50)
            assert la.tolist() == lb.tolist()
            assert np.allclose(sa, sb)
            overlap.append(len(set(_rescored(c, vecs, q, 10, 50)) & _exact_top(vecs, q, 10)))
        assert np.mean(overlap) >= 9.5
    finally:
        db.close()


def test_searches_during_a_parallel_build_see_a_consistent_prefix(tmp_path: Path) -> None:
    vecs = clustered(4000, seed=7)
    db, cat = _catalog(tmp_path, vecs)
    try:
        h = HnswIndex(cat.dim, threads=2)
        errors: list[str] = []
        done = threading.Event()

        def reader() -> None:
            qs = clustered(50, seed=8)
            j = 0
            while not done.is_set():
                labels, sims = h.search(qs[j % 50], 5, 50)
                seen = h.count
                if labels.size and (labels.max() >= seen or labels.min() < 0):
                    errors.append(f"label {labels.max()} past the prefix {seen}")
                if sims.size and not np.all(np.isfinite(sims)):
                    errors.append("non-finite similarity")
                j += 1

        threads = [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()

        def build() -> None:
            while h.extend(cat, cat.n):
                pass

        builder = threading.Thread(target=build)
        builder.start()
        builder.join(timeout=300)  # overlapping queries must not keep the builder out
        done.set()
        assert not builder.is_alive(), "the builder never got the lock back"
        builder.join()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        assert h.count == 4000
    finally:
        db.close()


def test_the_database_builds_with_the_configured_threads(tmp_path: Path) -> None:
    vecs = clustered(2500, seed=9)
    with synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, hnsw_threshold=500, hnsw_build_threads=2
    ) as db:
        mem = db.namespace("big")
        written = mem.write_many(
            [{"entity": "u", "content": f"m{i}", "embedding": v} for i, v in enumerate(vecs)]
        )
        assert db.wait_for_indexes(timeout=120)
        state = db._state("big")
        assert state is not None and state.hnsw is not None
        assert state.hnsw.threads == min(2, usable_cores()) and state.hnsw.count == 2500
        q = clustered(1, seed=10)[0]
        got = [h.id for h in mem.query(embedding=q, mode="vector", k=10, dedup=False)]
        exact = [written[i].id for i in np.argsort(-(vecs @ q))[:10]]
        assert len(set(got) & set(exact)) >= 9
    with synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, hnsw_threshold=500, hnsw_build_threads=1
    ) as db:
        state = db._state("big")
        assert state is not None and state.hnsw is not None
        assert state.hnsw.count == 2500 and state.hnsw.threads == 1  # loaded, new setting


def test_a_query_queued_behind_a_chunk_goes_before_the_next_chunk() -> None:
    from synapsedb.index import hnsw

    lock = hnsw._RWLock()
    order: list[str] = []
    lock.acquire_write()  # the builder is adding a chunk

    def query() -> None:
        lock.acquire_read()
        order.append("query")
        lock.release_read()

    t = threading.Thread(target=query)
    t.start()
    while True:  # the query is waiting for the chunk
        with lock._cv:
            if lock._queued:
                break
    lock.release_write()
    lock.acquire_write()  # the builder's next chunk: it must let the waiting query in first
    order.append("chunk")
    lock.release_write()
    t.join()
    assert order == ["query", "chunk"]


def test_each_search_has_its_own_ef(tmp_path: Path) -> None:
    """Every search passes its ef to faiss (SearchParametersHNSW), so a wide search (k = ef =
    400) running beside narrow ones changes nothing for them, and answers as the graph set to
    ef 400 does."""
    vecs = clustered(2000, seed=8)
    db, cat = _catalog(tmp_path, vecs)
    try:
        h = HnswIndex(cat.dim, ef_search=50)
        while h.extend(cat, cat.n):
            pass
        q = clustered(1, seed=9)[0]
        narrow = h.search(q, 10, 50)
        wide = h.search(q, 400, 400)
        assert h.search(q, 10, 50)[0].tolist() == narrow[0].tolist()
        h._index.hnsw.efSearch = 400
        sims, labels = h._index.search(q[None, :].astype(np.float32), 400)
        assert wide[0].tolist() == labels[0].tolist()
        assert np.allclose(wide[1], sims[0])
        assert h.search(q, 10, 50)[0].tolist() == narrow[0].tolist()  # its own ef, not 400
    finally:
        db.close()


def test_rows_past_a_short_graph_are_scanned_exactly_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph far behind its rows (an open right after a bulk write): the rows it does not
    hold yet are scanned in place when most of them are allowed, gathered when few are; either
    way the answer is the exact one over them plus the graph's own."""
    from synapsedb.query import executor

    monkeypatch.setattr(executor, "EXACT_GATHER", 64)  # 2,500 rows past the graph: "many"
    vecs = clustered(3000, seed=11)
    db, cat = _catalog(tmp_path, vecs)
    try:
        h = HnswIndex(cat.dim)
        assert h.extend(cat, 500, chunk=500) == 500
        for q in clustered(10, seed=12):
            q = executor.unit_vector(q)
            for keep in (np.ones(cat.n, bool), np.arange(cat.n) % 5 == 0):  # in place; gathered
                rows, sims = executor.vector_candidates(cat, q, keep, 10, h, unit=True)
                past = np.flatnonzero(keep[500:]) + 500
                best_past = past[np.argsort(-(vecs[past] @ q))[:10]]
                got = set(rows.tolist())
                # every row past the graph that belongs in the top 10 is found, exactly scored
                better = [r for r in best_past if vecs[r] @ q >= sims[-1] - 1e-6]
                assert set(better) <= got
                assert np.allclose(sims, vecs[rows] @ q, atol=1e-5)
                assert all(keep[r] for r in got)
    finally:
        db.close()


def test_a_graph_nobody_searches_catches_up_in_big_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paced chunks hold the lock briefly for the queries' sake; when no query searched the
    graph for IDLE_AFTER_S the builder takes IDLE_ROWS at once (faiss spreads a chunk over its
    threads only past 100 rows), and goes back to the paced size once a query searched."""
    import types

    from synapsedb.index import hnsw
    from synapsedb.index.hnsw import IDLE_AFTER_S, IDLE_ROWS

    clock = [1000.0]
    fake = types.SimpleNamespace(monotonic=lambda: clock[0], perf_counter=hnsw.time.perf_counter)
    monkeypatch.setattr(hnsw, "time", fake)
    vecs = clustered(3000, seed=13)
    db, cat = _catalog(tmp_path, vecs)
    try:
        h = HnswIndex(cat.dim)
        assert h.extend(cat, cat.n) == IDLE_ROWS  # never searched: big
        h.search(vecs[0], 5, 50)
        paced = h.chunk
        assert paced < IDLE_ROWS and h.extend(cat, cat.n) == paced  # a query just came: paced
        clock[0] += IDLE_AFTER_S / 2
        paced = h.chunk
        assert paced < IDLE_ROWS and h.extend(cat, cat.n) == paced  # still recent: paced
        clock[0] += IDLE_AFTER_S
        assert h.extend(cat, cat.n) == IDLE_ROWS  # and none for a while: big again
    finally:
        db.close()


@pytest.mark.skipif(usable_cores() < 2, reason="needs two usable cores")
def test_a_small_chunk_is_added_on_one_thread(tmp_path: Path) -> None:
    """faiss inserts a level's rows in parallel only past 100 of them; a smaller chunk runs on
    the calling thread alone, so no second thread waits (spinning) for it."""
    import faiss

    from synapsedb.index.hnsw import PARALLEL_ROWS

    vecs = clustered(1000, seed=14)
    db, cat = _catalog(tmp_path, vecs)
    try:
        h = HnswIndex(cat.dim, threads=2)
        assert h.extend(cat, cat.n, chunk=PARALLEL_ROWS - 1) == PARALLEL_ROWS - 1
        assert faiss.omp_get_max_threads() == 1  # this thread's setting for its next region
        assert h.extend(cat, cat.n, chunk=PARALLEL_ROWS) == PARALLEL_ROWS
        assert faiss.omp_get_max_threads() == 2
    finally:
        db.close()


def test_openmp_threads_sleep_when_they_wait_unless_the_environment_says() -> None:
    """faiss's OpenMP threads spin while they wait unless OMP_WAIT_POLICY is PASSIVE, which
    the index module asks for before faiss loads; a policy set by the operator is kept."""
    import os
    import subprocess
    import sys

    code = "import os, synapsedb.index.hnsw; print(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "PASSIVE"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "OMP_WAIT_POLICY": "ACTIVE"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "ACTIVE"
