"""The hybrid query's fusion weights chosen by leave-one-conversation-out over LoCoMo dev and
BEAM 100K together (issue 13): is there a default that serves both styles?

All 25 conversations (5 LoCoMo, 20 BEAM chats; the protocols of bench_quality.py and
bench_beam.py) are ingested once; every scorable question is asked with ``query(text, k=10)`` under
each weight set of a small grid (``Database.fusion``: keyword weight, context weight, author
boost; the vector weight stays 0.5 since only ratios matter). Leave-one-conversation-out: for each
conversation, the grid point with the best objective on the other 24 is used on it; the objective
is the mean of the two datasets' mean R@10, so LoCoMo's 760 questions and BEAM's 355 weigh alike.
Reported: the LOO R@10 per dataset against the shipped default on the same questions, and the
grid point chosen on all 25 (what a new default would be). Nothing here changes the default.

Usage: python bench/bench_fusion.py [--quick] [--no-report]
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beam
import locomo
from bench_beam import ingest as ingest_beam
from bench_quality import turn_items
from common import append_report

import synapsedb
from synapsedb.query.executor import Fusion

GRID = {"keyword": (0.15, 0.3, 0.5), "context": (0.0, 0.25, 0.5), "author": (0.0, 0.5)}
DEFAULT = Fusion()


def ingest_locomo(db: synapsedb.Database, conv: locomo.Conversation) -> dict[str, int]:
    written = db.namespace(f"locomo-{conv.name}").write_many(turn_items(conv))
    return {m.id: i for i, m in enumerate(written)}  # memory id -> row


def recall10(ns: synapsedb.Namespace, text: str, ids: dict[str, int], ev: frozenset[int]) -> float:
    got: list[int] = []
    for h in ns.query(text, k=10):
        got.append(ids[h.id])
        got.extend(ids[d] for d in h.duplicates)
    return len(ev & set(got)) / len(ev)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="3 LoCoMo conversations, 6 BEAM chats")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    convs = locomo.load_dataset(locomo.DEFAULT_DATA)
    chats = beam.load_dataset()
    if args.quick:
        convs, chats = convs[:3], chats[:6]
    root = Path(tempfile.mkdtemp(prefix="synapsedb-fusion-"))
    db = synapsedb.open(root / "d", durability="os", llm=None, query_cache_size=4096)
    t0 = time.perf_counter()
    # (dataset, conversation, namespace, questions as (text, evidence rows), id map)
    work: list[tuple[str, str, synapsedb.Namespace, list[tuple[str, frozenset[int]]], dict]] = []
    try:
        for conv in convs:
            ids = ingest_locomo(db, conv)
            qs = [(q.text, frozenset(q.evidence)) for q in conv.questions]
            work.append(("LoCoMo", conv.name, db.namespace(f"locomo-{conv.name}"), qs, ids))
        for chat in chats:
            ids, _ = ingest_beam(db, chat, db.settings.max_content_bytes)
            qs = [(q.text, q.evidence) for q in chat.questions]
            work.append(("BEAM", chat.name, db.namespace(f"beam-{chat.name}"), qs, ids))
        ingest_s = time.perf_counter() - t0
        points = [
            DEFAULT,
            *(
                Fusion(keyword=kw, context=cx, author=au)
                for kw, cx, au in itertools.product(*GRID.values())
            ),
        ]
        # scores[p][conversation index] = per-question R@10 under grid point p
        scores: list[list[np.ndarray]] = []
        t1 = time.perf_counter()
        for p in points:
            db.fusion = p
            scores.append(
                [
                    np.array([recall10(ns, text, ids, ev) for text, ev in qs])
                    for _, _, ns, qs, ids in work
                ]
            )
        query_s = time.perf_counter() - t1
    finally:
        db.close()
        shutil.rmtree(root, ignore_errors=True)
    lines = report(work, points, scores, ingest_s, query_s)
    if args.no_report:
        print("\n".join(lines))
    else:
        append_report(
            "Fusion weights by leave-one-conversation-out, LoCoMo + BEAM"
            + (" (quick)" if args.quick else ""),
            "python bench/bench_fusion.py" + (" --quick" if args.quick else ""),
            lines,
        )


def objective(scores: list[np.ndarray], datasets: list[str], keep: list[int]) -> float:
    by: dict[str, list[np.ndarray]] = defaultdict(list)
    for i in keep:
        by[datasets[i]].append(scores[i])
    return float(np.mean([np.concatenate(v).mean() for v in by.values()]))


def name(p: Fusion) -> str:
    return f"keyword {p.keyword}, context {p.context}, author {p.author}"


def report(
    work: list,
    points: list[Fusion],
    scores: list[list[np.ndarray]],
    ingest_s: float,
    query_s: float,
) -> list[str]:
    datasets = [w[0] for w in work]
    n = len(work)
    loo: list[np.ndarray] = []
    picks: list[int] = []
    for held in range(n):
        keep = [i for i in range(n) if i != held]
        best = max(range(len(points)), key=lambda p: (objective(scores[p], datasets, keep), -p))
        picks.append(best)
        loo.append(scores[best][held])
    final = max(
        range(len(points)), key=lambda p: (objective(scores[p], datasets, list(range(n))), -p)
    )

    def per(ds: str, arrays: list[np.ndarray]) -> float:
        return float(
            np.concatenate([a for a, d in zip(arrays, datasets, strict=True) if d == ds]).mean()
        )

    lines = [
        f"{sum(d == 'LoCoMo' for d in datasets)} LoCoMo conversations and "
        f"{sum(d == 'BEAM' for d in datasets)} BEAM chats, "
        f"{sum(len(w[3]) for w in work):,} questions; {len(points) - 1} grid points "
        f"({', '.join(f'{k} {v}' for k, v in GRID.items())}; vector weight 0.5, window 2) plus "
        f"the shipped default ({name(DEFAULT)}). Ingest {ingest_s:.0f} s, all queries "
        f"{query_s:.0f} s.",
        "",
        "| weights | LoCoMo R@10 | BEAM R@10 | objective (mean of the two) |",
        "|---|---:|---:|---:|",
        f"| shipped default ({name(DEFAULT)}) | {per('LoCoMo', scores[0]):.3f} | "
        f"{per('BEAM', scores[0]):.3f} | {objective(scores[0], datasets, list(range(n))):.3f} |",
        f"| **leave-one-conversation-out** (each conversation scored with the weights chosen "
        f"on the other {n - 1}) | **{per('LoCoMo', loo):.3f}** | **{per('BEAM', loo):.3f}** | "
        f"{np.mean([per('LoCoMo', loo), per('BEAM', loo)]):.3f} |",
        f"| chosen on all {n} (in sample: {name(points[final])}) | "
        f"{per('LoCoMo', scores[final]):.3f} | {per('BEAM', scores[final]):.3f} | "
        f"{objective(scores[final], datasets, list(range(n))):.3f} |",
        "",
        "Weights each held-out conversation got: "
        + "; ".join(f"{w[0]} {w[1]}: {name(points[p])}" for w, p in zip(work, picks, strict=True))
        + ".",
        "",
        "Every grid point (in sample, all conversations):",
        "",
        "| weights | LoCoMo R@10 | BEAM R@10 |",
        "|---|---:|---:|",
    ]
    lines += [
        f"| {name(p)} | {per('LoCoMo', s):.3f} | {per('BEAM', s):.3f} |"
        for p, s in zip(points[1:], scores[1:], strict=True)
    ]
    return lines


if __name__ == "__main__":
    main()
