"""The pure helpers of the peer benchmark (bench/peers/report.py): no peer library needed."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "peers" / "report.py"
_spec = importlib.util.spec_from_file_location("bench_peers_report", _PATH)
assert _spec is not None and _spec.loader is not None
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def test_summary_ms_converts_seconds_and_orders_quantiles() -> None:
    s = report.summary_ms([0.001 * i for i in range(1, 101)])  # 1..100 ms
    assert s["n"] == 100
    assert s["p50"] == pytest.approx(50.5)
    assert s["p50"] <= s["p95"] <= s["p99"] <= 100
    assert s["mean"] == pytest.approx(50.5)


def test_summary_ms_of_nothing_is_nan() -> None:
    s = report.summary_ms([])
    assert s["n"] == 0 and math.isnan(s["p50"]) and math.isnan(s["p99"])


def test_recall_at_k() -> None:
    truth = [[1, 2, 3, 4], [5, 6]]
    assert report.recall_at_k([[1, 2, 3, 4], [5, 6]], truth, 4) == 1.0
    assert report.recall_at_k([[4, 3, 9, 9], [7, 8]], truth, 4) == pytest.approx(0.25)
    # only the first k of each side count; an empty truth is left out of the mean
    assert report.recall_at_k([[9, 1]], [[1, 2]], 1) == 0.0
    assert report.recall_at_k([[1], [2]], [[1], []], 1) == 1.0
    assert math.isnan(report.recall_at_k([], [], 10))
    with pytest.raises(ValueError):
        report.recall_at_k([[1]], [[1], [2]], 1)


def test_ratio_is_none_when_a_side_is_missing() -> None:
    assert report.ratio(3.0, 1.5) == 2.0
    assert report.ratio(None, 1.0) is None
    assert report.ratio(1.0, None) is None
    assert report.ratio(1.0, 0.0) is None
    assert report.ratio(float("nan"), 1.0) is None


RATIOS = [
    (None, "—"),
    (0.1234, "0.12x"),
    (3.0, "3.00x"),
    (12.34, "12.3x"),
    (1234.0, "1,234x"),
    (0.000455, "1/2,198x"),
    (0.0, "0.00x"),
]


@pytest.mark.parametrize(("value", "text"), RATIOS)
def test_fmt_ratio(value: float | None, text: str) -> None:
    assert report.fmt_ratio(value) == text


def test_fmt_num_and_n() -> None:
    assert report.fmt_num(None) == "—"
    assert report.fmt_num(float("nan")) == "—"
    assert report.fmt_num(12345.6) == "12,346"
    assert report.fmt_num(123.4) == "123"
    assert report.fmt_num(1.23456, 3) == "1.235"
    assert [report.fmt_n(n) for n in (500, 2000, 2500, 10_000, 100_000, 1_000_000)] == [
        "500",
        "2k",
        "2.5k",
        "10k",
        "100k",
        "1M",
    ]


def test_target_line_directions() -> None:
    # a latency ratio must be at most the goal, a throughput ratio at least
    assert report.target_line("q", 0.05, 0.1, at_least=False).endswith("| met |")
    assert report.target_line("q", 0.5, 0.1, at_least=False).endswith("| **missed** |")
    assert report.target_line("i", 3.5, 3.0, at_least=True).endswith("| met |")
    assert report.target_line("i", 2.0, 3.0, at_least=True).endswith("| **missed** |")
    line = report.target_line("kv", None, 1 / 7, at_least=True)
    assert "not measured" in line and ">= 0.14x" in line


def test_table_shape() -> None:
    lines = report.table(["a", "b"], [[1, "x"], [2.5, ""]])
    assert lines[0] == "| a | b |"
    assert lines[1] == "|---|---|"
    assert lines[2:] == ["| 1 | x |", "| 2.5 |  |"]
