"""Retrieval speed benchmark (issue: retrieval). In-process, on this machine.

Targets: query with a caller vector at 100,000 memories with a metadata filter p50 <= 1 ms,
p99 <= 5 ms, ANN recall@10 against exact >= 0.95 on real MiniLM vectors; query from text
(embedding included) p50 <= 5 ms; 10,000 namespaces of 100 memories: query p50 <= 0.5 ms and
resident memory within 2x of the raw vectors.

Usage: python bench/bench_retrieval.py [--quick] [--no-report] [--many-only | --big-only]
       [--many-dir DIR]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import append_report, pct, rss_mib

import synapsedb

CACHE = Path(tempfile.gettempdir()) / "synapsedb-bench-cache"
EF_SWEEP = (64, 40)  # query-time ef values tried besides the engine's own

NAMES = [
    "Ava",
    "Ben",
    "Chloe",
    "Dan",
    "Eva",
    "Finn",
    "Gia",
    "Hugo",
    "Iris",
    "Jon",
    "Kai",
    "Lena",
    "Milo",
    "Nora",
    "Omar",
    "Pia",
    "Quinn",
    "Rosa",
]
VERBS = [
    "asked about",
    "complained about",
    "praised",
    "returned",
    "ordered",
    "cancelled",
    "tracked",
    "reviewed",
]
ADJ = [
    "blue",
    "wireless",
    "refurbished",
    "large",
    "organic",
    "vintage",
    "spare",
    "compact",
    "leather",
    "heavy",
]
NOUNS = [
    "headphones",
    "laptop",
    "kettle",
    "jacket",
    "router",
    "blender",
    "tent",
    "camera",
    "sofa",
    "bicycle",
    "printer",
]
TAILS = [
    "because it arrived late",
    "after the refund was issued",
    "and wants a replacement",
    "during the holiday sale",
    "with a discount code",
    "but the package was damaged",
    "and asked for an invoice",
    "before the warranty expired",
]


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(
            f"{NAMES[rng.integers(len(NAMES))]} {VERBS[rng.integers(len(VERBS))]} the "
            f"{ADJ[rng.integers(len(ADJ))]} {NOUNS[rng.integers(len(NOUNS))]} "
            f"(order #{rng.integers(10_000, 99_999)}) {TAILS[rng.integers(len(TAILS))]} "
            f"on day {i % 365}"
        )
    return out


def embed_cached(texts: list[str], embedder: object) -> np.ndarray:
    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = CACHE / f"{embedder.name}-{key}.npy"  # type: ignore[attr-defined]
    if path.exists():
        return np.load(path)
    CACHE.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    out = []
    for i in range(0, len(texts), 2048):
        out.append(embedder.embed(texts[i : i + 2048]))  # type: ignore[attr-defined]
        print(f"  embedded {i + len(out[-1]):,}/{len(texts):,}", end="\r", flush=True)
    vecs = np.concatenate(out)
    print(f"\n  embedding took {time.perf_counter() - t0:.1f} s", flush=True)
    np.save(path, vecs)
    return vecs


def timed(fn, reps: int, warm: int = 30) -> list[float]:  # type: ignore[no-untyped-def]
    for i in range(min(warm, reps)):  # warm-up, not timed
        fn(i)
    samples = []
    for i in range(reps):
        t0 = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t0)
    return samples


class Precomputed:
    """``model``, answering from vectors computed beforehand for known texts (the corpus) and
    asking the model for any other text (the query texts). The corpus is written WITHOUT
    vectors, so the namespace is the embedder's own and a text query embeds its text, as in
    production; the ingest just does not spend 100,000 embeddings again."""

    def __init__(self, model: Any, texts: list[str], vecs: np.ndarray) -> None:
        self.model, self.name, self.dim = model, model.name, model.dim
        self._known = dict(zip(texts, vecs, strict=True))

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), np.float32)
        todo = []
        for i, text in enumerate(texts):
            vec = self._known.get(text)
            if vec is None:
                todo.append(i)
            else:
                out[i] = vec
        if todo:
            out[todo] = self.model.embed([texts[i] for i in todo])
        return out


def bench_big(root: Path, n: int, reps: int, embedder: object) -> dict:
    texts = sentences(n + reps, seed=1)
    vecs = embed_cached(texts, embedder)
    corpus, queries = vecs[:n], vecs[n:]
    out: dict = {"n": n, "reps": reps}
    model = Precomputed(embedder, texts[:n], corpus)
    with synapsedb.open(root / "big", durability="os", embedder=model) as db:
        mem = db.namespace("big")
        t0 = time.perf_counter()
        for i in range(0, n, 5000):
            mem.write_many(
                [
                    {
                        "entity": f"user:{j % 5000}",
                        "content": texts[j],
                        "metadata": {"bucket": j % 100, "channel": ("email", "chat")[j % 2]},
                    }
                    for j in range(i, min(n, i + 5000))
                ]
            )
        out["ingest_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        db.wait_for_indexes()
        out["index_s"] = time.perf_counter() - t0
        state = db._state("big")
        assert state is not None and state.hnsw is not None
        cat, graph = state.catalog, state.hnsw
        out["hnsw"] = {
            "m": graph.m,
            "ef_construction": graph.ef_construction,
            "ef": graph.ef_search,
        }
        # the floor, in the same run: raw hnswlib with the engine's graph settings on the same
        # vectors, one thread, unfiltered, k=10 (timed before and after the engine's rows)
        raw = raw_index(corpus, graph.m, graph.ef_construction)
        raw.set_ef(graph.ef_search)
        unit_q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        floor = [timed(lambda i: raw.knn_query(unit_q[i], k=10), reps)]
        out["load_before"] = os.getloadavg()[0]
        filters = [
            ("none", None, np.ones(n, bool)),
            ("50%", {"channel": "email"}, np.arange(n) % 2 == 0),
            ("10%", {"bucket": {"$lt": 10}}, np.arange(n) % 100 < 10),
            ("1%", {"bucket": 7}, np.arange(n) % 100 == 7),
        ]
        for label, flt, _ in filters:
            s = timed(
                lambda i, flt=flt: mem.query(embedding=queries[i], filter=flt, k=10, mode="vector"),
                reps,
            )
            out[f"vec_{label}"] = (pct(s, 50), pct(s, 99))
            s = timed(lambda i, flt=flt: mem.query(embedding=queries[i], filter=flt, k=10), reps)
            out[f"hyb_{label}"] = (pct(s, 50), pct(s, 99))
        floor.append(timed(lambda i: raw.knn_query(unit_q[i], k=10), reps))
        out["load_after"] = os.getloadavg()[0]
        out["floor"] = [(pct(f, 50), pct(f, 99)) for f in floor]
        # recall@10 against the exact top 10 among the rows each filter keeps (dedup off, so
        # near-duplicates are not collapsed out of the comparison), and the raw index's
        m = min(reps, 300)
        unit_c = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
        truth: dict[str, list[set[str]]] = {}

        def recall(keep: np.ndarray, flt: Any) -> float:
            key = repr(flt)
            if key not in truth:
                rows = np.flatnonzero(keep)
                truth[key] = [
                    {cat.recs[r].id for r in rows[np.argsort(-(unit_c[rows] @ unit_q[i]))[:10]]}
                    for i in range(m)
                ]
            got = []
            for i in range(m):
                hits = mem.query(embedding=queries[i], filter=flt, mode="vector", k=10, dedup=False)
                got.append(len({h.id for h in hits} & truth[key][i]) / 10)
            return float(np.mean(got))

        for label, flt, keep in filters:
            out[f"recall_{label}"] = recall(keep, flt)
        got = []
        for i in range(m):
            labels, _ = raw.knn_query(unit_q[i], k=10)
            got.append(
                len(set(labels[0].tolist()) & set(np.argsort(-(unit_c @ unit_q[i]))[:10].tolist()))
                / 10
            )
        out["recall_floor"] = float(np.mean(got))
        out["ann_recall"] = out["recall_none"]
        # what a lower query-time ef (the hnsw_ef_search setting) would give: the same rows
        # with the engine graph's ef changed in place, then put back
        out["ef_sweep"] = {}
        for ef in EF_SWEEP:
            graph.ef_search = ef
            try:
                for label, flt, keep in filters:
                    s = timed(
                        lambda i, flt=flt: mem.query(
                            embedding=queries[i], filter=flt, k=10, mode="vector"
                        ),
                        reps,
                    )
                    out["ef_sweep"][ef, label] = (pct(s, 50), pct(s, 99), recall(keep, flt))
            finally:
                graph.ef_search = out["hnsw"]["ef"]
        assert mem.stats().embedder == embedder.name  # type: ignore[attr-defined]
        qtexts = texts[n:]
        s = timed(lambda i: mem.query(qtexts[i], k=10, mode="keyword"), reps)
        out["text_keyword"] = (pct(s, 50), pct(s, 99))
        # every timed text query embeds its text: warm up on other texts (the engine caches
        # query embeddings by text)
        warm = sentences(30, seed=2)
        for text in warm:
            mem.query(text, k=10)
        s = timed(lambda i: mem.query(qtexts[i], k=10), reps, warm=0)
        out["text_hybrid"] = (pct(s, 50), pct(s, 99))
        s = timed(lambda i: mem.query(qtexts[i], k=10, filter={"bucket": {"$lt": 10}}), reps)
        out["text_hybrid_10"] = (pct(s, 50), pct(s, 99))
        # the floor of the text row: the embedder alone (tokenizer + onnxruntime) on the same
        # texts, measured in the same run (the engine's query-embedding cache is not involved)
        s = timed(lambda i: embedder.embed([qtexts[i]]), reps)  # type: ignore[attr-defined]
        out["embed_alone"] = (pct(s, 50), pct(s, 99))
    return out


def raw_index(corpus: np.ndarray, m: int, ef_construction: int) -> Any:
    """Raw hnswlib over ``corpus`` (inner product of unit vectors, as the engine's graph), built
    with every core; searched with one thread."""
    import hnswlib  # type: ignore[import-untyped]

    t0 = time.perf_counter()
    index = hnswlib.Index(space="ip", dim=corpus.shape[1])
    index.init_index(max_elements=corpus.shape[0], ef_construction=ef_construction, M=m)
    index.add_items(corpus / np.linalg.norm(corpus, axis=1, keepdims=True))
    index.set_num_threads(1)
    print(f"  raw hnswlib built in {time.perf_counter() - t0:.1f} s", flush=True)
    return index


def raw_read(path: Path) -> tuple[float, float]:
    """The floor of a reopen: reading the same memory rows from SQLite, in commit order, with
    nothing done with them (the engine checks each one and builds its state from it).
    Returns (wall, CPU) seconds."""
    import sqlite3

    conn = sqlite3.connect(f"file:{path / 'synapse.db'}?mode=ro", uri=True)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        cur = conn.execute(
            "SELECT ns, id, version, sys_us, created_us, entity, type, content, metadata, "
            "embedding, salience, ts_us, agent, pinned, ttl, expires_us, deleted, erased "
            "FROM memory_versions ORDER BY rowid"
        )
        while cur.fetchmany(4096):
            pass
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        conn.close()


def build_many(path: Path, namespaces: int, per: int, reps: int) -> dict:
    dim = 384
    gc.collect()
    rss0 = rss_mib()
    rng = np.random.default_rng(3)
    t0 = time.perf_counter()
    with synapsedb.open(path, durability="os", embedder=None) as db:
        for ns in range(namespaces):
            v = rng.standard_normal((per, dim), dtype=np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            db.namespace(f"user-{ns}").write_many(
                [
                    {
                        "entity": f"user:{ns}",
                        "content": f"memory {j} of user {ns} about topic {j % 7}",
                        "embedding": v[j],
                    }
                    for j in range(per)
                ]
            )
            if ns % 500 == 0:
                print(f"  namespaces {ns:,}/{namespaces:,}", end="\r", flush=True)
        ingest_s = time.perf_counter() - t0
        gc.collect()
        rss_loaded = rss_mib()
        q = rng.standard_normal((reps, dim), dtype=np.float32)
        picks = rng.integers(0, namespaces, reps)
        handles = [db.namespace(f"user-{p}") for p in picks]
        s = timed(lambda i: handles[i].query(embedding=q[i], k=10, mode="vector"), reps)
        s2 = timed(lambda i: handles[i].query(embedding=q[i], k=10), reps)
    return {
        "ingest_s": ingest_s,
        "rss_mib": rss_loaded - rss0,
        "vec": (pct(s, 50), pct(s, 99)),
        "hybrid": (pct(s2, 50), pct(s2, 99)),
    }


def reopen_many(path: Path, namespaces: int, reps: int) -> dict:
    """A restart, in a fresh process (resident memory is not blurred by what this one freed):
    the time until open returns (load = lazy: it reads the namespace names only), the first
    query of namespaces right after it (each its namespace's first: loaded on that need unless
    the background thread got there first), the time until the background has loaded every
    namespace, resident memory then, and an open with load = eager for comparison. The floor
    is read in the same process first (which also leaves the file in the page cache). A data
    directory of an older schema is upgraded by a first open, not timed."""
    subprocess.run(
        [sys.executable, __file__, "--reopen-child", str(path), "0", "0"],
        capture_output=True,
        text=True,
        check=True,
    )
    out = subprocess.run(
        [sys.executable, __file__, "--reopen-child", str(path), str(namespaces), str(reps)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def reopen_child(path: Path, namespaces: int, reps: int) -> dict:
    if not namespaces:  # the untimed first open (a schema upgrade, when one is due)
        synapsedb.open(path, durability="os", embedder=None, load="lazy").close()
        return {}
    floor_s, floor_cpu = raw_read(path)
    dim = 384
    rng = np.random.default_rng(4)
    q = rng.standard_normal((reps, dim), dtype=np.float32)
    picks = rng.permutation(namespaces)[:reps]  # distinct: each query is its namespace's first
    gc.collect()
    rss1 = rss_mib()
    t0, c0 = time.perf_counter(), time.process_time()
    with synapsedb.open(path, durability="os", embedder=None, load="lazy") as db:
        reopen_s, reopen_cpu = time.perf_counter() - t0, time.process_time() - c0
        pending_at_open = db.core.loading_pending
        handles = [db.namespace(f"user-{p}") for p in picks]
        not_loaded = 0

        def first(i: int) -> Any:
            nonlocal not_loaded
            not_loaded += f"user-{picks[i]}" in db.core.states.pending
            return handles[i].query(embedding=q[i], k=10, mode="vector")

        first_vec = timed(first, reps)
        while db.core.loading_pending:  # the background thread (and the memory loop) load
            time.sleep(0.01)
        loaded_s = time.perf_counter() - t0
        gc.collect()
        rss_loaded = rss_mib() - rss1
        first_text = timed(lambda i: handles[i].query(f"memory about topic {i % 7}", k=10), reps)
        again_text = timed(lambda i: handles[i].query(f"topic {i % 5} memory", k=10), reps)
        gc.collect()
        rss_queried = rss_mib() - rss1
    gc.collect()
    t0 = time.perf_counter()
    with synapsedb.open(path, durability="os", embedder=None, load="eager"):
        eager_s = time.perf_counter() - t0
    return {
        "floor_s": floor_s,
        "floor_cpu": floor_cpu,
        "reopen_s": reopen_s,
        "reopen_cpu": reopen_cpu,
        "pending_at_open": pending_at_open,
        "loaded_s": loaded_s,
        "eager_s": eager_s,
        "load": os.getloadavg()[0],
        "rss_loaded_mib": rss_loaded,
        "rss_queried_mib": rss_queried,
        "first_vec": (pct(first_vec, 50), pct(first_vec, 99)),
        "first_vec_not_loaded": not_loaded,
        "first_text": (pct(first_text, 50), pct(first_text, 99)),
        "again_text": (pct(again_text, 50), pct(again_text, 99)),
        "queried": reps,
    }


def bench_many(root: Path, namespaces: int, per: int, reps: int, keep: Path | None) -> dict:
    path = keep if keep is not None else root / "many"
    if keep is not None and (keep / "synapse.db").exists():
        built: dict = {"ingest_s": None, "rss_mib": None, "vec": None, "hybrid": None}
        print(f"  reusing {keep}", flush=True)
    else:
        built = build_many(path, namespaces, per, reps)
    out = reopen_many(path, namespaces, min(reps, namespaces))
    return {
        "namespaces": namespaces,
        "per": per,
        "raw_mib": namespaces * per * 384 * 4 / 2**20,
        **built,
        **out,
    }


def many_lines(many: dict, ok) -> list[str]:  # type: ignore[no-untyped-def]
    raw = many["raw_mib"]
    head = f"{many['namespaces']:,} namespaces x {many['per']} memories (384-d): "
    if many["ingest_s"] is not None:
        head += (
            f"ingest {many['ingest_s']:.1f} s; query p50 / p99 {many['vec'][0] / 1000:.3f} / "
            f"{many['vec'][1] / 1000:.3f} ms (mode=vector; target p50 <= 0.5: "
            f"{ok(many['vec'][0], 500)}), hybrid without text {many['hybrid'][0] / 1000:.3f} / "
            f"{many['hybrid'][1] / 1000:.3f} ms; resident memory +{many['rss_mib']:.0f} MiB for "
            f"{raw:.0f} MiB of raw vectors = {many['rss_mib'] / raw:.2f}x "
            f"(target <= 2x: {ok(many['rss_mib'] / raw, 2.0)}); "
        )
    floor = many["floor_s"]
    return [
        head + f"after a reopen, once every namespace is loaded, +{many['rss_loaded_mib']:.0f} MiB "
        f"({many['rss_loaded_mib'] / raw:.2f}x the raw vectors); open returns in "
        f"{many['reopen_s']:.2f} s (target <= 5: {ok(many['reopen_s'], 5.0)}).",
        "",
        "| reopen of the namespaces (load = lazy) | value | floor in the same run | ratio |",
        "|---|---|---|---|",
        f"| open returns (reads {many['pending_at_open']:,} namespace names and the latest "
        f"stored time), wall | {many['reopen_s']:.2f} s | reading every memory row from SQLite: "
        f"{floor:.1f} s | {many['reopen_s'] / floor:.2f}x |",
        f"| open, CPU time | {many['reopen_cpu']:.2f} s | {many['floor_cpu']:.1f} s | "
        f"{many['reopen_cpu'] / many['floor_cpu']:.2f}x |",
        f"| first vector query of a namespace right after the open (p50 / p99, "
        f"{many['queried']:,} namespaces, {many['first_vec_not_loaded']:,} of them not loaded "
        f"yet when asked) | {many['first_vec'][0] / 1000:.3f} / "
        f"{many['first_vec'][1] / 1000:.3f} ms | | |",
        f"| every namespace loaded by the background thread, since the open began | "
        f"{many['loaded_s']:.1f} s | {floor:.1f} s | {many['loaded_s'] / floor:.2f}x |",
        f"| resident memory once every namespace is loaded (fresh process) | "
        f"+{many['rss_loaded_mib']:.0f} MiB | raw vectors: {raw:.0f} MiB | "
        f"{many['rss_loaded_mib'] / raw:.2f}x |",
        f"| resident memory after the text queries below | +{many['rss_queried_mib']:.0f} MiB "
        f"| | {many['rss_queried_mib'] / raw:.2f}x |",
        f"| first text query of a namespace (builds its keyword index) | "
        f"{many['first_text'][0] / 1000:.3f} / {many['first_text'][1] / 1000:.3f} ms | | |",
        f"| next text query of the namespace | {many['again_text'][0] / 1000:.3f} / "
        f"{many['again_text'][1] / 1000:.3f} ms | | |",
        f"| open with load = eager (every namespace loaded before it returns) | "
        f"{many['eager_s']:.1f} s | {floor:.1f} s | {many['eager_s'] / floor:.2f}x |",
        "",
        f"Load average (1 min) at the end: {many['load']:.2f}.",
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-report", action="store_true")
    ap.add_argument(
        "--many-only", action="store_true", help="only the many-namespaces part (and its reopen)"
    )
    ap.add_argument(
        "--big-only", action="store_true", help="only the one large namespace (no many-namespaces)"
    )
    ap.add_argument(
        "--many-dir",
        type=Path,
        help="keep the many-namespaces data here; when it exists, only the reopen is measured",
    )
    ap.add_argument("--reopen-child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    q = args.quick
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    # one BLAS thread, as `synapsedb serve` runs (--blas-threads 1): OpenBLAS's workers
    # busy-wait between calls (the recall check's exact scans here) and, on 2 cores, take the
    # CPU from the queries and the embedder timed after them
    threadpool_limits(limits=1, user_api="blas")
    if args.reopen_child:
        path, namespaces, reps = args.reopen_child
        print(json.dumps(reopen_child(Path(path), int(namespaces), int(reps))))
        return

    def ok(v: float, target: float, higher: bool = False) -> str:
        return "met" if (v >= target if higher else v <= target) else "**missed**"

    root = Path(tempfile.mkdtemp(prefix="synapsedb-bench-"))
    many_args = (1000 if q else 10_000, 100, 500 if q else 2000, args.many_dir)
    if args.many_only:
        try:
            many = bench_many(root, *many_args)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print("many", many, flush=True)
        if args.no_report:
            print("\n".join(many_lines(many, ok)))
        else:
            append_report(
                "Reopen of many namespaces" + (" (quick)" if q else ""),
                "python bench/bench_retrieval.py --many-only"
                + (" --quick" if q else "")
                + (f" --many-dir {args.many_dir}" if args.many_dir else ""),
                many_lines(many, ok),
                data=many,
            )
        return
    from synapsedb.embed import OnnxMiniLM

    embedder = OnnxMiniLM()
    try:
        big = bench_big(root, 20_000 if q else 100_000, 200 if q else 1000, embedder)
        print("big", big, flush=True)
        many = None if args.big_only else bench_many(root, *many_args)
        print("many", many, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    n = big["n"]
    lines = [
        f"{n:,} memories in one namespace (generated support sentences written as text, embedded by the database's MiniLM: vectors computed once and cached), "
        f"ingest {big['ingest_s']:.1f} s, HNSW catch-up after ingest {big['index_s']:.1f} s.",
        "",
        "| query (k=10) | filter keeps | p50 ms | p99 ms | p50 / floor | recall@10 vs exact "
        "| target |",
        "|---|---|---|---|---|---|---|",
    ]
    f50 = float(np.mean([f[0] for f in big["floor"]]))
    f99 = float(np.mean([f[1] for f in big["floor"]]))
    hp = big["hnsw"]
    lines.append(
        f"| floor: raw hnswlib (M {hp['m']}, ef_construction {hp['ef_construction']}, ef "
        f"{hp['ef']}, one thread), unfiltered | none | {f50 / 1000:.3f} | {f99 / 1000:.3f} | 1.0x "
        f"| {big['recall_floor']:.3f} | |"
    )
    for label in ("none", "50%", "10%", "1%"):
        p50, p99 = big[f"vec_{label}"]
        verdict = f"p50 <= 1, p99 <= 5: {ok(p50, 1000)} / {ok(p99, 5000)}"
        lines.append(
            f"| caller vector, mode=vector | {label} | {p50 / 1000:.3f} | {p99 / 1000:.3f} "
            f"| {p50 / f50:.2f}x | {big[f'recall_{label}']:.3f} | {verdict} |"
        )
    for label in ("none", "50%", "10%", "1%"):
        p50, p99 = big[f"hyb_{label}"]
        lines.append(
            f"| caller vector, mode=hybrid (no text) | {label} | {p50 / 1000:.3f} "
            f"| {p99 / 1000:.3f} | {p50 / f50:.2f}x | | |"
        )
    for (ef, label), (p50, p99, rec) in big["ef_sweep"].items():
        lines.append(
            f"| caller vector, mode=vector, query-time ef {ef} instead of {hp['ef']} | {label} "
            f"| {p50 / 1000:.3f} | {p99 / 1000:.3f} | {p50 / f50:.2f}x | {rec:.3f} "
            f"| p50 <= 1: {ok(p50, 1000)} |"
        )
    if "text_keyword" in big:
        p50, p99 = big["text_keyword"]
        lines.append(
            f"| text, mode=keyword (BM25 alone, no embedding) | all | {p50 / 1000:.2f} "
            f"| {p99 / 1000:.2f} | | | |"
        )
    p50, p99 = big["text_hybrid"]
    lines.append(
        f"| text, hybrid, embedding included (each text new to the query cache) | all "
        f"| {p50 / 1000:.2f} | {p99 / 1000:.2f} | | | p50 <= 5 {ok(p50, 5000)} |"
    )
    t50 = p50
    p50, p99 = big["text_hybrid_10"]
    lines.append(
        f"| text, hybrid, the same texts again (query embedding cached) | 10% | {p50 / 1000:.2f} "
        f"| {p99 / 1000:.2f} | | | |"
    )
    if "embed_alone" in big:
        e50, e99 = big["embed_alone"]
        lines.append(
            f"| floor: the embedder alone (tokenizer + onnxruntime), the same texts | - "
            f"| {e50 / 1000:.2f} | {e99 / 1000:.2f} | | | text query p50 / this p50: "
            f"{t50 / e50:.2f}x |"
        )
    lines += [
        "",
        f"ANN recall@10 against exact (unfiltered, real MiniLM vectors): {big['ann_recall']:.3f} "
        f"(target >= 0.95: {ok(big['ann_recall'], 0.95, True)}); recall per filter: the engine's "
        f"query with dedup off against the exact top 10 among the rows the filter keeps, "
        f"{min(big['reps'], 300)} queries. Floor p50 before / after the engine's rows: "
        + " / ".join(f"{f[0] / 1000:.3f}" for f in big["floor"])
        + f" ms; load average (1 min) {big['load_before']:.2f} before the rows, "
        f"{big['load_after']:.2f} after.",
        *([] if many is None else ["", *many_lines(many, ok)]),
    ]
    if not args.no_report:
        append_report(
            "Retrieval speed" + (" (quick)" if q else ""),
            "python bench/bench_retrieval.py"
            + (" --quick" if q else "")
            + (" --big-only" if args.big_only else " (part of make bench)"),
            lines,
            data={"big": big, "many": many},
        )
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
