"""The value objects of conversation sessions, the same embedded and over HTTP: a session's
counts and times (:class:`SessionInfo`) and what a load with a strategy answers
(:class:`SessionMessages`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .messages import Message

__all__ = ["SessionInfo", "SessionMessages"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session at one moment. ``count``: messages since the last clear, exact when
    ``count_exact`` (at most ``count_limit`` are counted: a lower bound past that).
    ``first_at``/``last_at``: the first (None when the count is not exact) and last message
    since the clear. ``cleared_at``: when
    the last clear happened (``cleared_through``: the last event it hid). ``ttl``: the
    session's (its own, else the store's), ``expires_at``: its last message's time plus the
    ttl; ``expired``: it reads as empty. ``summary_version``: the version of the summary a
    summarising strategy keeps for it (None if none)."""

    session_id: str
    stream: str
    count: int
    count_exact: bool
    first_at: datetime | None
    last_at: datetime | None
    cleared_at: datetime | None
    cleared_through: str | None
    ttl: float | None
    expires_at: datetime | None
    expired: bool
    summary_version: int | None


@dataclass(frozen=True, slots=True)
class SessionMessages:
    """The answer of a load over HTTP: the messages (OpenAI's shape plus ``id``, ``ts``,
    ``metadata``), the strategy that chose them, and the summary standing for older turns when
    one did (``method``: llm or extractive, ``version``, ``through``: the last message folded)."""

    messages: list[Message]
    strategy: str | None
    summary: dict[str, Any] | None
