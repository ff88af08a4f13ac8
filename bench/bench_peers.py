"""SynapseDB side by side with what users would pick instead, in one run on one machine.

Systems: SynapseDB embedded and over HTTP; Chroma in-process and its HTTP server; mem0 OSS
(infer=False, no LLM); redis-server for KV; raw hnswlib and exact numpy as the floor of the
vector path. Workloads: ingest and query latency (with and without a filter) at 10k, 100k and
1M memories; KV get/set; 10,000 small namespaces of 100 memories; a mixed read/write run; LoCoMo
dev evidence recall. Every system gets the same vectors (synthetic clustered 384-d unit vectors
for the scale workloads, MiniLM for LoCoMo); each workload of each system runs in its own child
process (bench/peers/child.py). Ratios are computed within this run, pair by pair.

Usage: python bench/bench_peers.py [--quick] [--no-report] [--only vector,kv,...]
                                   [--systems a,b,...] [--all-at-1m]
       (make bench-peers sets up .venv-peers and runs this under flock)

Bounded: every child has a time budget and a hard timeout; a system that cannot finish a size
in its budget (predicted from the previous size) is skipped and the report says so. At 1M the
default run measures SynapseDB embedded, Chroma in-process, raw hnswlib and numpy (the floor and
the peer the targets name; 1M has a budget of 720 s each, about 25 minutes for the four on 2
cores); --all-at-1m tries the others too (predicted, so most are still skipped). The default
run aims at <= 60 minutes (its deadline is 55), --quick at <= 5. For SynapseDB embedded each
size also records the resident memory after ingest and the close + reopen time to the first
answered query.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))
from common import ROOT, append_report, git_rev, machine  # noqa: E402
from report import (  # noqa: E402
    fmt_n,
    fmt_num,
    fmt_ratio,
    ratio,
    table,
    target_line,
)
from scale import largest_targets, memory_reopen_table  # noqa: E402
from systems import DIM, LABELS, free_port, start_synapse_server, wait_until  # noqa: E402

CHILD = HERE / "peers" / "child.py"
IMG = ROOT / "docs" / "img"
VECTOR_SYSTEMS = [
    "synapsedb",
    "synapsedb-http",
    "chroma",
    "chroma-http",
    "mem0",
    "hnswlib",
    "numpy",
]
T_START = time.monotonic()


def log(msg: str) -> None:
    el = time.monotonic() - T_START
    print(f"[{el // 60:02.0f}:{el % 60:02.0f}] {msg}", file=sys.stderr, flush=True)


class Plan:
    """Sizes, budgets (seconds) and the global deadline of one run."""

    def __init__(self, quick: bool, deadline_s: float) -> None:
        self.quick = quick
        self.deadline = T_START + deadline_s
        self.sizes = [2_000, 10_000] if quick else [10_000, 100_000, 1_000_000]
        self.budget = (
            {2_000: 30, 10_000: 60} if quick else {10_000: 120, 100_000: 360, 1_000_000: 720}
        )
        # the systems run at the largest size (others cost the run's bound, not its claims)
        self.largest = {"synapsedb", "chroma", "hnswlib", "numpy"}
        self.nq = 100 if quick else 200
        self.namespaces = 300 if quick else 10_000
        self.ns_budget = 20 if quick else 120
        self.mixed_base = 2_000 if quick else 10_000
        self.mixed_s = 4 if quick else 12
        self.kv_s = 3 if quick else 8
        self.stride = 8 if quick else 1
        self.rows = max(max(self.sizes), self.namespaces * 100, self.mixed_base + 50_000)

    def left(self) -> float:
        return self.deadline - time.monotonic()


def child_env() -> dict[str, str]:
    # One BLAS thread everywhere: on 2 shared cores OpenBLAS's second thread turns a 0.5 ms
    # matrix-vector product into 4-8 ms whenever anything else runs. Applies to all systems.
    return {
        **os.environ,
        "OPENBLAS_NUM_THREADS": "1",
        "MEM0_TELEMETRY": "False",
        "ANONYMIZED_TELEMETRY": "False",
        "TOKENIZERS_PARALLELISM": "false",
    }


def run_child(workload: str, system: str, timeout: float, **kw: Any) -> dict:
    cmd = [sys.executable, str(CHILD), workload, system]
    for k, v in kw.items():
        cmd += [f"--{k}", str(v)]
    t0 = time.monotonic()
    try:
        out = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=None, text=True, timeout=timeout, env=child_env()
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            res["child_s"] = time.monotonic() - t0
            return res
    return {"error": f"exit {out.returncode}, no result"}


def make_data(root: Path, rows: int, nq: int) -> Path:
    """Clustered unit vectors (200 centres + noise, like bench_http), written once."""
    d = root / "data"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((200, DIM)).astype(np.float32)
    x = np.lib.format.open_memmap(d / "vectors.npy", mode="w+", dtype=np.float32, shape=(rows, DIM))
    for i in range(0, rows, 100_000):
        m = min(100_000, rows - i)
        v = centers[rng.integers(0, 200, m)] + 0.6 * rng.standard_normal((m, DIM), np.float32)
        x[i : i + m] = v / np.linalg.norm(v, axis=1, keepdims=True)
    x.flush()
    del x
    q = centers[rng.integers(0, 200, nq)] + 0.6 * rng.standard_normal((nq, DIM), np.float32)
    np.save(d / "queries.npy", (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32))
    return d


# -- stages ------------------------------------------------------------------------------------


def stage_vector(plan: Plan, data: Path, tmp: Path, systems: list[str]) -> dict:
    out: dict[int, dict[str, dict]] = {}
    for n in plan.sizes:
        out[n] = {}
        for s in systems:
            budget = plan.budget[n]
            prev = [m for m in plan.sizes if m < n]
            reason = None
            if n == max(plan.sizes) and n >= 1_000_000 and s not in plan.largest:
                reason = f"not run at {fmt_n(n)} (run bound; --all-at-1m runs it)"
            elif prev:
                p = out[prev[-1]].get(s, {})
                if p.get("skipped") or p.get("error") or "query" not in p:
                    reason = f"did not finish {fmt_n(prev[-1])}"
                else:
                    ing = p["ingest"]
                    scale = n / prev[-1]
                    # HNSW builds grow faster than N (hnswlib: ~20x time for 10x rows here)
                    grow = 1.2 if s in ("mem0", "numpy") else 2.0
                    est = scale * grow * (ing["seconds"] + ing.get("index_wait_s", 0))
                    # exact-scan systems also query linearly slower; each query phase is capped
                    if s in ("mem0", "numpy"):
                        q_s = scale * plan.nq * p["query"]["p50"] / 1e3
                        est += 2 * min(max(20.0, budget / 8), q_s)
                    if est > budget:
                        reason = f"predicted {est:,.0f} s > budget {budget} s"
            if reason is None and plan.left() < budget + 60:
                reason = f"run deadline ({plan.left():.0f} s left)"
            if reason:
                log(f"vector {fmt_n(n)} {s}: skipped ({reason})")
                out[n][s] = {"skipped": reason}
                continue
            log(f"vector {fmt_n(n)} {s}: budget {budget} s")
            r = run_child(
                "vector",
                s,
                timeout=budget * 3 + 120,
                data=data,
                tmp=tmp,
                n=n,
                nq=plan.nq,
                budget=budget,
            )
            if "ingest" in r and not r["ingest"].get("complete", True):
                r["skipped"] = (
                    f"out of budget: {r['ingest']['rows']:,} rows in {r['ingest']['seconds']:.0f} s"
                )
            out[n][s] = r
    return out


def redis_start(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    cmd = [
        "redis-server",
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(tmp),
        "--protected-mode",
        "yes",
    ]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(
        lambda: (
            subprocess.run(
                ["redis-cli", "-h", "127.0.0.1", "-p", str(port), "ping"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            == "PONG"
        ),
        30,
        "redis-server",
    )
    return p, port


def redis_benchmark(port: int, n: int, conns: int, tests: str = "set,get") -> dict[str, dict]:
    cmd = [
        "redis-benchmark",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-c",
        str(conns),
        "-n",
        str(n),
        "-t",
        tests,
        "-d",
        "12",
        "--csv",
    ]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "1", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout
    res = {}
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0] in ("SET", "GET"):
            res[cells[0].lower()] = {
                "rps": float(cells[1]),
                "p50": float(cells[4]),
                "p99": float(cells[6]),
            }
    return res


def wrk(url: str, seconds: float, conns: int, script: Path | None = None) -> dict[str, float]:
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{max(1, round(seconds))}s", "--latency"]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "1", *cmd]
    if script is not None:
        cmd += ["-s", str(script)]
    out = subprocess.run(
        [*cmd, url], capture_output=True, text=True, check=True, timeout=seconds + 60
    ).stdout

    def ms(label: str) -> float:
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)", out, re.M)
        if not m:
            return math.nan
        return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": rps,
        "p50": ms("50"),
        "p99": ms("99"),
        "errors": int(non2xx.group(1)) if non2xx else 0,
    }


def stage_kv(plan: Plan, tmp: Path) -> dict:
    import httpx

    out: dict[str, Any] = {"conns": 64}
    have_wrk = shutil.which("wrk") is not None
    rp, rport = redis_start(tmp)
    try:
        log(f"kv: redis-benchmark, 64 clients, redis-server on 127.0.0.1:{rport}")
        out["redis"] = redis_benchmark(rport, 100_000 if plan.quick else 400_000, 64)
        log(f"kv: redis {out['redis']}")
        log("kv: redis-py single-client loop")
        out["redis_loop"] = run_child(
            "kvloop", "redis", timeout=120, port=rport, n=200_000, seconds=plan.kv_s
        )
    finally:
        rp.terminate()
        rp.wait(timeout=30)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_synapse_server(tmp / "kv-http", port, core="0")
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, 60, "server")
        ns = "/v1/namespaces/kv"
        httpx.put(
            f"{base}{ns}/facts", json={"entity": "user:1", "key": "plan", "value": {"tier": 1}}
        ).raise_for_status()
        if have_wrk:
            log("kv: wrk GET/SET against the SynapseDB server, 64 connections")
            out["http_get"] = wrk(f"{base}{ns}/facts?entity=user:1&key=plan", plan.kv_s, 64)
            body = '{"entity": "user:1", "key": "plan", "value": {"tier": 2}}'
            script = tmp / "set.lua"
            script.write_text(
                f'wrk.method = "PUT"\nwrk.path = "{ns}/facts"\nwrk.body = \'{body}\'\n'
                'wrk.headers["Content-Type"] = "application/json"\n'
            )
            out["http_set"] = wrk(base, plan.kv_s, 64, script)
            log(f"kv: http get {out['http_get']} set {out['http_set']}")
    finally:
        server.terminate()
        server.wait(timeout=60)
    for s in ("synapsedb", "synapsedb-http"):
        log(f"kv: {s} single-client loop")
        out[f"{s}_loop"] = run_child(
            "kvloop", s, timeout=120, data=tmp / "none", tmp=tmp, n=200_000, seconds=plan.kv_s
        )
    return out


def stage_namespaces(plan: Plan, data: Path, tmp: Path, systems: list[str]) -> dict:
    out = {}
    for s in systems:
        if plan.left() < plan.ns_budget + 60:
            out[s] = {"skipped": f"run deadline ({plan.left():.0f} s left)"}
            continue
        log(f"namespaces {plan.namespaces:,} x 100 {s}: budget {plan.ns_budget} s")
        out[s] = run_child(
            "namespaces",
            s,
            timeout=plan.ns_budget * 3 + 120,
            data=data,
            tmp=tmp,
            n=plan.namespaces,
            nq=plan.nq,
            budget=plan.ns_budget,
        )
    return out


def stage_mixed(plan: Plan, data: Path, tmp: Path, systems: list[str]) -> dict:
    out = {}
    for s in systems:
        if plan.left() < plan.mixed_s + 90:
            out[s] = {"skipped": f"run deadline ({plan.left():.0f} s left)"}
            continue
        log(f"mixed {s}: {fmt_n(plan.mixed_base)} preloaded, {plan.mixed_s} s")
        out[s] = run_child(
            "mixed",
            s,
            timeout=600,
            data=data,
            tmp=tmp,
            n=plan.mixed_base,
            nq=plan.nq,
            budget=plan.budget[plan.sizes[0]],
            seconds=plan.mixed_s,
        )
    return out


def stage_locomo(plan: Plan, tmp: Path) -> dict:
    out = {}
    for s in ("synapsedb", "numpy", "chroma", "mem0"):
        if plan.left() < 120:
            out[s] = {"skipped": f"run deadline ({plan.left():.0f} s left)"}
            continue
        log(f"locomo {s}")
        out[s] = run_child("locomo", s, timeout=900, tmp=tmp, stride=plan.stride)
    return out


# -- report ------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    out = {}
    for pkg in ("chromadb", "mem0ai", "qdrant-client", "hnswlib", "numpy", "redis", "onnxruntime"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        v = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
        out["redis-server"] = re.search(r"v=([\d.]+)", v).group(1)  # type: ignore[union-attr]
    except (OSError, AttributeError):
        out["redis-server"] = "?"
    try:
        v = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
        out["wrk"] = v.split()[1] if v else "?"
    except (OSError, IndexError):
        out["wrk"] = "?"
    return out


def dirty_src() -> list[str]:
    """Files under src/ that differ from the commit (the run measures the working tree)."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True, text=True
        ).stdout
    except OSError:
        return []
    return [line[3:] for line in out.splitlines() if line.strip()]


