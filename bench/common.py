"""Shared helpers for benchmarks: percentiles, machine description, run records."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "bench" / "runs"


def pct(samples_s: list[float], q: float) -> float:
    """Percentile in microseconds of samples given in seconds."""
    return float(np.percentile(np.asarray(samples_s) * 1e6, q))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB, {platform.system()} "
        f"{platform.machine()}, Python {sys.version.split()[0]}"
    )


def git_rev() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return out.stdout.strip() or "?"
    except OSError:
        return "?"


def rss_mib(pid: int | None = None) -> float:
    import psutil

    return psutil.Process(pid or os.getpid()).memory_info().rss / 2**20


def slug(title: str) -> str:
    """A file name from a run's title: "Retrieval speed" -> "retrieval-speed"."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def plain(value: Any) -> Any:
    """``value`` as JSON can hold it: keys as strings, tuples as lists, numpy scalars as numbers."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def append_report(
    title: str, command: str, lines: list[str], data: dict[str, Any] | None = None
) -> Path:
    """Append one run to bench/runs/<slug of title>.jsonl and print it as a markdown section.

    A record is one JSON object per line: date, title, machine, commit, command, the 1-minute
    load average at the end, the markdown lines, and ``data``, the run's numbers where the
    script has them at hand. docs/benchmarks.md shows the latest run of each kind, by hand."""
    now = dt.datetime.now(dt.UTC)
    record: dict[str, Any] = {
        "date": now.strftime("%Y-%m-%dT%H:%MZ"),
        "title": title,
        "machine": machine(),
        "commit": git_rev(),
        "command": command,
        "load_average": load_average(),
        "lines": lines,
    }
    if data is not None:
        record["data"] = plain(data)
    section = [
        f"## {title}: {now.strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        f"Machine: {record['machine']}. Commit {record['commit']}. Command: `{command}`.",
        "",
        *lines,
        "",
    ]
    print("\n".join(section))
    RUNS.mkdir(parents=True, exist_ok=True)
    path = RUNS / f"{slug(title)}.jsonl"
    with path.open("a") as fh:
        fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    print(f"(appended to {path.relative_to(ROOT)})")
    return path
