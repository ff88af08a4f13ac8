"""Measure the OnnxMiniLM embedder: export, size, load, RSS, latency, throughput, accuracy.

    python tools/bench_embed.py [--threads 2] [--compare]

Runs in a fresh process so that RSS means something. Export goes to a temp dir; the rest loads
that export. ``--compare`` also measures the float32 graph and onnxruntime's ``quantize_dynamic``
(uint8 per-channel weights AND uint8 per-tensor activations) on the same texts, which is the
evidence for choosing weight-only quantization. Timings are wall clock on a shared machine:
run it on a quiet one and read them as rough numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    from synapsedb.embed import export as ex
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from synapsedb.embed import export as ex

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "embed" / "reference_vectors.json"
SUBJECTS = ["The user", "Alice", "Our customer in Lisbon", "The on-call engineer", "Bob's manager"]
VERBS = ["prefers", "asked about", "complained about", "wants a reminder for", "cancelled"]
OBJECTS = [
    "dark mode in the editor",
    "the invoice from March that was charged twice",
    "a vegetarian option at the team dinner on Friday",
    "the flaky integration test in the payments service, which fails about once a week",
    "renewing the TLS certificate before it expires on the 14th",
    "moving the weekly sync to Tuesday mornings because of the time zone difference",
]


def rss_mb() -> float:
    """Resident set size of this process in MB, from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def corpus(n: int) -> list[str]:
    """``n`` deterministic memory-like sentences of 8 to 30 tokens."""
    rng = np.random.default_rng(0)
    return [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}." for _ in range(n)]


def measure(emb: object, label: str, single: int, batches: int) -> dict[str, float]:
    """Accuracy vs golden, single-text latency and batch-32 throughput of one embedder."""
    gold = json.loads(GOLDEN.read_text("utf-8"))
    texts = [it["text"] for it in gold["items"]]
    ref = np.array([it["vector"] for it in gold["items"]])
    batch = emb.embed(texts)  # type: ignore[attr-defined]
    alone = np.concatenate([emb.embed([t]) for t in texts])  # type: ignore[attr-defined]
    cos, sb = (batch * ref).sum(1), (batch * alone).sum(1)
    queries = corpus(64)
    for q in queries[:10]:
        emb.embed([q])  # type: ignore[attr-defined]
    lat = []
    for i in range(single):
        t0 = time.perf_counter()
        emb.embed([queries[i % len(queries)]])  # type: ignore[attr-defined]
        lat.append(time.perf_counter() - t0)
    docs = corpus(32 * batches)
    t0 = time.perf_counter()
    for b in range(batches):
        emb.embed(docs[32 * b : 32 * (b + 1)])  # type: ignore[attr-defined]
    thr = 32 * batches / (time.perf_counter() - t0)
    res = {
        "cos_min": float(cos.min()),
        "cos_mean": float(cos.mean()),
        "batch_vs_single_min": float(sb.min()),
        "p50_ms": float(np.percentile(lat, 50) * 1e3),
        "p99_ms": float(np.percentile(lat, 99) * 1e3),
        "batch32_texts_per_s": thr,
    }
    print(
        f"{label:22s} cos vs golden min {res['cos_min']:.4f} mean {res['cos_mean']:.4f} | "
        f"batch-vs-alone min {res['batch_vs_single_min']:.5f} | single p50 {res['p50_ms']:.2f} ms "
        f"p99 {res['p99_ms']:.2f} ms | batch-32 {thr:.0f} texts/s"
    )
    return res


def variant(folder: Path, kind: str) -> Path:
    """Write a float32 or quantize_dynamic model into ``folder`` under the embedder's file name."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder.mkdir(parents=True)
    src = ex.source_dir()
    (folder / ex.TOKENIZER_FILE).write_bytes((src / "tokenizer.json").read_bytes())
    model = ex.build_model(src, quantize=False)
    out = folder / ex.MODEL_FILE
    if kind == "fp32":
        onnx.save(model, str(out))
        return out
    logging.getLogger().addFilter(lambda r: "pre-processing" not in r.getMessage())
    quantize_dynamic(model, str(out), weight_type=QuantType.QUInt8, per_channel=True)
    quantized = onnx.load(str(out))  # keep the metadata, or the embedder would re-export
    onnx.helper.set_model_props(quantized, {p.key: p.value for p in model.metadata_props})
    onnx.save(quantized, str(out))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the measurements and print them (and JSON with --json)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2, help="intra_op_num_threads")
    ap.add_argument("--single", type=int, default=500, help="single-text calls timed")
    ap.add_argument("--batches", type=int, default=30, help="batches of 32 timed")
    ap.add_argument("--compare", action="store_true", help="also fp32 and quantize_dynamic")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = ap.parse_args(argv)
    rss0 = rss_mb()
    results: dict[str, object] = {"rss_start_mb": rss0}
    with tempfile.TemporaryDirectory(prefix="synapsedb-bench-") as tmp:
        # Export in a child process (as tools/export_model.py) so it doesn't inflate our RSS.
        tool = Path(__file__).resolve().parent / "export_model.py"
        t0 = time.perf_counter()
        cmd = [sys.executable, str(tool), "--model-dir", str(Path(tmp) / "u8")]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        results["export_wall_s"] = time.perf_counter() - t0
        print(done.stdout.strip().splitlines()[-1])
        print(
            f"export wall time incl. interpreter start and imports: {results['export_wall_s']:.2f} s"
        )
        results["model_mb"] = (Path(tmp) / "u8" / ex.MODEL_FILE).stat().st_size / 1e6
        from synapsedb.embed import OnnxMiniLM

        rss1 = rss_mb()
        t0 = time.perf_counter()
        emb = OnnxMiniLM(Path(tmp) / "u8", intra_op_num_threads=args.threads)
        load_s = time.perf_counter() - t0
        results["load_s"] = load_s
        emb.embed(["warm up"])
        results["rss_after_load_mb"] = rss_mb()
        print(
            f"load {load_s * 1e3:.0f} ms | RSS at start {rss0:.0f} MB, after imports "
            f"{rss1:.0f} MB, after load + 1 embed {results['rss_after_load_mb']:.0f} MB"
        )
        results["uint8_weight_only"] = measure(emb, "uint8 weight-only", args.single, args.batches)
        if args.compare:
            for kind in ("fp32", "dynamic"):
                folder = Path(tmp) / kind
                path = variant(folder, kind)
                print(f"{kind}: {path.stat().st_size / 1e6:.1f} MB")
                other = OnnxMiniLM(folder, intra_op_num_threads=args.threads)
                results[kind] = measure(other, kind, args.single, args.batches)
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
