"""The peer benchmark at 1M: which systems the default run takes there, and the scale report
(bench/peers/scale.py). No peer library is needed."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def mods() -> Any:
    for p in (str(BENCH), str(BENCH / "peers")):
        if p not in sys.path:
            sys.path.insert(0, p)
    return importlib.import_module("scale"), importlib.import_module("bench_peers")


def result(ingest_s: float, wait_s: float, p50: float, p99: float, **extra: Any) -> dict:
    q = {"p50": p50, "p95": p99, "p99": p99, "recall": 1.0}
    return {
        "ingest": {
            "rows": 1_000_000,
            "seconds": ingest_s,
            "complete": True,
            "index_wait_s": wait_s,
        },
        "query": q,
        "query_filter": dict(q),
        **extra,
    }


def test_largest_targets_only_from_1m_and_with_verdicts(mods: Any) -> None:
    scale, _ = mods
    assert scale.largest_targets({100_000: {"synapsedb": result(1, 1, 0.5, 1)}}) == []
    reopen = {"close_s": 1.0, "open_s": 0.5, "first_query_s": 2.0, "pending_rows": 0.0}
    vec = {
        1_000_000: {
            "synapsedb": result(50, 150, 0.8, 6.0, rss_mib=3000.0, reopen=reopen),
            "chroma": result(500, 0, 2.0, 4.0),
        }
    }
    lines = scale.largest_targets(vec)
    by = {ln.split(" | ")[0].lstrip("| "): ln for ln in lines}
    ingest = next(v for k, v in by.items() if k.startswith("ingest at 1M"))
    assert "| 2.50x |" in ingest and ingest.endswith("| **missed** |")  # 1M/200 s vs 1M/500 s
    assert by["query p50 at 1M, no filter: SynapseDB embedded"].endswith("| met |")
    assert by["query p99 at 1M, no filter: SynapseDB embedded"].endswith("| **missed** |")
    assert by["resident memory at 1M: SynapseDB embedded"].endswith("| **missed** |")
    reo = by["close + reopen to the first answer at 1M: SynapseDB embedded"]
    assert "| 3.500 s |" in reo and reo.endswith("| met |")
    # a Chroma that did not finish: the ingest ratio is not measured, not a pass
    vec[1_000_000]["chroma"] = {"skipped": "out of budget"}
    lines = scale.largest_targets(vec)
    assert lines[0].endswith("| not measured |")


def test_memory_reopen_table_lists_sizes_synapsedb_finished(mods: Any) -> None:
    scale, _ = mods
    reopen = {"close_s": 0.25, "open_s": 0.01, "first_query_s": 0.5, "pending_rows": 0.0}
    vec = {
        10_000: {"synapsedb": result(1, 0, 0.5, 1, rss_mib=100.0, reopen=reopen)},
        1_000_000: {"synapsedb": {"skipped": "predicted 900 s > budget 720 s"}},
    }
    lines = scale.memory_reopen_table(vec)
    rows = [ln for ln in lines if ln.startswith("| 10k") or ln.startswith("| 1M")]
    assert rows == ["| 10k | 100 | 0.0 | 0.25 | 0.010 | 0.50 | 0.76 | 0 |"]
    assert scale.memory_reopen_table({1_000_000: {"chroma": result(1, 0, 1, 1)}}) == []


def test_default_run_takes_only_the_named_systems_to_1m(mods: Any, monkeypatch: Any) -> None:
    _, bp = mods
    calls: list[tuple[str, int]] = []

    def fake_child(workload: str, system: str, timeout: float, **kw: Any) -> dict:
        calls.append((system, kw["n"]))
        return result(0.1, 0.0, 0.5, 1.0)

    monkeypatch.setattr(bp, "run_child", fake_child)
    plan = bp.Plan(False, 3300)
    systems = ["synapsedb", "chroma-http", "hnswlib"]
    out = bp.stage_vector(plan, Path("data"), Path("tmp"), systems)
    assert ("synapsedb", 1_000_000) in calls and ("hnswlib", 1_000_000) in calls
    assert ("chroma-http", 100_000) in calls and ("chroma-http", 1_000_000) not in calls
    assert "not run at 1M" in out[1_000_000]["chroma-http"]["skipped"]
    calls.clear()
    plan.largest = set(systems)  # --all-at-1m
    bp.stage_vector(plan, Path("data"), Path("tmp"), systems)
    assert ("chroma-http", 1_000_000) in calls
