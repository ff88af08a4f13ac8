"""Two SynapseDB processes on one PostgreSQL schema: how long after one acknowledges a write
the other serves it (visibility lag), and what following costs the writer.

Process A (this one) writes memories one at a time, paced (``--gap-ms``), and notes when each
write returned; process B (a child) polls ``get(id)`` for each in turn and notes when it first
saw it. Both clocks are this machine's ``time.time()``. Lag = seen - acknowledged. B's polling
loop sleeps 0.2 ms between tries, so it shares the 2 cores with A and PostgreSQL.

Also: A's write latency alone on the schema, then with B following (B's listener and
catch-up are what it costs A: the commit lock, the catch-up read, the NOTIFY).

    .venv/bin/python bench/bench_pg_processes.py --writes 500
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # tests.support

import synapsedb
from synapsedb.errors import NotFoundError


def open_db(url: str, directory: str) -> synapsedb.Database:
    return synapsedb.open(
        directory, storage=url, llm=None, embedder=None, background_maintenance=False
    )


def follower(url: str, directory: str, ids: list[str], ready: Any, out: Any) -> None:
    db = open_db(url, directory)
    mem = db.namespace("bench")
    ready.set()
    seen: list[float] = []
    for mid in ids:
        while True:
            try:
                mem.get(mid)
                break
            except NotFoundError:
                time.sleep(0.0002)
        seen.append(time.time())
    out.send(seen)
    db.close()


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def write_latencies(mem: Any, prefix: str, n: int, gap_s: float) -> tuple[list[float], list[float]]:
    took, acked = [], []
    for i in range(n):
        started = time.perf_counter()
        mem.write("user:1", {"id": f"{prefix}{i}", "content": f"note {i} about the order"})
        took.append((time.perf_counter() - started) * 1000)
        acked.append(time.time())
        time.sleep(gap_s)
    return took, acked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--gap-ms", type=float, default=10.0)
    args = parser.parse_args()
    from tests.support.backend_servers import postgres_server

    gap = args.gap_ms / 1000
    with postgres_server() as dsn, tempfile.TemporaryDirectory() as tmp:
        url = f"{dsn}{'&' if '?' in dsn else '?'}schema=bench_{uuid.uuid4().hex[:8]}"
        a = open_db(url, f"{tmp}/a")
        mem = a.namespace("bench")
        mem.write("user:0", "warm up")
        alone, _ = write_latencies(mem, "solo-", args.writes, gap)
        ids = [f"m-{i}" for i in range(args.writes)]
        ctx = mp.get_context("spawn")
        ready, (recv, send) = ctx.Event(), ctx.Pipe(duplex=False)
        child = ctx.Process(target=follower, args=(url, f"{tmp}/b", ids, ready, send))
        child.start()
        ready.wait(120)
        followed, acked = write_latencies(mem, "m-", args.writes, gap)
        seen = recv.recv()
        child.join(60)
        a.close()
    lag = [(s - t) * 1000 for s, t in zip(seen, acked, strict=True)]
    print(f"writes: {args.writes}, paced {args.gap_ms} ms apart, one memory each (no embedder)")
    print("| measure | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|")
    for name, values in (
        ("write latency, A alone on the schema", alone),
        ("write latency, A with B following", followed),
        ("visibility lag A -> B (B polls get every 0.2 ms)", lag),
    ):
        print(
            f"| {name} | {statistics.median(values):.2f} | {pct(values, 99):.2f} | "
            f"{max(values):.2f} |"
        )


if __name__ == "__main__":
    main()
