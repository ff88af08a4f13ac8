"""LoCoMo evidence-retrieval benchmark: how well a query finds the turns that answer a question.

No LLM anywhere. Protocol (fixed by the issue):

* one namespace per conversation, one memory per dialog turn with content ``"Speaker: text"``
  (plus ``" [image: caption]"`` when the turn shares an image), ts = the session's date;
* every question of categories 1-4 queries the top k; the conversation's ``observation``,
  ``summary`` and ``events`` fields (LLM-derived) are never read, nor the image ``query`` field;
* metrics: evidence recall@5/10/20 (share of the question's evidence turns in the top k, averaged
  over questions), all-evidence hit@10, MRR of the first evidence turn (over the top 100), and the
  whitespace tokens of the top 10 against the whole conversation's; overall and per category.
  Questions whose evidence ids map to no turn are skipped and counted.

A retriever is any callable ``retrieve(conv, question_text, k) -> list[dia_id | row index]``;
one with a ``prepare(conv, questions)`` method gets to batch its query embeddings first. The
built-in ones are three baselines (plain BM25, plain dense MiniLM cosine, naive RRF) and the
hybrid recipe (``Recipe``) described in ``bench/ranking_notes.md``. Pure numpy + PyStemmer + the
MiniLM embedder of ``synapsedb.embed``; no engine dependency.

Usage::

    python bench/locomo.py                      # all retrievers, markdown tables on stdout
    python bench/locomo.py --quick              # every 4th question
    python bench/locomo.py --ablations          # the recipe with one part removed at a time
    python bench/locomo.py --loco               # leave-one-conversation-out check of the weights
    python bench/locomo.py --timing 100000      # recipe latency on a synthetic 100k namespace
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib
import itertools
import json
import math
import os
import re
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev"
DEFAULT_CACHE = Path(os.environ.get("TMPDIR", "/tmp")) / "synapsedb-locomo-cache"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)
MRR_DEPTH = 100

# ---------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    content: str  # what the memory holds: "Speaker: text [image: caption]"
    session: int
    date: str  # the session's date_time, the memory's ts


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    category: int
    evidence: tuple[int, ...]  # rows of the evidence turns


@dataclass
class Conversation:
    """One LoCoMo conversation = one namespace; rows are turns in write (and time) order."""

    name: str
    turns: list[Turn]
    questions: list[Question]
    skipped: int  # questions of categories 1-4 whose evidence maps to no turn
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ids(self) -> list[str]:
        return [t.dia_id for t in self.turns]


_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")  # tolerates "D8:6; D9:17" and "D:11:26" in the data


def load_conversation(path: Path) -> Conversation:
    raw = json.loads(path.read_text())
    sessions = sorted(int(k.split("_")[1]) for k in raw if re.fullmatch(r"session_\d+", k))
    turns = []
    for s in sessions:
        date = raw.get(f"session_{s}_date_time", "")
        for t in raw[f"session_{s}"]:
            content = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                content += f" [image: {t['blip_caption']}]"
            turns.append(Turn(t["dia_id"], t["speaker"], content, s, date))
    row_of = {t.dia_id: i for i, t in enumerate(turns)}
    questions, skipped = [], 0
    for q in raw["qa"]:
        if q.get("category") not in CATEGORIES:
            continue
        rows: list[int] = []
        for ev in q.get("evidence", []):
            for m in _EVIDENCE.finditer(str(ev)):
                r = row_of.get(f"D{m.group(1)}:{m.group(2)}")
                if r is not None and r not in rows:
                    rows.append(r)
        if not rows:
            skipped += 1
            continue
        questions.append(Question(q["question"], q["category"], tuple(rows)))
    return Conversation(path.stem, turns, questions, skipped)


def load_dataset(data: Path, names: Sequence[str] | None = None) -> list[Conversation]:
    paths = sorted(data.glob("*.json"), key=lambda p: (len(p.stem), p.stem))
    if names:
        paths = [p for p in paths if p.stem in names]
    if not paths:
        raise SystemExit(f"no conversation files in {data}")
    return [load_conversation(p) for p in paths]


# ---------------------------------------------------------------------------------------------
# Text analysis: the same conventions as synapsedb.index.keyword.analyze (\w+ tokens, lowercase,
# a short function-word stoplist, Snowball English stemming), duplicated to stay engine-free.

_WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    """a an and are as at be been being but by can could did do does doing for from had has
    have having he her here hers him his how i if in into is it its itself just me more most
    my no nor not of off on once only or other our ours out over own same she should so some
    such than that the their theirs them then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would
    you your yours""".split()  # noqa: SIM905
)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class Analyzer:
    def __init__(self, stem: bool = True, stop: bool = True) -> None:
        self.stop = stop
        self._stem: Callable[[str], str] | None = None
        if stem:
            import Stemmer  # PyStemmer

            self._stem = Stemmer.Stemmer("english").stemWord
        self._memo: dict[str, str] = {}

    def terms(self, ws: Iterable[str]) -> list[str]:
        out = []
        for w in ws:
            if self.stop and w in STOPWORDS:
                continue
            if self._stem is not None:
                s = self._memo.get(w)
                if s is None:
                    s = self._memo[w] = self._stem(w)
                w = s
            out.append(w)
        return out


class BM25:
    """Okapi BM25 (Lucene idf) over postings; ``score`` costs O(postings of the query terms)."""

    def __init__(self, docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.n = len(docs)
        vocab: dict[str, int] = {}
        rows, cols, tfs = [], [], []
        for i, doc in enumerate(docs):
            for term, tf in Counter(doc).items():
                rows.append(i)
                cols.append(vocab.setdefault(term, len(vocab)))
                tfs.append(tf)
        self.vocab = vocab
        r, c, tf = np.array(rows), np.array(cols), np.array(tfs, np.float64)
        dl = np.array([len(d) for d in docs], np.float64)
        avgdl = float(dl.mean()) if self.n else 1.0
        df = np.bincount(c, minlength=len(vocab)).astype(np.float64)
        self.idf = np.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
        w = tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl[r] / (avgdl or 1.0)))
        order = np.argsort(c, kind="stable")
        self.post_rows = r[order]
        self.post_w = w[order] * self.idf[c[order]]
        self.start = np.concatenate([[0], np.cumsum(np.bincount(c, minlength=len(vocab)))])

    def score(self, terms: Sequence[str]) -> np.ndarray:
        s = np.zeros(self.n)
        for term, qtf in Counter(terms).items():
            j = self.vocab.get(term)
            if j is not None:
                a, b = self.start[j], self.start[j + 1]
                s[self.post_rows[a:b]] += qtf * self.post_w[a:b]
        return s


# ---------------------------------------------------------------------------------------------
# Embeddings (all-MiniLM-L6-v2 from synapsedb.embed, cached on disk per list of texts)


def _import_embedder() -> Any:
    src = ROOT / "src"
    if str(src) not in sys.path:
        sys.path.insert(0, str(src))
    try:
        return importlib.import_module("synapsedb.embed").OnnxMiniLM
    except ImportError:
        # The package __init__ imports the whole engine; the embedder needs none of it.
        for mod in [m for m in sys.modules if m == "synapsedb" or m.startswith("synapsedb.")]:
            del sys.modules[mod]
        pkg = types.ModuleType("synapsedb")
        pkg.__path__ = [str(src / "synapsedb")]
        sys.modules["synapsedb"] = pkg
        return importlib.import_module("synapsedb.embed.onnx_minilm").OnnxMiniLM


class Embeddings:
    def __init__(self, model_dir: str | None, cache: Path | None) -> None:
        self._model: Any = None
        self.model_dir = model_dir
        self.cache = cache
        self.seconds = 0.0  # time spent embedding (cache misses only)

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = _import_embedder()(self.model_dir)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        path = None
        if self.cache is not None:
            h = hashlib.sha1("\x1f".join(["minilm-l6-v2", *texts]).encode()).hexdigest()[:20]
            path = self.cache / f"{h}.npy"
            if path.exists():
                return np.load(path)
        t0 = time.perf_counter()
        vecs = np.asarray(self.model.embed(texts), np.float32)
        self.seconds += time.perf_counter() - t0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, vecs)
        return vecs


EMB: Embeddings | None = None  # set by main() or by a caller of evaluate()


def doc_vectors(conv: Conversation) -> np.ndarray:
    if "D" not in conv._cache:
        assert EMB is not None, "set locomo.EMB = Embeddings(...) first"
        conv._cache["D"] = EMB.embed([t.content for t in conv.turns])
    return conv._cache["D"]


def query_vectors(conv: Conversation, texts: Sequence[str]) -> None:
    """Embed ``texts`` in one batch into the conversation's query-vector memo."""
    memo = conv._cache.setdefault("Q", {})
    todo = sorted({t for t in texts if t not in memo})
    if todo:
        assert EMB is not None
        for t, v in zip(todo, EMB.embed(todo), strict=True):
            memo[t] = v


