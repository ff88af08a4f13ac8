"""Shared helpers for benchmarks: percentiles, machine description, report appending."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "benchmarks.md"


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


def append_report(title: str, command: str, lines: list[str]) -> None:
    """Append a dated section to docs/benchmarks.md and echo it."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = [
        f"## {title}: {now}",
        "",
        f"Machine: {machine()}. Commit {git_rev()}. Command: `{command}`.",
        "",
        *lines,
        "",
    ]
    text = "\n".join(section) + "\n"
    print(text)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    if not REPORT.exists():
        REPORT.write_text(
            "# Benchmarks\n\nEvery `make bench` run appends its results here, newest last. "
            "Timings come from one shared 2-core machine: compare ratios within one run.\n\n"
        )
    with REPORT.open("a") as fh:
        fh.write(text)
