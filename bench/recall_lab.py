"""The default hybrid ranking, recomputed in numpy over every memory of a conversation, for the
recall study (bench/recall_study.py): the engine's recipe (query/rank.py, query/executor.py,
query/feedback.py) with each signal kept per row, so new rankings are tried in seconds.

Per conversation (:class:`Index`): unit vectors, BM25 postings by the engine's analyzer, speaker
labels, sessions, and the pairs dedup folds together. Per question (:class:`Scored`): every row's
cosine to the names-stripped question, BM25 of the question (and after feedback), the fused base
``s0``, the context term, the author term and the default score. Rows are in timeline order
(both datasets are written in time order, one entity per conversation).

Differences from the engine, measured by :func:`check` against it: every row is a candidate here
(the engine takes the top 100 of each list plus their neighbours); BM25 is summed in float64.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from recall_data import Conv, Vectors

from synapsedb.index.keyword import STOPWORDS, analyze, stem
from synapsedb.query.dedup import norm_text
from synapsedb.query.rank import named_labels, strip_words

K = 10
VERSION = 1  # bump when Scored changes (the study caches it)
_LABEL = re.compile(r"^([^:\n]{1,40}):\s")  # index/catalog.py
_WORD = re.compile(r"\w+")


@dataclass
class Index:
    conv: Conv
    vecs: np.ndarray  # (n, 384) unit rows
    post: dict[str, tuple[np.ndarray, np.ndarray]]  # term -> rows, tf
    doclen: np.ndarray
    label: np.ndarray  # label id per row (-1: none)
    label_words: dict[str, set[int]]
    dups: list[list[int]]  # per row, the earlier rows dedup folds it into (same text, cos >= .95)
    terms: list[Counter[str]]  # analyzed text per row (first 32,768 chars, as feedback reads)
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # other per-row arrays

    @property
    def n(self) -> int:
        return self.vecs.shape[0]

    @classmethod
    def build(cls, conv: Conv, vecs: np.ndarray) -> Index:
        post: dict[str, tuple[list[int], list[int]]] = {}
        doclen = []
        terms = []
        for i, text in enumerate(conv.texts):
            ts = analyze(text)
            doclen.append(len(ts))
            for t, tf in Counter(ts).items():
                p = post.setdefault(t, ([], []))
                p[0].append(i)
                p[1].append(tf)
            terms.append(Counter(analyze(text[:32_768])))
        labels: dict[str, int] = {}
        label_words: dict[str, set[int]] = {}
        label = np.full(len(conv.texts), -1, np.int32)
        for i, text in enumerate(conv.texts):
            m = _LABEL.match(text)
            if m is None:
                continue
            name = m.group(1).strip()
            if name not in labels:
                labels[name] = len(labels)
                for w in _WORD.findall(name.lower()):
                    if len(w) > 1 and w not in STOPWORDS:
                        label_words.setdefault(w, set()).add(labels[name])
            label[i] = labels[name]
        units = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        close = np.triu(units @ units.T >= 0.95, 1)
        norm = [norm_text(t) for t in conv.texts]
        dups: list[list[int]] = [[] for _ in conv.texts]
        for i, j in zip(*np.nonzero(close), strict=True):
            dups[int(j)].append(int(i))
        first: dict[str, int] = {}
        for j, t in enumerate(norm):
            if t in first:
                dups[j].append(first[t])
            else:
                first[t] = j
        return cls(
            conv,
            units.astype(np.float32),
            {t: (np.array(r), np.array(f, np.float64)) for t, (r, f) in post.items()},
            np.array(doclen, np.float64),
            label,
            label_words,
            dups,
            terms,
        )

    def bm25(self, terms: Sequence[str], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
        n = self.n
        out = np.zeros(n)
        avgdl = float(self.doclen.mean()) or 1.0
        for term, qtf in Counter(terms).items():
            p = self.post.get(term)
            if p is None:
                continue
            rows, tf = p
            idf = math.log(1.0 + (n - rows.shape[0] + 0.5) / (rows.shape[0] + 0.5))
            norm = k1 * (1 - b + b * self.doclen[rows] / avgdl) + tf
            out[rows] += qtf * idf * tf * (k1 + 1) / norm
        return out

    def expansion(
        self, rows: Sequence[int], weights: Sequence[float], question: Sequence[str], count: int = 5
    ) -> list[str]:
        """query/feedback.py's expansion_terms, over this index."""
        pairs = [(r, max(w, 0.0)) for r, w in zip(rows, weights, strict=True)]
        total = sum(w for _, w in pairs)
        if not pairs or total <= 0:
            return []
        scores: dict[str, float] = {}
        for row, w in pairs:
            ts = self.terms[row]
            size = sum(ts.values())
            if w <= 0 or not size:
                continue
            share = w / total / size
            for term, tf in ts.items():
                scores[term] = scores.get(term, 0.0) + share * tf
        skip = set(question) | {stem(w) for w in self.label_words}
        ranked = []
        for term, s in scores.items():
            p = self.post.get(term)
            if term in skip or p is None or p[0].shape[0] < 2:
                continue
            df = p[0].shape[0]
            ranked.append((-s * math.log(1.0 + (self.n - df + 0.5) / (df + 0.5)), term))
        ranked.sort()
        return [t for _, t in ranked[:count]]