def cell_skip(r: dict) -> str | None:
    if r.get("skipped"):
        return f"skipped: {r['skipped']}"
    if r.get("error"):
        return f"error: {r['error']}"
    return None


def adv(ref: float | None, peer: float | None, lower_is_better: bool) -> float | None:
    """How many times better SynapseDB (ref) is than the peer: >1 means SynapseDB wins."""
    return ratio(peer, ref) if lower_is_better else ratio(ref, peer)


def vector_tables(vec: dict) -> list[str]:
    lines = [
        "### Ingest",
        "",
        "Memories written per second by one client (batches of 1,000; mem0: add() of 100 "
        "messages, its batch form), until every write call returned (durable and "
        "queryable; numpy: a copy into RAM, nothing durable). *index wait* is the extra time until background HNSW indexing caught "
        "up (SynapseDB indexes off the write path; queries are exact on unindexed rows "
        "meanwhile). Ratios: SynapseDB's rate / the peer's (>1: SynapseDB faster); *emb* = "
        "SynapseDB embedded, *http* = SynapseDB over HTTP.",
        "",
    ]
    rows = []
    for n, per in vec.items():
        ref_e = per.get("synapsedb", {}).get("ingest", {})
        ref_h = per.get("synapsedb-http", {}).get("ingest", {})
        rate = lambda i: i["rows"] / i["seconds"] if i.get("complete") else None  # noqa: E731
        for s, r in per.items():
            skip = cell_skip(r)
            if skip:
                rows.append([fmt_n(int(n)), LABELS[s], skip, "", "", "", ""])
                continue
            i = r["ingest"]
            rows.append(
                [
                    fmt_n(int(n)),
                    LABELS[s],
                    fmt_num(rate(i)),
                    fmt_num(i.get("index_wait_s"), 1),
                    fmt_num(r.get("rss_mib")),
                    fmt_ratio(adv(rate(ref_e), rate(i), False)) if s != "synapsedb" else "",
                    fmt_ratio(adv(rate(ref_h), rate(i), False)) if s != "synapsedb-http" else "",
                ]
            )
    lines += table(
        [
            "N",
            "system",
            "memories/s",
            "index wait s",
            "RSS MiB (with server)",
            "emb ratio",
            "http ratio",
        ],
        rows,
    )
    for key, title in (
        ("query", "Query latency, no filter"),
        ("query_filter", "Query latency, filter bucket = b (1% of rows)"),
    ):
        lines += [
            "",
            f"### {title}",
            "",
            "One client, top 10 by cosine, the query vector given (no embedding cost), "
            f"{'a metadata equality filter keeping 1% of the rows, ' if key != 'query' else ''}"
            "milliseconds; recall@10 against the exact answer (numpy). Ratios: the peer's "
            "p50 / SynapseDB's p50 (>1: SynapseDB faster).",
            "",
        ]
        rows = []
        for n, per in vec.items():
            ref_e = per.get("synapsedb", {}).get(key, {}).get("p50")
            ref_h = per.get("synapsedb-http", {}).get(key, {}).get("p50")
            for s, r in per.items():
                skip = cell_skip(r)
                if skip:
                    rows.append([fmt_n(int(n)), LABELS[s], skip, "", "", "", "", ""])
                    continue
                q = r[key]
                rows.append(
                    [
                        fmt_n(int(n)),
                        LABELS[s],
                        fmt_num(q["p50"], 3),
                        fmt_num(q["p95"], 3),
                        fmt_num(q["p99"], 3),
                        fmt_num(q["recall"], 3),
                        fmt_ratio(adv(ref_e, q["p50"], True)) if s != "synapsedb" else "",
                        fmt_ratio(adv(ref_h, q["p50"], True)) if s != "synapsedb-http" else "",
                    ]
                )
        lines += table(
            ["N", "system", "p50 ms", "p95 ms", "p99 ms", "recall@10", "emb ratio", "http ratio"],
            rows,
        )
    return lines


