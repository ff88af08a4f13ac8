"""Pseudo-relevance feedback (PRF) for the default hybrid query, measured by
leave-one-conversation-out over LoCoMo dev and a BEAM 100K subset (issue 13).

Everything runs over the public API; the engine is not changed. Per question:

1. pass 1 is the shipped default, ``ns.query(text, k=10)``: its top 10 is the baseline, and its
   top m hits are the feedback set. The query vector the engine used (the question minus the
   speaker names it strips, embedded by MiniLM) is read from the database's embedder, a caching
   wrapper of MiniLM that remembers what it embedded; the hits' vectors are the stored ones
   (the same wrapper embedded them at write time).
2. pass 2 is ``ns.query(text2, embedding=q2, k=10)`` (hybrid: BM25 of ``text2``, the context
   and speaker terms as usual, the vector side from ``q2``), per variant:

   - ``rocchio``: ``q2 = normalize(q + beta * mean(top-m hit vectors))``, ``text2 = text``;
   - ``rm3``: ``q2 = q``; ``text2`` = the question repeated ``r`` times plus the ``t`` best
     expansion terms of the top-m hits, each once (BM25 counts a repeated query term that many
     times, so an expansion term weighs 1/r of a question term). A term's weight is
     ``sum_d w_d * tf(term, d) / len(d) * idf(term)`` over the feedback documents, ``w_d`` the
     pass-1 score share; terms of the question, speaker-label words and terms in one memory only
     are left out;
   - ``both``: the two together.

   No second model run: ``q2`` comes from stored vectors, terms from the stored texts.
3. Leave-one-conversation-out: for each conversation, the grid point of a family with the best
   objective on all the others (the mean of the two datasets' mean R@10, as bench_fusion.py) is
   used on it; the held-out questions are never used to choose. Reported per dataset and per
   LoCoMo category / BEAM ability: default R@10, LOO PRF R@10, and the paired bootstrap 95% CI
   of their difference (2,000 resamples of the questions).

Message vectors are cached under ``--cache`` (default /tmp/synapsedb-prf-cache), one file per
conversation, so later runs skip the model for the memories.

Usage: nice -n 10 python bench/bench_prf.py [--beam-chats 1,2,3,4,5,6] [--quick] [--embed-only]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import math
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beam
import locomo
from bench_beam import bootstrap
from bench_beam import ingest as ingest_beam
from bench_quality import turn_items
from common import git_rev, machine

import synapsedb
from synapsedb.index.keyword import STOPWORDS, analyze

K = 10
CACHE = Path(tempfile.gettempdir()) / "synapsedb-prf-cache"
_LABEL = re.compile(r"^([^:\n]{1,40}):\s")  # the engine's speaker label (index/catalog.py)
_WORD = re.compile(r"\w+")


# -- the embedder ---------------------------------------------------------------------------------


class CachedEmbedder:
    """MiniLM behind an in-memory text -> vector map (filled from disk by :meth:`warm`), which
    remembers the last text it embedded for a single-text call (a query)."""

    def __init__(self, model: Any, cache_dir: Path | None) -> None:
        self.model = model
        self.cache_dir = cache_dir
        self.name: str = model.name
        self.dim: int = model.dim
        self.compatible_names: frozenset[str] = getattr(model, "compatible_names", frozenset())
        self.known: dict[str, np.ndarray] = {}
        self.last: np.ndarray | None = None
        self.embed_s = 0.0  # model time spent (cache misses)

    def warm(self, label: str, texts: Sequence[str]) -> None:
        """Embed ``texts`` (or load them from the disk cache) into the map."""
        todo = [t for t in dict.fromkeys(texts) if t not in self.known]
        if not todo:
            return
        path = None
        if self.cache_dir is not None:
            digest = hashlib.sha1("\x1f".join([self.name, *todo]).encode()).hexdigest()[:16]
            path = self.cache_dir / f"{label}-{digest}.npy"
            if path.exists():
                vecs = np.load(path)
                if vecs.shape == (len(todo), self.dim):
                    self.known.update(zip(todo, vecs, strict=True))
                    return
        t0 = time.perf_counter()
        vecs = np.concatenate(
            [
                np.asarray(self.model.embed(todo[i : i + 64]), np.float32)
                for i in range(0, len(todo), 64)
            ]
        )
        self.embed_s += time.perf_counter() - t0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, vecs)
        self.known.update(zip(todo, vecs, strict=True))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            t0 = time.perf_counter()
            self.known.update(zip(missing, self.model.embed(missing), strict=True))
            self.embed_s += time.perf_counter() - t0
        out = np.stack([self.known[t] for t in texts]).astype(np.float32).reshape(-1, self.dim)
        if len(texts) == 1:
            self.last = out[0]
        return out


# -- feedback -------------------------------------------------------------------------------------


def rocchio(q: np.ndarray, feedback: np.ndarray, beta: float) -> np.ndarray:
    """``normalize(q + beta * mean(feedback rows))`` (rows are unit vectors); ``q`` if no rows."""
    if feedback.shape[0] == 0 or beta == 0:
        return q
    v = q.astype(np.float64) + beta * feedback.astype(np.float64).mean(axis=0)
    norm = float(np.linalg.norm(v))
    return (v / norm).astype(np.float32) if norm > 0 else q


@dataclass
class Corpus:
    """What expansion reads from one namespace's memories: per-row term counts and lengths,
    document frequencies, a surface word per term, and the speaker-label words."""

    counts: list[Counter[str]]
    lengths: np.ndarray
    df: Counter[str]
    surface: dict[str, str]
    label_words: frozenset[str]

    @classmethod
    def build(cls, texts: Sequence[str]) -> Corpus:
        counts: list[Counter[str]] = []
        df: Counter[str] = Counter()
        surface: dict[str, str] = {}
        labels: set[str] = set()
        for text in texts:
            c = Counter(analyze(text))
            counts.append(c)
            df.update(c.keys())
            m = _LABEL.match(text)
            if m is not None:
                labels.update(
                    w
                    for w in _WORD.findall(m.group(1).lower())
                    if len(w) > 1 and w not in STOPWORDS
                )
        for text in texts:  # a word of the texts that analyzes to exactly it, per term
            for word in sorted(set(_WORD.findall(text.lower()))):
                if word in STOPWORDS:
                    continue
                terms = analyze(word)
                if len(terms) == 1 and terms[0] not in surface:
                    surface[terms[0]] = word
        lengths = np.array([max(1, sum(c.values())) for c in counts], np.float64)
        return cls(counts, lengths, df, surface, frozenset(labels))

    def expansion(
        self, rows: Sequence[int], weights: Sequence[float], question: str, n_terms: int
    ) -> list[str]:
        """The ``n_terms`` best expansion words from the feedback ``rows`` (RM3-style, with idf),
        leaving out the question's terms, speaker-label words and terms of one memory only."""
        if not rows or n_terms <= 0:
            return []
        skip = set(analyze(question)) | {t for w in self.label_words for t in analyze(w)}
        total = float(sum(weights)) or 1.0
        n = len(self.counts)
        score: dict[str, float] = defaultdict(float)
        for r, w in zip(rows, weights, strict=True):
            share = w / total
            for term, tf in self.counts[r].items():
                score[term] += share * tf / self.lengths[r]
        ranked = []
        for term, s in score.items():
            df = self.df[term]
            if term in skip or df < 2 or term not in self.surface:
                continue
            ranked.append((s * math.log(1.0 + (n - df + 0.5) / (df + 0.5)), term))
        ranked.sort(key=lambda x: (-x[0], x[1]))
        return [self.surface[t] for _, t in ranked[:n_terms]]