def neighbour_max(s: np.ndarray, window: int = 2) -> np.ndarray:
    """Per row, the max of ``s`` over the ``window`` rows before and after it (0 past the ends)."""
    n = s.shape[0]
    out = np.zeros(n)
    for d in range(1, window + 1):
        out[d:] = np.maximum(out[d:], s[:-d] if d < n else s[:0])
        out[:-d] = np.maximum(out[:-d], s[d:] if d < n else s[:0])
    return out


def fuse(cos: np.ndarray, bm: np.ndarray, vector: float = 0.5, keyword: float = 0.5) -> np.ndarray:
    cmax, bmax = float(cos.max(initial=0.0)), float(bm.max(initial=0.0))
    v = np.maximum(cos, 0) / cmax if cmax > 0 else np.zeros_like(cos)
    kw = bm / bmax if bmax > 0 else np.zeros_like(bm)
    return vector * v + keyword * kw


def ranked(score: np.ndarray) -> np.ndarray:
    """Rows by score, best first, ties by row (the engine's lexsort)."""
    return np.lexsort((np.arange(score.shape[0]), -score))


def dedup_top(ix: Index, order: np.ndarray, k: int = K) -> list[list[int]]:
    """The top ``k`` kept rows in rank order, each with the rows folded into it."""
    kept: list[list[int]] = []
    where: dict[int, int] = {}
    for r in order.tolist():
        j = None
        for d in ix.dups[r]:
            if d in where:
                j = where[d] if j is None else min(j, where[d])
        if j is not None:
            kept[j].append(r)
            where[r] = j
            continue
        where[r] = len(kept)
        kept.append([r])
        if len(kept) == k:
            break
    return kept


@dataclass
class Scored:
    """One question's signals over every row of its conversation."""

    q: int  # question number in the conversation
    cos: np.ndarray  # to the names-stripped question
    bm: np.ndarray  # BM25 of the question's terms
    bm_fb: np.ndarray  # after feedback (question x2 + expansion terms)
    author: np.ndarray  # 1 where the row's speaker is named in the question
    named: bool
    cos_raw: np.ndarray  # to the question as asked (vector-only mode)
    s0: np.ndarray  # the default's base, after feedback
    score: np.ndarray  # the default's final score


def default_score(
    cos: np.ndarray,
    bm: np.ndarray,
    author: np.ndarray,
    context: float = 0.5,
    window: int = 2,
    author_w: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    s0 = fuse(cos, bm)
    return s0, s0 + context * neighbour_max(s0, window) + author_w * author


def score_questions(ix: Index, vec: Vectors) -> list[Scored]:
    conv = ix.conv
    dense, names_of = [], []
    for q in conv.questions:
        names, named = named_labels(q.text, ix.label_words)
        dense.append(strip_words(q.text, names))
        names_of.append(named)
    qv = vec.get(f"{conv.key}-q-dense", dense)
    qraw = vec.get(f"{conv.key}-q-raw", [q.text for q in conv.questions])
    out = []
    for qi, q in enumerate(conv.questions):
        terms = analyze(q.text)
        cos = ix.vecs @ qv[qi]
        bm = ix.bm25(terms)
        author = (
            np.isin(ix.label, list(names_of[qi])).astype(np.float64)
            if names_of[qi]
            else (np.zeros(ix.n))
        )
        s0, score = default_score(cos, bm, author)
        bm_fb = bm
        top = dedup_top(ix, ranked(score), 3)
        best = [g[0] for g in top]
        extra = ix.expansion(best, [float(score[r]) for r in best], terms)
        if extra:
            bm_fb = 2 * bm + ix.bm25(extra)
            s0, score = default_score(cos, bm_fb, author)
        out.append(
            Scored(
                qi,
                cos.astype(np.float64),
                bm,
                bm_fb,
                author,
                bool(names_of[qi]),
                (ix.vecs @ qraw[qi]).astype(np.float64),
                s0,
                score,
            )
        )
    return out


# -- metrics ----------------------------------------------------------------------------------


def found(ix: Index, order: np.ndarray, k: int = K, dedup: bool = True) -> list[int]:
    """The rows a top-k list shows (dedup: folded duplicates count at their kept row's rank)."""
    if not dedup:
        return order[:k].tolist()
    return [r for g in dedup_top(ix, order, k) for r in g]


def metrics(ix: Index, ev: frozenset[int], got: Sequence[int]) -> dict[str, float]:
    s = set(got)
    sess = ix.conv.session
    ev_s = {int(sess[e]) for e in ev}
    got_s = {int(sess[g]) for g in got}
    return {
        "r10": len(ev & s) / len(ev),
        "all10": float(ev <= s),
        "sess10": len(ev_s & got_s) / len(ev_s),
    }
