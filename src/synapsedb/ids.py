"""Identifiers: time-sortable memory ids (ULID) and stream event ids (``<ms>-<seq>``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from .errors import ValidationError

__all__ = ["format_event_id", "new_memory_id", "parse_event_id", "reset_random_pool"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# two Crockford characters per 10 bits: 13 table lookups make the 26 characters
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
# The random part comes from the OS's CSPRNG: a seeded generator (Mersenne Twister) shared by
# every tenant would let one recover its state from a few hundred of its own ids, then predict
# and count the ids made for other tenants. os.urandom is read 256 ids at a time (one syscall).
_BATCH = 256
_pool: Iterator[int] = iter(())
_EVENT_ID = re.compile(r"^(\d{1,15})(?:-(\d{1,15}))?$")


def new_memory_id(now_us: int) -> str:
    """A ULID: 48 bits of milliseconds + 80 random bits, 26 Crockford base-32 characters."""
    value = ((now_us // 1000) << 80) | _random80()
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in range(120, -1, -10)])


def _random80() -> int:
    """80 bits from os.urandom. Taking an item from a list iterator is atomic, so two threads
    never get the same one; two threads finding the pool empty both refill it, with new bytes."""
    global _pool
    try:
        return next(_pool)
    except StopIteration:
        data = os.urandom(10 * _BATCH)
        pool = iter([int.from_bytes(data[i : i + 10]) for i in range(0, len(data), 10)])
        _pool = pool
        return next(pool)


def reset_random_pool() -> None:
    """Drop the random bytes read ahead: a forked child must not reuse those its parent will."""
    global _pool
    _pool = iter(())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=reset_random_pool)


def format_event_id(ms: int, seq: int) -> str:
    return f"{ms}-{seq}"


def parse_event_id(value: object, field: str, *, default_seq: int = 0) -> tuple[int, int]:
    """Parse ``"<ms>-<seq>"`` (or ``"<ms>"``, meaning seq ``default_seq``) into a sortable pair."""
    if isinstance(value, str):
        m = _EVENT_ID.match(value.strip())
        if m:
            seq = int(m.group(2)) if m.group(2) is not None else default_seq
            return int(m.group(1)), seq
    raise ValidationError(
        f"{field}: expected a stream id like '1730000000000-0', got {value!r}", field=field
    )
