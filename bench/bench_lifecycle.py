"""Lifecycle benchmark (issue: lifecycle). In-process, caller-provided 384-d vectors.

Target: query p99 stays within 1.5x when a namespace grows to 10x its hot quota (eviction keeps
the hot tier at the quota). Also reported: the cost of a maintenance pass per 100,000 memories,
with nothing to move and with 90% to demote.

Usage: python bench/bench_lifecycle.py [--quick] [--no-report]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import append_report, pct

import synapsedb

DIM = 384


def clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((200, DIM)).astype(np.float32)
    x = centers[rng.integers(0, 200, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def write(mem: synapsedb.Namespace, start: int, n: int) -> None:
    vecs = clustered(n, seed=start)
    rng = np.random.default_rng(start + 1)
    for i in range(0, n, 5000):
        mem.write_many(
            [
                {
                    "entity": f"user:{(start + j) % 2000}",
                    "content": f"support note {start + j} about order {(start + j) * 7 % 99991}",
                    "embedding": vecs[j],
                    "salience": float(rng.random()),
                    "metadata": {"channel": ("email", "chat")[j % 2]},
                }
                for j in range(i, min(n, i + 5000))
            ]
        )


def latency(
    db: synapsedb.Database, mem: synapsedb.Namespace, queries: np.ndarray
) -> tuple[float, float]:
    """Steady-state latency: background indexing caught up, garbage collected, warmed up."""
    db.wait_for_indexes()
    gc.collect()
    for q in queries[:50]:
        mem.query(embedding=q, k=10, mode="vector")
    samples = []
    for q in queries:
        t0 = time.perf_counter()
        mem.query(embedding=q, k=10, mode="vector")
        samples.append(time.perf_counter() - t0)
    return pct(samples, 50), pct(samples, 99)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    quota = 2_000 if args.quick else 10_000
    reps = 300 if args.quick else 1000
    root = Path(tempfile.mkdtemp(prefix="synapsedb-lifecycle-"))
    queries = clustered(reps, seed=999)
    try:
        with synapsedb.open(root / "grow", durability="os", embedder=None) as db:
            mem = db.namespace("grow")
            mem.configure(max_hot=quota, policy="evict")
            write(mem, 0, quota)
            mem.maintain()
            base = latency(db, mem, queries)
            print("at quota", base, flush=True)
            t0 = time.perf_counter()
            write(mem, quota, 9 * quota)
            ingest = time.perf_counter() - t0
            t0 = time.perf_counter()
            report = mem.maintain()
            evict_s = time.perf_counter() - t0
            grown = latency(db, mem, queries)
            st = mem.stats()
            print("at 10x", grown, st.memories, st.cold_memories, flush=True)
        n_maint = 20_000 if args.quick else 100_000
        with synapsedb.open(root / "maint", durability="os", embedder=None) as db:
            mem = db.namespace("m")
            write(mem, 0, n_maint)
            t0 = time.perf_counter()
            mem.maintain()
            idle_s = time.perf_counter() - t0
            mem.configure(max_hot=n_maint // 10)
            t0 = time.perf_counter()
            big = mem.maintain()
            demote_s = time.perf_counter() - t0
            print("maintenance", idle_s, demote_s, len(big.demoted), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio = grown[1] / base[1]
    scale = 100_000 / n_maint
    lines = [
        "| measure | result | target | |",
        "|---|---|---|---|",
        f"| query p50 / p99 at the hot quota ({quota:,} memories) | {base[0] / 1000:.3f} / "
        f"{base[1] / 1000:.3f} ms | | |",
        f"| query p50 / p99 at 10x the quota ({st.memories:,} memories, {st.cold_memories:,} "
        f"cold) | {grown[0] / 1000:.3f} / {grown[1] / 1000:.3f} ms | | |",
        f"| p99 ratio (10x / 1x) | {ratio:.2f} | <= 1.5 | "
        f"{'met' if ratio <= 1.5 else '**missed**'} |",
        f"| eviction pass after growing to 10x ({len(report.demoted):,} demoted, namespace "
        f"rebuilt) | {evict_s:.2f} s | | |",
        f"| maintenance pass, {n_maint:,} memories within quota | {idle_s:.2f} s "
        f"({idle_s * scale:.2f} s per 100,000) | | |",
        f"| maintenance pass demoting {len(big.demoted):,} of {n_maint:,} | {demote_s:.2f} s "
        f"({demote_s * scale:.2f} s per 100,000) | | |",
        f"| ingest of the 9x growth ({9 * quota:,} memories, write_many of 5,000) | "
        f"{ingest:.1f} s | | |",
    ]
    if args.no_report:
        print("\n".join(lines))
    else:
        append_report(
            "Lifecycle" + (" (quick)" if args.quick else ""),
            "python bench/bench_lifecycle.py"
            + (" --quick" if args.quick else "")
            + " (part of make bench)",
            lines,
        )


if __name__ == "__main__":
    main()
