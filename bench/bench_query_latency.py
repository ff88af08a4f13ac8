"""Text query latency against the query embedding alone, on the same texts in the same run
(the target: default query p50 <= 1.5x the embedder's): LoCoMo dev questions against their
conversations, memories' vectors from the recall study's cache, the query text embedded by the
engine's own embedder (OnnxMiniLM, ``query_model`` as given) on every call (query cache off).

Each round asks every question once through ``query(text, k=10)`` and once through
``embed_query(text)`` alone, interleaved, so both see the same machine load.

Usage: flock /tmp/synapsedb-bench.lock nice -n 10 python bench/bench_query_latency.py
       [--query-model auto|same|int8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import items
from common import git_rev, machine
from recall_data import Vectors, load_locomo

import synapsedb
from synapsedb.embed import OnnxMiniLM
from synapsedb.query.executor import Fusion


class Embedder:
    """Memories from the cache; queries through the real model, every time."""

    def __init__(self, model: OnnxMiniLM) -> None:
        self.model = model
        self.name, self.dim = model.name, model.dim
        self.compatible_names = model.compatible_names
        self.known: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.known[t] for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.model.embed_query(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--query-model", default="auto")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    model = OnnxMiniLM(query_model=args.query_model)
    emb = Embedder(model)
    vec = Vectors()
    convs = load_locomo()
    root = Path(tempfile.mkdtemp(prefix="synapsedb-latency-"))
    db = synapsedb.open(root / "d", durability="os", embedder=emb, llm=None)
    times: dict[str, list[float]] = {
        "embed_query alone": [],
        "query, re-ranking on": [],
        "query, re-ranking off": [],
    }
    try:
        asks = []
        for c in convs:
            emb.known.update(zip(c.texts, vec.memories(c), strict=True))
            db.namespace(c.key).write_many(items(c))
            asks += [(c.key, q.text) for q in c.questions]
        cache = db.core.embedding._cache  # the engine's query-vector LRU
        for t in [q for _, q in asks[:20]]:
            model.embed_query(t)  # warm up
        for _ in range(args.rounds):
            for key, text in asks:
                ns = db.namespace(key)
                t0 = time.perf_counter()
                model.embed_query(text)
                t1 = time.perf_counter()
                cache.clear()  # the query is embedded every time
                db.fusion = Fusion()
                ns.query(text, k=10)
                t2 = time.perf_counter()
                cache.clear()
                db.fusion = Fusion(rerank=False)
                ns.query(text, k=10)
                t3 = time.perf_counter()
                times["embed_query alone"].append(t1 - t0)
                times["query, re-ranking on"].append(t2 - t1)
                times["query, re-ranking off"].append(t3 - t2)
    finally:
        db.close()
        shutil.rmtree(root, ignore_errors=True)
    base = float(np.percentile(times["embed_query alone"], 50))
    print(
        f"Machine: {machine()}. Commit {git_rev()}. `python bench/bench_query_latency.py "
        f"--query-model {args.query_model} --rounds {args.rounds}` (query model: "
        f"{model.query_model}); {len(asks)} LoCoMo dev questions x {args.rounds} rounds.\n"
    )
    print("| call | p50 ms | p90 ms | p50 / embed_query p50 |\n|---|---:|---:|---:|")
    for name, xs in times.items():
        ms = np.array(xs) * 1e3
        print(
            f"| {name} | {np.percentile(ms, 50):.2f} | {np.percentile(ms, 90):.2f} | "
            f"{np.percentile(ms, 50) / (base * 1e3):.2f} |"
        )


if __name__ == "__main__":
    main()