def kv_tables(kv: dict) -> list[str]:
    lines = [
        "### KV get/set",
        "",
        f"Over the network, {kv['conns']} connections: the server pinned to core 0, the "
        "load generator to core 1 (wrk for SynapseDB's `GET/PUT /v1/namespaces/kv/facts`, "
        "`redis-benchmark -c 64 -d 12` for redis-server; both hit one key). SynapseDB's "
        "SET is a durable (fsync, group-committed) versioned write; redis-server runs with "
        "`--save '' --appendonly no` (no durability). Single client: a Python loop "
        "(SynapseDB embedded, SynapseDB through `synapsedb.connect`, redis-py), 1,000 "
        "keys. Ratio: SynapseDB's ops/s / redis's (>= 1/7 = 0.14x is the GET target).",
        "",
    ]
    rows = []
    red = kv.get("redis", {})
    for op in ("get", "set"):
        h = kv.get(f"http_{op}")
        r = red.get(op)
        if r:
            rows.append(
                [
                    f"{op.upper()}, 64 connections",
                    LABELS["redis"],
                    fmt_num(r["rps"]),
                    fmt_num(r["p50"], 3),
                    fmt_num(r["p99"], 3),
                    "",
                ]
            )
        if h:
            rows.append(
                [
                    f"{op.upper()}, 64 connections",
                    "SynapseDB HTTP (wrk)",
                    fmt_num(h["rps"]),
                    fmt_num(h["p50"], 3),
                    fmt_num(h["p99"], 3),
                    fmt_ratio(ratio(h["rps"], r["rps"] if r else None)),
                ]
            )
    rl = kv.get("redis_loop", {})
    for op in ("get", "set"):
        ref = rl.get(op, {}).get("ops_per_s")
        for key, label in (
            ("redis_loop", "redis-py loop"),
            ("synapsedb_loop", "SynapseDB embedded loop"),
            ("synapsedb-http_loop", "SynapseDB client over HTTP loop"),
        ):
            r = kv.get(key, {}).get(op)
            if r is None:
                continue
            rows.append(
                [
                    f"{op.upper()}, 1 client",
                    label,
                    fmt_num(r["ops_per_s"]),
                    fmt_num(r["p50"], 3),
                    fmt_num(r["p99"], 3),
                    "" if key == "redis_loop" else fmt_ratio(ratio(r["ops_per_s"], ref)),
                ]
            )
    lines += table(["operation", "system", "ops/s", "p50 ms", "p99 ms", "ratio vs redis"], rows)
    return lines