# -- the grid -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    family: str  # "rocchio", "rm3", "both"
    m: int  # feedback hits
    beta: float = 0.0  # Rocchio weight
    terms: int = 0  # expansion terms
    repeat: int = 1  # question repeats (an expansion term weighs 1/repeat)

    def label(self) -> str:
        parts = [f"m {self.m}"]
        if self.beta:
            parts.append(f"beta {self.beta}")
        if self.terms:
            parts += [f"terms {self.terms}", f"repeat {self.repeat}"]
        return f"{self.family} ({', '.join(parts)})"


def grid(quick: bool = False) -> list[Point]:
    ms = (3, 5) if quick else (3, 5, 10)
    pts = [Point("rocchio", m, beta=b) for m, b in itertools.product(ms, (0.25, 0.5, 1.0))]
    pts += [
        Point("rm3", m, terms=t, repeat=r)
        for m, t, r in itertools.product(ms, (5, 10, 20), (1, 2, 3))
    ]
    pts += [
        Point("both", m, beta=b, terms=t, repeat=r)
        for m, b, (t, r) in itertools.product((3, 5), (0.25, 0.5), ((10, 2), (20, 3)))
    ]
    return pts


def objective(per_conv: list[np.ndarray], datasets: list[str], keep: list[int]) -> float:
    by: dict[str, list[np.ndarray]] = defaultdict(list)
    for i in keep:
        by[datasets[i]].append(per_conv[i])
    return float(np.mean([np.concatenate(v).mean() for v in by.values()]))


