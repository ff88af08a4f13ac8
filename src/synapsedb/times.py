"""Parsing and formatting of timestamps: ISO-8601 strings, epoch seconds, datetimes."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from .errors import ValidationError

__all__ = ["EARLIEST_US", "LATEST_US", "TimeLike", "format_us", "to_datetime", "to_us"]

TimeLike = datetime | str | int | float

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Accept 0001..9999 only (what datetime can represent); epoch numbers beyond ~year 9999 are typos.
_MAX_EPOCH_S = 253_402_300_799
_MIN_EPOCH_S = -62_135_596_800  # 0001-01-01T00:00:00Z
# The times a datetime can hold: 0001-01-01 .. 9999-12-31 (UTC), in microseconds.
EARLIEST_US = -62_135_596_800_000_000
LATEST_US = 253_402_300_799_999_999


def to_us(value: Any, field: str) -> int:
    """Convert a time-like value to integer microseconds since the epoch (UTC).

    Accepts a ``datetime`` (naive means UTC), an ISO-8601 string (``Z`` suffix allowed, date only
    allowed), or epoch seconds as int/float. Anything else is a ValidationError naming ``field``.
    """
    if isinstance(value, bool):
        raise ValidationError(
            f"{field}: expected ISO-8601 time or epoch seconds, got a boolean", field=field
        )
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        delta = dt - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, int | float):
        if not math.isfinite(value) or not _MIN_EPOCH_S <= value <= _MAX_EPOCH_S:
            raise ValidationError(
                f"{field}: epoch seconds must be finite and within years 1 to 9999, got {value!r}",
                field=field,
            )
        return round(value * 1_000_000)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise ValidationError(f"{field}: empty time string", field=field)
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            try:  # numeric strings are epoch seconds
                return to_us(float(text), field)
            except (ValueError, ValidationError):
                pass
            raise ValidationError(
                f"{field}: unparseable time {value[:64]!r}; use ISO-8601 "
                "(e.g. 2025-10-24T10:00:00Z) or epoch seconds",
                field=field,
            ) from None
        return to_us(dt, field)
    raise ValidationError(
        f"{field}: expected ISO-8601 time or epoch seconds, got {type(value).__name__}", field=field
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@lru_cache(maxsize=4096)  # datetimes are immutable; a batch shares its commit time
def to_datetime(us: int) -> datetime:
    """Microseconds since the epoch to an aware UTC datetime (integer arithmetic: exact, and
    about 3x cheaper than ``fromtimestamp``, which a query pays per hit)."""
    return _EPOCH + timedelta(microseconds=us)


def format_us(us: int) -> str:
    """Microseconds since the epoch to ISO-8601 with a ``Z`` suffix."""
    return to_datetime(us).isoformat().replace("+00:00", "Z")
