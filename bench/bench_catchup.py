"""HNSW graph catch-up after a bulk ingest, and what queries see while it runs.

One namespace, N clustered 384-d unit vectors (bench_pg.clustered: 1,000 clusters in a 48-d
latent space plus noise) written by one client in batches of 1,000 with caller vectors, default
settings except ``durability='os'`` and the build-thread count given. Then, while the background
indexer catches up, a paced client (one query every 20 ms, alternating no filter and a filter
keeping 1% of rows) measures latency: that is the stall queries see. Every chunk the indexer
adds is timed (HnswIndex.extend, whose time is the write-lock hold plus a vector copy).

Usage: python bench/bench_catchup.py --n 100000 [--threads 1] [--runs 1]
Prints one markdown row per run; nothing is appended to bench/runs/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_pg import clustered  # noqa: E402
from common import git_rev, machine, rss_mib  # noqa: E402

import synapsedb  # noqa: E402
from synapsedb.index.hnsw import HnswIndex  # noqa: E402

HOLDS: list[tuple[float, int]] = []  # (seconds, rows) per extend call that added rows


def timed_extend() -> None:
    """Wrap HnswIndex.extend to record each chunk's duration and size."""
    original = HnswIndex.extend

    def extend(self: HnswIndex, *args: Any, **kw: Any) -> int:
        t0 = time.perf_counter()
        added = original(self, *args, **kw)
        if added:
            HOLDS.append((time.perf_counter() - t0, added))
        return added

    HnswIndex.extend = extend  # type: ignore[method-assign]


def pq(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1e3, q)) if xs else float("nan")


def run(n: int, threads: int | None, root: Path) -> dict[str, Any]:
    x = clustered(n, seed=7)
    qs = clustered(200, seed=8)
    kw: dict[str, Any] = {"embedder": None, "durability": "os"}
    if threads is not None:
        kw["hnsw_build_threads"] = threads
    HOLDS.clear()
    db = synapsedb.open(root, **kw)
    mem = db.namespace("bench")
    t0 = time.perf_counter()
    for i in range(0, n, 1000):
        mem.write_many([{"entity": f"u{j % 1000}", "content": f"m{j}", "embedding": x[j],
                         "metadata": {"bucket": (j // 100) % 100}}
                        for j in range(i, min(n, i + 1000))])  # fmt: skip
    ingest_s = time.perf_counter() - t0
    holds_during_ingest = len(HOLDS)
    lat: list[float] = []
    stop = threading.Event()

    def client() -> None:
        j = 0
        while not stop.is_set():
            flt = {"bucket": j % 100} if j % 2 else None
            t1 = time.perf_counter()
            mem.query(embedding=qs[j % len(qs)], k=10, mode="vector", dedup=False, filter=flt)
            lat.append(time.perf_counter() - t1)
            j += 1
            time.sleep(0.02)

    th = threading.Thread(target=client, daemon=True)
    th.start()
    t1 = time.perf_counter()
    assert db.wait_for_indexes()
    wait_s = time.perf_counter() - t1
    stop.set()
    th.join()
    during = list(lat)
    after: list[float] = []
    for j in range(200):
        flt = {"bucket": j % 100} if j % 2 else None
        t2 = time.perf_counter()
        mem.query(embedding=qs[j], k=10, mode="vector", dedup=False, filter=flt)
        after.append(time.perf_counter() - t2)
    rss = rss_mib()
    db.close()
    holds = [h for h, _ in HOLDS]
    rows = [r for _, r in HOLDS]
    build_s = sum(holds)
    return {
        "n": n, "threads": threads, "ingest_s": ingest_s, "wait_s": wait_s,
        "build_s": build_s, "chunks": len(HOLDS), "chunks_in_ingest": holds_during_ingest,
        "rows_p50": float(np.median(rows)) if rows else 0.0,
        "hold_p50": pq(holds, 50), "hold_p99": pq(holds, 99), "hold_max": pq(holds, 100),
        "q_during": len(during), "during_p50": pq(during, 50), "during_p99": pq(during, 99),
        "during_max": pq(during, 100), "after_p50": pq(after, 50), "after_p99": pq(after, 99),
        "rss_mib": rss, "load": " ".join(f"{v:.2f}" for v in os.getloadavg()),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=None, help="hnsw_build_threads (default)")
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    timed_extend()
    print(f"machine: {machine()}, commit {git_rev()}", flush=True)
    print("| N | build threads | ingest s | index wait s | chunks | rows/chunk p50 | hold p50 / "
          "p99 / max ms | query p50 / p99 / max ms during catch-up (queries) | after p50 / p99 "
          "ms | RSS MiB | load 1/5/15 |", flush=True)  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for _ in range(a.runs):
        tmp = Path(tempfile.mkdtemp(prefix="synapsedb-catchup-"))
        try:
            r = run(a.n, a.threads, tmp / "db")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"| {r['n']:,} | {r['threads'] or 'default'} | {r['ingest_s']:.1f} | "
              f"{r['wait_s']:.1f} | {r['chunks']:,} | {r['rows_p50']:.0f} | {r['hold_p50']:.1f} / "
              f"{r['hold_p99']:.1f} / {r['hold_max']:.1f} | {r['during_p50']:.2f} / "
              f"{r['during_p99']:.2f} / {r['during_max']:.1f} ({r['q_during']:,}) | "
              f"{r['after_p50']:.2f} / {r['after_p99']:.2f} | {r['rss_mib']:,.0f} | {r['load']} |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
