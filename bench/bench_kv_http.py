"""KV GET over HTTP against its floor, redis-server, in the same run (issue 18: SynapseDB's
``GET /v1/namespaces/kv/facts?entity=&key=`` at >= 1/7 of redis-server's GET, 64 connections).

    .venv/bin/python bench/bench_kv_http.py [--runs 3] [--seconds 5] [--report]

Each run, as bench_peers.py's kv stage measures it: redis-server pinned to core 0 and
``redis-benchmark -c 64 -t get -d 12`` on core 1; then ``python -m synapsedb serve`` (its
defaults) pinned to core 0 and ``wrk -t1 -c64`` on core 1, both hitting one key. The ratio is
SynapseDB's requests/s over redis-server's from the same run; the 1-minute load average before
and after each run is recorded, since a shared machine moves both. ``--report`` prints the
markdown table and appends it to bench/runs/kv-get-over-http.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))
from bench_peers import dirty_src, redis_benchmark, redis_start, versions, wrk  # noqa: E402
from common import append_report, git_rev, machine  # noqa: E402
from report import fmt_num, fmt_ratio, ratio, table  # noqa: E402
from systems import free_port, start_synapse_server, wait_until  # noqa: E402

TARGET = 1 / 7
CONNS = 64


def load() -> float:
    return os.getloadavg()[0]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(tmp: Path, seconds: float, requests: int) -> dict[str, Any]:
    import httpx

    out: dict[str, Any] = {"load_before": load()}
    rp, rport = redis_start(tmp)
    try:
        cpu = cpu_seconds(rp.pid)  # taskset execs the server: the same pid
        out["redis"] = redis_benchmark(rport, requests, CONNS, tests="get")["get"]
        out["redis"]["cpu_per_request"] = (cpu_seconds(rp.pid) - cpu) / requests
    finally:
        rp.terminate()
        rp.wait(timeout=30)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_synapse_server(tmp / f"kv-{port}", port, core="0")
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, 60, "server")
        ns = "/v1/namespaces/kv"
        httpx.put(
            f"{base}{ns}/facts", json={"entity": "user:1", "key": "plan", "value": {"tier": 1}}
        ).raise_for_status()
        cpu = cpu_seconds(server.pid)
        out["synapsedb"] = got = wrk(f"{base}{ns}/facts?entity=user:1&key=plan", seconds, CONNS)
        # wrk's rate is its requests over its duration (whole seconds)
        got["cpu_per_request"] = (cpu_seconds(server.pid) - cpu) / (got["rps"] * round(seconds))
    finally:
        server.terminate()
        server.wait(timeout=60)
    out["load_after"] = load()
    out["ratio"] = ratio(out["synapsedb"]["rps"], out["redis"]["rps"])
    # the same ratio had each server had its core to itself (a shared machine takes more
    # from one than the other): CPU time per request, redis-server's over SynapseDB's
    out["cpu_ratio"] = ratio(out["redis"]["cpu_per_request"], got["cpu_per_request"])
    return out


def report_lines(runs: list[dict[str, Any]], seconds: float) -> list[str]:
    vers = versions()
    dirty = dirty_src()
    lines = [
        f"Machine: {machine()}; commit {git_rev()}"
        + (f" plus uncommitted changes in {', '.join(dirty)}" if dirty else "")
        + f"; redis-server {vers['redis-server']}, wrk {vers['wrk']}.",
        "",
        f"GET of one key, {CONNS} connections: the server pinned to core 0, the load generator "
        f"to core 1 (`redis-benchmark -c {CONNS} -t get -d 12` for redis-server, "
        f"`wrk -t1 -c{CONNS} -d{seconds:g}s` for SynapseDB's "
        "`GET /v1/namespaces/kv/facts?entity=&key=` served by `python -m synapsedb serve` with "
        "its defaults). Ratio: SynapseDB's requests/s over redis-server's in the same run "
        f"(target >= 1/7 = {TARGET:.3f}x). Load: the 1-minute load average before and after "
        "the run. CPU/request: each server process's CPU time over the requests it answered; "
        "CPU ratio: redis-server's CPU per request over SynapseDB's (the ratio were each "
        "alone on its core; a loaded machine slows the two unequally).",
        "",
    ]
    rows = []
    for i, r in enumerate(runs, 1):
        s, red = r["synapsedb"], r["redis"]
        rows.append(
            [
                str(i),
                f"{r['load_before']:.2f} / {r['load_after']:.2f}",
                fmt_num(red["rps"]),
                fmt_num(s["rps"]),
                f"{s['p50']:.2f}",
                f"{s['p99']:.2f}",
                str(s["errors"]),
                fmt_ratio(r["ratio"]),
                "met" if r["ratio"] is not None and r["ratio"] >= TARGET else "missed",
                f"{red['cpu_per_request'] * 1e6:.1f} / {s['cpu_per_request'] * 1e6:.1f}",
                fmt_ratio(r["cpu_ratio"]),
            ]
        )
    lines += table(
        [
            "run",
            "load",
            "redis-server GET/s",
            "SynapseDB GET/s",
            "p50 ms",
            "p99 ms",
            "non-2xx",
            "ratio",
            ">= 1/7",
            "CPU/request us (redis / SynapseDB)",
            "CPU ratio",
        ],
        rows,
    )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0, help="wrk's duration per run")
    ap.add_argument("--requests", type=int, default=400_000, help="redis-benchmark's -n")
    ap.add_argument("--report", action="store_true", help="append the run to bench/runs/")
    a = ap.parse_args()
    if a.runs < 1 or a.seconds < 1 or a.requests < 1000:
        ap.error("--runs >= 1, --seconds >= 1, --requests >= 1000")
    runs = []
    with tempfile.TemporaryDirectory(prefix="synapsedb-kvhttp-") as tmp:
        for i in range(a.runs):
            r = one_run(Path(tmp), a.seconds, a.requests)
            runs.append(r)
            print(
                f"run {i + 1}: load {r['load_before']:.2f}/{r['load_after']:.2f} "
                f"redis {r['redis']['rps']:,.0f}/s synapsedb {r['synapsedb']['rps']:,.0f}/s "
                f"ratio {fmt_ratio(r['ratio'])} cpu ratio {fmt_ratio(r['cpu_ratio'])}",
                flush=True,
            )
    if a.report:
        append_report(
            "KV GET over HTTP",
            "python " + " ".join(sys.argv),
            report_lines(runs, a.seconds),
            data={"runs": runs},
        )
    else:
        print(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