def query_vector(conv: Conversation, text: str) -> np.ndarray:
    memo = conv._cache.setdefault("Q", {})
    if text not in memo:
        query_vectors(conv, [text])
    return memo[text]


def bm25_index(conv: Conversation, analyzer: Analyzer, k1: float, b: float) -> BM25:
    key = f"bm25:{analyzer.stop}:{analyzer._stem is not None}:{k1}:{b}"
    if key not in conv._cache:
        conv._cache[key] = BM25([analyzer.terms(words(t.content)) for t in conv.turns], k1, b)
    return conv._cache[key]


# ---------------------------------------------------------------------------------------------
# Retrievers


class Retriever(Protocol):
    def __call__(self, conv: Conversation, question: str, k: int) -> Sequence[int | str]: ...


def _top(scores: np.ndarray, k: int, rows: np.ndarray | None = None) -> list[int]:
    k = min(k, scores.shape[0])
    part = np.argpartition(-scores, k - 1)[:k] if scores.shape[0] > k else np.arange(k)
    order = part[np.argsort(-scores[part], kind="stable")]
    return (rows[order] if rows is not None else order).tolist()


class BM25Retriever:
    """Baseline: plain BM25 (k1 1.2, b 0.75), lowercase \\w+ tokens; ``stem``/``stop`` opt in."""

    def __init__(self, stem: bool = False, stop: bool = False) -> None:
        self.analyzer = Analyzer(stem, stop)

    def scores(self, conv: Conversation, question: str) -> np.ndarray:
        index = bm25_index(conv, self.analyzer, 1.2, 0.75)
        return index.score(self.analyzer.terms(words(question)))

    def __call__(self, conv: Conversation, question: str, k: int) -> list[int]:
        return _top(self.scores(conv, question), k)


