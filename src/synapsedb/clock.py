"""Clocks. The engine reads system time only through a :class:`Clock`, so tests can drive it.

Times inside the engine are integer microseconds since the Unix epoch (UTC).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def now_us(self) -> int:
        """Current time in integer microseconds since the epoch."""
        ...


class SystemClock:
    """Wall-clock time."""

    def now_us(self) -> int:
        return time.time_ns() // 1000


class ManualClock:
    """A clock that moves only when told to: for tests of time travel, TTL and eviction."""

    def __init__(self, start_us: int = 1_700_000_000_000_000) -> None:
        self._now = int(start_us)
        self._lock = threading.Lock()

    def now_us(self) -> int:
        return self._now

    def set(self, us: int) -> None:
        with self._lock:
            self._now = int(us)

    def advance(self, seconds: float = 0.0, *, us: int = 0) -> int:
        """Move forward by ``seconds`` (and/or ``us`` microseconds); returns the new time."""
        with self._lock:
            self._now += round(seconds * 1_000_000) + int(us)
            return self._now
