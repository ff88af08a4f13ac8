"""BM25 keyword search with Snowball stemming, in memory, over catalog rows.

Postings are compact ``array`` objects (row ids and term frequencies) that only grow; the
writer never resizes one a reader is copying (:func:`synapsedb.index.postings.grow`). Corpus
statistics (document count, average length, document frequencies) are computed over the rows a
query may see, so a query ``as_of`` T ranks exactly as BM25 over the memories visible at T.

A namespace loaded at open defers its index (:meth:`KeywordIndex.defer`): rows are analyzed
not at load but on first need, in bulk, from the catalog's texts: by the first search (every
row it may see, before ranking), by the background indexer, or by the first write once the
index is in use. The postings built are the ones adding the rows one by one builds.
"""

from __future__ import annotations

import math
import re
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import Stemmer

from .postings import extend, grow

__all__ = ["KeywordIndex", "analyze", "stem"]

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


def stem(word: str) -> str:
    """The index's stem of one lowercase word (as :func:`analyze` stems it)."""
    return _stem(word)


def analyze(text: str) -> list[str]:
    """Lowercase, split on non-word characters, drop stopwords, stem."""
    return [_stem(w) for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS]


# rows analyzed per step of a deferred index's catch-up (the lock is released between steps)
_CHUNK = 4096


