"""A session's records: messages as stream events, the session's state fact, its info.

Session ``<id>`` is the stream ``session:<id>`` (:mod:`.layout`). A message is one event of
it: ``content`` its text, ``data`` ``{"role", "session", "name"?, "tool_calls"?,
"tool_call_id"?, "metadata"?, "content"?}``. ``data.content`` is there only when the text is
empty: the engine wants a non-empty event content, so the event says ``[tool calls:
get_weather]`` or ``[empty tool result]`` and ``data.content`` keeps the ``""`` that ``load``
gives back. The KV fact ``("session:<id>", "state")`` holds ``{"cleared_through": <event id>,
"ttl": <seconds or null>}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import ValidationError
from ..times import to_datetime, to_us
from ..types import Event, Fact, SessionInfo
from ..validation import MAX_TTL_S
from .layout import MAX_LAST, STATE_KEY, SUMMARY_KEY
from .messages import Message

__all__ = [
    "SessionInfo",
    "State",
    "check_count_limit",
    "check_ttl",
    "event_body",
    "event_key",
    "expiry",
    "live",
    "message_of_event",
    "state_of",
]

# -- messages as events -----------------------------------------------------------------------


def event_body(session_id: str, msg: Message, searchable: bool) -> tuple[dict[str, Any], bool]:
    """The ``append`` body of a message, and whether it is stored searchable (only a message
    with text: an empty one has nothing to find)."""
    data: dict[str, Any] = {"role": msg.role, "session": session_id}
    if msg.name is not None:
        data["name"] = msg.name
    if msg.tool_calls is not None:
        data["tool_calls"] = msg.tool_calls
    if msg.tool_call_id is not None:
        data["tool_call_id"] = msg.tool_call_id
    if msg.metadata is not None:
        data["metadata"] = msg.metadata
    text = msg.content
    if not text.strip():
        data["content"] = text
        text = _rendering(msg)
        searchable = False
    body: dict[str, Any] = {"content": text, "data": data}
    if searchable:
        body["metadata"] = {"role": msg.role, "session": session_id}
    return body, searchable


def _rendering(msg: Message) -> str:
    if msg.tool_calls:
        names = []
        for c in msg.tool_calls[:8]:
            fn = c.get("function")
            name = fn.get("name") if isinstance(fn, dict) else c.get("name")
            names.append(str(name)[:64] if name else "?")
        more = f" and {len(msg.tool_calls) - 8} more" if len(msg.tool_calls) > 8 else ""
        return f"[tool calls: {', '.join(names)}{more}]"
    return f"[empty {msg.role} {'result' if msg.role == 'tool' else 'message'}]"


_ROLE_OF = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


def message_of_event(ev: Event) -> Message | None:
    """The message an event of a session stream holds (written by ``Sessions.append`` or by
    ``ns.remember``, whose ``developer`` turns read as ``system``); None for an event that is
    no message (no known ``role`` in its data). A message whose stored extras no longer pass
    the checks is returned with its role and text only, not dropped."""
    data = ev.data or {}
    role = _ROLE_OF.get(data.get("role"))  # type: ignore[arg-type]
    if role is None:
        return None
    content = data.get("content", ev.content)
    if not isinstance(content, str):
        content = ev.content
    meta = data.get("metadata")
    try:
        return Message(
            role,  # type: ignore[arg-type]
            content,
            name=data.get("name"),
            tool_calls=data.get("tool_calls"),
            tool_call_id=data.get("tool_call_id"),
            metadata=meta if isinstance(meta, dict) else None,
            id=ev.id,
            ts=ev.ts,
        )
    except ValidationError:
        try:
            return Message(role, ev.content, id=ev.id, ts=ev.ts)  # type: ignore[arg-type]
        except ValidationError:
            return None


def event_key(event_id: str) -> tuple[int, int]:
    """``"<ms>-<seq>"`` as a tuple that sorts as the stream does."""
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq or 0)


# -- session state ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class State:
    """The ``state`` fact of a session (its version for compare-and-set; 0: none yet) and
    the summary fact's version."""

    value: dict[str, Any]
    version: int
    recorded_at: datetime | None
    summary_version: int | None

    @property
    def cleared_through(self) -> str | None:
        v = self.value.get("cleared_through")
        return v if isinstance(v, str) else None


def state_of(facts: list[Fact]) -> State:
    value: dict[str, Any] = {}
    version, at, summary = 0, None, None
    for f in facts:
        if f.key == STATE_KEY and isinstance(f.value, dict):
            value, version, at = dict(f.value), f.version, f.recorded_at
        elif f.key == SUMMARY_KEY:
            v = f.value.get("version") if isinstance(f.value, dict) else None
            summary = v if isinstance(v, int) and not isinstance(v, bool) else f.version
    return State(value, version, at, summary)


def check_ttl(value: Any, field: str = "ttl") -> float | None:
    """Seconds a session lives after its last message: None (forever) or > 0, finite."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(
            f"{field}: expected seconds (a number) or None, got {type(value).__name__}", field=field
        )
    if not math.isfinite(value) or value <= 0:
        raise ValidationError(
            f"{field}: expected a positive, finite number of seconds, got {value!r}", field=field
        )
    if value > MAX_TTL_S:
        raise ValidationError(
            f"{field}: {value} seconds, over the limit of {MAX_TTL_S}", field=field, limit=MAX_TTL_S
        )
    return float(value)


def check_count_limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LAST:
        raise ValidationError(
            f"count_limit: expected an integer from 1 to {MAX_LAST}, got {value!r}",
            field="count_limit",
            limit=MAX_LAST,
        )
    return value


def expiry(ttl: float | None, last: Event | None) -> datetime | None:
    """When a session whose last event is ``last`` expires (sliding: each message renews)."""
    if ttl is None or last is None:
        return None
    return to_datetime(to_us(last.recorded_at, "recorded_at") + round(ttl * 1_000_000))


def live(events: list[Event], ttl: float | None, now_us: int) -> list[Event]:
    """The messages of ``events`` (oldest first) that are not expired at ``now_us``: none if
    the last is older than ``ttl``, else those after the last pause longer than ``ttl`` (an
    expired session used again starts afresh, as an expired key written again does)."""
    if ttl is None or not events:
        return events
    ttl_us = round(ttl * 1_000_000)
    at = to_us(events[-1].recorded_at, "recorded_at")
    if now_us - at > ttl_us:
        return []
    i = len(events) - 1
    while i > 0:
        before = to_us(events[i - 1].recorded_at, "recorded_at")
        if at - before > ttl_us:
            break
        i, at = i - 1, before
    return events[i:]
