"""The pure helpers of bench/bench_prf.py: Rocchio, RM3-style expansion, the caching embedder,
leave-one-conversation-out selection."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

_DIR = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(_DIR))
_spec = importlib.util.spec_from_file_location("bench_prf", _DIR / "bench_prf.py")
assert _spec is not None and _spec.loader is not None
prf = importlib.util.module_from_spec(_spec)
sys.modules["bench_prf"] = prf
_spec.loader.exec_module(prf)


def test_rocchio_moves_the_query_toward_the_feedback_mean_and_stays_unit() -> None:
    q = np.array([1.0, 0.0, 0.0], np.float32)
    fb = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], np.float32)
    out = prf.rocchio(q, fb, 1.0)
    want = np.array([1.0, 0.5, 0.5]) / np.linalg.norm([1.0, 0.5, 0.5])
    assert np.allclose(out, want, atol=1e-6)
    assert abs(float(np.linalg.norm(out)) - 1.0) < 1e-6


def test_rocchio_without_feedback_or_weight_is_the_query() -> None:
    q = np.array([0.6, 0.8], np.float32)
    assert prf.rocchio(q, np.zeros((0, 2), np.float32), 0.5) is q
    assert prf.rocchio(q, np.ones((2, 2), np.float32), 0.0) is q


def _corpus() -> Any:
    return prf.Corpus.build(
        [
            "Alice: we hiked the volcano trail at sunrise",
            "Bob: the volcano trail was steep, volcanoes everywhere",
            "Alice: I bought new boots for hiking",
            "Bob: my sister visited Paris",
            "Alice: Paris had a volcano exhibit",
        ]
    )


def test_expansion_leaves_out_question_terms_speakers_and_singletons() -> None:
    c = _corpus()
    assert c.label_words == frozenset({"alice", "bob"})
    words = c.expansion([0, 1], [1.0, 1.0], "Where did Alice hike?", 10)
    assert "trail" in words  # in both feedback memories, df 2
    assert "alice" not in words and "bob" not in words  # speaker labels
    assert "hiked" not in words and "hike" not in words  # the question's own term (stem hike)
    assert "sunrise" not in words and "steep" not in words  # in one memory only


def test_expansion_ranks_by_feedback_weight_and_respects_the_count() -> None:
    c = _corpus()
    # only memory 3 counts (weight 0 for memory 0): its terms that recur elsewhere come first
    words = c.expansion([0, 3], [0.0, 1.0], "what happened", 1)
    assert words == ["paris"]
    assert c.expansion([], [], "anything", 5) == []
    assert c.expansion([0], [1.0], "anything", 0) == []


def test_expansion_words_analyze_back_to_their_terms() -> None:
    c = _corpus()
    for term, word in c.surface.items():
        assert prf.analyze(word) == [term]


class _Model:
    name, dim = "toy", 2

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], np.float32)


def test_cached_embedder_warms_from_disk_and_remembers_the_last_query(tmp_path: Path) -> None:
    model = _Model()
    emb = prf.CachedEmbedder(model, tmp_path)
    emb.warm("c", ["ab", "abc"])
    assert model.calls == [["ab", "abc"]]
    again = prf.CachedEmbedder(model, tmp_path)
    again.warm("c", ["ab", "abc"])
    assert model.calls == [["ab", "abc"]]  # read from the cache file
    out = again.embed(["abc", "ab"])
    assert out.tolist() == [[3.0, 1.0], [2.0, 1.0]] and again.last is None
    again.embed(["wxyz"])
    assert model.calls[-1] == ["wxyz"]
    assert again.last is not None and again.last.tolist() == [4.0, 1.0]


def test_loo_picks_by_the_other_conversations_only() -> None:
    # point 0 is better on conversations a, b; point 1 on c (by a lot)
    datasets = ["X", "X", "X"]
    s0 = [np.array([1.0]), np.array([1.0]), np.array([0.0])]
    s1 = [np.array([0.5]), np.array([0.5]), np.array([1.0])]
    held, picks = prf.loo([s0, s1], datasets)
    # held out a: b+c: p0 0.5, p1 0.75 -> p1; held out b: same -> p1; held out c: p0 1.0 > p1 0.5
    assert picks == [1, 1, 0]
    assert [float(h[0]) for h in held] == [0.5, 0.5, 0.0]


def test_objective_weighs_datasets_alike() -> None:
    scores = [np.array([1.0, 1.0, 1.0]), np.array([0.0])]
    assert prf.objective(scores, ["A", "B"], [0, 1]) == 0.5


def test_cluster_bootstrap_resamples_whole_conversations() -> None:
    rng = np.random.default_rng(0)
    # every conversation has the same mean difference: the interval is that point
    same = [np.array([0.1, 0.3]), np.array([0.2, 0.2, 0.2])]
    lo, hi = prf.cluster_bootstrap(same, rng)
    assert abs(lo - 0.2) < 1e-9 and abs(hi - 0.2) < 1e-9
    # one conversation up, one down: the interval spans both means
    lo, hi = prf.cluster_bootstrap([np.full(10, 1.0), np.full(10, -1.0)], rng)
    assert lo == -1.0 and hi == 1.0