def loo(scores: list[list[np.ndarray]], datasets: list[str]) -> tuple[list[np.ndarray], list[int]]:
    """Per held-out conversation: the point (index into ``scores``) best on all the others, and
    that point's scores on it. Ties go to the earlier point."""
    n = len(datasets)
    held_scores, picks = [], []
    for held in range(n):
        keep = [i for i in range(n) if i != held]
        best = max(range(len(scores)), key=lambda p: (objective(scores[p], datasets, keep), -p))
        picks.append(best)
        held_scores.append(scores[best][held])
    return held_scores, picks


# -- running --------------------------------------------------------------------------------------


@dataclass
class Conv:
    dataset: str
    name: str
    ns: Any
    ids: dict[str, int]  # memory id -> row (message id for BEAM)
    rows: dict[str, int]  # memory id -> corpus position
    corpus: Corpus
    vectors: np.ndarray  # corpus position -> stored vector
    questions: list[tuple[str, frozenset[int], str]]  # text, evidence, category


def recall(hits: Any, ids: dict[str, int], ev: frozenset[int], cut: bool = False) -> float:
    """Share of the evidence in the hits, a collapsed duplicate at its representative's rank
    (``cut``: only the first K rows count, as bench_beam.py scores the single-list modes)."""
    got: list[int] = []
    for h in hits:
        got.append(ids[h.id])
        got.extend(ids[d] for d in h.duplicates)
    return len(ev & set(got[:K] if cut else got)) / len(ev)


