"""Identifiers: time-sortable memory ids (ULID) and stream event ids (``<ms>-<seq>``)."""

from __future__ import annotations

import os
import random
import re

from .errors import ValidationError

__all__ = ["format_event_id", "new_memory_id", "parse_event_id"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# two Crockford characters per 10 bits: 13 table lookups make the 26 characters
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
# ids need uniqueness, not secrecy: a per-process generator seeded from the OS (no syscall per id)
_RANDOM = random.Random(os.urandom(16))
_EVENT_ID = re.compile(r"^(\d{1,15})(?:-(\d{1,15}))?$")


def new_memory_id(now_us: int) -> str:
    """A ULID: 48 bits of milliseconds + 80 random bits, 26 Crockford base-32 characters."""
    value = ((now_us // 1000) << 80) | _RANDOM.getrandbits(80)
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in range(120, -1, -10)])


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
