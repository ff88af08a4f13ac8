"""Conversation memory: chat messages kept per session, embedded or over HTTP (issue 12).

- :class:`Message`: one chat message (role, content, name, tool calls, metadata).
- :class:`MemoryStore` / :class:`AsyncMemoryStore`: seed 003's store protocol.
- :class:`InMemoryStore`: a store in a dict, for tests and scripts.

See docs/conversation.md.
"""

from __future__ import annotations

from .layout import SESSION_PREFIX, session_entity
from .messages import ROLES, Message, MessageLike, Role
from .store import AsyncMemoryStore, InMemoryStore, MemoryStore

__all__ = [
    "ROLES",
    "SESSION_PREFIX",
    "AsyncMemoryStore",
    "InMemoryStore",
    "MemoryStore",
    "Message",
    "MessageLike",
    "Role",
    "session_entity",
]
