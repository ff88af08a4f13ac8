"""Agent memory (seed 002's API, synapsedb.agent_state): store and retrieval latency, tier maintenance.

    .venv/bin/python bench/bench_agents.py [--states 10000] [--embedder none|minilm] [--http]

One agent stores ``--states`` states (a position, health, an inventory, a mood) one call each,
step by step; then each retrieval runs ``--repeats`` times with the result cache off (every
call reaches the database) and is reported as p50/p95. Tier maintenance is timed on the full
agent with STM 1,000 and IM 5,000 (it compresses what is beyond). The similarity benchmark
(recall of retrieve_similar_states) is bench/bench_state_similarity.py.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support for --http

import synapsedb
from synapsedb.agent_state import AgentMemoryAPI, MemoryConfig


def _ms(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    p95 = samples[min(len(samples) - 1, int(0.95 * len(samples)))]
    return statistics.median(samples) * 1000, p95 * 1000


def _time(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return _ms(out)


def run(states: int, embedder: str, http: bool, repeats: int) -> list[tuple[str, str, str]]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        db = synapsedb.open(
            Path(tmp) / "d",
            durability="os",
            llm=None,
            background_maintenance=False,
            embedder=None if embedder == "none" else embedder,
        )
        server = None
        target: Any = db
        if http:
            from tests.support.live_server import serve

            from synapsedb.server import create_app

            server = serve(create_app(db))
            target = synapsedb.connect(server.__enter__())
        config = MemoryConfig(
            cleanup_interval=0,
            cache_ttl=0,
            stm_config={"memory_limit": 1000},
            im_config={"memory_limit": 5000},
        )
        api = AgentMemoryAPI(config, target)
        rows: list[tuple[str, str, str]] = []
        store = []
        for step in range(states):
            state = {
                "position": [rng.randint(0, 100), rng.randint(0, 100)],
                "health": round(rng.random(), 3),
                "inventory": {"wood": rng.randint(0, 9), "stone": rng.randint(0, 9)},
                "mood": rng.choice(["calm", "angry", "curious", "tired"]),
            }
            t0 = time.perf_counter()
            api.store_agent_state("agent-1", state, step, priority=round(rng.random(), 2))
            store.append(time.perf_counter() - t0)
        p50, p95 = _ms(store)
        rows.append((f"store_agent_state ({states:,} stores)", f"{p50:.2f}", f"{p95:.2f}"))
        space = api.get_memory_space("agent-1")
        mid = states // 2
        cases: list[tuple[str, Callable[[], Any]]] = [
            (
                "retrieve_by_time_range, 100 steps",
                lambda: api.retrieve_by_time_range("agent-1", mid, mid + 99),
            ),
            ("retrieve_recent_states(10)", lambda: space.retrieve_recent_states(10)),
            (
                "retrieve_by_attributes (mood, wood: ~2.5% match)",
                lambda: api.retrieve_by_attributes(
                    "agent-1", {"mood": "calm", "inventory": {"wood": 3}}
                ),
            ),
            ("search_by_content, k=10", lambda: space.search_by_content("curious wood 7", 10)),
            ("retrieve_by_importance, k=10", lambda: api.retrieve_by_importance("agent-1", 10)),
        ]
        for name, fn in cases:
            p50, p95 = _time(fn, repeats)
            rows.append((name, f"{p50:.2f}", f"{p95:.2f}"))
        t0 = time.perf_counter()
        report = api.force_memory_maintenance("agent-1")
        took = (time.perf_counter() - t0) * 1000
        rows.append(
            (
                f"force_memory_maintenance (first: {report['to_im']:,} to IM, "
                f"{report['to_ltm']:,} to LTM)",
                f"{took:.0f}",
                "",
            )
        )
        t0 = time.perf_counter()
        api.force_memory_maintenance("agent-1")
        rows.append(
            (
                "force_memory_maintenance (nothing to move)",
                f"{(time.perf_counter() - t0) * 1000:.0f}",
                "",
            )
        )
        for name, fn in cases[:2]:
            p50, p95 = _time(fn, repeats)
            rows.append((name + ", after tiering", f"{p50:.2f}", f"{p95:.2f}"))
        api.close()
        if server is not None:
            target.close()
            server.__exit__(None, None, None)
        db.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=10_000)
    ap.add_argument("--embedder", default="minilm", choices=["none", "minilm"])
    ap.add_argument("--http", action="store_true", help="through synapsedb serve (loopback)")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--report", action="store_true", help="append the run to bench/runs/")
    args = ap.parse_args()
    rows = run(args.states, args.embedder, args.http, args.repeats)
    where = "HTTP (loopback)" if args.http else "embedded"
    lines = [
        f"{args.states:,} states of one agent, {where}, embedder {args.embedder}, "
        f"{args.repeats} repeats per retrieval (result cache off).",
        "",
        "| operation | p50 ms | p95 ms |",
        "|---|---|---|",
    ]
    lines += [f"| {row[0]} | {row[1]} | {row[2]} |" for row in rows]
    if args.report:
        from common import append_report

        append_report("Agent memory", "python " + " ".join(sys.argv), lines)
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
