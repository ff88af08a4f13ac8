"""Conversation memory: chat messages kept per session, embedded or over HTTP (issue 12).

- :class:`Message`: one chat message (role, content, name, tool calls, metadata).
- :class:`MemoryStore` / :class:`AsyncMemoryStore`: seed 003's store protocol.
- :class:`InMemoryStore`: a store in a dict, for tests and scripts.
- :class:`Sessions` / :class:`AsyncSessions`: a SynapseDB namespace (embedded or remote) as a
  store: messages as stream events, clear as a write, purge as an erasure, session TTL.

See docs/conversation.md.
"""

from __future__ import annotations

from .layout import SESSION_PREFIX, session_entity
from .messages import ROLES, Message, MessageLike, Role
from .sessions import AsyncSessions, SessionInfo, Sessions
from .store import AsyncMemoryStore, InMemoryStore, MemoryStore

__all__ = [
    "ROLES",
    "SESSION_PREFIX",
    "AsyncMemoryStore",
    "AsyncSessions",
    "InMemoryStore",
    "MemoryStore",
    "Message",
    "MessageLike",
    "Role",
    "SessionInfo",
    "Sessions",
    "session_entity",
]
