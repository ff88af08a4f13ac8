"""Similar agent states (issue 14): the value featuriser of ``synapsedb.agent_state.similar`` against
embedding each state's JSON as text, on generated states with a known nearest-neighbour truth.

Generation. ``P`` situations (prototypes) are drawn; each is observed ``M = 10`` times with noise
as the candidates, and once more as a query. The truth of a query is the ``M`` candidates of its
own situation (a fact of the generator, not of any featuriser); recall@5 is the share of the five
nearest candidates that are from it. A situation: a position near one of ``P/5`` sites (so
position alone does not tell five situations apart), health 0..100, energy 0..1, a status (7),
an inventory (6 item counts), nested ``goal`` (kind of 5, target [x, y]) and ``stats`` (level,
xp), tags (a subset of 10) and a mood sentence (8 moods, 4 phrasings each). An observation:
position +- N(0, 1.5), health +- N(0, 5), energy +- N(0, 0.05), status kept with p 0.9, item
counts +- 1, goal kind kept p 0.9 and target +- N(0, 2), level kept p 0.9 (else +-1), xp +- 5%,
each tag flipped with p 0.1, the mood in a random phrasing, each top-level field but position
missing with p 0.05, keys in random order.

Methods: ``rank_similar(query, candidates, 5)`` (the featuriser; text through an
``EmbeddingCache`` of the default embedder) and the baseline: cosine between all-MiniLM-L6-v2
embeddings of ``json.dumps(state)``. Latency per query is timed at 1,000 and 10,000 candidates
with the text cache warm (the first, cold query apart).

Usage: python bench/bench_state_similarity.py [--quick] [--seed N]
Prints a markdown table; --report appends the run to bench/runs/similar-agent-states.jsonl.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import append_report, git_rev, machine

from synapsedb.agent_state.similar import EmbeddingCache, rank_similar
from synapsedb.embed.onnx_minilm import OnnxMiniLM

M = 10
K = 5
STATUS = ["idle", "moving", "fighting", "fleeing", "gathering", "trading", "resting"]
ITEMS = ["wood", "stone", "food", "water", "iron", "gold"]
GOALS = ["explore", "gather", "build", "attack", "trade"]
TAGS = [f"tag{i}" for i in range(10)]
MOODS = [
    (
        "calm",
        [
            "I feel calm and at ease",
            "everything is peaceful and quiet",
            "relaxed, nothing to worry about",
            "a quiet and restful moment",
        ],
    ),
    (
        "afraid",
        [
            "I am scared of what is coming",
            "something dangerous is near, I am afraid",
            "fear grips me, I want to run",
            "nervous and frightened right now",
        ],
    ),
    (
        "angry",
        [
            "I am furious at the raiders",
            "rage, they stole from me",
            "so angry I could fight anyone",
            "irritated and hostile today",
        ],
    ),
    (
        "hungry",
        [
            "I need to find food soon",
            "starving, my stomach is empty",
            "hunger is all I can think about",
            "I must eat something now",
        ],
    ),
    (
        "curious",
        [
            "I wonder what lies beyond the hills",
            "eager to explore the unknown",
            "curious about the strange ruins",
            "I want to discover new places",
        ],
    ),
    (
        "tired",
        [
            "exhausted after a long day",
            "I need to sleep and rest",
            "my legs are heavy, so tired",
            "worn out and sleepy",
        ],
    ),
    (
        "greedy",
        [
            "I want more gold than anyone",
            "riches, I must collect every coin",
            "wealth is all that matters",
            "I crave treasure and profit",
        ],
    ),
    (
        "social",
        [
            "I would love to talk with friends",
            "looking for company and a chat",
            "meeting other travellers makes me happy",
            "I enjoy trading stories",
        ],
    ),
]


def situations(p: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    sites = rng.uniform(0, 100, (max(1, p // 5), 2))
    out = []
    for _ in range(p):
        site = sites[rng.integers(0, len(sites))]
        lam = rng.uniform(0, 10, len(ITEMS))
        out.append(
            {
                "position": site + rng.normal(0, 4, 2),
                "health": rng.uniform(0, 100),
                "energy": rng.uniform(0, 1),
                "status": rng.integers(0, len(STATUS)),
                "inventory": rng.poisson(lam),
                "goal_kind": rng.integers(0, len(GOALS)),
                "goal_target": rng.uniform(0, 100, 2),
                "level": int(rng.integers(1, 21)),
                "xp": rng.uniform(0, 1000),
                "tags": rng.random(len(TAGS)) < 0.3,
                "mood": rng.integers(0, len(MOODS)),
            }
        )
    return out


def observe(s: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    def keep(value: int, n: int) -> int:
        return value if rng.random() < 0.9 else int(rng.integers(0, n))

    level = s["level"] if rng.random() < 0.9 else max(1, s["level"] + int(rng.choice([-1, 1])))
    tags = s["tags"] ^ (rng.random(len(TAGS)) < 0.1)
    state: dict[str, Any] = {
        "position": [round(float(v), 2) for v in s["position"] + rng.normal(0, 1.5, 2)],
        "health": round(float(np.clip(s["health"] + rng.normal(0, 5), 0, 100)), 1),
        "energy": round(float(np.clip(s["energy"] + rng.normal(0, 0.05), 0, 1)), 3),
        "status": STATUS[keep(int(s["status"]), len(STATUS))],
        "inventory": {
            item: int(max(0, c + rng.integers(-1, 2)))
            for item, c in zip(ITEMS, s["inventory"], strict=True)
        },
        "goal": {
            "kind": GOALS[keep(int(s["goal_kind"]), len(GOALS))],
            "target": [round(float(v), 1) for v in s["goal_target"] + rng.normal(0, 2, 2)],
        },
        "stats": {"level": level, "xp": round(float(s["xp"] * rng.normal(1, 0.05)), 1)},
        "tags": [t for t, on in zip(TAGS, tags, strict=True) if on],
        "mood": MOODS[int(s["mood"])][1][int(rng.integers(0, 4))],
    }
    for key in list(state):
        if key != "position" and rng.random() < 0.05:
            del state[key]
    keys = list(state)
    rng.shuffle(keys)
    return {k: state[k] for k in keys}


def dataset(
    p: int, seed: int
) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]], np.ndarray]:
    rng = np.random.default_rng(seed)
    sits = situations(p, rng)
    cands = []
    owner = []
    for i, s in enumerate(sits):
        for j in range(M):
            cands.append((f"s{i}-o{j}", observe(s, rng)))
            owner.append(i)
    queries = [observe(s, rng) for s in sits]
    return cands, queries, np.asarray(owner)


def recall(top: list[int], owner: np.ndarray, q: int) -> float:
    return sum(1 for i in top if owner[i] == q) / K


def run(p: int, n_queries: int, seed: int, model: OnnxMiniLM, baseline: bool) -> dict[str, Any]:
    cands, queries, owner = dataset(p, seed)
    qidx = np.random.default_rng(seed + 1).choice(p, size=min(n_queries, p), replace=False)
    index = {cid: i for i, (cid, _) in enumerate(cands)}
    cache = EmbeddingCache(lambda texts: model.embed(texts))
    t0 = time.perf_counter()
    rank_similar(queries[int(qidx[0])], cands, K, embed=cache)
    cold = time.perf_counter() - t0
    lat, rec = [], []
    for q in qidx.tolist():
        t0 = time.perf_counter()
        ranked = rank_similar(queries[q], cands, K, embed=cache)
        lat.append(time.perf_counter() - t0)
        rec.append(recall([index[cid] for cid, _ in ranked], owner, q))
    out: dict[str, Any] = {
        "n": len(cands),
        "queries": len(qidx),
        "recall": float(np.mean(rec)),
        "p50_ms": float(np.percentile(lat, 50) * 1e3),
        "p95_ms": float(np.percentile(lat, 95) * 1e3),
        "cold_ms": cold * 1e3,
    }
    if baseline:
        t0 = time.perf_counter()
        cvec = model.embed([json.dumps(s) for _, s in cands])
        out["baseline_index_s"] = time.perf_counter() - t0
        brec, blat = [], []
        for q in qidx.tolist():
            t0 = time.perf_counter()
            qv = model.embed([json.dumps(queries[q])])[0]
            top = np.argsort(-(cvec @ qv), kind="stable")[:K].tolist()
            blat.append(time.perf_counter() - t0)
            brec.append(recall(top, owner, q))
        out["baseline_recall"] = float(np.mean(brec))
        out["baseline_p50_ms"] = float(np.percentile(blat, 50) * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer queries")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--no-baseline-10k", action="store_true")
    ap.add_argument("--report", action="store_true", help="append the run to bench/runs/")
    args = ap.parse_args()
    model = OnnxMiniLM()
    nq = 50 if args.quick else 200
    rows = [
        run(100, nq, args.seed, model, baseline=True),
        run(1000, nq // 2, args.seed, model, baseline=not args.no_baseline_10k),
    ]
    lines = [
        f"Seed {args.seed}; generated situations observed with noise, truth = same situation.",
        "",
        "| candidates | queries | featuriser recall@5 | JSON-as-text recall@5 | featuriser p50 / p95"
        " ms per query (warm) | first query (cold text cache) ms | JSON-as-text p50 ms per query"
        " (index built apart) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        b = f"{r['baseline_recall']:.3f}" if "baseline_recall" in r else "-"
        bl = (
            f"{r['baseline_p50_ms']:.1f} (index {r['baseline_index_s']:.1f} s)"
            if "baseline_p50_ms" in r
            else "-"
        )
        lines.append(
            f"| {r['n']:,} | {r['queries']} | {r['recall']:.3f} | {b} | {r['p50_ms']:.1f} / "
            f"{r['p95_ms']:.1f} | {r['cold_ms']:.0f} | {bl} |"
        )
    if args.report:
        append_report("Similar agent states", "python " + " ".join(sys.argv), lines)
    else:
        print(f"machine: {machine()}; commit {git_rev()}")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