class KeywordIndex:
    __slots__ = ("_doclen_f32", "_lazy", "_lock", "_source", "b", "doclen", "k1", "postings")

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.postings: dict[str, tuple[array[int], array[int]]] = {}
        self.doclen = array("i")
        # doclen as float32 for ranking, extended as rows arrive (a row's length never changes)
        self._doclen_f32 = np.zeros(0, np.float32)
        # rows [len(doclen), catalog count) not indexed yet are read from the source
        self._source: Callable[[int, int], Sequence[str]] | None = None
        self._lazy = False  # rows are left to the source as they arrive
        self._lock = threading.Lock()  # one indexer at a time (the writer or a catch-up)

    # -- deferred indexing -----------------------------------------------------------------------

    def defer(self, source: Callable[[int, int], Sequence[str]]) -> None:
        """Index rows on first need rather than as they are added: ``source(start, stop)``
        gives the texts of rows ``[start, stop)`` (any rows the catalog has)."""
        with self._lock:
            self._source, self._lazy = source, True

    @property
    def indexed(self) -> int:
        """Rows indexed so far."""
        return len(self.doclen)

    @property
    def lazy(self) -> bool:
        """True until the index is first needed (rows are then indexed as they arrive)."""
        return self._lazy

    def catch_up(self, n: int, chunk: int | None = None) -> int:
        """Index the rows below ``n`` not indexed yet (at most ``chunk`` of them, else all, in
        steps that release the lock); returns how many. Once every row below ``n`` is in, the
        index is in use: later rows are indexed as they are added."""
        done = 0
        while chunk is None or done < chunk:
            with self._lock:
                start = len(self.doclen)
                if start >= n or self._source is None:
                    if start >= n:
                        self._lazy = False
                    break
                step = _CHUNK if chunk is None else min(_CHUNK, chunk - done)
                stop = min(n, start + step)
                self._add_texts(start, self._source(start, stop))
                done += stop - start
        return done

    def add_text(self, row: int, text: str) -> None:
        """Index catalog row ``row`` (rows arrive in order); a lazy index leaves it to its
        source."""
        self.add_texts(row, (text,))

    def add_texts(self, start: int, texts: Sequence[str]) -> None:
        """Index catalog rows ``start, start + 1, ...`` (see :meth:`add_text`)."""
        if self._lazy or not texts:
            return
        with self._lock:
            if self._lazy:
                return
            have = len(self.doclen)
            if have < start and self._source is not None:  # rows left while lazy
                self._add_texts(have, self._source(have, start))
            self._add_texts(start, texts)

    def add(self, row: int, terms: list[str]) -> None:
        """Index catalog row ``row`` (rows arrive in order, 0, 1, 2, ...)."""
        with self._lock:
            self._lazy = False
            self._add(row, terms)

    def _add(self, row: int, terms: list[str]) -> None:
        start = len(self.doclen)
        if start < row and self._source is not None:  # rows left while lazy: theirs first
            self._add_texts(start, self._source(start, row))
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

    def _add_texts(self, start: int, texts: Sequence[str]) -> None:
        """Index rows ``start, start + 1, ...`` in one pass: what adding them one by one
        builds (the caller holds the lock)."""
        assert start == len(self.doclen), "rows must be added in order"
        fresh: dict[str, tuple[list[int], list[int]]] = {}
        lens = []
        row = start
        for text in texts:
            terms = analyze(text)
            lens.append(len(terms))
            counts: dict[str, int] = {}
            for term in terms:
                counts[term] = counts.get(term, 0) + 1
            for term, tf in counts.items():
                acc = fresh.get(term)
                if acc is None:
                    fresh[term] = ([row], [tf])
                else:
                    acc[0].append(row)
                    acc[1].append(tf)
            row += 1
        postings = self.postings
        for term, (rows, tfs) in fresh.items():
            post = postings.get(term)
            if post is None:
                postings[term] = (array("i", rows), array("i", tfs))
                continue
            new_tfs = extend(post[1], tfs)  # tfs first: a reader's tfs never shorter than rows
            if new_tfs is post[1]:
                new_rows = extend(post[0], rows)
            else:  # a reader holds the old pair: leave it whole
                new_rows = post[0][:]
                new_rows.extend(rows)
            if new_rows is not post[0]:
                postings[term] = (new_rows, new_tfs)
        self.doclen = extend(self.doclen, lens)

    def search(
        self,
        terms: list[str],
        allowed: np.ndarray,
        k: int,
        *,
        full: bool = False,
        start: np.ndarray | None = None,
    ) -> Any:
        """Top ``k`` rows by BM25 among ``allowed`` (a mask over the first ``len(allowed)`` rows).

        Returns (rows, scores), best first; rows with no query term are not returned. With
        ``full=True`` also the score of every row (0 where no query term occurs).

        ``start``: every row's score for earlier terms (a ``full=True`` result over the same
        ``allowed``, times an integer to count those terms that many times); this search's
        terms are added to it in place. Searching ``q`` then these terms this way gives what
        searching ``q * m + terms`` at once gives when no term of ``terms`` is in ``q`` (BM25
        is linear in each term's query count): exactly for m a power of two (scaling by 2 is
        exact in floating point), to the last bit of rounding otherwise.

        Each term's postings are read in place (a numpy view of the compact list, held only
        for this call: the writer copies a list a reader holds rather than resize it) and its
        scores are added into one dense accumulator, term by term in the order of ``terms``:
        the same float32 term scores summed in the same order as concatenating them and
        counting with weights, without the copies. With no row filtered out, the rows and
        frequencies are not compressed at all.
        """
        n = allowed.shape[0]
        if len(self.doclen) < n:  # rows left to the source: in before ranking
            self.catch_up(n)
        empty: tuple[np.ndarray, ...] = (np.zeros(0, np.int64), np.zeros(0, np.float32))
        if full:
            empty = (*empty, np.zeros(n, np.float64))
        if start is not None and start.shape != (n,):
            raise ValueError(f"start: expected {n} scores, got shape {start.shape}")
        if (not terms and start is None) or n == 0:
            return empty
        doclen = self._doclen_f32
        if doclen.shape[0] < n:  # only the new rows are converted (readers may race: both fine)
            more = np.array(self.doclen[doclen.shape[0] : n], dtype=np.float32)
            doclen = self._doclen_f32 = np.concatenate([doclen, more])
        doclen = doclen[:n]
        visible = int(np.count_nonzero(allowed))
        if visible == 0:
            return empty
        every = visible == n  # no row filtered out: no per-posting mask
        avgdl = (float(doclen.mean()) if every else float(doclen[allowed].mean())) or 1.0
        k1, b = self.k1, self.b
        scores = np.zeros(n, np.float64) if start is None else start
        found = start is not None  # all zero: _top_rows finds no row, as with no term found
        for term, qtf in Counter(terms).items():
            post = self.postings.get(term)
            if post is None:
                continue
            # rows first: tfs are never shorter. The views are dropped once copied, so the
            # writer is kept from growing these lists in place only for that long
            held = np.frombuffer(post[0], dtype=np.int32)
            cut = held.shape[0]
            if cut and held[-1] >= n:  # rows arrive in order: a prefix is below n
                cut = int(np.searchsorted(held, n))
            rows = held[:cut].astype(np.intp)
            tf = np.frombuffer(post[1], dtype=np.int32)[:cut].astype(np.float32)
            del held
            if not every:
                keep = allowed.take(rows)
                rows, tf = rows[keep], tf[keep]
            df = rows.shape[0]
            if df == 0:
                continue
            found = True
            idf = math.log(1.0 + (visible - df + 0.5) / (df + 0.5))
            # k1 * (1 - b + b * dl / avgdl) + tf, and qtf * idf * tf * (k1 + 1) / that, in
            # float32, each operation in this order
            norm = doclen.take(rows)
            norm *= b
            norm /= avgdl
            norm += 1.0 - b
            norm *= k1
            norm += tf
            part = tf * (qtf * idf)
            part *= k1 + 1.0
            part /= norm
            scores[rows] += part  # a term's rows are distinct
        if not found:
            return empty
        hit = _top_rows(scores, k)
        if full:
            return hit, scores[hit].astype(np.float32), scores
        return hit, scores[hit].astype(np.float32)


def _top_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """The rows of the ``k`` best positive scores, best first (ties in row order).

    A sample of every 16th score gives a threshold that about twice ``k`` scores reach; only
    those are partitioned, unless fewer than ``k`` (or no positive score) reach it.
    """
    n = scores.shape[0]
    hit = None
    if n >= 64 * k:
        sample = scores[::16]
        m = min(sample.shape[0], 2 * (k // 16) + 4)
        thr = float(np.partition(sample, sample.shape[0] - m)[sample.shape[0] - m])
        if thr > 0:
            hit = np.flatnonzero(scores >= thr)
            if hit.shape[0] < k:
                hit = None
    if hit is None:
        hit = np.flatnonzero(scores)
    if hit.shape[0] > k:  # the scores above the k-th best, then its ties in row order
        values = scores[hit]
        kth = values[np.argpartition(values, hit.shape[0] - k)[hit.shape[0] - k]]
        above = hit[values > kth]
        hit = np.concatenate([above, hit[values == kth][: k - above.shape[0]]])
        hit.sort()
    return hit[np.argsort(-scores[hit], kind="stable")]
