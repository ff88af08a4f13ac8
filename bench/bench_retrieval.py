"""Retrieval speed benchmark (issue: retrieval). In-process, on this machine.

Targets: query with a caller vector at 100,000 memories with a metadata filter p50 <= 1 ms,
p99 <= 5 ms, ANN recall@10 against exact >= 0.95 on real MiniLM vectors; query from text
(embedding included) p50 <= 5 ms; 10,000 namespaces of 100 memories: query p50 <= 0.5 ms and
resident memory within 2x of the raw vectors.

Usage: python bench/bench_retrieval.py [--quick] [--no-report]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import append_report, pct, rss_mib

import synapsedb

CACHE = Path(tempfile.gettempdir()) / "synapsedb-bench-cache"

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


def timed(fn, reps: int) -> list[float]:  # type: ignore[no-untyped-def]
    samples = []
    for i in range(reps):
        t0 = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t0)
    return samples


def bench_big(root: Path, n: int, reps: int, embedder: object) -> dict:
    texts = sentences(n + reps, seed=1)
    vecs = embed_cached(texts, embedder)
    corpus, queries = vecs[:n], vecs[n:]
    out: dict = {"n": n}
    with synapsedb.open(root / "big", durability="os", embedder=embedder) as db:
        mem = db.namespace("big")
        t0 = time.perf_counter()
        for i in range(0, n, 5000):
            mem.write_many(
                [
                    {
                        "entity": f"user:{j % 5000}",
                        "content": texts[j],
                        "embedding": corpus[j],
                        "metadata": {"bucket": j % 100, "channel": ("email", "chat")[j % 2]},
                    }
                    for j in range(i, min(n, i + 5000))
                ]
            )
        out["ingest_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        db.wait_for_indexes()
        out["index_s"] = time.perf_counter() - t0
        # ANN recall@10 against exact, unfiltered
        ids = [m.id for m in mem.memories(limit=10_000)]  # warm
        del ids
        state = db._state("big")
        assert state is not None
        cat = state.catalog
        recall = []
        for i in range(min(reps, 300)):
            got = {h.id for h in mem.query(embedding=queries[i], mode="vector", k=10, dedup=False)}
            exact_rows = np.argsort(-(corpus @ queries[i]))[:10]
            recall.append(len(got & {cat.recs[r].id for r in exact_rows}) / 10)
        out["ann_recall"] = float(np.mean(recall))
        for label, flt in [
            ("none", None),
            ("50%", {"channel": "email"}),
            ("10%", {"bucket": {"$lt": 10}}),
            ("1%", {"bucket": 7}),
        ]:
            s = timed(
                lambda i, flt=flt: mem.query(embedding=queries[i], filter=flt, k=10, mode="vector"),
                reps,
            )
            out[f"vec_{label}"] = (pct(s, 50), pct(s, 99))
            s = timed(lambda i, flt=flt: mem.query(embedding=queries[i], filter=flt, k=10), reps)
            out[f"hyb_{label}"] = (pct(s, 50), pct(s, 99))
        qtexts = texts[n:]
        s = timed(lambda i: mem.query(qtexts[i], k=10), reps)
        out["text_hybrid"] = (pct(s, 50), pct(s, 99))
        s = timed(lambda i: mem.query(qtexts[i], k=10, filter={"bucket": {"$lt": 10}}), reps)
        out["text_hybrid_10"] = (pct(s, 50), pct(s, 99))
    return out


def bench_many(root: Path, namespaces: int, per: int, reps: int) -> dict:
    dim = 384
    gc.collect()
    rss0 = rss_mib()
    rng = np.random.default_rng(3)
    t0 = time.perf_counter()
    with synapsedb.open(root / "many", durability="os", embedder=None) as db:
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
        raw = namespaces * per * dim * 4 / 2**20
        q = rng.standard_normal((reps, dim), dtype=np.float32)
        picks = rng.integers(0, namespaces, reps)
        handles = [db.namespace(f"user-{p}") for p in picks]
        s = timed(lambda i: handles[i].query(embedding=q[i], k=10, mode="vector"), reps)
        s2 = timed(lambda i: handles[i].query(embedding=q[i], k=10), reps)
    # reopen: what a restart needs
    gc.collect()
    rss1 = rss_mib()
    t0 = time.perf_counter()
    with synapsedb.open(root / "many", durability="os", embedder=None) as db:
        reopen_s = time.perf_counter() - t0
        gc.collect()
        rss_reopened = rss_mib() - rss1
    return {
        "namespaces": namespaces,
        "per": per,
        "ingest_s": ingest_s,
        "raw_mib": raw,
        "rss_mib": rss_loaded - rss0,
        "rss_reopened_mib": rss_reopened,
        "reopen_s": reopen_s,
        "vec": (pct(s, 50), pct(s, 99)),
        "hybrid": (pct(s2, 50), pct(s2, 99)),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    q = args.quick
    from synapsedb.embed import OnnxMiniLM

    embedder = OnnxMiniLM()
    root = Path(tempfile.mkdtemp(prefix="synapsedb-bench-"))
    try:
        big = bench_big(root, 20_000 if q else 100_000, 200 if q else 1000, embedder)
        print("big", big, flush=True)
        many = bench_many(root, 1000 if q else 10_000, 100, 500 if q else 2000)
        print("many", many, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def ok(v: float, target: float, higher: bool = False) -> str:
        return "met" if (v >= target if higher else v <= target) else "**missed**"

    n = big["n"]
    lines = [
        f"{n:,} memories in one namespace (generated support sentences, real MiniLM vectors), "
        f"ingest {big['ingest_s']:.1f} s, HNSW catch-up after ingest {big['index_s']:.1f} s.",
        "",
        "| query (k=10) | filter keeps | p50 ms | p99 ms | target |",
        "|---|---|---|---|---|",
    ]
    for label in ("none", "50%", "10%", "1%"):
        p50, p99 = big[f"vec_{label}"]
        tgt = "p50 <= 1, p99 <= 5" if label != "none" else ""
        verdict = f"{ok(p50, 1000)} / {ok(p99, 5000)}" if label != "none" else ""
        lines.append(
            f"| caller vector, mode=vector | {label} | {p50 / 1000:.2f} | {p99 / 1000:.2f} "
            f"| {tgt} {verdict} |"
        )
    for label in ("none", "50%", "10%", "1%"):
        p50, p99 = big[f"hyb_{label}"]
        lines.append(
            f"| caller vector, mode=hybrid (no text) | {label} | {p50 / 1000:.2f} | {p99 / 1000:.2f} | |"
        )
    p50, p99 = big["text_hybrid"]
    lines.append(
        f"| text, hybrid, embedding included | all | {p50 / 1000:.2f} | {p99 / 1000:.2f} "
        f"| p50 <= 5 {ok(p50, 5000)} |"
    )
    p50, p99 = big["text_hybrid_10"]
    lines.append(
        f"| text, hybrid, embedding included | 10% | {p50 / 1000:.2f} | {p99 / 1000:.2f} | |"
    )
    lines += [
        "",
        f"ANN recall@10 against exact (unfiltered, real MiniLM vectors): {big['ann_recall']:.3f} "
        f"(target >= 0.95: {ok(big['ann_recall'], 0.95, True)}).",
        "",
        f"{many['namespaces']:,} namespaces x {many['per']} memories (384-d): "
        f"ingest {many['ingest_s']:.1f} s; query p50 / p99 {many['vec'][0] / 1000:.3f} / "
        f"{many['vec'][1] / 1000:.3f} ms (mode=vector; target p50 <= 0.5: "
        f"{ok(many['vec'][0], 500)}), hybrid without text {many['hybrid'][0] / 1000:.3f} / "
        f"{many['hybrid'][1] / 1000:.3f} ms; resident memory +{many['rss_mib']:.0f} MiB for "
        f"{many['raw_mib']:.0f} MiB of raw vectors = {many['rss_mib'] / many['raw_mib']:.2f}x "
        f"(target <= 2x: {ok(many['rss_mib'] / many['raw_mib'], 2.0)}); after a reopen "
        f"+{many['rss_reopened_mib']:.0f} MiB ({many['rss_reopened_mib'] / many['raw_mib']:.2f}x), "
        f"reopen {many['reopen_s']:.1f} s.",
    ]
    if not args.no_report:
        append_report(
            "Retrieval speed" + (" (quick)" if q else ""),
            "python bench/bench_retrieval.py" + (" --quick" if q else "") + " (part of make bench)",
            lines,
        )
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
