"""The learned re-ranking of hybrid text queries (query/rerank.py, executor._reranked): the
vectorized trees give what walking each tree gives; the shipped table matches the features;
the text tests; in the engine, the user's own statement outranks an assistant's reply that
echoes the question, scores still fall with rank, and only hybrid text queries without
recency or salience weights are re-ordered; Fusion(rerank=False) turns it off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import synapsedb
from synapsedb.query import ranker_model, rerank
from synapsedb.query.executor import Fusion

TURNS = [
    "user: I'm planning a trip next month and need help packing.",
    "assistant: Happy to help! Where are you going, and for how long?",
    "user: My sister's wedding is in Lisbon on June 3rd, so about a week.",
    "assistant: A wedding in Lisbon sounds wonderful! Pack light formal wear for the wedding, "
    "comfortable shoes for Lisbon's hills, and a light jacket for the wedding evening.",
    "user: Great, I also need a gift idea.",
    "assistant: For a wedding gift, consider a framed print of Lisbon.",
    "user: My laptop battery died yesterday, so I ordered a new one.",
    "assistant: Sorry to hear about the laptop battery! A new battery should arrive soon.",
]


def walk(table: list, x: np.ndarray) -> float:
    """The ensemble's score of one row, one tree at a time (the reference)."""
    total = 0.0
    for feature, threshold, left, right, leaves in table:
        node = 0 if feature else -1
        while node >= 0:
            node = left[node] if x[feature[node]] <= threshold[node] else right[node]
        total += leaves[~node]
    return total


def test_vectorized_trees_give_what_walking_each_tree_gives() -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(-0.5, 3.0, size=(300, len(rerank.FEATURES)))
    x[:, [9, 11, 13, 14, 22]] = rng.integers(0, 2, size=(300, 5))  # the 0/1 features
    got = rerank.forest().predict(x)
    want = [walk(ranker_model.TREES, row) for row in x]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # a tree that is a single leaf
    one = rerank.Forest.from_table([([], [], [], [], [0.25])], depth=0, rows=5)
    assert one.predict(x[:3]).tolist() == [0.25, 0.25, 0.25]


def test_the_shipped_table_reads_the_features_rerank_computes() -> None:
    assert tuple(ranker_model.FEATURES) == rerank.FEATURES
    assert ranker_model.ROWS == rerank.forest().rows == 100
    for feature, threshold, left, right, leaves in ranker_model.TREES:
        assert len(feature) == len(threshold) == len(left) == len(right) == len(leaves) - 1
        assert all(0 <= f < len(rerank.FEATURES) for f in feature)
        refs = sorted(left + right)
        assert refs == sorted([*range(1, len(feature)), *(~i for i in range(len(leaves)))])


@pytest.mark.parametrize(
    ("text", "flags"),
    [
        ("Caroline: I went to the support group yesterday.", rerank.TIME),
        ("Mel: Did you go?", rerank.ASKS | rerank.ENDS_ASKING),
        ("assistant: sure." + " word" * 600 + " ok?", rerank.ENDS_ASKING),
        ("When: no label is read as text", 0),  # "When:" is a label; nothing after it
        ("plain text from 2019", rerank.TIME),
        ("", 0),
    ],
)
def test_text_flags(text: str, flags: int) -> None:
    assert rerank.text_flags(text) == flags


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path: Path = tmp_path_factory.mktemp("rerank") / "d"
    with synapsedb.open(path, durability="os", llm=None) as d:
        mem = d.namespace("n")
        mem.write_many([{"entity": "conversation", "content": t} for t in TURNS])
        yield d, mem


def test_the_users_statement_outranks_the_assistants_echo(chat) -> None:  # type: ignore[no-untyped-def]
    d, mem = chat
    question = "What happened to my laptop?"
    d.fusion = Fusion(rerank=False)
    off = mem.query(question, k=3, explain=True).hits
    assert off[0].content.startswith("assistant: Sorry to hear about the laptop battery")
    assert off[0].explanation is not None and "rerank" not in off[0].explanation
    d.fusion = Fusion()
    on = mem.query(question, k=3, explain=True).hits
    assert on[0].content.startswith("user: My laptop battery died")
    assert on[0].explanation is not None and "rerank" in on[0].explanation
    # the hits keep the default's scores, in the new order
    assert [h.score for h in on] == [h.score for h in off]
    assert mem.query(question, k=3).hits == mem.query(question, k=3).hits  # deterministic


def test_only_default_hybrid_text_queries_are_reordered(chat) -> None:  # type: ignore[no-untyped-def]
    d, mem = chat
    question = "What happened to my laptop?"
    for fusion in (Fusion(recency=0.1), Fusion(salience=0.1)):
        d.fusion = fusion
        hits = mem.query(question, k=3, explain=True).hits
        assert all("rerank" not in (h.explanation or {}) for h in hits)
    d.fusion = Fusion()
    for mode in ("vector", "keyword"):
        hits = mem.query(question, k=3, mode=mode, explain=True).hits  # type: ignore[arg-type]
        assert all("rerank" not in (h.explanation or {}) for h in hits)


def test_scores_fall_with_rank_and_min_score_keeps_its_meaning(chat) -> None:  # type: ignore[no-untyped-def]
    d, mem = chat
    d.fusion = Fusion()
    for question in ("Where is my sister's wedding?", "What should I pack?", "gift"):
        hits = mem.query(question, k=8).hits
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        floor = scores[len(scores) // 2]
        kept = mem.query(question, k=8, min_score=floor).hits
        assert kept and all(h.score >= floor for h in kept)


def test_memories_that_are_not_a_transcript_keep_the_default_order(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", durability="os", llm=None) as d:
        mem = d.namespace("notes")
        a = mem.write("user:7", "Customer prefers email over phone calls")
        mem.write("user:7", "Order #77 shipped to Lisbon on Monday")
        hits = mem.query("how should we contact the customer?", entity="user:7", explain=True)
        assert hits.hits[0].id == a.id
        assert all("rerank" not in (h.explanation or {}) for h in hits.hits)
    assert rerank.transcript(np.array([0, 1, -1, -1]))
    assert not rerank.transcript(np.array([0, -1, -1]))
    assert not rerank.transcript(np.array([], np.int32))
