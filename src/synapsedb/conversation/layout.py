"""How a session sits in a namespace, and the session id rule.

One session ``<id>`` is:

- the stream ``session:<id>``: one event per message (``content``: the text; ``data``: the
  rest of the message, see :mod:`synapsedb.conversation.sessions`). ``ns.remember`` writes a
  conversation's turns to the same stream name, so both read alike.
- the entity ``session:<id>``: the events' entity unless the caller names another (a user,
  so that user-scoped recall reaches the turns), and the subject of the session's KV facts:
  ``state`` (what ``clear`` and ``configure`` set) and the strategies' own (``summary``).
  Because the stream is named after the entity, ``forget(entity="session:<id>", purge=True)``
  erases every event of the stream, whoever it is about, with its searchable twin, and every
  one of these facts: nothing of the session survives a purge, not even its id as a key.
- the companion stream ``synapsedb:session:<id>`` (:func:`records_stream`): what another layer
  keeps about the session's turns, as events of the user they are about (the memory proxy's
  Responses API records). A purge of the session erases it too, and a purge of the user erases
  the user's events in it.
"""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError
from ..validation import MAX_SESSION_ID_CHARS, check_session_id

__all__ = [
    "MAX_LAST",
    "MAX_SESSION_ID_CHARS",
    "RECORDS_PREFIX",
    "SESSION_PREFIX",
    "STATE_KEY",
    "SUMMARY_KEY",
    "check_last",
    "check_session_id",
    "records_stream",
    "session_entity",
    "session_of",
]

SESSION_PREFIX = "session:"
RECORDS_PREFIX = "synapsedb:session:"  # a session's companion stream (records_stream)
STATE_KEY = "state"  # the session's own fact: {"cleared_through": event id, "ttl": seconds}
SUMMARY_KEY = "summary"  # where a summarising strategy keeps its running summary
MAX_LAST = 10_000  # the engine's largest page of events


def check_last(value: Any, field: str = "last") -> int | None:
    """``load(last=N)``: None (everything) or 0..10,000 messages."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(
            f"{field}: expected a non-negative integer, got {value!r}", field=field
        )
    if value > MAX_LAST:
        raise ValidationError(
            f"{field}: {value} messages, over the limit of {MAX_LAST}", field=field, limit=MAX_LAST
        )
    return value


def session_entity(session_id: str) -> str:
    """The stream, and the default entity, of a session: ``session:<id>``."""
    return SESSION_PREFIX + check_session_id(session_id)


def records_stream(session: str) -> str:
    """The session's companion stream, ``synapsedb:session:<session>``: records other layers
    derive from its turns (the memory proxy's Responses API chains), erased with the session."""
    return RECORDS_PREFIX + session


def session_of(stream: str) -> str | None:
    """The session id of a stream named ``session:<id>``, else None."""
    if stream.startswith(SESSION_PREFIX) and len(stream) > len(SESSION_PREFIX):
        return stream[len(SESSION_PREFIX) :]
    return None
