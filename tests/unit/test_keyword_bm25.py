"""BM25 search against a plain reference: the statistics over the rows a query may see, every
row's score, and the top k (best first, ties in row order), with and without a filter, over a
prefix of the rows (a query as_of an earlier time) and for a k far below the row count (the
sampled threshold of the top-k selection)."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from synapsedb.index.keyword import KeywordIndex, analyze

WORDS = [
    "parcel",
    "refund",
    "order",
    "delay",
    "hamburg",
    "invoice",
    "courier",
    "label",
    "customs",
    "address",
    "wallet",
    "ticket",
    "escalate",
    "carrier",
    "return",
]


def reference(docs: list[list[str]], terms: list[str], allowed: list[bool]) -> list[float]:
    """Okapi BM25 (Lucene idf, k1 1.2, b 0.75) over the allowed docs, in float64."""
    k1, b = 1.2, 0.75
    seen = [d for d, ok in zip(docs, allowed, strict=True) if ok]
    avgdl = (sum(len(d) for d in seen) / len(seen)) or 1.0
    out = []
    for doc, ok in zip(docs, allowed, strict=True):
        score = 0.0
        if ok:
            counts = Counter(doc)
            for term, qtf in Counter(terms).items():
                df = sum(1 for d in seen if term in d)
                tf = counts.get(term, 0)
                if df == 0 or tf == 0:
                    continue
                idf = math.log(1.0 + (len(seen) - df + 0.5) / (df + 0.5))
                score += qtf * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        out.append(score)
    return out


def corpus(seed: int, n: int) -> list[list[str]]:
    rnd = random.Random(seed)
    return [analyze(" ".join(rnd.choices(WORDS, k=rnd.randint(0, 12)))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("share", [1.0, 0.5, 0.05])
def test_scores_and_top_k_match_the_reference(seed: int, share: float) -> None:
    rnd = random.Random(seed)
    n = rnd.choice([50, 700, 3000])
    docs = corpus(seed, n)
    index = KeywordIndex()
    for row, doc in enumerate(docs):
        index.add(row, doc)
    visible_n = n if seed % 2 == 0 else n - n // 5  # as_of: only a prefix of the rows
    allowed = [share == 1.0 or rnd.random() < share for _ in range(visible_n)]
    if not any(allowed):
        allowed[0] = True
    terms = analyze(" ".join(rnd.choices([*WORDS, "nowhere"], k=rnd.randint(1, 6))))
    k = rnd.choice([1, 3, 10, 40])
    rows, scores, full = index.search(terms, np.array(allowed), k, full=True)
    want = reference(docs[:visible_n], terms, allowed)
    assert full.shape == (visible_n,)
    np.testing.assert_allclose(full, want, rtol=1e-5, atol=1e-9)
    # best first, ties in row order; only rows with a query term
    expected = sorted((i for i, s in enumerate(full.tolist()) if s > 0), key=lambda i: -full[i])
    assert rows.tolist() == expected[:k]
    np.testing.assert_allclose(scores, full[rows].astype(np.float32))
    plain_rows, _ = index.search(terms, np.array(allowed), k)
    assert plain_rows.tolist() == rows.tolist()


def test_top_k_of_many_rows_with_tied_scores_keeps_row_order() -> None:
    index = KeywordIndex()
    for row in range(5000):  # every row the same length: scores tie in groups
        index.add(row, ["parcel"] * (1 + row % 3) + ["pad"] * (3 - row % 3))
    rows, scores = index.search(["parcel"], np.ones(5000, bool), 10)
    assert rows.tolist() == [2, 5, 8, 11, 14, 17, 20, 23, 26, 29]
    assert len(set(scores.tolist())) == 1


def test_no_query_term_in_any_allowed_row() -> None:
    index = KeywordIndex()
    for row, doc in enumerate(corpus(1, 100)):
        index.add(row, doc)
    rows, scores, full = index.search(["nowhere"], np.ones(100, bool), 5, full=True)
    assert rows.shape == (0,) and scores.shape == (0,) and not full.any()
    allowed = np.zeros(100, bool)
    rows, _scores = index.search(analyze("parcel"), allowed, 5)
    assert rows.shape == (0,)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("share", [1.0, 0.3])
def test_adding_terms_to_earlier_scores_equals_searching_them_all(seed: int, share: float) -> None:
    """Feedback's second search: the question's scores doubled, then the expansion terms added,
    is bit for bit the search of the question twice plus the expansion terms."""
    rnd = random.Random(100 + seed)
    n = rnd.choice([80, 900, 4000])
    docs = corpus(seed, n)
    index = KeywordIndex()
    for row, doc in enumerate(docs):
        index.add(row, doc)
    allowed = np.array([share == 1.0 or rnd.random() < share for _ in range(n)])
    allowed[0] = True
    words = rnd.sample(WORDS, 7)
    question, extra = analyze(" ".join(words[:3] * 2)), analyze(" ".join(words[3:]))
    k = rnd.choice([5, 40])
    _, _, first = index.search(question, allowed, k, full=True)
    start = first * 2
    got_rows, got_scores, got_all = index.search(extra, allowed, k, full=True, start=start)
    rows, scores, every = index.search(question * 2 + extra, allowed, k, full=True)
    assert got_rows.tolist() == rows.tolist()
    assert got_scores.tolist() == scores.tolist()
    assert np.array_equal(got_all, every)
    assert got_all is start  # added in place
    assert np.array_equal(first * 2, index.search(question * 2, allowed, k, full=True)[2])


def test_start_alone_ranks_its_scores_and_must_fit_the_rows() -> None:
    index = KeywordIndex()
    for row, doc in enumerate(corpus(3, 200)):
        index.add(row, doc)
    allowed = np.ones(200, bool)
    _, _, first = index.search(["refund"], allowed, 10, full=True)
    rows, _scores = index.search([], allowed, 10, start=first.copy())
    assert rows.tolist() == index.search(["refund"], allowed, 10)[0].tolist()
    assert index.search([], allowed, 10, start=np.zeros(200))[0].shape == (0,)
    with pytest.raises(ValueError, match="start: expected 200 scores"):
        index.search(["refund"], allowed, 10, start=np.zeros(199))
