"""The conversation sessions of a namespace, local or remote: :class:`SessionsAPI`
(``ns.sessions``).

A session ``<id>`` is the stream ``session:<id>`` (one event per message) and KV facts about
the entity ``session:<id>`` (docs/conversation.md). Each method is one operation of the
session routes: embedded it runs :class:`synapsedb.conversation.Sessions` over the namespace,
over HTTP the server runs the same code, so the answers are the same. TTLs are sliding and
judged by the database's clock (the server's, over HTTP): ``ttl`` is the seconds a session
lives after its last message unless the session has its own (``configure``); None: forever.

For a store with its own defaults (``searchable``, ``ttl``, ``entity``), strategies and
context assembly, use :class:`synapsedb.conversation.Sessions` over the namespace: it calls
these operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..times import TimeLike
from ..types import Forgotten, Message, MessageLike, SessionInfo

__all__ = ["MAX_APPEND", "SessionsAPI"]

MAX_APPEND = 1000  # messages in one append_many call (one request)


class SessionsAPI(Protocol):
    """The conversation sessions of one namespace."""

    __slots__ = ()

    def append(
        self,
        session_id: str,
        message: MessageLike,
        *,
        searchable: bool | None = None,
        entity: str | None = None,
    ) -> Message:
        """Add a message (a Message, a dict or a (role, content) tuple) at the end of the
        session; returns it as stored (``id``: its event id, ``ts``). ``searchable``: also store
        it as a memory (type ``event``) that ``ns.query`` and ``ns.recall`` find; ``entity``:
        what it is about (default ``session:<id>``)."""
        ...

    def append_many(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        *,
        searchable: bool | None = None,
        entity: str | None = None,
    ) -> list[Message]:
        """Append up to MAX_APPEND messages in order, all checked first (bad input writes
        nothing); returns them as stored."""
        ...

    def load(
        self,
        session_id: str,
        *,
        last: int | None = None,
        as_of: TimeLike | None = None,
        ttl: float | None = None,
        strategy: str | None = None,
        k: int | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
        keep: int | None = None,
        summary_tokens: int | None = None,
    ) -> list[Message]:
        """The session's messages since its last clear, oldest first (``[]`` once expired).
        ``last=N`` (at most 10,000): only the newest N. ``as_of``: the session as it read then.
        ``strategy``: what a strategy of that name gives (``window``, ``token_buffer``,
        ``summary_buffer``...; its options ``k``, ``max_tokens``, ``model``, ``keep``,
        ``summary_tokens``), not with ``last``/``as_of``. A summarising strategy stores the
        summary it folds (write scope over HTTP), made by the memory loop's model (extractive
        without one)."""
        ...

    def clear(self, session_id: str) -> None:
        """Empty the session for later loads: a write of its ``state`` fact, not an erasure
        (``load(as_of=<before>)`` and ``ns.history`` still show what was there)."""
        ...

    def purge(self, session_id: str) -> Forgotten:
        """Erase the session (``ns.forget(entity="session:<id>", purge=True)``; admin scope over
        HTTP): every event of its stream, their searchable memories and its facts."""
        ...

    def configure(self, session_id: str, *, ttl: float | None) -> None:
        """Set this session's own ttl in seconds (None: it never expires)."""
        ...

    def info(
        self,
        session_id: str,
        *,
        as_of: TimeLike | None = None,
        count_limit: int = 1000,
        ttl: float | None = None,
    ) -> SessionInfo:
        """Counts and times of a session: ``count`` reads up to ``count_limit`` events (at most
        10,000); past it the count is a lower bound (``count_exact`` False)."""
        ...

    def ids(self, *, as_of: TimeLike | None = None, ttl: float | None = None) -> list[str]:
        """Ids of the sessions with messages since their last clear and not expired, sorted."""
        ...

    def purge_expired(self, *, ttl: float | None = None) -> list[str]:
        """Erase every expired session (as :meth:`purge`; admin scope over HTTP); their ids."""
        ...

    def search(
        self,
        session_id: str,
        text: str,
        *,
        k: int = 5,
        as_of: TimeLike | None = None,
        exclude: Sequence[str] = (),
        ttl: float | None = None,
    ) -> list[Message]:
        """The session's searchable messages (since its last clear) most relevant to
        ``text``: up to ``k``, oldest first. ``exclude``: ids of messages left out of the
        search (at most 1,024), e.g. the one whose text is the query."""
        ...