def ns_tables(nsr: dict, plan: Plan) -> list[str]:
    lines = [
        "### Many small namespaces",
        "",
        f"Target {plan.namespaces:,} namespaces of 100 memories each (SynapseDB: a "
        "namespace each; Chroma: a collection each; mem0: a user_id each in its one Qdrant "
        "collection; hnswlib: an index each; numpy: a matrix each), created one after the "
        f"other within {plan.ns_budget} s and while the system's resident memory grew by "
        "less than 6 GiB (this 24 GiB box is shared); then top-10 queries against random "
        "namespaces. RSS is the whole system (this process plus its server, if any) after "
        "creation; KiB per namespace is its growth divided by the namespaces made. "
        "Ratios: SynapseDB embedded's advantage (peer latency / SynapseDB's; peer "
        "MiB per namespace / SynapseDB's).",
        "",
    ]
    ref = nsr.get("synapsedb", {})
    ref_ms = ref.get("query", {}).get("p50")
    per_ns = lambda r: r["rss_delta_mib"] / max(r["namespaces"], 1)  # noqa: E731
    ref_mem = per_ns(ref) if "rss_delta_mib" in ref else None
    rows = []
    for s, r in nsr.items():
        skip = cell_skip(r)
        if skip:
            rows.append([LABELS[s], skip, "", "", "", "", "", ""])
            continue
        rows.append(
            [
                LABELS[s],
                f"{r['namespaces']:,}{'' if r['complete'] else ' (budget)'}",
                fmt_num(r["namespaces"] / r["seconds"]),
                fmt_num(r["query"]["p50"], 3),
                fmt_num(r["query"]["p99"], 3),
                fmt_num(r["rss_mib"]),
                fmt_num(1024 * per_ns(r), 1),
                ""
                if s == "synapsedb"
                else f"{fmt_ratio(adv(ref_ms, r['query']['p50'], True))} / "
                f"{fmt_ratio(adv(ref_mem, per_ns(r), True))}",
            ]
        )
    lines += table(
        [
            "system",
            "namespaces made",
            "namespaces/s",
            "query p50 ms",
            "p99 ms",
            "RSS MiB",
            "KiB per namespace",
            "ratio latency / memory",
        ],
        rows,
    )
    return lines


