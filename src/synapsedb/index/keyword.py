"""BM25 keyword search with Snowball stemming, in memory, over catalog rows.

Postings are compact ``array`` objects (row ids and term frequencies) that only grow; the
writer never resizes one a reader is copying (:func:`synapsedb.index.postings.grow`). Corpus
statistics (document count, average length, document frequencies) are computed over the rows a
query may see, so a query ``as_of`` T ranks exactly as BM25 over the memories visible at T.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from functools import lru_cache
from typing import Any

import numpy as np
import Stemmer

from .postings import grow

__all__ = ["KeywordIndex", "analyze"]

_TOKEN = re.compile(r"\w+", re.UNICODE)
_STEMMER = Stemmer.Stemmer("english")
# A short, standard English stopword list (function words only).
STOPWORDS = frozenset(
    """a an and are as at be been being but by can could did do does doing for from had has
    have having he her here hers him his how i if in into is it its itself just me more most
    my no nor not of off on once only or other our ours out over own same she should so some
    such than that the their theirs them then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would
    you your yours""".split()  # noqa: SIM905
)


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def analyze(text: str) -> list[str]:
    """Lowercase, split on non-word characters, drop stopwords, stem."""
    return [_stem(w) for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS]


class KeywordIndex:
    __slots__ = ("b", "doclen", "k1", "postings")

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.postings: dict[str, tuple[array[int], array[int]]] = {}
        self.doclen = array("i")

    def add(self, row: int, terms: list[str]) -> None:
        """Index catalog row ``row`` (rows arrive in order, 0, 1, 2, ...)."""
        assert row == len(self.doclen), "rows must be added in order"
        counts: dict[str, int] = {}
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
        for term, tf in counts.items():
            post = self.postings.get(term)
            if post is None:
                self.postings[term] = (array("i", (row,)), array("i", (tf,)))
                continue
            tfs = grow(post[1], tf)  # tf first, so a reader's tfs are never shorter than its rows
            if tfs is post[1]:
                rows = grow(post[0], row)
            else:  # a reader holds the old pair: leave it whole
                rows = post[0][:]
                rows.append(row)
            if rows is not post[0]:
                self.postings[term] = (rows, tfs)
        self.doclen = grow(self.doclen, len(terms))

    def search(self, terms: list[str], allowed: np.ndarray, k: int, *, full: bool = False) -> Any:
        """Top ``k`` rows by BM25 among ``allowed`` (a mask over the first ``len(allowed)`` rows).

        Returns (rows, scores), best first; rows with no query term are not returned. With
        ``full=True`` also the score of every row (0 where no query term occurs).
        """
        n = allowed.shape[0]
        empty: tuple[np.ndarray, ...] = (np.zeros(0, np.int64), np.zeros(0, np.float32))
        if full:
            empty = (*empty, np.zeros(n, np.float64))
        if not terms or n == 0:
            return empty
        doclen = np.array(self.doclen[:n], dtype=np.float32)
        visible = int(allowed.sum())
        if visible == 0:
            return empty
        avgdl = float(doclen[allowed].mean()) or 1.0
        k1, b = self.k1, self.b
        row_parts, score_parts = [], []
        for term, qtf in Counter(terms).items():
            post = self.postings.get(term)
            if post is None:
                continue
            rows = np.array(post[0], dtype=np.int64)  # rows first: tfs are never shorter
            tfs = np.array(post[1][: rows.shape[0]], dtype=np.float32)
            keep = rows < n
            rows, tfs = rows[keep], tfs[keep]
            keep = allowed[rows]
            rows, tfs = rows[keep], tfs[keep]
            df = rows.shape[0]
            if df == 0:
                continue
            idf = math.log(1.0 + (visible - df + 0.5) / (df + 0.5))
            norm = k1 * (1.0 - b + b * doclen[rows] / avgdl)
            row_parts.append(rows)
            score_parts.append(qtf * idf * tfs * (k1 + 1.0) / (tfs + norm))
        if not row_parts:
            return empty
        rows = np.concatenate(row_parts)
        scores = np.bincount(rows, weights=np.concatenate(score_parts), minlength=n)
        hit = np.flatnonzero(scores)
        if hit.shape[0] > k:
            hit = hit[np.argpartition(-scores[hit], k - 1)[:k]]
        order = np.argsort(-scores[hit], kind="stable")
        hit = hit[order]
        if full:
            return hit, scores[hit].astype(np.float32), scores
        return hit, scores[hit].astype(np.float32)
