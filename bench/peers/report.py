"""Pure helpers of the peer benchmark: summaries, ratios, budgets and markdown tables.

No peer library is imported here (the unit tests load this module from the main venv).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

QUANTILES = (50, 95, 99)


def summary_ms(samples_s: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99 and mean in milliseconds of latencies given in seconds (NaN if none)."""
    if len(samples_s) == 0:
        return {"p50": math.nan, "p95": math.nan, "p99": math.nan, "mean": math.nan, "n": 0}
    ms = np.asarray(samples_s, dtype=np.float64) * 1e3
    out: dict[str, float] = {f"p{q}": float(np.percentile(ms, q)) for q in QUANTILES}
    out["mean"] = float(ms.mean())
    out["n"] = len(ms)
    return out


def recall_at_k(found: Sequence[Sequence[int]], truth: Sequence[Sequence[int]], k: int) -> float:
    """Mean share of each query's exact top k found in its returned top k."""
    if not truth:
        return math.nan
    shares = []
    for got, want in zip(found, truth, strict=True):
        want_k = list(want)[:k]
        if not want_k:
            continue
        shares.append(len(set(list(got)[:k]).intersection(want_k)) / len(want_k))
    return float(np.mean(shares)) if shares else math.nan


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is missing, NaN or the denominator is 0."""
    if numerator is None or denominator is None:
        return None
    if math.isnan(numerator) or math.isnan(denominator) or denominator == 0:
        return None
    return numerator / denominator


def fmt_ratio(r: float | None) -> str:
    """'12.3x', '0.41x', '1/2,199x' below 0.01, or an em dash when there is no ratio."""
    if r is None:
        return "—"
    if 0 < r < 0.01:
        return f"1/{1 / r:,.0f}x"
    if r >= 100:
        return f"{r:,.0f}x"
    if r >= 10:
        return f"{r:.1f}x"
    return f"{r:.2f}x"


def fmt_num(v: float | None, digits: int = 2) -> str:
    """A number for a table cell: thousands separators above 1,000; em dash when missing."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def fmt_n(n: int) -> str:
    """10000 -> '10k', 1000000 -> '1M', 2500 -> '2.5k'."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000:
        k = n / 1000
        return f"{k:g}k"
    return str(n)


def target_line(label: str, value: float | None, goal: float, *, at_least: bool) -> str:
    """One row of the targets table: the measured ratio, the goal and met/missed."""
    if value is None:
        verdict = "not measured"
        shown = "—"
    else:
        ok = value >= goal if at_least else value <= goal
        verdict = "met" if ok else "**missed**"
        shown = fmt_ratio(value)
    sign = ">=" if at_least else "<="
    return f"| {label} | {shown} | {sign} {fmt_ratio(goal)} | {verdict} |"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A markdown table; cells are str()-ed."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out