def run_conv(
    c: Conv, emb: CachedEmbedder, points: list[Point], lat: dict[str, list[float]], check: bool
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """R@10 per question: the default (pass 1), each grid point (pass 2), and the default's
    own vector-only and keyword-only modes."""
    base = np.zeros(len(c.questions))
    out = np.zeros((len(points), len(c.questions)))
    modes = {m: np.zeros(len(c.questions)) for m in ("vector", "keyword")}
    for qi, (text, ev, _cat) in enumerate(c.questions):
        t0 = time.perf_counter()
        hits = list(c.ns.query(text, k=K))
        lat["pass 1 (default query)"].append(time.perf_counter() - t0)
        base[qi] = recall(hits, c.ids, ev)
        q = emb.last
        assert q is not None
        t_an = time.perf_counter()  # what RM3 costs without stored term counts (the engine's case)
        for h in hits[:5]:
            Counter(analyze(h.content))
        lat["analyze the top-5 hits' texts"].append(time.perf_counter() - t_an)
        if check:  # pass 2 with no feedback reproduces pass 1
            again = c.ns.query(text, embedding=q.tolist(), k=K)
            assert [h.id for h in again] == [h.id for h in hits], text
        for pi, p in enumerate(points):
            t1 = time.perf_counter()
            fb = hits[: p.m]
            pos = [c.rows[h.id] for h in fb]
            q2 = rocchio(q, c.vectors[pos], p.beta) if p.beta else q
            text2 = text
            if p.terms:
                words = c.corpus.expansion(pos, [max(h.score, 0.0) for h in fb], text, p.terms)
                text2 = " ".join([text] * p.repeat + words)
            t2 = time.perf_counter()
            res = c.ns.query(text2, embedding=q2.tolist(), k=K)
            t3 = time.perf_counter()
            lat[f"{p.family} feedback"].append(t2 - t1)
            lat[f"{p.family} pass 2"].append(t3 - t2)
            out[pi, qi] = recall(res, c.ids, ev)
        for m in modes:  # after the feedback: vector mode embeds the unstripped text
            modes[m][qi] = recall(c.ns.query(text, k=K, mode=m), c.ids, ev, cut=True)
    return base, out, modes


def run_engine(db: synapsedb.Database, convs: list[Conv]) -> list[str]:
    """The engine's own feedback (Fusion.feedback_*, query/feedback.py) against the same
    default with feedback off and against its single-list modes, per category."""
    from synapsedb.query.executor import Fusion

    on, off = Fusion(), Fusion(feedback_terms=0)
    base: list[np.ndarray] = []
    held: list[np.ndarray] = []
    modes: dict[str, list[np.ndarray]] = defaultdict(list)
    lat: dict[str, list[float]] = defaultdict(list)
    for c in convs:
        b, h = np.zeros(len(c.questions)), np.zeros(len(c.questions))
        per_mode = {m: np.zeros(len(c.questions)) for m in ("vector", "keyword")}
        for qi, (text, ev, _cat) in enumerate(c.questions):
            c.ns.query(text, k=K)  # the query embedding, cached for both timed runs
            for fusion, out, label in ((off, b, "feedback off"), (on, h, "feedback on")):
                db.fusion = fusion
                t0 = time.perf_counter()
                hits = list(c.ns.query(text, k=K))
                lat[label].append(time.perf_counter() - t0)
                out[qi] = recall(hits, c.ids, ev)
            for m in per_mode:
                per_mode[m][qi] = recall(c.ns.query(text, k=K, mode=m), c.ids, ev, cut=True)
        base.append(b)
        held.append(h)
        for m, v in per_mode.items():
            modes[m].append(v)
        print(f"{c.dataset} {c.name}: feedback off {b.mean():.3f}, on {h.mean():.3f}", flush=True)
    db.fusion = on
    lines = family_tables(
        convs, base, held, "The engine's feedback (on) against the same default with feedback off"
    )
    lines = [
        ln.replace("R@10 default", "R@10 off")
        .replace("R@10 PRF (LOO)", "R@10 on")
        .replace("PRF - default", "on - off")
        for ln in lines
    ]
    lines += ["", *mode_table(convs, base, held, modes)]
    lines = [
        ln.replace("PRF (any, LOO)", "The default with feedback")
        .replace("| default | PRF (LOO) |", "| feedback off | feedback on (default) |")
        .replace("PRF - better mode", "default - better mode")
        for ln in lines
    ]
    lines += ["| query (query embedding cached) | p50 ms | p99 ms |", "|---|---:|---:|"]
    for label, xs in lat.items():
        ms = np.asarray(xs) * 1000
        lines.append(
            f"| default, {label} | {np.percentile(ms, 50):.2f} | {np.percentile(ms, 99):.2f} |"
        )
    return lines


def load(
    db: synapsedb.Database,
    emb: CachedEmbedder,
    quick: bool,
    chats_wanted: list[str],
    embed_only: bool,
) -> list[Conv]:
    convs = locomo.load_dataset(locomo.DEFAULT_DATA)
    chats = beam.load_dataset(beam.DEFAULT_DATA, chats_wanted)
    if quick:
        convs = convs[:3]
    out: list[Conv] = []
    for conv in convs:
        texts = [t.content for t in conv.turns]
        emb.warm(f"locomo-{conv.name}", texts)
        if embed_only:
            continue
        written = db.namespace(f"locomo-{conv.name}").write_many(turn_items(conv))
        ids = {m.id: i for i, m in enumerate(written)}
        qs = [
            (q.text, frozenset(q.evidence), locomo.CATEGORIES[q.category]) for q in conv.questions
        ]
        out.append(
            Conv(
                "LoCoMo",
                conv.name,
                db.namespace(f"locomo-{conv.name}"),
                ids,
                ids,
                Corpus.build(texts),
                np.stack([emb.known[t] for t in texts]),
                qs,
            )
        )
    for chat in chats:
        texts = [f"{m.role}: {m.content}" for m in chat.messages]
        t0 = time.perf_counter()
        emb.warm(f"beam-{chat.name}", texts)
        print(
            f"BEAM chat {chat.name}: {len(texts)} message vectors in "
            f"{time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        if embed_only:
            continue
        ids, cut = ingest_beam(db, chat)
        assert cut == 0
        rows = {mid: i for i, mid in enumerate(ids)}  # ids is in message order
        qs = [(q.text, q.evidence, q.ability) for q in chat.questions]
        out.append(
            Conv(
                "BEAM",
                chat.name,
                db.namespace(f"beam-{chat.name}"),
                ids,
                rows,
                Corpus.build(texts),
                np.stack([emb.known[t] for t in texts]),
                qs,
            )
        )
    return out


# -- report ---------------------------------------------------------------------------------------


def ci_cell(diff: np.ndarray, rng: np.random.Generator) -> str:
    lo, hi = bootstrap(diff, rng)
    verdict = "within noise" if lo <= 0 <= hi else ("**better**" if lo > 0 else "**worse**")
    return f"{diff.mean():+.3f} ({lo:+.3f}, {hi:+.3f}) {verdict}"


def cluster_bootstrap(
    diffs: list[np.ndarray], rng: np.random.Generator, n: int = 2000
) -> tuple[float, float]:
    """95% interval of the pooled mean difference when whole conversations are resampled
    (questions of one conversation are not independent)."""
    sums = np.array([d.sum() for d in diffs])
    counts = np.array([d.size for d in diffs], np.float64)
    if counts.sum() == 0:
        return 0.0, 0.0
    pick = rng.integers(0, len(diffs), size=(n, len(diffs)))
    means = sums[pick].sum(axis=1) / np.maximum(counts[pick].sum(axis=1), 1.0)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def family_tables(
    convs: list[Conv], base: list[np.ndarray], held: list[np.ndarray], title: str
) -> list[str]:
    rng = np.random.default_rng(13)
    lines = [
        f"**{title}**",
        "",
        "| dataset | category / ability | questions | R@10 default | R@10 PRF (LOO) | "
        "PRF - default (95% CI) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for ds in ("LoCoMo", "BEAM"):
        idx = [i for i, c in enumerate(convs) if c.dataset == ds]
        if not idx:
            continue
        cats = np.array([q[2] for i in idx for q in convs[i].questions])
        b = np.concatenate([base[i] for i in idx])
        h = np.concatenate([held[i] for i in idx])
        for cat in sorted(set(cats.tolist())):
            sel = cats == cat
            lines.append(
                f"| {ds} | {cat} | {int(sel.sum())} | {b[sel].mean():.3f} | "
                f"{h[sel].mean():.3f} | {ci_cell(h[sel] - b[sel], rng)} |"
            )
        lines.append(
            f"| {ds} | **all** | {b.size} | **{b.mean():.3f}** | **{h.mean():.3f}** | "
            f"{ci_cell(h - b, rng)} |"
        )
    notes = []
    for ds in ("LoCoMo", "BEAM"):
        diffs = [held[i] - base[i] for i, c in enumerate(convs) if c.dataset == ds]
        if diffs:
            lo, hi = cluster_bootstrap(diffs, rng)
            means = np.array([d.mean() for d in diffs])
            notes.append(
                f"{ds} ({lo:+.3f}, {hi:+.3f}), conversations better / equal / worse "
                f"{int((means > 0).sum())} / {int((means == 0).sum())} / "
                f"{int((means < 0).sum())}"
            )
    return [
        *lines,
        "",
        "Resampling whole conversations, 95% CI of the difference: " + "; ".join(notes) + ".",
    ]


def mode_table(
    convs: list[Conv],
    base: list[np.ndarray],
    held: list[np.ndarray],
    modes: dict[str, list[np.ndarray]],
) -> list[str]:
    """The 'any' LOO PRF against the better of the default's vector-only and keyword-only
    modes (issue 13: the default should be at least as good as either)."""
    rng = np.random.default_rng(13)
    lines = [
        "**PRF (any, LOO) against the default's own single-list modes**",
        "",
        "| dataset | category / ability | questions | default | PRF (LOO) | vector | keyword "
        "| PRF - better mode (95% CI) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for ds in ("LoCoMo", "BEAM"):
        idx = [i for i, c in enumerate(convs) if c.dataset == ds]
        if not idx:
            continue
        cats = np.array([q[2] for i in idx for q in convs[i].questions])
        b, h = (np.concatenate([a[i] for i in idx]) for a in (base, held))
        v, kw = (np.concatenate([modes[m][i] for i in idx]) for m in ("vector", "keyword"))
        for cat in [*sorted(set(cats.tolist())), "**all**"]:
            sel = cats == cat if cat != "**all**" else np.ones(cats.size, bool)
            better = v[sel] if v[sel].mean() >= kw[sel].mean() else kw[sel]
            lines.append(
                f"| {ds} | {cat} | {int(sel.sum())} | {b[sel].mean():.3f} | "
                f"{h[sel].mean():.3f} | {v[sel].mean():.3f} | {kw[sel].mean():.3f} | "
                f"{ci_cell(h[sel] - better, rng)} |"
            )
    return [*lines, ""]


def report(
    convs: list[Conv],
    points: list[Point],
    base: list[np.ndarray],
    scores: list[list[np.ndarray]],
    lat: dict[str, list[float]],
    modes: dict[str, list[np.ndarray]],
) -> list[str]:
    datasets = [c.dataset for c in convs]
    every = list(range(len(convs)))
    lines: list[str] = []
    families = ["rocchio", "rm3", "both"]
    for fam in [*families, "any"]:
        sel = [i for i, p in enumerate(points) if fam in ("any", p.family)]
        if not sel:
            continue
        cands = [scores[i] for i in sel]
        names = [points[i].label() for i in sel]
        if fam == "any":  # feedback may also be left off
            cands, names = [base, *cands], ["default (no feedback)", *names]
        held, picks = loo(cands, datasets)
        title = (
            f"{fam}: each conversation scored with the {fam} point chosen on the others"
            if fam != "any"
            else "any: the best of the default and every grid point, chosen on the others"
        )
        lines += family_tables(convs, base, held, title)
        chosen = Counter(names[p] for p in picks)
        lines += ["", "Chosen: " + "; ".join(f"{k} x{v}" for k, v in chosen.most_common()), ""]
    lines += mode_table(convs, base, held, modes)
    lines += [
        "**Every grid point, in sample (all conversations)**",
        "",
        "| point | LoCoMo R@10 | BEAM R@10 | objective |",
        "|---|---:|---:|---:|",
    ]

    def per(ds: str, arrays: list[np.ndarray]) -> str:
        got = [a for a, d in zip(arrays, datasets, strict=True) if d == ds]
        return f"{np.concatenate(got).mean():.3f}" if got else "-"

    lines.append(
        f"| default (no feedback) | {per('LoCoMo', base)} | {per('BEAM', base)} | "
        f"{objective(base, datasets, every):.3f} |"
    )
    for p, s in zip(points, scores, strict=True):
        lines.append(
            f"| {p.label()} | {per('LoCoMo', s)} | {per('BEAM', s)} | "
            f"{objective(s, datasets, every):.3f} |"
        )
    lines += [
        "",
        "**Query latency (ms, this harness, nice 10, shared machine)**",
        "",
        "| stage | p50 | p99 |",
        "|---|---:|---:|",
    ]
    for name, xs in sorted(lat.items()):
        a = np.asarray(xs) * 1e3
        lines.append(f"| {name} | {np.percentile(a, 50):.2f} | {np.percentile(a, 99):.2f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--beam-chats", default="1,2,3,4,5,6", help="comma-separated BEAM chat names")
    ap.add_argument("--quick", action="store_true", help="3 LoCoMo conversations, a small grid")
    ap.add_argument("--embed-only", action="store_true", help="fill the vector cache and stop")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--check", action="store_true", help="assert pass 2 without feedback = pass 1")
    ap.add_argument(
        "--engine",
        action="store_true",
        help="measure the engine's own feedback (on vs off), not the grid",
    )
    args = ap.parse_args()
    from synapsedb.config import Settings
    from synapsedb.embed import OnnxMiniLM

    model = OnnxMiniLM(precision=Settings().minilm_precision)
    emb = CachedEmbedder(model, args.cache)
    chats = [c.strip() for c in args.beam_chats.split(",") if c.strip()]
    root = Path(tempfile.mkdtemp(prefix="synapsedb-prf-"))
    # query_cache_size 1: a query text the engine did not embed again is the last one embedded
    db = synapsedb.open(root / "d", durability="os", embedder=emb, llm=None, query_cache_size=1)
    points = grid(args.quick)
    t0 = time.perf_counter()
    lat: dict[str, list[float]] = defaultdict(list)
    try:
        convs = load(db, emb, args.quick, chats, args.embed_only)
        if args.embed_only:
            return
        load_s = time.perf_counter() - t0
        if args.engine:
            t1 = time.perf_counter()
            lines = run_engine(db, convs)
            print(
                f"Machine: {machine()}. Commit {git_rev()}. Command: `nice -n 10 python "
                f"bench/bench_prf.py --engine --beam-chats {args.beam_chats}`. "
                f"{len(convs)} conversations, load {load_s:.0f} s, queries "
                f"{time.perf_counter() - t1:.0f} s.\n"
            )
            print("\n".join(lines))
            return
        base: list[np.ndarray] = []
        per_point: list[list[np.ndarray]] = [[] for _ in points]
        modes: dict[str, list[np.ndarray]] = defaultdict(list)
        t1 = time.perf_counter()
        for c in convs:
            b, out, ms = run_conv(c, emb, points, lat, args.check)
            base.append(b)
            for m, v in ms.items():
                modes[m].append(v)
            for pi in range(len(points)):
                per_point[pi].append(out[pi])
            print(
                f"{c.dataset} {c.name}: default {b.mean():.3f}, best point "
                f"{out.mean(axis=1).max():.3f}",
                flush=True,
            )
        query_s = time.perf_counter() - t1
    finally:
        db.close()
        shutil.rmtree(root, ignore_errors=True)
    n_q = sum(len(c.questions) for c in convs)
    head = [
        f"Machine: {machine()}. Commit {git_rev()}. Command: `nice -n 10 python "
        f"bench/bench_prf.py --beam-chats {args.beam_chats}{' --quick' if args.quick else ''}"
        f"{' --check' if args.check else ''}`.",
        "",
        f"{sum(c.dataset == 'LoCoMo' for c in convs)} LoCoMo conversations and "
        f"{sum(c.dataset == 'BEAM' for c in convs)} BEAM chats ({', '.join(chats)}), {n_q:,} "
        f"questions; {len(points)} grid points. Load (vectors cached, ingest, corpus stats) "
        f"{load_s:.0f} s, queries {query_s:.0f} s.",
        "",
    ]
    print("\n".join(head + report(convs, points, base, per_point, lat, modes)))


if __name__ == "__main__":
    main()