class DenseRetriever:
    """Baseline: cosine of MiniLM vectors of the question and of each memory's content."""

    def prepare(self, conv: Conversation, questions: Sequence[str]) -> None:
        doc_vectors(conv)
        query_vectors(conv, questions)

    def scores(self, conv: Conversation, question: str) -> np.ndarray:
        return doc_vectors(conv) @ query_vector(conv, question)

    def __call__(self, conv: Conversation, question: str, k: int) -> list[int]:
        return _top(self.scores(conv, question), k)


class RRFRetriever:
    """Baseline: naive reciprocal-rank fusion, sum of 1/(60 + rank) over plain BM25 and dense."""

    def __init__(self, k: int = 60) -> None:
        self.k = k
        self.bm25 = BM25Retriever()
        self.dense = DenseRetriever()

    def prepare(self, conv: Conversation, questions: Sequence[str]) -> None:
        self.dense.prepare(conv, questions)

    def __call__(self, conv: Conversation, question: str, k: int) -> list[int]:
        total = 0.0
        for s in (self.bm25.scores(conv, question), self.dense.scores(conv, question)):
            ranks = np.empty(s.shape[0])
            ranks[np.argsort(-s, kind="stable")] = np.arange(1, s.shape[0] + 1)
            total = total + 1.0 / (self.k + ranks)
        return _top(np.asarray(total), k)


_LABEL = re.compile(r"^([^:\n]{1,40}):\s")  # "Speaker: ..." -> the memory's author label