def mixed_tables(mx: dict, plan: Plan) -> list[str]:
    lines = [
        "### Mixed reads and writes",
        "",
        f"{fmt_n(plan.mixed_base)} memories preloaded, then one client for {plan.mixed_s} s: "
        "4 top-10 queries (every other one filtered) then 1 single-memory write, repeated. "
        "Ratio: SynapseDB embedded's ops/s / the peer's.",
        "",
    ]
    ref = mx.get("synapsedb", {}).get("ops_per_s")
    rows = []
    for s, r in mx.items():
        skip = cell_skip(r) or (None if "ops_per_s" in r else "out of budget while preloading")
        if skip:
            rows.append([LABELS[s], skip, "", "", "", "", ""])
            continue
        rows.append(
            [
                LABELS[s],
                fmt_num(r["ops_per_s"]),
                fmt_num(r["query"]["p50"], 3),
                fmt_num(r["query"]["p99"], 3),
                fmt_num(r["write"]["p50"], 3),
                fmt_num(r["write"]["p99"], 3),
                "" if s == "synapsedb" else fmt_ratio(adv(ref, r["ops_per_s"], False)),
            ]
        )
    lines += table(
        [
            "system",
            "ops/s",
            "query p50 ms",
            "query p99 ms",
            "write p50 ms",
            "write p99 ms",
            "ratio",
        ],
        rows,
    )
    return lines


