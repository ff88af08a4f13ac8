"""Conversation memory: chat messages kept per session, embedded or over HTTP.

- :class:`Message`: one chat message (role, content, name, tool calls, metadata).
- :class:`MemoryStore` / :class:`AsyncMemoryStore`: the store protocol (Synaptic's).
- :class:`InMemoryStore`: a store in a dict, for tests and scripts.
- :class:`Sessions` / :class:`AsyncSessions`: a SynapseDB namespace (embedded or remote) as a
  store: messages as stream events, clear as a write, purge as an erasure, session TTL.
- Strategies (each wraps a store and is one): :class:`Buffer`, :class:`Window`,
  :class:`TokenBuffer`, :class:`Summary`, :class:`SummaryBuffer`, :class:`Vector` and their
  ``Async*`` twins; :class:`Summarizer` folds turns into a running summary (LLM or extractive).
- :class:`SmartContextManager`: a token-budgeted prompt in four tiers; token counts
  (:func:`count_tokens`, exact for OpenAI encodings with the ``tokens`` extra).
- SynapseKit's classes: :class:`BaseMemory`, :class:`InMemoryConversation`, :class:`WindowMemory`,
  :class:`SummaryMemory`, :class:`VectorMemory`, :class:`SynapseMemory` (:class:`SqliteMemory`);
  :class:`RedisMemory` and :class:`PostgresMemory` need the ``redis``/``postgres`` extras and
  import their drivers only when used.

See docs/conversation.md.
"""

from __future__ import annotations

from .backends import PostgresMemory, RedisMemory
from .context import ContextStats, SmartContextManager
from .layout import SESSION_PREFIX, session_entity
from .memory import BaseMemory, InMemoryConversation, SummaryMemory, WindowMemory
from .messages import ROLES, Message, MessageLike, Role
from .sessions import AsyncSessions, SessionInfo, Sessions
from .store import AsyncMemoryStore, InMemoryStore, MemoryStore
from .strategies import (
    AsyncBuffer,
    AsyncSummary,
    AsyncSummaryBuffer,
    AsyncTokenBuffer,
    AsyncVector,
    AsyncWindow,
    Buffer,
    Summary,
    SummaryBuffer,
    TokenBuffer,
    Vector,
    Window,
)
from .summary import DEFAULT_SUMMARY_PROMPT, Summarizer, SummaryState, extractive_summary
from .synapse_memory import SqliteMemory, SynapseMemory, VectorMemory
from .tokens import (
    TokenCounter,
    count_message_tokens,
    count_tokens,
    encoding_for,
    encoding_name_for,
)

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "ROLES",
    "SESSION_PREFIX",
    "AsyncBuffer",
    "AsyncMemoryStore",
    "AsyncSessions",
    "AsyncSummary",
    "AsyncSummaryBuffer",
    "AsyncTokenBuffer",
    "AsyncVector",
    "AsyncWindow",
    "BaseMemory",
    "Buffer",
    "ContextStats",
    "InMemoryConversation",
    "InMemoryStore",
    "MemoryStore",
    "Message",
    "MessageLike",
    "PostgresMemory",
    "RedisMemory",
    "Role",
    "SessionInfo",
    "Sessions",
    "SmartContextManager",
    "SqliteMemory",
    "Summarizer",
    "Summary",
    "SummaryBuffer",
    "SummaryMemory",
    "SummaryState",
    "SynapseMemory",
    "TokenBuffer",
    "TokenCounter",
    "Vector",
    "VectorMemory",
    "Window",
    "WindowMemory",
    "count_message_tokens",
    "count_tokens",
    "encoding_for",
    "encoding_name_for",
    "extractive_summary",
    "session_entity",
]
