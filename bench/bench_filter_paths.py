"""The vector paths of a filtered query side by side on real MiniLM vectors, in one run: what
the executor's planner chooses between (query/executor.py, vector_candidates).

100,000 generated support sentences (bench_retrieval's corpus, embedded by the database's
MiniLM; vectors cached) and 1,000 further sentences as queries, k=10, one thread. Filters keep a
random share of the rows (0.1% to 100%). For each share, p50/p99 and recall@10 against exact
search over the allowed rows, of:

- exact: the allowed rows' float32 vectors gathered and scanned (numpy);
- graph: faiss HNSW with 8-bit codes (the engine's graph: M 16, efConstruction 200), the filter
  passed as a bitmap that faiss reads while it walks, at the ef the planner picks for the share
  (``filtered_ef``) and at the engine's plain ef, each proposing 2k candidates re-scored from
  float32 (the engine's path);
- unfiltered only: the graph alone (8-bit scores, no re-scoring: the library's own search, the
  floor), and raw hnswlib (float32 graph, the previous engine's) for comparison.

Usage: python bench/bench_filter_paths.py [--n 100000] [--queries 300] [--report]
(run under ``flock /tmp/synapsedb-bench.lock``: two benchmarks never overlap)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_retrieval
from common import append_report

K = 10
SHARES = (0.001, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)


def minilm_corpus(n: int, nq: int) -> tuple[np.ndarray, np.ndarray]:
    from synapsedb.embed import OnnxMiniLM

    texts = bench_retrieval.sentences(n + nq, seed=1)
    vecs = bench_retrieval.embed_cached(texts, OnnxMiniLM())
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    return np.ascontiguousarray(vecs[:n], np.float32), np.ascontiguousarray(vecs[n:], np.float32)


def timed(fn, nq: int) -> tuple[list[float], list[list[int]]]:  # type: ignore[no-untyped-def]
    for i in range(min(20, nq)):  # warm-up
        fn(i)
    lat, found = [], []
    for i in range(nq):
        t0 = time.perf_counter()
        got = fn(i)
        lat.append(time.perf_counter() - t0)
        found.append(got)
    return lat, found


def recall(found: list[list[int]], truth: list[list[int]]) -> float:
    hits = [
        len(set(f) & set(t)) / max(1, min(K, len(t))) for f, t in zip(found, truth, strict=True)
    ]
    return float(np.mean(hits))


def ms(lat: list[float], q: float) -> float:
    return float(np.percentile(lat, q) * 1000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()
    import faiss
    from threadpoolctl import threadpool_limits

    from synapsedb.index.hnsw import bitmap
    from synapsedb.query.executor import RESCORE, RESCORE_MIN, _top, filtered_ef

    x, qs = minilm_corpus(a.n, 1000)
    qs = qs[: a.queries]
    nq = qs.shape[0]
    m, efc, ef0 = 16, 200, 100
    t0 = time.perf_counter()
    graph = faiss.IndexHNSWSQ(
        x.shape[1], faiss.ScalarQuantizer.QT_8bit, m, faiss.METRIC_INNER_PRODUCT
    )
    graph.hnsw.efConstruction = efc
    graph.train(x[:: max(1, a.n // 65_536)])
    faiss.omp_set_num_threads(2)
    graph.add(x)
    build_s = time.perf_counter() - t0
    faiss.omp_set_num_threads(1)
    print(f"faiss HNSW SQ8 built in {build_s:.1f} s", flush=True)
    want = max(RESCORE * K, K + RESCORE_MIN)
    rows_out: list[list[str]] = []
    rng = np.random.default_rng(3)
    sims_all = qs @ x.T  # (nq, n): exact truth for every filter below

    def search(q: np.ndarray, k: int, ef: int, bits: np.ndarray | None) -> np.ndarray:
        params = faiss.SearchParametersHNSW()
        params.efSearch = max(ef, k)
        if bits is not None:
            params.sel = faiss.IDSelectorBitmap(bits.shape[0], faiss.swig_ptr(bits))
        _d, labels = graph.search(q[None, :], k, params=params)
        lab = labels[0]
        return lab[lab >= 0]

    def rescore(q: np.ndarray, labels: np.ndarray) -> list[int]:
        rows, _ = _top(x[labels] @ q, labels, K)
        return rows.tolist()

    def path_table(  # type: ignore[no-untyped-def]
        allowed: np.ndarray, bits: np.ndarray | None, ef: int, ef0: int, share: float
    ) -> dict:
        """Each path's name and its query function (query index -> rows found)."""
        paths = {
            "exact (gather + scan, float32)": lambda i: _top(x[allowed] @ qs[i], allowed, K)[
                0
            ].tolist(),
            f"graph + bitmap, ef {ef} (planner), re-scored": lambda i: rescore(
                qs[i], search(qs[i], want, ef, bits)
            ),
        }
        if ef != ef0:
            paths[f"graph + bitmap, ef {ef0}, re-scored"] = lambda i: rescore(
                qs[i], search(qs[i], want, ef0, bits)
            )
        if share == 1.0:
            paths[f"graph alone, ef {ef0}, k {K}, 8-bit scores (floor)"] = lambda i: search(
                qs[i], K, ef0, None
            ).tolist()
        return paths

    with threadpool_limits(1):
        for share in SHARES:
            mask = rng.random(a.n) < share if share < 1.0 else np.ones(a.n, bool)
            allowed = np.flatnonzero(mask)
            bits = None if share == 1.0 else bitmap(mask)
            truth = []
            for j in range(nq):
                s = sims_all[j][allowed]
                top = np.argpartition(-s, K - 1)[:K] if s.shape[0] > K else np.arange(s.shape[0])
                truth.append(allowed[top[np.argsort(-s[top])]].tolist())
            ef = filtered_ef(ef0, want, share)
            paths = path_table(allowed, bits, ef, ef0, share)
            for name, fn in paths.items():
                lat, found = timed(fn, nq)
                r = recall(found, truth)
                rows_out.append(
                    [
                        f"{share:.1%}",
                        f"{allowed.shape[0]:,}",
                        name,
                        f"{ms(lat, 50):.3f}",
                        f"{ms(lat, 99):.3f}",
                        f"{r:.3f}",
                    ]
                )
                print(" | ".join(rows_out[-1]), flush=True)
        try:
            import hnswlib  # type: ignore[import-untyped]

            raw = hnswlib.Index(space="ip", dim=x.shape[1])
            raw.init_index(max_elements=a.n, ef_construction=efc, M=m)
            raw.add_items(x, np.arange(a.n), num_threads=2)
            raw.set_ef(ef0)
            raw.set_num_threads(1)
            truth = [np.argsort(-sims_all[j])[:K].tolist() for j in range(nq)]
            lat, found = timed(lambda i: raw.knn_query(qs[i], k=K)[0][0].tolist(), nq)
            rows_out.append(
                [
                    "100.0%",
                    f"{a.n:,}",
                    f"raw hnswlib float32, ef {ef0} (before)",
                    f"{ms(lat, 50):.3f}",
                    f"{ms(lat, 99):.3f}",
                    f"{recall(found, truth):.3f}",
                ]
            )
            print(" | ".join(rows_out[-1]), flush=True)
        except ImportError:
            pass
    lines = [
        f"{a.n:,} MiniLM vectors (bench_retrieval's "
        f"sentences), {nq} queries, k={K}, one thread; faiss HNSW SQ8 M {m}, efConstruction "
        f"{efc} built in {build_s:.0f} s (2 threads); filters keep random rows. Recall@10 "
        f"against exact search over the allowed rows. Re-scored paths ask the graph for {want} "
        "candidates and score them from float32.",
        "",
        "| filter keeps | rows | path | p50 ms | p99 ms | recall@10 |",
        "|---|---:|---|---:|---:|---:|",
        *("| " + " | ".join(r) + " |" for r in rows_out),
    ]
    print("\n".join(lines))
    if a.report:
        append_report(
            "Filtered vector paths side by side (MiniLM)",
            "python bench/bench_filter_paths.py --report",
            lines,
        )


if __name__ == "__main__":
    main()
