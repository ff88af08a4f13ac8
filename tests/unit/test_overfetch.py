"""A filtered graph search: the graph walks with the filter as a bitmap and proposes
candidates that are re-scored exactly; a query asks for k allowed rows first, and again with
the dedup slack only when dedup leaves fewer than k hits (query/executor.py,
vector_candidates' ``need``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import synapsedb
from synapsedb.index import dense


def spread(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    """Unit vectors without near-duplicates (dedup must fold only the written pairs)."""
    x = np.random.default_rng(seed).standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_duplicates_in_a_filtered_graph_search_still_fill_k_distinct_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dense, "ROWS_PER_EF", 0)  # the graph path, not a filter's block
    pairs = spread(5000)
    with synapsedb.open(tmp_path / "d", durability="os", hnsw_threshold=500) as db:
        mem = db.namespace("dups")
        # every memory twice (same text, same vector): dedup folds each pair into one hit
        mem.write_many(
            [
                {
                    "entity": "u",
                    "content": f"pair {i}",
                    "embedding": pairs[i],
                    "metadata": {"b": i % 100},
                }
                for i in range(5000)
                for _ in range(2)
            ]
        )
        assert db.wait_for_indexes(timeout=120)
        state = db.core.state("dups")
        assert state is not None and state.hnsw is not None and state.hnsw.count == 10_000
        allowed = np.flatnonzero(np.arange(5000) % 100 < 50)  # 5,000 rows: over the exact cut
        overlap, searches = [], []
        for q in spread(30, seed=3):
            before = state.hnsw.searches
            res = mem.query(embedding=q, filter={"b": {"$lt": 50}}, k=10, mode="vector")
            searches.append(state.hnsw.searches - before)
            assert len(res.hits) == 10 and len({h.content for h in res.hits}) == 10
            exact = {f"pair {i}" for i in allowed[np.argsort(-(pairs[allowed] @ q))[:10]]}
            overlap.append(len({h.content for h in res.hits} & exact) / 10)
        assert np.mean(overlap) >= 0.95
        # the graph was asked (no exact fallback), and the candidates it proposes for
        # re-scoring cover the dedup slack: one search, most often
        assert min(searches) >= 1 and np.median(searches) == 1


def test_hybrid_with_a_vector_and_no_text_searches_as_vector_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cosine alone ranks both, so both ask the graph for k allowed rows first (hybrid used to
    ask for k plus the dedup slack, twice the graph work under a 10% filter) and answer alike."""
    monkeypatch.setattr(dense, "ROWS_PER_EF", 0)  # the graph path, not a filter's block
    vecs = spread(8000, seed=5)
    with synapsedb.open(tmp_path / "d", durability="os", hnsw_threshold=500) as db:
        mem = db.namespace("h")
        mem.write_many(
            [
                {
                    "entity": "u",
                    "content": f"row {i}",
                    "embedding": vecs[i],
                    "metadata": {"b": i % 10},
                }
                for i in range(8000)
            ]
        )
        assert db.wait_for_indexes(timeout=120)
        state = db.core.state("h")
        assert state is not None and state.hnsw is not None
        asked: list[int] = []
        search = state.hnsw.search

        def spy(q: np.ndarray, k: int, ef: int, allowed: object = None) -> object:
            asked.append(k)
            return search(q, k, ef, allowed)  # type: ignore[arg-type]

        state.hnsw.search = spy  # type: ignore[method-assign,assignment]
        for q in spread(20, seed=9):
            for flt in (None, {"b": {"$lt": 6}}):  # all rows; 4,800 rows (over the exact cut)
                sizes, answers = [], []
                for mode in ("vector", "hybrid"):
                    asked.clear()
                    res = mem.query(embedding=q, filter=flt, k=10, mode=mode)
                    sizes.append(list(asked))
                    answers.append([(h.id, h.score) for h in res.hits])
                assert answers[0] == answers[1] and len(answers[0]) == 10
                assert sizes[0] == sizes[1] and sizes[0]
                if flt is not None:  # 60% kept: about 1.3 * 10 / 0.6 + 8 rows, not 20 / 0.6
                    assert sizes[0][0] < 1.3 * 20 / 0.6


def test_unfiltered_graph_answer_matches_the_general_path(tmp_path: Path) -> None:
    """With nothing filtered out and every row in the graph, vector_candidates returns the
    graph's candidates re-scored from float32 without a mask: the rows, their order (ties
    included) and the similarities are what a stable top k of the re-scored candidates gives."""
    from synapsedb.query import executor

    base = spread(5000, seed=7)  # over EXACT_GATHER rows, so the graph answers
    vecs = np.concatenate([base, base[:300]])  # 300 exact duplicates: tied similarities
    with synapsedb.open(tmp_path / "d", durability="os", hnsw_threshold=500) as db:
        mem = db.namespace("t")
        mem.write_many(
            [{"entity": "u", "content": f"row {i}", "embedding": vecs[i]} for i in range(5300)]
        )
        assert db.wait_for_indexes(timeout=120)
        state = db.core.state("t")
        assert state is not None and state.hnsw is not None and state.hnsw.count == 5300
        cat, graph = state.catalog, state.hnsw
        assert cat.n > executor.EXACT_GATHER
        everything = np.ones(cat.n, bool)
        ties, before = 0, graph.searches
        want = max(executor.RESCORE * 20, 20 + executor.RESCORE_MIN)
        for q in [*base[:20], *spread(20, seed=8)]:
            q = executor.unit_vector(q)
            rows, sims = executor.vector_candidates(cat, q, everything, 20, graph, unit=True)
            labels, _ = graph.search(q, want, max(graph.ef_search, want))
            exact = (cat.vectors[labels] @ q) * cat.inv_norm[labels]  # re-scored from float32
            want_rows, want_sims = executor._top(exact, labels, 20)
            assert rows.tolist() == want_rows.tolist()
            assert sims.tolist() == want_sims.tolist()
            ties += len(set(sims.tolist())) < len(sims)
        assert ties  # the duplicated rows were among the answers
        assert graph.searches - before == 80  # one graph search per call: the graph answered
        # a filter that keeps everything but one row takes the general path: same ranking
        # without that row
        one_out = everything.copy()
        one_out[int(rows[0])] = False
        rest, _ = executor.vector_candidates(cat, q, one_out, 20, graph, unit=True)
        assert int(rows[0]) not in rest.tolist()
