"""SynapseDB on PostgreSQL against SynapseDB on SQLite, in one run on this machine (issue 16).

1. Query p50/p99 (k=10, a caller vector) at 100,000 memories, without a filter and with
   filters keeping ~10% and ~1%. Search runs in the SynapseDB process on both backends (its
   HNSW and keyword indexes, kept fresh from the change log): PostgreSQL stores rows, it does
   not search them.
2. Durable ingest: ``write_many`` batches, and single writes from 4 threads (group commit).
   SQLite with ``durability="fsync"`` (the default), PostgreSQL with ``synchronous_commit=on``:
   a write is acknowledged once committed and flushed.
3. KV GET (``get(entity, key)`` of a fact), 4. an ``as_of`` query at a moment half-way through
   the ingest; every row with its PostgreSQL / SQLite ratio.
5. One and two ``synapsedb serve --storage postgresql://...`` processes (127.0.0.1) on that
   schema: query and write throughput over HTTP from a threaded load generator in this process
   (its CPU share is measured), and the visibility lag between two processes, measured by
   bench_pg_processes.py's writer and follower.
6. A large PostgreSQL namespace (``--pg-1m-size``, default 1,000,000): ingest time, query
   p50/p99 in-process, then a ``synapsedb serve`` on it: start time, resident memory, query
   p50/p99 over HTTP.

PostgreSQL is pgserver's (PostgreSQL 16.2 from PyPI, tests/support/backend_servers.py), on a
Unix socket, fsync on. Vectors: real MiniLM vectors of bench_retrieval.py's sentences when its
cache (/tmp/synapsedb-bench-cache) holds them, else clustered synthetic ones; the large
namespace always uses clustered synthetic vectors. The table goes to stdout and to
bench/runs/postgresql-backend.jsonl; every measurement to /tmp/synapsedb-bench-pg-<time>.json.

    .venv/bin/python bench/bench_pg.py [--quick] [--pg-1m-size N] [--skip-large]
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # tests.support
from bench_pg_processes import follower, open_db, write_latencies  # noqa: E402
from bench_retrieval import CACHE, sentences, timed  # noqa: E402
from common import append_report, git_rev, machine, pct, rss_mib  # noqa: E402

import synapsedb  # noqa: E402

DIM = 384
FILTERS: list[tuple[str, dict[str, Any] | None]] = [
    ("none", None),
    ("10%", {"bucket": {"$lt": 10}}),
    ("1%", {"bucket": 7}),
]


def loadavg() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


# -- data ------------------------------------------------------------------------------------------


def clustered(n: int, seed: int, clusters: int = 1000, latent: int = 48) -> np.ndarray:
    """Unit vectors from ``clusters`` Gaussian clusters in a ``latent``-d space projected to
    384-d plus noise (the spike's "clustered" set: neighbours exist, as in real embeddings)."""
    rng = np.random.default_rng(1234)  # the same space for every seed: queries match corpora
    proj = rng.standard_normal((latent, DIM), dtype=np.float32)
    centers = rng.standard_normal((clusters, latent), dtype=np.float32)
    rng = np.random.default_rng(seed)
    out = np.empty((n, DIM), dtype=np.float32)
    for lo in range(0, n, 100_000):
        hi = min(n, lo + 100_000)
        pick = rng.integers(0, clusters, hi - lo)
        lat = centers[pick] + 0.35 * rng.standard_normal((hi - lo, latent), dtype=np.float32)
        v = lat @ proj + 0.5 * rng.standard_normal((hi - lo, DIM), dtype=np.float32)
        out[lo:hi] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def vectors(n: int, reps: int) -> tuple[list[str], np.ndarray, np.ndarray, str]:
    """Texts, corpus vectors, query vectors and where the vectors come from. The MiniLM cache
    bench_retrieval.py leaves holds 100,000 corpus sentences then 1,000 query sentences."""
    import hashlib

    full, full_reps = 100_000, 1000
    texts = sentences(full + full_reps, seed=1)
    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    found = sorted(CACHE.glob(f"*-{key}.npy"))
    if found and n <= full and reps <= full_reps:
        vecs = np.load(found[0])
        name = found[0].name[: -len(f"-{key}.npy")]
        return texts[:n], vecs[:n], vecs[full : full + reps], f"real {name} vectors ({found[0]})"
    texts = sentences(n + reps, seed=1)
    return (
        texts[:n],
        clustered(n, seed=1),
        clustered(reps, seed=2),
        "clustered synthetic vectors (no MiniLM cache for these sentences)",
    )


def item(texts: list[str], vecs: np.ndarray, j: int) -> dict[str, Any]:
    return {
        "entity": f"user:{j % 5000}",
        "content": texts[j % len(texts)],
        "embedding": vecs[j],
        "metadata": {"bucket": j % 100},
    }


def p50_p99_ms(samples_s: list[float]) -> tuple[float, float]:
    return pct(samples_s, 50) / 1000, pct(samples_s, 99) / 1000


# -- 1-4: one backend in-process ---------------------------------------------------------------------


def threaded_writes(mem: Any, texts: list[str], vecs: np.ndarray, threads: int, per: int) -> float:
    """``threads`` threads each writing ``per`` memories one at a time; memories/s."""
    errors: list[BaseException] = []

    def run(t: int) -> None:
        try:
            for i in range(per):
                fields = item(texts, vecs, t * per + i)
                mem.write(fields.pop("entity"), fields)
        except BaseException as exc:  # reported below: a failed write must fail the benchmark
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    took = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return threads * per / took


def index_then_filters(db: Any, mem: Any, queries: np.ndarray, reps: int, out: dict) -> None:
    """Wait for the vector graph (``index_s``), then time a caller-vector query per filter."""
    t0 = time.perf_counter()
    db.wait_for_indexes()
    out["index_s"] = time.perf_counter() - t0
    for label, flt in FILTERS:
        run = lambda i, f=flt: mem.query(embedding=queries[i], filter=f, k=10, mode="vector")  # noqa: E731
        run(0)
        out[f"query_{label}"] = p50_p99_ms(timed(run, reps))


def bench_backend(
    path: Path,
    storage: str | None,
    texts: list[str],
    corpus: np.ndarray,
    queries: np.ndarray,
    a: argparse.Namespace,
) -> dict[str, Any]:
    n, reps = len(corpus), len(queries)
    out: dict[str, Any] = {"load_start": loadavg()}
    db = synapsedb.open(
        path, storage=storage, embedder=None, llm=None, background_maintenance=False
    )
    try:
        mem = db.namespace("bench")
        half = (n // a.batch // 2) * a.batch
        t0 = time.perf_counter()
        for lo in range(0, n, a.batch):
            if lo == half:
                time.sleep(0.002)
                out["as_of"] = time.time()
                time.sleep(0.002)
            mem.write_many([item(texts, corpus, j) for j in range(lo, min(n, lo + a.batch))])
        out["ingest_s"] = time.perf_counter() - t0
        out["ingest_rate"] = n / out["ingest_s"]
        index_then_filters(db, mem, queries, reps, out)
        run = lambda i: mem.query(embedding=queries[i], k=10)  # noqa: E731
        out["query_hybrid"] = p50_p99_ms(timed(run, reps))
        moment = out["as_of"]
        run = lambda i: mem.query(embedding=queries[i], k=10, mode="vector", as_of=moment)  # noqa: E731
        hits = run(0)
        out["as_of_hits"] = len(hits)
        out["query_as_of"] = p50_p99_ms(timed(run, reps))
        # single writes, 4 threads (the engine's group commit batches them), another namespace
        side = db.namespace("threads")
        first = item(texts, corpus, 0)
        side.write(first.pop("entity"), first)
        out["thread_rate"] = threaded_writes(side, texts, corpus, 4, a.thread_writes)
        # KV GET: facts set from 4 threads, then read one at a time
        facts = db.namespace("kv")
        keys = a.facts

        def set_facts(t: int) -> None:
            for i in range(t, keys, 4):
                facts.set(f"user:{i}", "plan", {"tier": i % 3, "seats": i})

        workers = [threading.Thread(target=set_facts, args=(t,)) for t in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        run = lambda i: facts.get(f"user:{(i * 7919) % keys}", "plan")  # noqa: E731
        run(0)
        out["kv_get"] = p50_p99_ms(timed(run, max(reps, 2000)))
    finally:
        db.close()
    out["load_end"] = loadavg()
    return out


# -- 5: server processes over HTTP ---------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds every core of the machine spent busy so far (/proc/stat)."""
    cols = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = cols[3] + cols[4]
    return (sum(cols[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class Server:
    """``python -m synapsedb serve --storage URL`` on 127.0.0.1, vectors from the caller."""

    def __init__(self, data: Path, url: str, *, maintenance: bool) -> None:
        self.port = free_port()
        env = {
            **os.environ,
            "SYNAPSEDB_EMBEDDER": "none",
            "SYNAPSEDB_BACKGROUND_MAINTENANCE": "true" if maintenance else "false",
        }
        self.log = (data.parent / f"{data.name}.log").open("wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "synapsedb",
                "serve",
                "--data",
                str(data),
                "--storage",
                url,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 1800
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"synapsedb serve exited: see {self.log.name}")
            try:
                status, _ = request(self.port, "GET", "/readyz", None)
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"synapsedb serve not ready: see {self.log.name}")
            time.sleep(0.2)
        self.start_s = time.perf_counter() - t0

    def rss_mib(self) -> float:
        return rss_mib(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def request(
    port: int,
    method: str,
    path: str,
    body: bytes | None,
    conn: http.client.HTTPConnection | None = None,
) -> tuple[int, bytes]:
    own = conn is None
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        c.request(method, path, body=body, headers=headers)
        resp = c.getresponse()
        return resp.status, resp.read()
    finally:
        if own:
            c.close()


def query_body(vec: np.ndarray, flt: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {
        "embedding": [round(float(x), 6) for x in vec],
        "k": 10,
        "mode": "vector",
    }
    if flt is not None:
        body["filter"] = flt
    return json.dumps(body).encode()


def load_phase(
    ports: list[int], path: str, bodies: list[bytes], seconds: float, threads: int
) -> dict[str, Any]:
    """``threads`` threads, each on one keep-alive connection to ``ports[t % len]``, sending
    ``bodies`` round-robin for ``seconds``; answers/s and the generator's CPU share."""
    done = [0] * threads
    errors: list[str] = []
    stop = threading.Event()

    def run(t: int) -> None:
        port = ports[t % len(ports)]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        i = t
        try:
            while not stop.is_set():
                status, text = request(port, "POST", path, bodies[i % len(bodies)], conn)
                if status >= 300:
                    errors.append(f"{status} {text[:200]!r}")
                    return
                done[t] += 1
                i += threads
        except OSError as exc:
            errors.append(repr(exc))
        finally:
            conn.close()

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    busy0, cpu0, t0 = machine_busy_s(), time.process_time(), time.perf_counter()
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    gen_cpu, busy = time.process_time() - cpu0, machine_busy_s() - busy0
    if errors:
        raise RuntimeError(f"load generator: {errors[0]}")
    return {
        "rate": sum(done) / wall,
        "gen_share": gen_cpu / busy if busy else 0.0,
        "machine_busy": busy / wall,
        "gen_cores": gen_cpu / wall,
    }


def bench_servers(
    root: Path, url: str, saved: Path, queries: np.ndarray, a: argparse.Namespace
) -> dict[str, Any]:
    q_bodies = [query_body(v) for v in queries[:500]]
    w_vecs = clustered(2000, seed=3)
    w_bodies = [
        json.dumps(
            {
                "entity": f"user:{i % 100}",
                "content": f"note {i} over HTTP",
                "embedding": [round(float(x), 6) for x in w_vecs[i]],
                "metadata": {"bucket": i % 100},
            }
        ).encode()
        for i in range(len(w_vecs))
    ]
    out: dict[str, Any] = {"load_start": loadavg()}
    servers: list[Server] = []
    try:
        for k in (1, 2):
            data = root / f"server-{k}"
            if saved.exists():  # the saved vector graphs: no server rebuilds HNSW at start
                shutil.copytree(saved, data / "indexes")
            servers.append(Server(data, url, maintenance=k == 1))
            out[f"start_s_{k}"] = servers[-1].start_s
            ports = [s.port for s in servers]
            out[f"query_{k}"] = load_phase(
                ports, "/v1/namespaces/bench/query", q_bodies, a.http_seconds, a.http_threads
            )
            out[f"write_{k}"] = load_phase(
                ports, "/v1/namespaces/http/memories", w_bodies, a.http_seconds, a.http_threads
            )
            out[f"rss_{k}"] = [s.rss_mib() for s in servers]
    finally:
        for s in servers:
            s.stop()
    out["load_end"] = loadavg()
    return out


def bench_lag(url: str, root: Path, writes: int, gap_ms: float) -> dict[str, Any]:
    """bench_pg_processes.py's measurement: this process writes, a spawned one polls get()."""
    a = open_db(url, str(root / "lag-a"))
    try:
        mem = a.namespace("bench")  # the namespace follower() polls
        mem.write("user:0", "warm up")
        alone, _ = write_latencies(mem, "solo-", writes, gap_ms / 1000)
        ids = [f"m-{i}" for i in range(writes)]
        ctx = mp.get_context("spawn")
        ready, (recv, send) = ctx.Event(), ctx.Pipe(duplex=False)
        child = ctx.Process(target=follower, args=(url, str(root / "lag-b"), ids, ready, send))
        child.start()
        if not ready.wait(300):
            raise RuntimeError("the follower process did not start")
        followed, acked = write_latencies(mem, "m-", writes, gap_ms / 1000)
        if not recv.poll(max(120.0, writes * 0.1)):
            raise RuntimeError("the follower did not see every write")
        seen = recv.recv()
        child.join(60)
    finally:
        a.close()
    lag = [(s - t) for s, t in zip(seen, acked, strict=True)]
    ms = lambda v: p50_p99_ms([x / 1000 for x in v])  # noqa: E731  (ms samples -> seconds)
    return {
        "lag": p50_p99_ms(lag),
        "write_alone": ms(alone),
        "write_followed": ms(followed),
        "lag_max_ms": max(lag) * 1000,
    }


# -- 6: the large namespace ------------------------------------------------------------------------


def bench_large(root: Path, url: str, size: int, a: argparse.Namespace) -> dict[str, Any]:
    reps = min(a.reps, 500)
    corpus, queries = clustered(size, seed=11), clustered(reps, seed=12)
    texts = sentences(10_000, seed=5)
    out: dict[str, Any] = {"size": size, "load_start": loadavg()}
    data = root / "large"
    db = synapsedb.open(data, storage=url, embedder=None, llm=None, background_maintenance=False)
    try:
        mem = db.namespace("large")
        t0 = time.perf_counter()
        for lo in range(0, size, a.batch):
            mem.write_many([item(texts, corpus, j) for j in range(lo, min(size, lo + a.batch))])
            if lo % 100_000 == 0:
                print(f"  large: {lo:,}/{size:,} in {time.perf_counter() - t0:.0f} s", flush=True)
        out["ingest_s"] = time.perf_counter() - t0
        index_then_filters(db, mem, queries, reps, out)
    finally:
        db.close()  # saves the vector graph under data/indexes for the server below
    del corpus
    if (data / "indexes").exists():  # the saved vector graph: the server does not rebuild it
        shutil.copytree(data / "indexes", root / "large-server" / "indexes")
    server = Server(root / "large-server", url, maintenance=True)
    try:
        out["server_start_s"] = server.start_s
        out["server_rss_mib"] = server.rss_mib()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        bodies = [query_body(v) for v in queries]
        path = "/v1/namespaces/large/query"
        request(server.port, "POST", path, bodies[0], conn)
        out["http_query_none"] = p50_p99_ms(
            timed(lambda i: request(server.port, "POST", path, bodies[i], conn), reps)
        )
        conn.close()
        out["server_rss_after_mib"] = server.rss_mib()
    finally:
        server.stop()
    out["load_end"] = loadavg()
    return out


# -- report ------------------------------------------------------------------------------------------


def fmt_ms(v: tuple[float, float]) -> str:
    return f"{v[0]:.3f} / {v[1]:.3f}"


def ratio_ms(pg: tuple[float, float], lite: tuple[float, float]) -> str:
    return f"{pg[0] / lite[0]:.2f}x / {pg[1] / lite[1]:.2f}x"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def report(r: dict[str, Any], a: argparse.Namespace) -> list[str]:
    lite, pg = r["sqlite"], r["postgres"]
    n = r["n"]
    lines = [
        f"Date {r['date']}; machine: {r['machine']}; commit {r['commit']}; PostgreSQL "
        f"{r['pg_version']} (pgserver, Unix socket, fsync on, synchronous_commit on); SQLite "
        "with durability=fsync. Command: `" + r["command"] + "`.",
        "",
        f"{n:,} memories in one namespace ({r['vectors']}), metadata bucket = row % 100; "
        f"{len(r['queries'])} queries per row. Search runs in the SynapseDB process on both "
        "backends (HNSW + keyword indexes in memory, kept fresh from the change log; "
        "PostgreSQL stores the rows and does not search them), so query rows compare the same "
        "code on the same vectors. Load averages (1/5/15 min): SQLite part "
        f"{lite['load_start']} -> {lite['load_end']}, PostgreSQL part {pg['load_start']} -> "
        f"{pg['load_end']}.",
        "",
        "| measure | SQLite | PostgreSQL | PostgreSQL / SQLite | target |",
        "|---|---|---|---|---|",
    ]
    for label, _ in FILTERS:
        key = f"query_{label}"
        tgt = f"p50 within 2x: {verdict(pg[key][0] <= 2 * lite[key][0])}"
        lines.append(
            f"| query k=10 mode=vector, filter keeps {label if label != 'none' else 'all'}"
            f", p50 / p99 ms | {fmt_ms(lite[key])} | {fmt_ms(pg[key])} | "
            f"{ratio_ms(pg[key], lite[key])} | {tgt} |"
        )
    lines.append(
        f"| query k=10 hybrid (vector, no text), p50 / p99 ms | "
        f"{fmt_ms(lite['query_hybrid'])} | {fmt_ms(pg['query_hybrid'])} | "
        f"{ratio_ms(pg['query_hybrid'], lite['query_hybrid'])} | |"
    )
    lines.append(
        f"| query k=10 as_of half-way through the ingest ({pg['as_of_hits']} hits), "
        f"p50 / p99 ms | {fmt_ms(lite['query_as_of'])} | {fmt_ms(pg['query_as_of'])} | "
        f"{ratio_ms(pg['query_as_of'], lite['query_as_of'])} | |"
    )
    lines.append(
        f"| KV GET (`get(entity, key)`, {a.facts:,} facts), p50 / p99 ms | "
        f"{fmt_ms(lite['kv_get'])} | {fmt_ms(pg['kv_get'])} | "
        f"{ratio_ms(pg['kv_get'], lite['kv_get'])} | |"
    )
    lines.append(
        f"| durable ingest, write_many batches of {a.batch}, memories/s | "
        f"{lite['ingest_rate']:,.0f} | {pg['ingest_rate']:,.0f} | "
        f"{pg['ingest_rate'] / lite['ingest_rate']:.2f}x | PostgreSQL >= 5,000/s: "
        f"{verdict(pg['ingest_rate'] >= 5000)} |"
    )
    lines.append(
        f"| durable single writes from 4 threads ({4 * a.thread_writes:,}), memories/s | "
        f"{lite['thread_rate']:,.0f} | {pg['thread_rate']:,.0f} | "
        f"{pg['thread_rate'] / lite['thread_rate']:.2f}x | |"
    )
    lines.append(
        f"| HNSW catch-up after the ingest, s | {lite['index_s']:.1f} | {pg['index_s']:.1f} | | |"
    )
    s = r.get("servers")
    if s:
        q1, q2, w1, w2 = s["query_1"], s["query_2"], s["write_1"], s["write_2"]
        lines += [
            "",
            f"`synapsedb serve --storage postgresql://...` on that schema ({n:,} memories), "
            f"127.0.0.1, `SYNAPSEDB_EMBEDDER=none`; load generator: {a.http_threads} threads "
            "in the benchmark process (http.client, keep-alive, bodies encoded beforehand), "
            f"{a.http_seconds:g} s per phase, threads spread over the servers; query = caller "
            "vector, k=10, mode=vector; write = one memory with its vector. Generator share = "
            "its CPU time over the machine's busy CPU time in the phase. Load: "
            f"{s['load_start']} -> {s['load_end']}.",
            "",
            "| servers | start s | queries/s | writes/s | generator CPU share (query / write) "
            "| machine busy cores (query / write) | server RSS MiB |",
            "|---|---|---|---|---|---|---|",
        ]
        for k, q, w in ((1, q1, w1), (2, q2, w2)):
            lines.append(
                f"| {k} | {s[f'start_s_{k}']:.1f} | {q['rate']:,.0f} | {w['rate']:,.0f} "
                f"| {q['gen_share']:.0%} / {w['gen_share']:.0%} | "
                f"{q['machine_busy']:.2f} / {w['machine_busy']:.2f} | "
                f"{', '.join(f'{x:.0f}' for x in s[f'rss_{k}'])} |"
            )
        lines.append(
            f"| 2 / 1 | | {q2['rate'] / q1['rate']:.2f}x | {w2['rate'] / w1['rate']:.2f}x | | | |"
        )
    lag = r.get("lag")
    if lag:
        lines += [
            "",
            f"Visibility lag between two processes on one schema (bench_pg_processes.py's "
            f"writer and follower: {a.lag_writes} writes {a.lag_gap_ms:g} ms apart; the "
            "follower polls get() every 0.2 ms; target: within 100 ms).",
            "",
            "| measure | p50 ms | p99 ms |",
            "|---|---|---|",
            f"| write latency, writer alone | {fmt_ms(lag['write_alone']).replace(' / ', ' | ')} |",
            f"| write latency, with a follower | "
            f"{fmt_ms(lag['write_followed']).replace(' / ', ' | ')} |",
            f"| visibility lag (max {lag['lag_max_ms']:.1f} ms; p99 <= 100 ms: "
            f"{verdict(lag['lag'][1] <= 100)}) | {fmt_ms(lag['lag']).replace(' / ', ' | ')} |",
        ]
    big = r.get("large")
    if big:
        lines += [
            "",
            f"{big['size']:,} memories on PostgreSQL (clustered synthetic 384-d vectors; "
            f"requested size {a.pg_1m_size:,}): ingest in-process with write_many batches of "
            f"{a.batch}, then a `synapsedb serve` started on the schema. Load: "
            f"{big['load_start']} -> {big['load_end']}.",
            "",
            "| measure | value |",
            "|---|---|",
            f"| ingest | {big['ingest_s']:.0f} s ({big['size'] / big['ingest_s']:,.0f} memories/s) |",
            f"| HNSW catch-up after the ingest | {big['index_s']:.0f} s |",
        ]
        for label, _ in FILTERS:
            lines.append(
                f"| query in-process, filter keeps {label}, p50 / p99 ms | "
                f"{fmt_ms(big[f'query_{label}'])} |"
            )
        lines += [
            f"| server start (load the rows, saved graph) | {big['server_start_s']:.1f} s |",
            f"| server RSS after start / after the queries | {big['server_rss_mib']:,.0f} / "
            f"{big['server_rss_after_mib']:,.0f} MiB (raw vectors "
            f"{big['size'] * DIM * 4 / 2**20:,.0f} MiB) |",
            f"| query over HTTP (one client), p50 / p99 ms | {fmt_ms(big['http_query_none'])} |",
        ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small smoke run (about a minute)")
    ap.add_argument("--n", type=int, help="memories per backend (default 100,000; quick 5,000)")
    ap.add_argument("--reps", type=int, help="queries per row (default 1,000; quick 100)")
    ap.add_argument("--batch", type=int, default=500, help="write_many batch size")
    ap.add_argument(
        "--pg-1m-size",
        type=int,
        help="the large PostgreSQL namespace (default 1,000,000; quick 20,000)",
    )
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--http-seconds", type=float, help="per load phase (default 10; quick 2)")
    ap.add_argument("--http-threads", type=int, default=8)
    ap.add_argument("--lag-writes", type=int, help="default 500; quick 50")
    ap.add_argument("--lag-gap-ms", type=float, default=10.0)
    a = ap.parse_args()
    q = a.quick
    a.n = a.n or (5_000 if q else 100_000)
    a.reps = a.reps or (100 if q else 1000)
    a.pg_1m_size = a.pg_1m_size or (20_000 if q else 1_000_000)
    a.http_seconds = a.http_seconds or (2.0 if q else 10.0)
    a.lag_writes = a.lag_writes or (50 if q else 500)
    a.thread_writes = 100 if q else 1000
    a.facts = 500 if q else 4_000
    if min(a.n, a.reps, a.batch, a.pg_1m_size, a.http_threads, a.lag_writes) < 1 or a.n < a.batch:
        ap.error("sizes must be positive, and --n at least --batch")
    from tests.support.backend_servers import postgres_server
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    threadpool_limits(limits=1, user_api="blas")  # as synapsedb serve runs (--blas-threads 1)
    stamp = dt.datetime.now(dt.UTC)
    r: dict[str, Any] = {
        "date": stamp.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "commit": git_rev(),
        "command": "python " + " ".join(sys.argv),
    }
    texts, corpus, queries, r["vectors"] = vectors(a.n, a.reps)
    r["n"], r["queries"] = a.n, list(range(len(queries)))
    print(f"vectors: {r['vectors']}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="synapsedb-bench-pg-"))
    try:
        with postgres_server() as dsn:
            import psycopg

            with psycopg.connect(dsn) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                r["pg_version"] = row[0] if row else "?"
            sep = "&" if "?" in dsn else "?"
            url = f"{dsn}{sep}schema=bench_{uuid.uuid4().hex[:8]}"
            print("SQLite ...", flush=True)
            r["sqlite"] = bench_backend(root / "sqlite", None, texts, corpus, queries, a)
            print("sqlite", r["sqlite"], flush=True)
            print("PostgreSQL ...", flush=True)
            r["postgres"] = bench_backend(root / "pg", url, texts, corpus, queries, a)
            print("postgres", r["postgres"], flush=True)
            print("servers ...", flush=True)
            r["servers"] = bench_servers(root, url, root / "pg" / "indexes", queries, a)
            print("servers", r["servers"], flush=True)
            print("lag ...", flush=True)
            lag_url = f"{dsn}{sep}schema=lag_{uuid.uuid4().hex[:8]}"
            r["lag"] = bench_lag(lag_url, root, a.lag_writes, a.lag_gap_ms)
            print("lag", r["lag"], flush=True)
            if not a.skip_large:
                print(f"large ({a.pg_1m_size:,}) ...", flush=True)
                big_url = f"{dsn}{sep}schema=large_{uuid.uuid4().hex[:8]}"
                r["large"] = bench_large(root, big_url, a.pg_1m_size, a)
                print("large", r["large"], flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines = report(r, a)
    base = Path(tempfile.gettempdir()) / f"synapsedb-bench-pg-{stamp.strftime('%Y%m%d-%H%M%S')}"
    base.with_suffix(".json").write_text(json.dumps(r, indent=1, default=str))
    data = {k: v for k, v in r.items() if k != "queries"}
    append_report("PostgreSQL backend" + (" (quick)" if q else ""), r["command"], lines, data)
    print(f"written: {base}.json (every query too)")


if __name__ == "__main__":
    main()