def locomo_tables(lo: dict, plan: Plan) -> list[str]:
    names = {
        "synapsedb": "SynapseDB query (default, hybrid)",
        "numpy": "dense MiniLM, exact (numpy)",
        "chroma": "Chroma (MiniLM vectors)",
        "mem0": "mem0 OSS search (infer=False, MiniLM vectors)",
    }
    lines = [
        "### Retrieval quality: LoCoMo dev",
        "",
        "The protocol of bench/bench_quality.py: one namespace (Chroma collection, mem0 "
        "user_id) per conversation, one memory per turn, every question of categories 1-4 "
        f"{'(every ' + str(plan.stride) + 'th) ' if plan.stride > 1 else ''}asks for the top "
        "100. Every system gets the same all-MiniLM-L6-v2 vectors (SynapseDB's onnx "
        "embedder); ms/query excludes the peers' query embedding (prepared beforehand) but "
        "includes SynapseDB's own. Ratio: SynapseDB's R@10 / the peer's.",
        "",
    ]
    ref = lo.get("synapsedb", {}).get("r@10")
    rows = []
    for s, r in lo.items():
        skip = cell_skip(r)
        if skip:
            rows.append([names[s], skip, "", "", "", "", "", "", ""])
            continue
        rows.append(
            [
                names[s],
                r["questions"],
                fmt_num(r["r@5"], 3),
                f"**{r['r@10']:.3f}**",
                fmt_num(r["r@20"], 3),
                fmt_num(r["hit@10"], 3),
                fmt_num(r["mrr"], 3),
                fmt_num(r["ms_per_query"], 2),
                "" if s == "synapsedb" else fmt_ratio(ratio(ref, r["r@10"])),
            ]
        )
    lines += table(
        [
            "retriever",
            "questions",
            "R@5",
            "R@10",
            "R@20",
            "all-ev hit@10",
            "MRR",
            "ms/query",
            "ratio",
        ],
        rows,
    )
    return lines


def targets(vec: dict, kv: dict) -> list[str]:
    n = 100_000 if 100_000 in vec else max(vec) if vec else None
    lines = [
        "### Targets (ratios from this run)",
        "",
        "| target | measured | goal | |",
        "|---|---|---|---|",
    ]
    g = kv.get("http_get", {}).get("rps")
    rg = kv.get("redis", {}).get("get", {}).get("rps")
    kv_line = target_line(
        "KV GET over HTTP (64 connections): SynapseDB / redis-server ops/s",
        ratio(g, rg),
        1 / 7,
        at_least=True,
    )
    if n is None:  # no vector stage in this run (--only kv): the KV target alone
        return [*lines, kv_line] if kv else lines
    per = vec[n]

    def p50(s: str, key: str = "query") -> float | None:
        return per.get(s, {}).get(key, {}).get("p50")

    def rate(s: str, at: dict, indexed: bool = False) -> float | None:
        i = at.get(s, {}).get("ingest", {})
        if not i.get("complete"):
            return None
        return i["rows"] / (i["seconds"] + (i.get("index_wait_s", 0.0) if indexed else 0.0))

    lines.append(
        target_line(
            f"query p50 at {fmt_n(n)}: SynapseDB embedded / Chroma in-process",
            ratio(p50("synapsedb"), p50("chroma")),
            0.1,
            at_least=False,
        )
    )
    mem_n = n
    if p50("mem0") is None:  # mem0 skipped at n: the largest size it finished, labelled
        done = [m for m in vec if vec[m].get("mem0", {}).get("query")]
        mem_n = max(done) if done else n
    m_ratio = ratio(
        vec[mem_n].get("synapsedb", {}).get("query", {}).get("p50"),
        vec[mem_n].get("mem0", {}).get("query", {}).get("p50"),
    )
    label = f"query p50 at {fmt_n(mem_n)}: SynapseDB embedded / mem0"
    if mem_n != n:
        label += f" (**mem0 not run at {fmt_n(n)}**; at {fmt_n(mem_n)} instead)"
    lines.append(target_line(label, m_ratio, 1 / 50, at_least=False))
    lines.append(
        target_line(
            f"ingest at {fmt_n(n)}: SynapseDB embedded / Chroma in-process "
            "(memories/s, durable and queryable)",
            ratio(rate("synapsedb", per), rate("chroma", per)),
            3.0,
            at_least=True,
        )
    )
    # Chroma's add() inserts into its HNSW graph before returning; SynapseDB indexes afterwards.
    lines.append(
        target_line(
            f"ingest at {fmt_n(n)}, same, counting until the HNSW index has "
            "caught up (Chroma's add() indexes before it returns)",
            ratio(rate("synapsedb", per, True), rate("chroma", per, True)),
            3.0,
            at_least=True,
        )
    )
    lines += largest_targets(vec)
    lines.append(kv_line)
    return lines