def author_labels(conv: Conversation) -> tuple[np.ndarray, dict[str, frozenset[int]]]:
    """Per row, the id of its author label (-1 if none); per label word, the label ids using it.

    Generic: labels are parsed from the memories' content (a chat transcript's "Name: text"),
    never from a list of names. Label words that are stopwords or one letter are ignored.
    """
    if "labels" not in conv._cache:
        ids: dict[str, int] = {}
        row_label = np.full(len(conv.turns), -1, np.int64)
        for i, t in enumerate(conv.turns):
            m = _LABEL.match(t.content)
            if m:
                row_label[i] = ids.setdefault(m.group(1).strip(), len(ids))
        by_word: dict[str, set[int]] = {}
        for label, lid in ids.items():
            for w in words(label):
                if len(w) > 1 and w not in STOPWORDS:
                    by_word.setdefault(w, set()).add(lid)
        conv._cache["labels"] = (row_label, {w: frozenset(s) for w, s in by_word.items()})
    return conv._cache["labels"]


def strip_words(text: str, drop: Iterable[str]) -> str:
    """``text`` without the words in ``drop`` (and their possessive 's), whitespace collapsed."""
    drop = sorted(set(drop), key=len, reverse=True)
    if not drop:
        return text
    pat = re.compile(r"\b(?:" + "|".join(map(re.escape, drop)) + r")(?:['\u2019]s)?\b", re.I)
    out = re.sub(r"\s+", " ", pat.sub(" ", text)).strip()
    out = re.sub(r"\s+([?.!,;:])", r"\1", out)
    return out if _WORD.search(out) else text


@dataclass(frozen=True)
class RecipeParams:
    keyword_weight: float = 0.5  # alpha: bm25 share of the fused score (dense gets 1 - alpha)
    context: float = 0.5  # beta: share of the best neighbour's score a memory inherits
    context_window: int = 2  # W: neighbours up to W rows away in the timeline
    context_decay: float = 1.0  # K(d) = decay ** (d - 1) for a neighbour d rows away
    author_boost: float = 0.5  # gamma: added when the query names the memory's author
    locality: float = 0.0  # delta (optional, off): adds the best s0 within S rows, self included
    locality_window: int = 5  # S
    candidates: int = 100  # C: rows taken from each of the bm25 and the dense list
    k1: float = 1.2
    b: float = 0.75
    # switches for ablations
    names_out_of_dense: bool = True  # embed the query without the author names it contains
    names_out_of_bm25: bool = False  # also drop them from the bm25 terms (makes no difference)
    fusion: str = "max"  # "max": scores / best score (cosine clipped at 0); "rrf": 1/(60+rank)
    stem: bool = True
    stop: bool = True


