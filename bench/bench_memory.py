"""Where a loaded namespace's resident memory goes (issue 13: 1,000,000 memories in <= 2.5 GB).

One namespace of N memories (clustered synthetic 384-d vectors, short generated texts, metadata
``{"bucket": row % 100}``, 5,000 entities) is written to a fresh data directory, closed (the graph
is saved), then opened again in a new process state with ``load="eager"``, its graph loaded and
its keyword index built by one text query. The open runs under :mod:`tracemalloc`, so every
Python and numpy allocation still held afterwards is attributed to the source file that made it;
the HNSW graph lives in C++ (hnswlib), outside tracemalloc, and is counted by its serialized size
(the same layout it has in memory). The report compares the parts with the raw float32 vectors
(N x 384 x 4 bytes) and with the process's resident-memory growth.

Usage: python bench/bench_memory.py [--n 100000] [--no-report]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_pg import clustered, item, sentences  # noqa: E402
from common import append_report, git_rev, machine, rss_mib  # noqa: E402

import synapsedb  # noqa: E402

NS = "mem"

# source files -> the part of the engine they hold (anything else: "other Python")
PARTS = {
    "catalog.py": "catalog: columns, the float32 vectors, metadata postings",
    "postings.py": "catalog: columns, the float32 vectors, metadata postings",
    "numcol.py": "catalog: columns, the float32 vectors, metadata postings",
    "loader.py": "memory records (one Python object per version)",
    "records.py": "memory records (one Python object per version)",
    "sqlite.py": "the records' fields as read from SQLite (ids, texts, JSON, times)",
    "lazy_reads.py": "the records' fields as read from SQLite (ids, texts, JSON, times)",
    "keyword.py": "keyword index (BM25 postings)",
    "timeline.py": "timelines (neighbours for the hybrid context)",
    "state.py": "namespace state (memory id -> versions, entities)",
}


def build(data: Path, n: int, batch: int = 1000) -> float:
    vecs = clustered(n, seed=21)
    texts = sentences(min(n, 20_000), seed=5)
    t0 = time.perf_counter()
    db = synapsedb.open(data, durability="os", embedder=None, llm=None)
    try:
        mem = db.namespace(NS)
        for lo in range(0, n, batch):
            mem.write_many([item(texts, vecs, j) for j in range(lo, min(n, lo + batch))])
        db.wait_for_indexes()
    finally:
        db.close()
    return time.perf_counter() - t0


def measure(data: Path, n: int) -> dict:
    gc.collect()
    rss0 = rss_mib()
    tracemalloc.start(1)
    t0 = time.perf_counter()
    db = synapsedb.open(data, durability="os", embedder=None, llm=None, load="eager")
    mem = db.namespace(NS)
    db.wait_for_indexes()
    mem.query("order refund", k=10, mode="keyword")  # builds the deferred keyword index
    open_s = time.perf_counter() - t0
    gc.collect()
    snap = tracemalloc.take_snapshot()
    tracemalloc.stop()
    rss1 = rss_mib()
    by_part: dict[str, int] = defaultdict(int)
    for stat in snap.statistics("filename"):
        name = Path(stat.traceback[0].filename).name
        by_part[PARTS.get(name, "other Python (interpreter, modules, caches)")] += stat.size
    graph = graph_bytes(data)
    db.close()
    return {"rss_mib": rss1 - rss0, "open_s": open_s, "parts": dict(by_part), "graph": graph}  # fmt: skip


def graph_bytes(data: Path) -> int:
    """The saved graph's size: hnswlib's in-memory layout, written out as is."""
    return sum(p.stat().st_size for p in (data / "indexes").glob(f"{NS}.hnsw*") if p.is_file())


def report(n: int, build_s: float, r: dict) -> list[str]:
    raw = n * 384 * 4
    mib = 2**20
    parts = sorted(r["parts"].items(), key=lambda kv: -kv[1])
    rows = [("HNSW graph (hnswlib, C++: its float32 copy of the vectors + links)", r["graph"])]
    rows += parts
    total = sum(v for _, v in rows)
    lines = [
        f"Load average at the end {os.getloadavg()[0]:.2f}.",
        "",
        f"{n:,} memories in one namespace (clustered synthetic 384-d vectors, generated texts "
        f"of about 60 characters, one metadata field); written in {build_s:.0f} s, then opened "
        f'again with load="eager" (graph from its saved file, keyword index built by a query) '
        f"in {r['open_s']:.1f} s. Raw float32 vectors: {raw / mib:,.0f} MiB.",
        "",
        "| part | MiB | bytes per memory | x raw vectors |",
        "|---|---:|---:|---:|",
    ]
    for label, size in rows:
        lines.append(f"| {label} | {size / mib:,.0f} | {size / n:,.0f} | {size / raw:.2f} |")
    lines.append(f"| **sum of the parts** | {total / mib:,.0f} | {total / n:,.0f} | "
                 f"{total / raw:.2f} |")  # fmt: skip
    lines.append(f"| resident memory growth of the process (RSS) | {r['rss_mib']:,.0f} | "
                 f"{r['rss_mib'] * mib / n:,.0f} | {r['rss_mib'] * mib / raw:.2f} |")  # fmt: skip
    per = r["rss_mib"] * mib / n
    lines += [
        "",
        f"At 1,000,000 memories the same per-memory figures come to about "
        f"{per * 1_000_000 / 2**30:.1f} GiB resident (target <= 2.5 GB). The Python parts are "
        "traced allocations still held after the open (tracemalloc, by the source file that "
        "allocated them); RSS also holds allocator slack and SQLite's page cache.",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="memories in the namespace")
    ap.add_argument("--data", type=Path, help="keep the data directory here (default: a temp)")
    ap.add_argument("--no-report", action="store_true", help="print, do not append")
    a = ap.parse_args()
    if a.n < 1:
        ap.error("--n: expected a positive number of memories")
    tmp = Path(tempfile.mkdtemp(prefix="synapsedb-mem-"))
    data = a.data or tmp / "data"
    try:
        build_s = build(data, a.n) if not (data / "synapse.db").exists() else 0.0
        r = measure(data, a.n)
        lines = report(a.n, build_s, r)
        if a.no_report:
            print(f"Machine: {machine()}. Commit {git_rev()}.")
            print("\n".join(lines))
        else:
            command = f"python bench/bench_memory.py --n {a.n}"
            append_report("Resident memory by part", command, lines, data=r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