def plots(vec: dict, lo: dict, suffix: str) -> list[str]:
    """docs/img/peers-latency-vs-n.png and docs/img/peers-recall-vs-latency.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    IMG.mkdir(parents=True, exist_ok=True)
    made = []
    colors = dict(zip(VECTOR_SYSTEMS, plt.get_cmap("tab10").colors, strict=False))
    handles = [Line2D([], [], color=colors[s], marker="o", label=LABELS[s]) for s in VECTOR_SYSTEMS]

    fig, axes = plt.subplots(1, 2, figsize=(11, 5), sharey=True)
    for ax, key, title in (
        (axes[0], "query", "no filter"),
        (axes[1], "query_filter", "filter keeping 1% of rows"),
    ):
        for s in VECTOR_SYSTEMS:
            pts = [
                (int(n), per[s][key]["p50"])
                for n, per in sorted(vec.items())
                if s in per and key in per[s]
            ]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", color=colors[s])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("memories in the namespace (N, log)")
        ax.set_title(f"query p50, top 10, {title}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("p50 latency, ms (log; lower is better)")
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path = IMG / f"peers-latency-vs-n{suffix}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    made.append(path.name)

    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    full = [m for m in vec if sum(1 for r in vec[m].values() if "query" in r) >= 3]
    if full:
        n = max(full)
        ax = axes[0]
        lows = [1.0]
        for s, r in vec[n].items():
            for key, marker in (("query", "o"), ("query_filter", "^")):
                if key in r:
                    ax.scatter(
                        r[key]["p50"],
                        r[key]["recall"],
                        color=colors[s],
                        marker=marker,
                        s=55,
                        alpha=0.85,
                    )
                    lows.append(r[key]["recall"])
        ax.set_ylim(min(0.98, min(lows) - 0.005), 1.002)
        ax.set_xscale("log")
        ax.set_xlabel("query p50, ms (log)")
        ax.set_ylabel("recall@10 against the exact top 10")
        ax.set_title(f"synthetic vectors, N = {fmt_n(int(n))} (o no filter, ^ 1% filter)")
        ax.grid(True, which="both", alpha=0.3)
    ax = axes[1]
    names = {
        "synapsedb": "SynapseDB query (hybrid)",
        "numpy": "dense MiniLM, exact",
        "chroma": "Chroma",
        "mem0": "mem0 (infer=False)",
    }
    for s, r in lo.items():
        if "r@10" in r:
            ax.scatter(r["ms_per_query"], r["r@10"], s=55, color=colors.get(s, "black"))
            ax.annotate(
                names[s],
                (r["ms_per_query"], r["r@10"]),
                fontsize=8,
                xytext=(5, -12),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.set_xlabel("ms per query (log)")
    ax.set_ylabel("evidence recall@10")
    ax.set_ylim(0, 1)
    ax.set_title("LoCoMo dev, the same MiniLM vectors for all")
    ax.grid(True, which="both", alpha=0.3)
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path = IMG / f"peers-recall-vs-latency{suffix}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    made.append(path.name)
    return made


def report(
    plan: Plan, res: dict, vers: dict, pngs: list[str], elapsed: float, dirty: list[str]
) -> list[str]:
    v = vers
    lines = [
        f"One process tree, one run, {elapsed / 60:.1f} minutes"
        f"{' (--quick)' if plan.quick else ''}. Versions: SynapseDB {git_rev()}, chromadb "
        f"{v['chromadb']}, mem0ai {v['mem0ai']} (vector store: embedded qdrant-client "
        f"{v['qdrant-client']}), hnswlib {v['hnswlib']}, numpy {v['numpy']}, redis-server "
        f"{v['redis-server']} (Debian), redis-py {v['redis']}, wrk {v['wrk']}.",
        "",
        "Set-up, the same for every system: 384-d unit vectors (200 Gaussian clusters plus "
        "noise) given by the caller, a text and a `bucket` metadata field per memory; one "
        "client; every workload of every system in its own child process (RSS is per system); "
        "`OPENBLAS_NUM_THREADS=1` for all (a second BLAS thread on 2 shared cores turns a "
        "sub-millisecond scan into 4-8 ms under any other load). SynapseDB: default settings "
        "(durability fsync, HNSW from 20,000 rows, M 16, ef 100), `query(embedding=..., "
        "mode='vector', dedup=False)`; over HTTP the server is `python -m synapsedb serve` and "
        "the client `synapsedb.connect`. Chroma: `PersistentClient` / `chroma run`, cosine "
        "space, `embedding_function=None`. mem0: `Memory` with its default vector store "
        "(embedded Qdrant on disk) and SQLite history, `add(messages, infer=False)`, "
        "`search(..., threshold=0.0)`; its embedder is replaced by a stand-in that returns the "
        "shared vector for each text, and its LLM block points at a closed loopback port with "
        "a dummy key (never called with infer=False). hnswlib: M 16, ef_construction 200, ef "
        "100, all cores for `add_items`. No telemetry: `MEM0_TELEMETRY=False`, Chroma "
        "`anonymized_telemetry=False`; everything listens on 127.0.0.1 only.",
        "",
        *(
            [
                "**The working tree differed from that commit** in "
                + ", ".join(f"`{f}`" for f in dirty)
                + " (uncommitted work measured as is).",
                "",
            ]
            if dirty
            else []
        ),
        "mem0 features off offline: LLM fact extraction and update (`infer=False`); BM25 "
        "keyword scoring (needs `fastembed`, whose model is downloaded at run time); spaCy "
        "lemmatization and entity boosts (need `mem0ai[nlp]` and a downloaded spaCy model); "
        "reranking. So mem0 here is semantic search over Qdrant plus its bookkeeping. Chroma's "
        "default embedding function (a downloaded ONNX MiniLM) is not used: vectors are given.",
        "",
    ]
    if "vector" in res:
        lines += [*vector_tables(res["vector"]), ""]
        if memory_reopen_table(res["vector"]):
            lines += [*memory_reopen_table(res["vector"]), ""]
    if "kv" in res:
        lines += [*kv_tables(res["kv"]), ""]
    if "namespaces" in res:
        lines += [*ns_tables(res["namespaces"], plan), ""]
    if "mixed" in res:
        lines += [*mixed_tables(res["mixed"], plan), ""]
    if "locomo" in res:
        lines += [*locomo_tables(res["locomo"], plan), ""]
    lines += [*targets(res.get("vector", {}), res.get("kv", {})), ""]
    for p in pngs:
        lines.append(f"![{p}](img/{p})")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, <= 5 minutes")
    ap.add_argument("--no-report", action="store_true", help="print, do not append or plot")
    ap.add_argument("--only", default="vector,kv,namespaces,mixed,locomo")
    ap.add_argument("--systems", default=",".join(VECTOR_SYSTEMS))
    ap.add_argument("--deadline", type=float, default=None, help="seconds for the whole run")
    ap.add_argument(
        "--all-at-1m",
        action="store_true",
        help="try every system at 1M (still skipped when predicted over budget)",
    )
    ap.add_argument("--from-json", type=Path, help="render a saved run's results, run nothing")
    a = ap.parse_args()
    plan = Plan(a.quick, a.deadline or (285 if a.quick else 3300))
    if a.all_at_1m:
        plan.largest = set(VECTOR_SYSTEMS)
    only = a.only.split(",")
    systems = [s for s in a.systems.split(",") if s]
    if a.from_json:
        saved = json.loads(a.from_json.read_text())
        saved["res"]["vector"] = {int(n): v for n, v in saved["res"].get("vector", {}).items()}
        pngs = plots(saved["res"]["vector"], saved["res"].get("locomo", {}), "-rendered")
        print(
            "\n".join(
                report(plan, saved["res"], versions(), pngs, saved["elapsed"], saved["dirty"])
            )
        )
        return
    tmp = Path(tempfile.mkdtemp(prefix="synapsedb-peers-"))
    res: dict[str, Any] = {}
    dirty = dirty_src()
    try:
        need = plan.rows if ("vector" in only or "namespaces" in only) else plan.mixed_base + 60_000
        log(f"data: {need:,} x {DIM} vectors in {tmp}")
        data = make_data(tmp, need, plan.nq)
        if "vector" in only:
            res["vector"] = stage_vector(plan, data, tmp, systems)
        if "kv" in only:
            res["kv"] = stage_kv(plan, tmp)
        if "locomo" in only:
            res["locomo"] = stage_locomo(plan, tmp)
        if "mixed" in only:
            res["mixed"] = stage_mixed(plan, data, tmp, systems)
        if "namespaces" in only:
            res["namespaces"] = stage_namespaces(
                plan, data, tmp, [s for s in systems if s != "chroma-http"]
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - T_START
    saved = {"res": res, "elapsed": elapsed, "dirty": dirty, "quick": a.quick}
    (Path(tempfile.gettempdir()) / "synapsedb-peers-last.json").write_text(json.dumps(saved))
    vers = versions()
    suffix = "-quick" if a.quick else ""
    pngs = [] if a.no_report else plots(res.get("vector", {}), res.get("locomo", {}), suffix)
    lines = report(plan, res, vers, pngs, elapsed, dirty)
    if a.no_report:
        print("\n".join(lines))
    else:
        append_report(
            "Peers side by side" + (" (quick)" if a.quick else ""),
            "make bench-peers" + (" (--quick)" if a.quick else ""),
            lines,
        )
    log(f"done in {elapsed / 60:.1f} min")


if __name__ == "__main__":
    assert machine()
    main()
