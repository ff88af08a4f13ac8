"""A server with more namespaces than fit in its memory budget (issue 30, item 4).

100,000 namespaces of 100 memories each (384-d caller vectors, a metadata bucket, an entity
among 7) in one SQLite data directory, served by ``synapsedb serve`` with
``SYNAPSEDB_MEMORY_BUDGET_MB`` (default 4096). Held in memory they would take about 25 GB.

Building the data: 20 template namespaces are written through the engine (``write_many``),
then copied row for row under 100,000 names in SQL, which is what an import of 100,000
namespaces would store (loading and serving cannot tell the copies apart, and building them
through the write path would take an hour on this machine).

Measured, one client thread over HTTP (keep-alive), in one run:

1. the server's start (to /readyz) and its warm-up (the background loading, which stops at
   80% of the budget);
2. the first query (caller vector, k=10) of every namespace once, in a random order: most are
   cold (not in memory: loaded from storage by the query), the warm-up's are warm;
3. cold first queries for certain: the first 2,000 namespaces of that order again (tens of
   budgets have gone through memory since), p50/p99;
4. the floor: the last 500 namespaces of the order again (just used, so in memory), p50/p99;
5. the server's RSS sampled every 0.5 s throughout (its maximum), and its counts from
   /metrics (namespaces in memory, their estimated bytes, unloads).

    .venv/bin/python bench/bench_residency.py [--namespaces 100000] [--budget-mb 4096]

The table goes to stdout and to /tmp/synapsedb-bench-residency-<time>.md and .json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import append_report, git_rev, machine, pct, rss_mib  # noqa: E402

import synapsedb  # noqa: E402

DIM = 384
TEMPLATES = 20


def build(data: Path, namespaces: int, per: int) -> dict[str, Any]:
    """The data directory: templates through the engine, then copies in SQL."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(7)
    db = synapsedb.Database(data, embedder=None, background_maintenance=False, durability="os")
    try:
        for t in range(TEMPLATES):
            vecs = rng.standard_normal((per, DIM)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            db.namespace(f"template-{t}").write_many([
                {"entity": f"user:{i % 7}", "content": f"note {i}: the customer asked about "
                 f"order {t * per + i} and the refund policy", "embedding": vecs[i],
                 "metadata": {"bucket": i % 10}} for i in range(per)
            ])  # fmt: skip
    finally:
        db.close()
    conn = sqlite3.connect(data / "synapse.db", isolation_level=None)
    try:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(memory_versions)")]
        ns_cols = [r[1] for r in conn.execute("PRAGMA table_info(namespaces)")]
        rest = ", ".join(c for c in cols if c != "ns")
        ns_rest = ", ".join(c for c in ns_cols if c != "name")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA journal_mode = WAL")
        step = 2000
        for lo in range(0, namespaces, step):
            conn.execute("BEGIN")
            names = [(name_of(k), f"template-{k % TEMPLATES}")
                     for k in range(lo, min(namespaces, lo + step))]  # fmt: skip
            conn.executemany(f"INSERT INTO namespaces (name, {ns_rest}) SELECT ?, {ns_rest} "
                             "FROM namespaces WHERE name = ?", names)  # fmt: skip
            conn.executemany(f"INSERT INTO memory_versions (ns, {rest}) SELECT ?, {rest} "
                             "FROM memory_versions WHERE ns = ?", names)  # fmt: skip
            conn.execute("COMMIT")
            if lo % 20_000 == 0:
                print(f"  copies: {lo:,}/{namespaces:,} in {time.perf_counter() - t0:.0f} s",
                      flush=True)  # fmt: skip
        conn.execute("DELETE FROM memory_versions WHERE ns LIKE 'template-%'")
        conn.execute("DELETE FROM namespaces WHERE name LIKE 'template-%'")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    size = sum(f.stat().st_size for f in data.iterdir() if f.is_file())
    return {"build_s": time.perf_counter() - t0, "db_gib": size / 2**30}


def name_of(k: int) -> str:
    return f"tenant-{k:06d}"


def query_body(vec: np.ndarray) -> bytes:
    return json.dumps({"embedding": [round(float(x), 5) for x in vec], "k": 10,
                       "mode": "vector"}).encode()  # fmt: skip


class Server:
    def __init__(self, data: Path, budget_mb: int, extra_env: dict[str, str] | None = None) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        env = {**os.environ, "SYNAPSEDB_EMBEDDER": "none", "SYNAPSEDB_LLM_BASE_URL": "",
               "SYNAPSEDB_MEMORY_BUDGET_MB": str(budget_mb), **(extra_env or {})}  # fmt: skip
        self.log = (data.parent / "server.log").open("wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "synapsedb", "serve", "--data", str(data), "--host",
             "127.0.0.1", "--port", str(self.port), "--log-level", "warning"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"synapsedb serve exited: see {self.log.name}")
            try:
                if self.request("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
            time.sleep(0.2)
        self.start_s = time.perf_counter() - t0
        self.rss_max = 0.0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            self.rss_max = max(self.rss_max, rss_mib(self.proc.pid))

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, ConnectionError):
                if attempt == 2 or self.proc.poll() is not None:
                    raise  # (a keep-alive connection the server closed: once more, anew)
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        raise AssertionError("unreachable")

    def metrics(self) -> dict[str, float]:
        _, text = self.request("GET", "/metrics")
        out = {}
        for name in ("synapsedb_memory_budget_bytes", "synapsedb_resident_bytes",
                     "synapsedb_resident_namespaces", "synapsedb_namespace_unloads_total",
                     "synapsedb_namespaces_loading"):  # fmt: skip
            found = re.search(rf"^{name} (\S+)$", text.decode(), re.M)
            out[name] = float(found.group(1)) if found else float("nan")
        return out

    def query(self, ns: str, body: bytes) -> float:
        t0 = time.perf_counter()
        status, text = self.request("POST", f"/v1/namespaces/{ns}/query", body)
        took = time.perf_counter() - t0
        if status != 200 or len(json.loads(text)["hits"]) != 10:
            raise RuntimeError(f"query of {ns}: {status} {text[:300]!r}")
        return took

    def stop(self) -> None:
        self._stop.set()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def ms(samples: list[float]) -> str:
    return f"{pct(samples, 50) / 1000:.2f} / {pct(samples, 99) / 1000:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--namespaces", type=int, default=100_000)
    ap.add_argument("--memories", type=int, default=100, help="per namespace")
    ap.add_argument("--budget-mb", type=int, default=4096)
    ap.add_argument("--keep", type=Path, help="build the data here, and reuse it if present")
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for the server, e.g. "
                         "MALLOC_MMAP_THRESHOLD_=65536 (repeatable)")  # fmt: skip
    a = ap.parse_args()
    stamp = dt.datetime.now(dt.UTC)
    r: dict[str, Any] = {"date": stamp.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
                         "commit": git_rev(), "command": "python " + " ".join(sys.argv),
                         "load_start": " / ".join(f"{v:.2f}" for v in os.getloadavg())}  # fmt: skip
    root = a.keep or Path(tempfile.mkdtemp(prefix="synapsedb-bench-residency-"))
    data = root / "data"
    try:
        if not (data / "synapse.db").exists():
            print(f"building {a.namespaces:,} namespaces of {a.memories} ...", flush=True)
            r["build"] = build(data, a.namespaces, a.memories)
            print("built", r["build"], flush=True)
        shutil.rmtree(data / "indexes", ignore_errors=True)
        server = Server(data, a.budget_mb, dict(v.split("=", 1) for v in a.server_env))
        try:
            r["start_s"] = server.start_s
            t0 = time.perf_counter()  # the warm-up: until the count in memory stops growing
            last, still = -1.0, 0
            while still < 6:
                time.sleep(0.5)
                now = server.metrics()["synapsedb_resident_namespaces"]
                still = still + 1 if now == last else 0
                last = now
            r["warm_s"] = time.perf_counter() - t0 - 3.0
            r["after_warm"] = server.metrics()
            r["rss_after_warm"] = rss_mib(server.proc.pid)
            order = [name_of(k) for k in range(a.namespaces)]
            random.Random(3).shuffle(order)
            qvecs = np.random.default_rng(11).standard_normal((64, DIM)).astype(np.float32)
            bodies = [query_body(v) for v in qvecs]
            first: list[float] = []
            t0 = time.perf_counter()
            for i, ns in enumerate(order):
                first.append(server.query(ns, bodies[i % len(bodies)]))
                if i % 10_000 == 0:
                    print(f"  first queries: {i:,}/{len(order):,} in {time.perf_counter() - t0:.0f}"
                          f" s, RSS max {server.rss_max:,.0f} MiB", flush=True)  # fmt: skip
            r["first_s"] = time.perf_counter() - t0
            r["first"] = first
            r["after_first"] = server.metrics()
            n_cold = min(2000, a.namespaces // 4)
            r["cold"] = [server.query(ns, bodies[i % len(bodies)])
                         for i, ns in enumerate(order[:n_cold])]  # fmt: skip
            r["warm"] = [server.query(ns, bodies[i % len(bodies)])
                         for i, ns in enumerate(order[-500:])]  # fmt: skip
            r["end"] = server.metrics()
            r["rss_end"] = rss_mib(server.proc.pid)
            r["rss_max"] = server.rss_max
        finally:
            server.stop()
    finally:
        if a.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    r["load_end"] = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    lines = report(r, a)
    text = "\n".join(lines) + "\n"
    base = Path(tempfile.gettempdir()) / f"synapsedb-bench-residency-{stamp:%Y%m%d-%H%M%S}"
    base.with_suffix(".md").write_text(text)
    base.with_suffix(".json").write_text(json.dumps(r, indent=1, default=str))
    print(f"written: {base}.md, {base}.json")
    append_report("Many namespaces within a memory budget", r["command"], lines, data=r)


def report(r: dict[str, Any], a: argparse.Namespace) -> list[str]:
    mib = 2**20
    end, warm = r["end"], r["after_warm"]
    build = r.get("build")
    budget = end["synapsedb_memory_budget_bytes"] / mib  # (0 asks for half the machine's)
    lines = [
        f"Date {r['date']}; machine: {r['machine']}; commit {r['commit']}. Command: "
        f"`{r['command']}`. Load (1/5/15 min): {r['load_start']} -> {r['load_end']}.",
        "",
        f"{a.namespaces:,} namespaces of {a.memories} memories (384-d caller vectors), SQLite, "
        f"`synapsedb serve` with `SYNAPSEDB_MEMORY_BUDGET_MB={a.budget_mb}` ({budget:,.0f} MiB)"
        + "".join(f", `{v}`" for v in a.server_env)
        + ", one client "
        "thread over HTTP, query = caller vector, k=10, mode=vector."
        + (
            f" Data built in {build['build_s']:.0f} s ({build['db_gib']:.1f} GiB)." if build else ""
        ),
        "",
        "| measure | value |",
        "|---|---|",
        f"| server start to /readyz | {r['start_s']:.1f} s |",
        f"| warm-up (background loading until 80% of the budget) | {r['warm_s']:.0f} s, "
        f"{warm['synapsedb_resident_namespaces']:,.0f} namespaces, "
        f"{warm['synapsedb_resident_bytes'] / mib:,.0f} MiB counted, RSS "
        f"{r['rss_after_warm']:,.0f} MiB |",
        f"| first query of every namespace once ({len(r['first']):,}, random order), p50 / p99 "
        f"ms | {ms(r['first'])} ({len(r['first']) / r['first_s']:,.0f} queries/s) |",
        f"| cold first query (the first {len(r['cold']):,} of that order again), p50 / p99 ms | "
        f"{ms(r['cold'])} |",
        f"| floor: a namespace in memory (the last 500 again), p50 / p99 ms | {ms(r['warm'])} |",
        f"| cold / floor, p50 | {pct(r['cold'], 50) / pct(r['warm'], 50):.1f}x |",
        f"| server RSS: max / at the end | {r['rss_max']:,.0f} / {r['rss_end']:,.0f} MiB "
        f"(budget {budget:,.0f} MiB: {'within' if r['rss_max'] <= budget else 'over'}) |",
        f"| namespaces in memory at the end | {end['synapsedb_resident_namespaces']:,.0f} "
        f"({end['synapsedb_resident_bytes'] / mib:,.0f} MiB counted) |",
        f"| namespaces unloaded | {end['synapsedb_namespace_unloads_total']:,.0f} |",
    ]
    return lines


if __name__ == "__main__":
    main()
