"""The memory proxy's overhead: the same chat request sent to the upstream model directly and
through SynapseDB (recall, injection, forwarding; turns stored in the background).

The SynapseDB server runs as its own process (``synapsedb serve --auth none`` on loopback,
upstream from SYNAPSEDB_LLM_*), as a user would run it; the client and the upstream share this
process. Upstreams:

- ScriptedUpstream (tests/support/scripted_upstream.py), a stand-in for a hosted model that
  answers at once, so what is measured is SynapseDB's own time;
- with ``--local-llm``, llama.cpp serving SmolLM2-135M (``make test-llm`` infra): the real
  thing, where the model's seconds dwarf the proxy's milliseconds.

Every request asks a different question (no embedding cache hit), for a user with 2,000
memories. Modes: ``paced`` leaves 50 ms between requests (a chat: the background work of one
turn is done before the next), ``back-to-back`` sends the next at once (the background work of
each turn competes with the next request on the 2 cores). Time to first token is measured on
streamed requests (first ``data:`` chunk with content), total time on non-streamed ones.

Fairness between tenants (``--part fairness``): the server with API keys, two tenants. Tenant
A asks its questions one after another (50 ms apart) while tenant B floods: 16 clients sending
requests the upstream answers only after the server's 2 s timeout (a huge ``max_tokens``),
without pause, so B's breaker opens and B's share of calls fills (502s and 429s at once). A's
proxy latency during the flood is compared with A alone in the same run (alone, flood, alone,
flood: drift hits both alike), and every one of A's requests must be answered.

    .venv/bin/python bench/bench_proxy.py [--quick] [--local-llm] [--no-report]
                                          [--part overhead|fairness|all]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import ROOT, append_report
from tests.support.scripted_upstream import Reply, Request, ScriptedUpstream

USER = "user:alice"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def synapsedb_server(
    base_url: str, model: str, data: Path, *, auth: str = "none", timeout_s: float = 300
) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "SYNAPSEDB_LLM_BASE_URL": base_url,
        "SYNAPSEDB_LLM_MODEL": model,
        "SYNAPSEDB_LLM_MAX_RETRIES": "0",
        "SYNAPSEDB_LLM_TIMEOUT_S": str(timeout_s),
    }
    cmd = [
        sys.executable,
        "-m",
        "synapsedb",
        "serve",
        "--data",
        str(data),
        "--port",
        str(port),
        "--auth",
        auth,
        "--log-level",
        "error",
    ]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("synapsedb serve did not become ready")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def seed(url: str, n: int, headers: dict[str, str] | None = None) -> None:
    items = [
        {
            "entity": USER,
            "content": f"Note {i}: the user mentioned plan number {i} for "
            f"trip {i % 37} and a preference for option {i % 11}",
        }
        for i in range(n)
    ]
    items.append({"entity": USER, "content": "The user's budget for the Hawaii trip is $10,000"})
    with httpx.Client(timeout=120, headers=headers) as c:
        for i in range(0, len(items), 500):
            r = c.post(
                f"{url}/v1/namespaces/acme/memories:batch", json={"items": items[i : i + 500]}
            )
            r.raise_for_status()


def body(i: int, stream: bool, max_tokens: int | None) -> dict:
    b: dict = {
        "model": "m",
        "user": USER,
        "stream": stream,
        "messages": [
            {
                "role": "user",
                "content": f"Question {i}: what is my budget for "
                f"trip number {i % 37} to Hawaii, option {i}?",
            }
        ],
    }
    if max_tokens is not None:
        b["max_tokens"] = max_tokens
    return b


def one(c: httpx.Client, url: str, b: dict) -> tuple[float, float]:
    """(time to first content chunk, total time) in seconds."""
    t0 = time.perf_counter()
    if not b["stream"]:
        r = c.post(url, json=b)
        r.raise_for_status()
        t = time.perf_counter() - t0
        return t, t
    first = None
    with c.stream("POST", url, json=b) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if first is None and line.startswith("data:") and '"content"' in line:
                first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    return (first if first is not None else total), total


def settle(c: httpx.Client, server: str, timeout_s: float = 120.0) -> None:
    """Wait until the memory loop is not extracting and nothing is due in the next seconds
    (the local model serves one request at a time: extraction would otherwise queue in front of
    the measured call). A job the model failed is retried later; it does not hold us up."""
    deadline = time.monotonic() + timeout_s
    quiet = 0  # consecutive idle looks: the proxy queues the remember of the last answer in a
    # background lane after answering, so one idle look right after it can come too early
    while time.monotonic() < deadline:
        time.sleep(0.5)
        r = c.get(f"{server}/v1/namespaces/acme/facts", params={"entity": "synapsedb:jobs"})
        soon = time.time() + 2.0
        busy = (
            [
                f
                for f in r.json()
                if isinstance(f.get("value"), dict)
                and (
                    f["value"].get("state") == "running"
                    or (
                        f["value"].get("state") == "queued"
                        and float(f["value"].get("due", 0)) <= soon
                    )
                )
            ]
            if r.status_code == 200
            else [1]
        )
        quiet = 0 if busy else quiet + 1
        if quiet >= 2:
            return
    print("warning: the memory loop stayed busy; measuring anyway", flush=True)


def run(
    c: httpx.Client,
    url: str,
    n: int,
    *,
    stream: bool,
    pace_s: float,
    offset: int,
    max_tokens: int | None,
    server: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    ttft, total = [], []
    for i in range(n):
        if server is not None:
            settle(c, server)
        a, b = one(c, url, body(offset + i, stream, max_tokens))
        ttft.append(a)
        total.append(b)
        if pace_s:
            time.sleep(pace_s)
    return np.array(ttft) * 1e3, np.array(total) * 1e3


def ms(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q))


def measure(
    upstream_url: str,
    model: str,
    n: int,
    max_tokens: int | None,
    modes: list[tuple[str, bool, float]],
    warm: int,
    settled: bool = False,
) -> list[str]:
    lines = [
        "| mode | metric | direct p50 / p99 ms | through SynapseDB p50 / p99 ms | added p50 / p99 ms |",
        "|---|---|---|---|---|",
    ]
    with (
        tempfile.TemporaryDirectory() as tmp,
        synapsedb_server(upstream_url, model, Path(tmp) / "d") as url,
    ):
        seed(url, 2000)
        direct = f"{upstream_url}/chat/completions"
        proxied = f"{url}/v1/namespaces/acme/chat/completions"
        with httpx.Client(timeout=600) as c:
            kw = {"max_tokens": max_tokens, "server": url if settled else None}
            for target in (direct, proxied):
                run(c, target, warm, stream=False, pace_s=0.0, offset=10_000, **kw)
            offset = 0
            for label, stream, pace in modes:
                # interleave direct and proxied runs in halves, so drift hits both alike
                halves = []
                for i, target in enumerate((direct, proxied, direct, proxied)):
                    halves.append(
                        run(
                            c,
                            target,
                            n // 2,
                            stream=stream,
                            pace_s=pace,
                            offset=offset + i * n,
                            **kw,
                        )
                    )
                d1, p1, d2, p2 = halves
                offset += 4 * n
                d = [np.concatenate([d1[k], d2[k]]) for k in (0, 1)]
                p = [np.concatenate([p1[k], p2[k]]) for k in (0, 1)]
                metric = (0, "time to first token") if stream else (1, "total time")
                k, name = metric
                lines.append(
                    f"| {label} | {name} | {ms(d[k], 50):.2f} / {ms(d[k], 99):.2f} | "
                    f"{ms(p[k], 50):.2f} / {ms(p[k], 99):.2f} | "
                    f"{ms(p[k], 50) - ms(d[k], 50):.2f} / {ms(p[k], 99) - ms(d[k], 99):.2f} |"
                )
                print(lines[-1], flush=True)
    return lines


FLOODERS = 16  # tenant B's clients sending without pause
FLOOD_TIMEOUT_S = 2.0  # the server's upstream timeout in the fairness run


def flood_answer(request: Request) -> Reply:
    """B's requests are answered after the server has given up on them; A's at once."""
    last = str(request.messages[-1].get("content"))
    if last.startswith("flood"):
        return Reply.slow(FLOOD_TIMEOUT_S * 5, "too late")
    return Reply.text("Your budget for the Hawaii trip is $10,000.")


def flood(url: str, key: str, stop: threading.Event, seen: Counter[str]) -> None:
    b = {
        "model": "m",
        "user": "user:bob",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "flood: write a novel"}],
    }
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {key}"}) as c:
        while not stop.is_set():
            try:
                r = c.post(url, json=b)
                kind = str(r.status_code)
                if r.status_code == 502:
                    kind += " breaker open" if "circuit breaker" in r.text else " timed out"
            except httpx.TransportError as exc:
                kind = type(exc).__name__
            seen[kind] += 1


def fairness(n: int) -> list[str]:
    """Tenant A's latency while tenant B floods, against A alone, in one run."""
    from synapsedb.server.keys import KeyStore

    with tempfile.TemporaryDirectory() as tmp, ScriptedUpstream(responder=flood_answer) as up:
        data = Path(tmp) / "d"
        keys = KeyStore(data)
        a = keys.create("tenant-a", ["read", "write"])[1]
        b = keys.create("tenant-b", ["read", "write"])[1]
        keys.close()
        with synapsedb_server(
            up.base_url, "scripted", data, auth="keys", timeout_s=FLOOD_TIMEOUT_S
        ) as url:
            auth = {"Authorization": f"Bearer {a}"}
            seed(url, 2000, auth)
            target = f"{url}/v1/namespaces/acme/chat/completions"
            alone: list[np.ndarray] = []
            flooded: list[np.ndarray] = []
            seen: Counter[str] = Counter()
            with httpx.Client(timeout=60, headers=auth) as c:
                run(c, target, 20, stream=False, pace_s=0.0, offset=50_000, max_tokens=None)
                for half in range(2):
                    alone.append(
                        run(
                            c,
                            target,
                            n // 2,
                            stream=False,
                            pace_s=0.05,
                            offset=half * n,
                            max_tokens=None,
                        )[1]
                    )
                    stop = threading.Event()
                    threads = [
                        threading.Thread(target=flood, args=(target, b, stop, seen))
                        for _ in range(FLOODERS)
                    ]
                    for t in threads:
                        t.start()
                    time.sleep(FLOOD_TIMEOUT_S * 3)  # B's breaker opens, its share fills
                    flooded.append(
                        run(
                            c,
                            target,
                            n // 2,
                            stream=False,
                            pace_s=0.05,
                            offset=10_000 + half * n,
                            max_tokens=None,
                        )[1]
                    )
                    stop.set()
                    for t in threads:
                        t.join()
    lone, busy = np.concatenate(alone), np.concatenate(flooded)
    floods = ", ".join(f"{k}: {v:,}" for k, v in sorted(seen.items()))
    return [
        f"Fairness: tenant A's non-streamed requests through the proxy (50 ms apart, {n} per "
        f"cell, every one answered: run() raises on any error), alone and while tenant B "
        f"floods with {FLOODERS} clients sending without pause requests the upstream answers "
        f"after the server's {FLOOD_TIMEOUT_S:g} s timeout. B's answers during the flood: "
        f"{floods}.",
        "",
        "| tenant A | p50 ms | p99 ms |",
        "|---|---|---|",
        f"| alone | {ms(lone, 50):.2f} | {ms(lone, 99):.2f} |",
        f"| while B floods | {ms(busy, 50):.2f} | {ms(busy, 99):.2f} |",
        f"| added by B's flood | {ms(busy, 50) - ms(lone, 50):.2f} | "
        f"{ms(busy, 99) - ms(lone, 99):.2f} |",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests")
    ap.add_argument("--local-llm", action="store_true", help="also against SmolLM2 (llama.cpp)")
    ap.add_argument(
        "--local-requests",
        type=int,
        default=10,
        help="requests per cell against the local model (each waits for the "
        "extraction of the turns before it: seconds to a minute)",
    )
    ap.add_argument("--no-report", action="store_true", help="do not append the run to bench/runs/")
    ap.add_argument(
        "--part",
        choices=("overhead", "fairness", "all"),
        default="all",
        help="the overhead against a direct call, fairness between tenants, or both",
    )
    args = ap.parse_args()
    n = 60 if args.quick else 300
    lines: list[str] = []
    if args.part in ("overhead", "all"):
        lines += [
            "Scripted upstream (a stand-in for a hosted model; answers in well under a "
            "millisecond of its own), 2,000 memories for the user, a new question each "
            f"request, {n} requests per cell:",
            "",
        ]
        modes = [
            ("paced, non-streamed", False, 0.05),
            ("paced, streamed", True, 0.05),
            ("back-to-back, non-streamed", False, 0.0),
        ]
        answer = "Your budget for the Hawaii trip is $10,000."
        with ScriptedUpstream(responder=lambda r: answer) as up:
            lines += measure(up.base_url, "scripted", n, None, modes, warm=20)
    if args.part in ("fairness", "all"):
        lines += ["", *fairness(n)] if lines else fairness(n)
        print("\n".join(lines[-6:]), flush=True)
    if args.local_llm:
        from tests.support.local_llm import serve

        k = max(2, args.local_requests)
        lines += [
            "",
            f"SmolLM2-135M on llama.cpp (2 threads), max_tokens 16, {k} requests per "
            "cell, each sent once the memory loop's extraction of the previous turns is "
            "done (the model serves one request at a time; a plumbing model):",
            "",
        ]
        with serve() as llm:
            lines += measure(
                llm.base_url,
                llm.model,
                k,
                16,
                [("settled, streamed", True, 0.05), ("settled, non-streamed", False, 0.05)],
                warm=3,
                settled=True,
            )
    if not args.no_report:
        cmd = "make bench-proxy" + (" (with --local-llm)" if args.local_llm else "")
        if args.part != "all":
            cmd += f" (BENCH_PROXY_ARGS=--part {args.part})"
        append_report("Memory proxy overhead and fairness between tenants", cmd, lines)
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
