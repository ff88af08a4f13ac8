"""Resilience for calls to a remote model: exponential backoff with full jitter, and a circuit
breaker so a dead upstream costs callers nothing while it is down.

Both take their clock and randomness as arguments, so tests drive them without sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import StrEnum

__all__ = ["Backoff", "BreakerState", "CircuitBreaker"]


class Backoff:
    """Wait before retry ``n`` (0 for the first retry): a uniformly random time between 0 and
    ``min(cap_s, base_s * 2**n)`` ("full jitter": clients that failed together do not retry
    together)."""

    def __init__(self, base_s: float, cap_s: float, random: Callable[[], float]) -> None:
        self.base_s, self.cap_s, self._random = base_s, cap_s, random

    def ceiling(self, retry: int) -> float:
        return min(self.cap_s, self.base_s * 2 ** min(retry, 62))

    def delay(self, retry: int) -> float:
        return self._random() * self.ceiling(retry)


class BreakerState(StrEnum):
    CLOSED = "closed"  # calls go through; consecutive failures are counted
    OPEN = "open"  # calls are refused at once until the cooldown has passed
    HALF_OPEN = "half_open"  # one probe call is in flight; the others are refused


class CircuitBreaker:
    """closed -> open after ``failures`` consecutive failed requests; open -> half-open once
    ``cooldown_s`` has passed, letting exactly one probe through; the probe's success closes
    the breaker, its failure opens it for another cooldown. Thread-safe.

    A caller asks :meth:`admit` before each request and reports the outcome with
    :meth:`succeed` or :meth:`fail`; a probe that ends with neither (cancelled) reports
    :meth:`abandon`, so the next caller may probe.
    """

    def __init__(self, failures: int, cooldown_s: float, clock: Callable[[], float]) -> None:
        self.threshold, self.cooldown_s, self._clock = failures, cooldown_s, clock
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probing = False

    @property
    def state(self) -> BreakerState:
        """The state now (an open breaker whose cooldown has passed reads half-open)."""
        with self._lock:
            if self._state is BreakerState.OPEN and self._cooled():
                return BreakerState.HALF_OPEN
            return self._state

    @property
    def failures(self) -> int:
        """Consecutive failures counted so far."""
        return self._failures

    def _cooled(self) -> bool:
        return self._clock() - self._opened_at >= self.cooldown_s

    def admit(self) -> tuple[bool, bool]:
        """``(admitted, probe)``: whether a request may go now, and whether it is the probe of
        a half-open breaker (whose outcome decides the state)."""
        with self._lock:
            if self._state is BreakerState.CLOSED:
                return True, False
            if self._state is BreakerState.OPEN and self._cooled():
                self._state = BreakerState.HALF_OPEN
            if self._state is BreakerState.HALF_OPEN and not self._probing:
                self._probing = True
                return True, True
            return False, False

    def remaining_s(self) -> float:
        """Seconds until an open breaker lets a probe through (0 if it would now)."""
        with self._lock:
            if self._state is not BreakerState.OPEN:
                return 0.0
            return max(0.0, self.cooldown_s - (self._clock() - self._opened_at))

    def succeed(self) -> None:
        with self._lock:
            self._state, self._failures, self._probing = BreakerState.CLOSED, 0, False

    def fail(self) -> bool:
        """Count a failed request; True if the breaker is open now (callers stop retrying)."""
        with self._lock:
            self._failures += 1
            if self._state is BreakerState.HALF_OPEN or self._failures >= self.threshold:
                self._state, self._opened_at, self._probing = (
                    BreakerState.OPEN,
                    self._clock(),
                    False,
                )
            return self._state is BreakerState.OPEN

    def abandon(self) -> None:
        """The probe ended without an outcome: let the next caller probe instead."""
        with self._lock:
            self._probing = False
