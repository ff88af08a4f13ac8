"""The recall study (issue: recall across long histories): rankings tried on top of the default
hybrid query, each measured leave-one-conversation-out on LoCoMo dev and BEAM 100K with a
paired bootstrap interval that resamples whole conversations.

Families (each a small grid; LOCO picks a point per held-out conversation):

- ``session``: + delta * (the row's session's best score / the best score): sessions first, softly;
- ``two-stage``: the turns of the top m sessions first (sessions ranked by their best turn), each
  group by the default score;
- ``cap``: at most c turns of one session in the top 10 (coverage for multi-evidence questions);
- ``mmr``: maximal marginal relevance over the top 50 (cosine between memories);
- ``assistant``: - rho where the row's speaker is "assistant";
- ``prev-vector``: memories also embedded after the turn before them (a second vector per
  memory; cosine = max or mean of the two), needs the ``prev`` vectors in the cache.

Usage: nice -n 10 python bench/recall_study.py [--families session,cap] [--datasets locomo,beam]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall_eval as ev
import recall_lab as lab
from recall_data import Vectors, load_beam, load_locomo
from recall_features import session_ranks

Point = tuple[str, ev.Ranking]


def default(ix: lab.Index, s: lab.Scored) -> np.ndarray:
    return lab.ranked(s.score)


def session_boost(delta: float, use: str = "max") -> ev.Ranking:
    def rank(ix: lab.Index, s: lab.Scored) -> np.ndarray:
        _, best = session_ranks(ix.conv.session, s.score)
        return lab.ranked(s.score + delta * best / (float(s.score.max()) or 1.0))

    return rank


def two_stage(m: int) -> ev.Ranking:
    def rank(ix: lab.Index, s: lab.Scored) -> np.ndarray:
        srank, _ = session_ranks(ix.conv.session, s.score)
        return np.lexsort((np.arange(ix.n), -s.score, srank >= m))

    return rank


def capped(c: int, depth: int = 100) -> ev.Ranking:
    def rank(ix: lab.Index, s: lab.Scored) -> np.ndarray:
        order = lab.ranked(s.score)
        seen: Counter[int] = Counter()
        first, later = [], []
        for r in order[:depth].tolist():
            sess = int(ix.conv.session[r])
            (first if seen[sess] < c else later).append(r)
            seen[sess] += 1
        return np.array(first + later + order[depth:].tolist())

    return rank


def mmr(lam: float, depth: int = 50) -> ev.Ranking:
    def rank(ix: lab.Index, s: lab.Scored) -> np.ndarray:
        order = lab.ranked(s.score)
        cand = order[:depth]
        rel = s.score[cand] / (float(s.score[cand[0]]) or 1.0)
        sim = ix.vecs[cand] @ ix.vecs[cand].T
        chosen: list[int] = []
        best_sim = np.full(cand.shape[0], -1.0)
        left = np.ones(cand.shape[0], bool)
        for _ in range(min(lab.K * 2, cand.shape[0])):
            val = lam * rel - (1 - lam) * (best_sim if chosen else 0.0)
            val[~left] = -np.inf
            j = int(np.argmax(val))
            chosen.append(j)
            left[j] = False
            best_sim = np.maximum(best_sim, sim[j])
        picked = cand[chosen]
        rest = [r for r in order.tolist() if r not in set(picked.tolist())]
        return np.array(picked.tolist() + rest)

    return rank


def assistant(rho: float) -> ev.Ranking:
    def rank(ix: lab.Index, s: lab.Scored) -> np.ndarray:
        a = np.array([sp.lower() == "assistant" for sp in ix.conv.speaker], np.float64)
        return lab.ranked(s.score - rho * a)

    return rank


def prev_vector(how: str, vec: Vectors) -> ev.Ranking:
    memo: dict[str, np.ndarray] = {}

    def rank(ix: lab.Index, s: lab.Scored) -> np.ndarray:
        key = ix.conv.key
        if key not in memo:
            memo[key] = vec.memories(ix.conv, "prev")
        qv = vec.get(f"{key}-q-dense", _dense_texts(ix))[s.q]
        c2 = (memo[key] @ qv).astype(np.float64)
        cos = {"max": np.maximum(s.cos, c2), "mean": (s.cos + c2) / 2, "only": c2}[how]
        return lab.ranked(lab.default_score(cos, s.bm_fb, s.author)[1])

    return rank


def learned(path: Path, preps: Sequence[ev.Prepared]) -> ev.Ranking:
    """Held-out re-ranker scores (bench/recall_train.py) over the default's top candidates;
    rows past them keep the default order."""
    d = np.load(path)
    by: dict[tuple[str, int], np.ndarray] = {}
    keys = [(p.conv.key, s.q) for p in preps for s in p.scored]
    for g, key in enumerate(keys):
        sel = d["group"] == g
        rows, pred = d["row"][sel], d["pred"][sel]
        by[key] = rows[np.lexsort((np.arange(rows.shape[0]), -pred))]

    def rank(ix: lab.Index, s: lab.Scored) -> np.ndarray:
        head = by[(ix.conv.key, s.q)]
        order = lab.ranked(s.score)
        return np.concatenate([head, order[~np.isin(order, head)]])

    return rank


def _dense_texts(ix: lab.Index) -> list[str]:
    out = []
    for q in ix.conv.questions:
        names, _ = lab.named_labels(q.text, ix.label_words)
        out.append(lab.strip_words(q.text, names))
    return out


def families(vec: Vectors) -> dict[str, list[Point]]:
    return {
        "session": [(f"delta {d}", session_boost(d)) for d in (0.1, 0.2, 0.3, 0.5, 1.0)],
        "two-stage": [(f"m {m}", two_stage(m)) for m in (1, 2, 3, 5, 8)],
        "cap": [(f"c {c}", capped(c)) for c in (1, 2, 3, 4, 5)],
        "mmr": [(f"lambda {x}", mmr(x)) for x in (0.9, 0.8, 0.7, 0.5)],
        "assistant": [(f"rho {x}", assistant(x)) for x in (0.05, 0.1, 0.2, 0.3, 0.5)],
        "prev-vector": [(f"{h}", prev_vector(h, vec)) for h in ("max", "mean", "only")],
    }


HEAD = [
    "| dataset | category | questions | default | new | new - default (95% CI, by conversation) |",
    "|---|---|---:|---:|---:|---|",
]


def study(
    preps: Sequence[ev.Prepared], fams: dict[str, list[Point]], by_category: bool
) -> list[str]:
    base = ev.run(preps, default)
    lines = [f"Default: {ev.summary(preps, base)}", ""]
    for name, points in fams.items():
        points = [("off", default), *points]
        res = [base, *(ev.run(preps, rank) for _, rank in points[1:])]
        start = len(lines)
        lines.append(f"### {name}")
        lines += ["", "In sample:", ""]
        for (label, _), r in zip(points, res, strict=True):
            lines.append(f"- {label}: {ev.summary(preps, r)}")
        for metric in ("r10", "all10"):
            held, picks = ev.loco(res, preps, metric)
            chosen = Counter(points[p][0] for p in picks)
            lines += [
                "",
                f"LOCO on {metric} (chosen: "
                + ", ".join(f"{k} x{v}" for k, v in chosen.most_common())
                + "):",
                "",
                *HEAD,
                *ev.compare(preps, base, held, metric, by_category),
            ]
        lines.append("")
        print("\n".join(lines[start:]), flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default="")
    ap.add_argument("--datasets", default="locomo,beam")
    ap.add_argument("--by-category", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--learned", default="", help="prediction files of recall_train.py")
    args = ap.parse_args()
    vec = Vectors()
    convs = (load_locomo() if "locomo" in args.datasets else []) + (
        load_beam() if "beam" in args.datasets else []
    )
    preps = ev.prepare(convs, vec)
    fams = families(vec)
    if args.families:
        fams = {k: v for k, v in fams.items() if k in args.families.split(",")}
    for path in args.learned.split(","):
        if path:
            fams[f"learned {Path(path).stem}"] = [("model", learned(Path(path), preps))]
    lines = study(preps, fams, args.by_category)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
