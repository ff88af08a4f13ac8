"""Where conversations are kept: the ``MemoryStore`` protocol (Synaptic's) and its stores.

A store keeps messages per session id; sessions are isolated from one another. Three
operations make a store (``append``, ``load``, ``clear``); every strategy (Buffer, Window,
Summary, ...) wraps a store and is one itself, so they compose. :class:`MemoryStore` is the
synchronous protocol, :class:`AsyncMemoryStore` the same with coroutines.

Two stores:

- :class:`InMemoryStore`: a dict of lists behind a lock, for tests and short-lived processes.
- :class:`~synapsedb.conversation.sessions.Sessions` and ``AsyncSessions`` (re-exported here):
  a SynapseDB namespace, embedded or remote. Each message is an event of the stream ``session:<id>``; ``clear`` is a
  write (history and ``as_of`` keep what was there); ``purge`` erases. The layout (which
  entity, stream and KV facts a session uses) is in :mod:`synapsedb.conversation.sessions`:
  per-session state lives in KV facts *about the session entity* ``session:<id>`` (key
  ``state``; a strategy's own per-session state belongs beside it, e.g. key ``summary``), so
  that ``purge`` erases it with the messages.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from .layout import check_last, check_session_id
from .messages import Message, MessageLike
from .sessions import AsyncSessions, SessionInfo, Sessions

__all__ = [
    "AsyncMemoryStore",
    "AsyncSessions",
    "InMemoryStore",
    "MemoryStore",
    "SessionInfo",
    "Sessions",
]


@runtime_checkable
class MemoryStore(Protocol):
    """The store protocol, synchronous: messages kept per session id, sessions isolated."""

    def append(self, session_id: str, message: MessageLike) -> Message:
        """Add ``message`` at the end of the session; returns it as stored (``id``, ``ts``)."""
        ...

    def load(self, session_id: str) -> list[Message]:
        """The session's messages, oldest first (a strategy may trim or summarise them)."""
        ...

    def clear(self, session_id: str) -> None:
        """Empty the session for later loads."""
        ...


@runtime_checkable
class AsyncMemoryStore(Protocol):
    """:class:`MemoryStore` with coroutines (Synaptic's store is async)."""

    async def append(self, session_id: str, message: MessageLike) -> Message: ...

    async def load(self, session_id: str) -> list[Message]: ...

    async def clear(self, session_id: str) -> None: ...


class InMemoryStore:
    """Messages in a dict of lists, behind a lock so threads may share it. Nothing persists;
    ``clear`` forgets (there is no history to keep). Ids are ``"<session>#<n>"``, ``n``
    counting from 1 per session and never reused after a clear."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[Message]] = {}
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def append(self, session_id: str, message: MessageLike) -> Message:
        session_id = check_session_id(session_id)
        msg = Message.of(message)
        with self._lock:
            n = self._counts.get(session_id, 0) + 1
            self._counts[session_id] = n
            stored = msg.stored(f"{session_id}#{n}", datetime.now(UTC))
            self._sessions.setdefault(session_id, []).append(stored)
        return stored

    def append_many(self, session_id: str, messages: list[MessageLike]) -> list[Message]:
        """Append several messages; all are checked before any is added."""
        session_id = check_session_id(session_id)
        msgs = [Message.of(m, f"messages[{i}]") for i, m in enumerate(messages)]
        return [self.append(session_id, m) for m in msgs]

    def load(self, session_id: str, *, last: int | None = None) -> list[Message]:
        """The session's messages, oldest first; ``last=N``: only the newest N."""
        session_id, last = check_session_id(session_id), check_last(last)
        with self._lock:
            msgs = list(self._sessions.get(session_id, ()))
        if last is not None:
            msgs = msgs[len(msgs) - last :] if last < len(msgs) else msgs
        return msgs

    def clear(self, session_id: str) -> None:
        session_id = check_session_id(session_id)
        with self._lock:
            self._sessions.pop(session_id, None)

    def sessions(self) -> list[str]:
        """Ids of the sessions holding at least one message, sorted."""
        with self._lock:
            return sorted(s for s, msgs in self._sessions.items() if msgs)
