"""Scoring rankings for the recall study: per-question metrics, leave-one-conversation-out choice
of a parameter, and paired bootstrap intervals that resample whole conversations.

A *ranking* is ``f(ix, scored) -> rows in rank order`` (recall_lab.py); a *family* is a list of
(label, ranking) points, of which LOCO picks, for each conversation, the point best on all the
others (the mean of the two datasets' mean R@10; ties to the earlier point).
"""

from __future__ import annotations

import pickle
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import recall_lab as lab
from recall_data import CACHE, Conv, Vectors

Ranking = Callable[[lab.Index, lab.Scored], np.ndarray]
METRICS = ("r10", "all10", "sess10")


@dataclass
class Prepared:
    ix: lab.Index
    scored: list[lab.Scored]

    @property
    def conv(self) -> Conv:
        return self.ix.conv


def prepare(convs: Sequence[Conv], vec: Vectors, cache: Path = CACHE) -> list[Prepared]:
    """Index and score every conversation (pickled under ``cache``, keyed by its texts' vector
    file, so a changed conversation or model is scored again)."""
    out = []
    for c in convs:
        stamp = vec.path(f"{c.key}-plain", c.texts).stem
        path = cache / f"scored-{stamp}-{lab.VERSION}.pkl"
        if path.exists():
            out.append(pickle.loads(path.read_bytes()))
            continue
        t0 = time.perf_counter()
        ix = lab.Index.build(c, vec.memories(c))
        p = Prepared(ix, lab.score_questions(ix, vec))
        path.write_bytes(pickle.dumps(p))
        print(
            f"scored {c.key}: {len(c.questions)} questions in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        out.append(p)
    return out


def run(
    preps: Sequence[Prepared], rank: Ranking, dedup: bool = True
) -> list[dict[str, np.ndarray]]:
    """Per conversation, each metric per question."""
    out = []
    for p in preps:
        rows: dict[str, list[float]] = defaultdict(list)
        for s in p.scored:
            got = lab.found(p.ix, rank(p.ix, s), lab.K, dedup)
            for k, v in lab.metrics(p.ix, p.conv.questions[s.q].evidence, got).items():
                rows[k].append(v)
        out.append({k: np.array(v) for k, v in rows.items()})
    return out


def objective(
    res: Sequence[dict[str, np.ndarray]],
    preps: Sequence[Prepared],
    keep: Sequence[int],
    metric: str = "r10",
) -> float:
    by: dict[str, list[np.ndarray]] = defaultdict(list)
    for i in keep:
        by[preps[i].conv.dataset].append(res[i][metric])
    return float(np.mean([np.concatenate(v).mean() for v in by.values()]))


def loco(
    points: Sequence[Sequence[dict[str, np.ndarray]]],
    preps: Sequence[Prepared],
    metric: str = "r10",
) -> tuple[list[dict[str, np.ndarray]], list[int]]:
    """Each conversation scored by the point best on all the others."""
    n = len(preps)
    held, picks = [], []
    for h in range(n):
        keep = [i for i in range(n) if i != h]
        best = max(
            range(len(points)), key=lambda p: (objective(points[p], preps, keep, metric), -p)
        )
        picks.append(best)
        held.append(points[best][h])
    return held, picks


def cluster_ci(diffs: Sequence[np.ndarray], seed: int = 13, n: int = 4000) -> tuple[float, float]:
    """95% interval of the pooled mean difference, resampling whole conversations."""
    rng = np.random.default_rng(seed)
    sums = np.array([d.sum() for d in diffs])
    counts = np.array([d.size for d in diffs], np.float64)
    pick = rng.integers(0, len(diffs), size=(n, len(diffs)))
    means = sums[pick].sum(axis=1) / np.maximum(counts[pick].sum(axis=1), 1.0)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def compare(
    preps: Sequence[Prepared],
    base: Sequence[dict[str, np.ndarray]],
    new: Sequence[dict[str, np.ndarray]],
    metric: str = "r10",
    by_category: bool = False,
) -> list[str]:
    """Lines: per dataset (and category), base and new means and the difference with its
    conversation-resampled 95% interval."""
    lines = []
    for ds in ("LoCoMo", "BEAM"):
        idx = [i for i, p in enumerate(preps) if p.conv.dataset == ds]
        if not idx:
            continue
        groups: list[tuple[str, list[np.ndarray]]] = []
        if by_category:
            cats = sorted({q.category for i in idx for q in preps[i].conv.questions})
            for cat in cats:
                masks = [
                    np.array(
                        [preps[i].conv.questions[s.q].category == cat for s in preps[i].scored]
                    )
                    for i in idx
                ]
                groups.append((cat, masks))
        groups.append(("all", [np.ones(base[i][metric].size, bool) for i in idx]))
        for name, masks in groups:
            b = [base[i][metric][m] for i, m in zip(idx, masks, strict=True)]
            w = [new[i][metric][m] for i, m in zip(idx, masks, strict=True)]
            d = [x - y for x, y in zip(w, b, strict=True)]
            lo, hi = cluster_ci([x for x in d if x.size])
            nq = sum(x.size for x in b)
            bm, wm = np.concatenate(b).mean(), np.concatenate(w).mean()
            tag = "" if lo <= 0 <= hi else (" **better**" if lo > 0 else " **worse**")
            lines.append(
                f"| {ds} | {name} | {nq} | {bm:.3f} | {wm:.3f} | {wm - bm:+.3f} "
                f"({lo:+.3f}, {hi:+.3f}){tag} |"
            )
    return lines


def summary(preps: Sequence[Prepared], res: Sequence[dict[str, np.ndarray]]) -> str:
    parts = []
    for ds in ("LoCoMo", "BEAM"):
        idx = [i for i, p in enumerate(preps) if p.conv.dataset == ds]
        if idx:
            vals = " ".join(
                f"{m} {np.concatenate([res[i][m] for i in idx]).mean():.3f}" for m in METRICS
            )
            parts.append(f"{ds}: {vals}")
    return "; ".join(parts)
