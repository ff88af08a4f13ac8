"""Pseudo-relevance feedback for hybrid text queries: expansion terms from the best hits.

A question often shares few words with the memory that answers it, but the memories that rank
first share words with that memory. After a first ranking, the words that stand out in its
best few hits (RM3 style: a word's share of each hit's length, weighted by the hit's share of
the score, times its idf) are added to the keyword search, each counted once against the
question's words counted ``feedback_repeat`` times, and the lists are fused again. The vector
side is not searched again and no model runs.

Chosen by leave-one-conversation-out over LoCoMo dev and BEAM 100K (bench/bench_prf.py): the
top 3 hits, 5 words, the question twice. BEAM R@10 0.505 -> 0.534 (beyond noise), LoCoMo 0.798
-> 0.794 (within noise); docs/retrieval.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

import numpy as np

from ..index.catalog import Catalog
from ..index.keyword import analyze, stem

__all__ = ["MAX_CHARS", "expansion_terms"]

# a hit's text is analyzed up to this many characters (a long memory's opening; its length is
# then the analyzed part's): a 350 KB reply would cost milliseconds per query
MAX_CHARS = 32_768


def expansion_terms(
    cat: Catalog,
    rows: Iterable[int],
    weights: Iterable[float],
    question: Iterable[str],
    count: int,
    n: int,
) -> list[str]:
    """The ``count`` best expansion terms of the feedback ``rows`` (catalog rows, weighted by
    ``weights``), best first, ties by term. Left out: the question's terms, the stems of
    speaker-label words, and terms found in fewer than 2 of the first ``n`` rows (df is counted
    over those rows, whatever the query's filters)."""
    pairs = [(int(r), max(float(w), 0.0)) for r, w in zip(rows, weights, strict=True)]
    total = sum(w for _, w in pairs)
    if count <= 0 or not pairs or total <= 0:
        return []
    scores: dict[str, float] = {}
    for row, w in pairs:
        if w <= 0:
            continue
        terms = analyze(cat.recs[row].content[:MAX_CHARS])
        if not terms:
            continue
        share = w / total / len(terms)
        for term, tf in Counter(terms).items():
            scores[term] = scores.get(term, 0.0) + share * tf
    skip = set(question)
    skip.update(stem(word) for word in cat.label_words)
    postings = cat.keywords.postings
    ranked: list[tuple[float, str]] = []
    for term, s in scores.items():
        if term in skip:
            continue
        post = postings.get(term)
        if post is None:
            continue
        held = np.frombuffer(post[0], dtype=np.int32)
        df = held.shape[0]
        if df and held[-1] >= n:  # rows arrive in order: a prefix is below n
            df = int(np.searchsorted(held, n))
        del held
        if df < 2:
            continue
        ranked.append((-s * math.log(1.0 + (n - df + 0.5) / (df + 0.5)), term))
    ranked.sort()
    return [term for _, term in ranked[:count]]