class Recipe:
    """The hybrid ranking recipe (bench/ranking_notes.md).

    1. Author names: the query words that are words of an author label of the namespace.
    2. ``bm``: BM25 (stemmed, stopworded) of the query, names included.
       ``cos``: cosine with the embedding of the query text with the names taken out.
    3. Candidates: top C of each list. Fused base score of a row:
       ``s0 = alpha * bm / max(bm) + (1 - alpha) * max(cos, 0) / max(cos)``.
    4. Context: rows within W of a candidate are scored too, and each scored row inherits the best
       of its timeline neighbours: ``s = s0 + beta * max_{1<=|d|<=W} K(|d|) * s0[row + d]``
       (K = 1 by default: the best of the 2 memories before and the 2 after).
    5. ``s += gamma`` when the row's author is named in the query. Top k by ``s``.

    Per query: one BM25 postings scan, one dense top-C (here exact; HNSW in the engine), then
    numpy work on at most 2C(4W+1) rows.
    """

    def __init__(self, params: RecipeParams | None = None, **overrides: Any) -> None:
        self.p = dataclasses.replace(params or RecipeParams(), **overrides)
        self.analyzer = Analyzer(self.p.stem, self.p.stop)

    def _split(self, conv: Conversation, question: str) -> tuple[list[str], set[int], str]:
        _, label_words = author_labels(conv)
        ws = words(question)
        named: set[int] = set()
        names = [w for w in ws if w in label_words]
        for w in names:
            named |= label_words[w]
        terms = [w for w in ws if w not in label_words] if self.p.names_out_of_bm25 else ws
        return terms, named, strip_words(question, names) if self.p.names_out_of_dense else question

    def prepare(self, conv: Conversation, questions: Sequence[str]) -> None:
        doc_vectors(conv)
        query_vectors(conv, [self._split(conv, q)[2] for q in questions])

    def signals(self, conv: Conversation, question: str) -> tuple[np.ndarray, np.ndarray, set[int]]:
        """BM25 and cosine of every row (the engine computes them for candidates only), and the
        ids of the author labels named in the query."""
        qwords, named, dense_text = self._split(conv, question)
        bm = bm25_index(conv, self.analyzer, self.p.k1, self.p.b).score(self.analyzer.terms(qwords))
        cos = doc_vectors(conv) @ query_vector(conv, dense_text)  # engine: HNSW top C
        return bm, cos, named

    def rank(
        self, conv: Conversation, bm: np.ndarray, cos: np.ndarray, named: set[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The scored rows (candidates and their neighbours) and their final scores."""
        p = self.p
        n = cos.shape[0]
        c = min(p.candidates, n)
        hits = np.flatnonzero(bm)
        if hits.shape[0] > c:
            hits = hits[np.argpartition(-bm[hits], c - 1)[:c]]
        cand = np.union1d(np.argpartition(-cos, c - 1)[:c] if n > c else np.arange(n), hits)
        w = p.context_window if p.context > 0 else 0
        sw = p.locality_window if p.locality > 0 else 0
        offsets = np.arange(-max(w, sw), max(w, sw) + 1)
        rows = np.unique(np.clip(cand[:, None] + offsets, 0, n - 1))  # rows that get a score
        near = np.unique(np.clip(rows[:, None] + offsets, 0, n - 1))  # rows whose s0 is needed
        s0 = self.base_score(bm, cos, cand, near)
        own = s0[np.searchsorted(near, rows)]
        score = own.copy()

        def neighbour(d: int) -> np.ndarray:
            """s0 of the rows d away in the timeline (0 past its ends)."""
            nb = rows + d
            ok = (nb >= 0) & (nb < n)
            return np.where(ok, s0[np.searchsorted(near, np.clip(nb, 0, n - 1))], 0.0)

        if w:
            best = np.zeros(rows.shape[0])
            for d in range(1, w + 1):
                kd = p.context_decay ** (d - 1)
                best = np.maximum(best, kd * np.maximum(neighbour(-d), neighbour(d)))
            score += p.context * best
        if sw:
            loc = own.copy()
            for d in range(1, sw + 1):
                loc = np.maximum(loc, np.maximum(neighbour(-d), neighbour(d)))
            score += p.locality * loc
        if named and p.author_boost:
            row_label, _ = author_labels(conv)
            score += p.author_boost * np.isin(row_label[rows], list(named))
        return rows, score

    def base_score(
        self, bm: np.ndarray, cos: np.ndarray, cand: np.ndarray, near: np.ndarray
    ) -> np.ndarray:
        """Fused score s0 of the rows ``near``."""
        if self.p.fusion == "rrf":
            return self._rrf(bm, cos, near)
        bmax = float(bm.max())
        cmax = float(cos[cand].max())
        bn = bm[near] / bmax if bmax > 0 else np.zeros(near.shape[0])
        cn = np.maximum(cos[near], 0.0) / cmax if cmax > 0 else np.zeros(near.shape[0])
        a = self.p.keyword_weight
        return a * bn + (1.0 - a) * cn

    def __call__(self, conv: Conversation, question: str, k: int) -> list[int]:
        rows, score = self.rank(conv, *self.signals(conv, question))
        return _top(score, k, rows)

    @staticmethod
    def _rrf(bm: np.ndarray, cos: np.ndarray, near: np.ndarray) -> np.ndarray:
        out = np.zeros(near.shape[0])
        for s in (bm, cos):
            rank = np.empty(s.shape[0])
            rank[np.argsort(-s, kind="stable")] = np.arange(1, s.shape[0] + 1)
            out += 1.0 / (60.0 + rank[near])
        return out * 30.0  # ~[0, 1] like the "max" fusion, so beta and gamma keep their meaning


def retrievers() -> dict[str, Retriever]:
    return {
        "BM25 (plain)": BM25Retriever(),
        "dense MiniLM (plain)": DenseRetriever(),
        "RRF k=60 (BM25 + dense)": RRFRetriever(),
        "BM25 stem+stop": BM25Retriever(stem=True, stop=True),
        "recipe": Recipe(),
    }


def ablations() -> dict[str, Retriever]:
    return {
        "recipe": Recipe(),
        "- author boost (gamma=0)": Recipe(author_boost=0.0),
        "- names kept in the dense query": Recipe(names_out_of_dense=False),
        "names also dropped from bm25 terms": Recipe(names_out_of_bm25=True),
        "- context (beta=0)": Recipe(context=0.0),
        "context W=1": Recipe(context_window=1),
        "- stemming and stopwords": Recipe(stem=False, stop=False),
        "RRF instead of max-normalized fusion": Recipe(fusion="rrf"),
        "bm25 only (alpha=1)": Recipe(keyword_weight=1.0),
        "dense only (alpha=0)": Recipe(keyword_weight=0.0),
        "fusion only (no names, context, boost)": Recipe(
            names_out_of_dense=False, context=0.0, author_boost=0.0
        ),
        "+ locality (delta=0.5, S=5)": Recipe(locality=0.5),
    }


# ---------------------------------------------------------------------------------------------
# Metrics


@dataclass
class Result:
    """Per-question metric values of one retriever over a set of conversations."""

    conv: list[str] = field(default_factory=list)
    category: list[int] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0  # retrieval time, query embeddings excluded (prepared before)
    conv_tokens: dict[str, int] = field(default_factory=dict)

    def add(self, conv: str, category: int, vals: dict[str, float]) -> None:
        self.conv.append(conv)
        self.category.append(category)
        for key, v in vals.items():
            self.values.setdefault(key, []).append(v)

    def mean(self, key: str, mask: np.ndarray | None = None) -> float:
        v = np.asarray(self.values[key])
        return float(v[mask].mean()) if mask is not None else float(v.mean())


def question_metrics(
    ranked: Sequence[int],
    evidence: Sequence[int],
    tokens: np.ndarray,
    sessions: np.ndarray | None = None,
) -> dict:
    ev = set(evidence)
    out = {f"r@{k}": len(ev.intersection(ranked[:k])) / len(ev) for k in KS}
    if sessions is not None:  # session-level recall@10: the granularity other systems publish
        ev_s = {int(sessions[r]) for r in ev}
        out["sr@10"] = len(ev_s.intersection(int(sessions[r]) for r in ranked[:10])) / len(ev_s)
    out["hit@10"] = float(ev.issubset(ranked[:10]))
    first = next((i for i, r in enumerate(ranked[:MRR_DEPTH]) if r in ev), None)
    out["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    out["tok@10"] = float(tokens[list(ranked[:10])].sum())
    return out


def _rows(conv: Conversation, ranked: Sequence[int | str]) -> list[int]:
    if ranked and isinstance(ranked[0], str):
        row_of = conv._cache.setdefault("row_of", {d: i for i, d in enumerate(conv.ids)})
        return [row_of[d] for d in ranked if d in row_of]
    return [int(r) for r in ranked]


def evaluate(retrieve: Retriever, convs: Sequence[Conversation], stride: int = 1) -> Result:
    res = Result()
    for conv in convs:
        qs = conv.questions[::stride]
        tokens = np.array([len(t.content.split()) for t in conv.turns])
        sessions = np.array([t.session for t in conv.turns])
        res.conv_tokens[conv.name] = int(tokens.sum())
        prepare = getattr(retrieve, "prepare", None)
        if prepare is not None:
            prepare(conv, [q.text for q in qs])
        for q in qs:
            t0 = time.perf_counter()
            ranked = _rows(conv, retrieve(conv, q.text, MRR_DEPTH))
            res.seconds += time.perf_counter() - t0
            res.add(conv.name, q.category, question_metrics(ranked, q.evidence, tokens, sessions))
    return res


# ---------------------------------------------------------------------------------------------
# Reports


def overall_table(results: dict[str, Result]) -> list[str]:
    lines = [
        "| retriever | R@5 | R@10 | R@20 | session R@10 | all-ev hit@10 | MRR | top-10 tokens |"
        " share of conv | ms/query |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        conv_tok = np.array([r.conv_tokens[c] for c in r.conv], float)
        share = float(np.mean(np.asarray(r.values["tok@10"]) / conv_tok))
        n = len(r.conv)
        lines.append(
            f"| {name} | {r.mean('r@5'):.3f} | **{r.mean('r@10'):.3f}** | {r.mean('r@20'):.3f} "
            f"| {r.mean('sr@10'):.3f} | {r.mean('hit@10'):.3f} | {r.mean('mrr'):.3f} | {r.mean('tok@10'):.0f} "
            f"| {share:.1%} | {1e3 * r.seconds / max(n, 1):.2f} |"
        )
    return lines


def category_table(results: dict[str, Result]) -> list[str]:
    lines = [
        "| retriever | category | n | R@5 | R@10 | R@20 | all-ev hit@10 | MRR | top-10 tokens |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        cats = np.asarray(r.category)
        for cat, label in CATEGORIES.items():
            m = cats == cat
            if not m.any():
                continue
            lines.append(
                f"| {name} | {cat} {label} | {int(m.sum())} | {r.mean('r@5', m):.3f} "
                f"| {r.mean('r@10', m):.3f} | {r.mean('r@20', m):.3f} "
                f"| {r.mean('hit@10', m):.3f} | {r.mean('mrr', m):.3f} "
                f"| {r.mean('tok@10', m):.0f} |"
            )
    return lines


def conversation_table(results: dict[str, Result]) -> list[str]:
    names = list(dict.fromkeys(next(iter(results.values())).conv))
    lines = [
        "| retriever (R@10) | " + " | ".join(names) + " | min |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for name, r in results.items():
        convs = np.asarray(r.conv)
        vals = [r.mean("r@10", convs == c) for c in names]
        lines.append(
            f"| {name} | " + " | ".join(f"{v:.3f}" for v in vals) + f" | {min(vals):.3f} |"
        )
    return lines


def report(results: dict[str, Result], title: str) -> list[str]:
    return [
        f"### {title}",
        "",
        *overall_table(results),
        "",
        *category_table(results),
        "",
        *conversation_table(results),
        "",
    ]


# ---------------------------------------------------------------------------------------------
# Leave-one-conversation-out check of the recipe's weights

LOCO_GRID = {
    "keyword_weight": (0.3, 0.4, 0.5, 0.6, 0.7),
    "context": (0.0, 0.3, 0.5, 0.7, 1.0),
    "author_boost": (0.0, 0.3, 0.5, 0.7),
}


def loco(convs: Sequence[Conversation], stride: int) -> list[str]:
    """Pick the grid point best on all conversations but one, score it on the one left out."""
    keys = list(LOCO_GRID)
    per: dict[tuple, dict[str, np.ndarray]] = {}
    for vals in itertools.product(*LOCO_GRID.values()):
        r = evaluate(Recipe(**dict(zip(keys, vals, strict=True))), convs, stride)
        c, v = np.asarray(r.conv), np.asarray(r.values["r@10"])
        per[vals] = {name: v[c == name] for name in dict.fromkeys(r.conv)}
    names = [cv.name for cv in convs]
    default = tuple(getattr(RecipeParams(), k) for k in keys)
    lines = [
        "| held out | chosen on the others (" + ", ".join(keys) + ") | held-out R@10 |"
        " default R@10 |",
        "|---|---|---|---|",
    ]
    held, fixed = [], []
    for name in names:
        others = [m for m in names if m != name]
        best = max(per, key=lambda p: np.concatenate([per[p][m] for m in others]).mean())
        held.append(per[best][name])
        fixed.append(per[default][name])
        lines.append(
            f"| {name} | {best} | {per[best][name].mean():.3f} | {per[default][name].mean():.3f} |"
        )
    best_all = max(per, key=lambda p: np.concatenate(list(per[p].values())).mean())
    lines.append(
        f"| **all (micro)** | best on all five: {best_all} "
        f"({np.concatenate(list(per[best_all].values())).mean():.3f}) "
        f"| **{np.concatenate(held).mean():.3f}** | {np.concatenate(fixed).mean():.3f} |"
    )
    return lines


# ---------------------------------------------------------------------------------------------
# Latency on a synthetic large namespace


def timing(convs: Sequence[Conversation], n: int, queries: int = 200) -> list[str]:
    """Tile the dev conversations' memories to ``n`` rows and time the recipe per query.

    Dense is an exact matrix-vector product here (the engine uses HNSW above 4,096 rows, which
    is cheaper); query embedding is timed apart, one question at a time.
    """
    turns = [t for c in convs for t in c.turns]
    reps = math.ceil(n / len(turns))
    big = Conversation(f"synthetic-{n}", (turns * reps)[:n], [], 0)
    vecs = np.concatenate([doc_vectors(c) for c in convs])
    big._cache["D"] = np.ascontiguousarray(np.tile(vecs, (reps, 1))[:n])
    qs = [q.text for c in convs for q in c.questions][:queries]
    recipe = Recipe()
    t0 = time.perf_counter()
    bm25_index(big, recipe.analyzer, recipe.p.k1, recipe.p.b)
    author_labels(big)
    build = time.perf_counter() - t0
    recipe.prepare(big, qs)
    lat = []
    for q in qs:
        t0 = time.perf_counter()
        recipe(big, q, 10)
        lat.append(time.perf_counter() - t0)
    assert EMB is not None
    model = EMB.model
    emb = []
    for q in qs[:50]:
        t0 = time.perf_counter()
        model.embed([q])
        emb.append(time.perf_counter() - t0)
    ms = np.asarray(lat) * 1e3
    return [
        "| namespace rows | index build (s) | recipe p50 ms | p95 ms | query embed p50 ms |",
        "|---|---|---|---|---|",
        f"| {n:,} | {build:.1f} | {np.percentile(ms, 50):.2f} | {np.percentile(ms, 95):.2f} "
        f"| {np.percentile(np.asarray(emb) * 1e3, 50):.2f} |",
    ]


# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of <conv>.json")
    ap.add_argument("--convs", nargs="*", help="conversation names (default: all)")
    ap.add_argument("--quick", action="store_true", help="every 4th question only")
    ap.add_argument("--ablations", action="store_true", help="recipe ablations instead")
    ap.add_argument("--loco", action="store_true", help="also run the leave-one-out check")
    ap.add_argument("--timing", type=int, metavar="N", help="also time the recipe at N rows")
    ap.add_argument("--model-dir", help="embedder model dir (default: synapsedb's)")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="embedding cache")
    ap.add_argument("--no-cache", action="store_true", help="do not cache embeddings")
    args = ap.parse_args(argv)

    global EMB
    EMB = Embeddings(args.model_dir, None if args.no_cache else args.cache_dir)
    t_start = time.perf_counter()
    convs = load_dataset(args.data, args.convs)
    stride = 4 if args.quick else 1
    for c in convs:
        doc_vectors(c)
    n_q = sum(len(c.questions[::stride]) for c in convs)
    skipped = sum(c.skipped for c in convs)
    print(
        f"# LoCoMo evidence retrieval: {len(convs)} conversations "
        f"({', '.join(c.name for c in convs)}), {sum(len(c.turns) for c in convs)} memories, "
        f"{n_q} questions of categories 1-4{' (every 4th)' if stride > 1 else ''}; "
        f"{skipped} skipped (no evidence id maps to a turn)\n"
    )
    print(
        "Tokens are whitespace tokens of the memory contents; ms/query is retrieval only "
        "(query embeddings batched beforehand); MRR over the top 100.\n"
    )
    todo = ablations() if args.ablations else retrievers()
    results = {name: evaluate(r, convs, stride) for name, r in todo.items()}
    print("\n".join(report(results, "Ablations" if args.ablations else "Retrievers")))
    if args.loco:
        print("### Leave-one-conversation-out (recipe weights, R@10)\n")
        print("\n".join(loco(convs, stride)) + "\n")
    if args.timing:
        print("### Recipe latency on a synthetic namespace\n")
        print("\n".join(timing(convs, args.timing)) + "\n")
    print(
        f"_run time {time.perf_counter() - t_start:.1f} s, of which embedding "
        f"{EMB.seconds:.1f} s (cache: {'off' if args.no_cache else args.cache_dir})_"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
