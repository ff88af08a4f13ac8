"""Storage failures are logged: every StorageError the backend raises is logged at ERROR with
its cause, once per failure, while repeats of the same message are counted rather than logged
(a full disk fails every write: one line a minute says so, not one per request).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..errors import StorageError

__all__ = ["FailureLog"]

log = logging.getLogger("synapsedb.storage")


class FailureLog:
    """Builds the StorageError for a failure and logs it, rate-limited per message.

    The first occurrence of a message is logged at once; identical messages within
    ``interval_s`` after it are only counted, and the next one logged after the interval says
    how many were left out.
    """

    def __init__(
        self, interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._interval = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, int]] = {}  # message -> (logged at, left out since)

    def error(
        self, message: str, cause: BaseException | None = None, **details: str
    ) -> StorageError:
        """The StorageError to raise (``raise log.error(...) from cause``), logged."""
        now = self._clock()
        with self._lock:
            logged_at, skipped = self._last.get(message, (None, 0))
            if logged_at is not None and now - logged_at < self._interval:
                self._last[message] = (logged_at, skipped + 1)
                emit = False
            else:
                self._last[message] = (now, 0)
                emit = True
                if len(self._last) > 1024:  # many distinct failures: forget the oldest
                    oldest = min(self._last, key=lambda m: self._last[m][0])
                    del self._last[oldest]
        if emit:
            more = f" ({skipped} more like it since)" if skipped else ""
            log.error("storage failure: %s%s", message, more, exc_info=cause)
        return StorageError(message, **details)
