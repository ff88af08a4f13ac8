"""The rate-limited log filter: a flood of identical warnings is cut to a burst per interval
plus one summary line, and nothing else is held back."""

from __future__ import annotations

import logging

import pytest

from synapsedb.server.observe import RateLimitFilter, configure_logging


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(
    msg: str, *args: object, level: int = logging.WARNING, name: str = "asyncio"
) -> logging.LogRecord:
    return logging.makeLogRecord(
        {
            "name": name,
            "levelno": level,
            "levelname": logging.getLevelName(level),
            "msg": msg,
            "args": args,
        }
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_flood_is_cut_to_a_burst_and_a_summary(clock: Clock) -> None:
    written: list[logging.LogRecord] = []
    flt = RateLimitFilter(burst=3, interval=10.0, emit=written.append, clock=clock)
    # what asyncio logs when accept() fails: the details after the first line differ each time
    passed = [
        flt.filter(record(f"socket.accept() out of system resource\nsocket: fd={i}"))
        for i in range(1000)
    ]
    assert passed == [True] * 3 + [False] * 997
    assert written == []  # the summary waits for the interval to end
    clock.now += 10.0
    assert flt.filter(record("socket.accept() out of system resource\nsocket: fd=5"))
    (summary,) = written
    assert summary.getMessage() == (
        "suppressed 997 similar lines in 10 s: socket.accept() out of system resource"
    )
    assert summary.name == "asyncio" and summary.levelno == logging.WARNING
    assert flt.filter(summary)  # the summary itself always passes


def test_different_lines_info_and_loggers_are_not_limited(clock: Clock) -> None:
    flt = RateLimitFilter(burst=2, interval=10.0, emit=lambda r: None, clock=clock)
    assert all(flt.filter(record("disk %s failed", f"/dev/sd{i}")) for i in "abcdefgh")
    assert all(flt.filter(record("same", name=f"log{i}")) for i in range(10))
    access = [flt.filter(record("GET /healthz 200", level=logging.INFO)) for _ in range(100)]
    assert all(access)  # the access log is one line per request by choice
    assert [flt.filter(record("same", name="log0")) for _ in range(3)] == [True, False, False]


def test_flush_writes_pending_summaries(clock: Clock) -> None:
    written: list[logging.LogRecord] = []
    flt = RateLimitFilter(burst=1, interval=10.0, emit=written.append, clock=clock)
    for _ in range(5):
        flt.filter(record("boom", level=logging.ERROR, name="synapsedb.server"))
    flt.flush()
    assert [r.getMessage() for r in written] == ["suppressed 4 similar lines in 10 s: boom"]
    assert written[0].levelno == logging.ERROR


def test_configure_logging_installs_it_for_every_logger(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging("warning", "text")
        (handler,) = root.handlers
        assert any(isinstance(f, RateLimitFilter) for f in handler.filters)
        for name in ("uvicorn.error", "asyncio", "synapsedb.server"):
            for _ in range(50):
                logging.getLogger(name).warning("Invalid HTTP request received.")
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 3 * 10  # the default burst, for each logger
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
