"""A SynapseDB namespace as a conversation store: :class:`Sessions` and :class:`AsyncSessions`.

``Sessions(ns)`` keeps chat messages per session id in any namespace: embedded
(``synapsedb.open(path).namespace(..)``) or remote (``synapsedb.connect(url).namespace(..)``),
through the public namespace methods only. :class:`AsyncSessions` is the same with coroutines,
over ``synapsedb.connect_async(url).namespace(..)`` or an embedded namespace (each operation in
a worker thread). Both run the same plans (:mod:`.session_plans`).

What a session is (:mod:`.layout`): the stream ``session:<id>``, one event per message, and KV
facts about the entity ``session:<id>``. Semantics:

- ``clear`` is a write-scope operation: it records the last event it hides in the ``state``
  fact, and later loads start after it. ``history``, ``events`` and every read ``as_of`` a time
  before the clear still see the messages; ``load(id, as_of=T)`` is the session as it read at T.
- ``purge`` erases (``ns.forget(entity="session:<id>", purge=True)``, which needs the admin
  scope over HTTP): every event of the stream, whichever entity it is about, their searchable
  memories and the session's facts.
- TTL, sliding: a session whose last message is older than its ttl reads as empty (``load``,
  ``info``, ``sessions``); ``purge_expired`` erases such sessions. The ttl is the session's own
  (``configure``) or the store's. Time is the store's ``clock`` (wall clock by default; give
  the database's clock to share its notion of now), compared with the events' commit times.
- Over a remote namespace each operation is one request to the session routes
  (:mod:`.routed`), unless the store has its own ``clock``: then the plans compose public calls.
- ``load(id, last=N)`` reads the tail from the end (``events(order="desc", limit=N,
  after=<cleared id>)``): as fast on a 100,000-message session as on a short one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..engine.namespace import Namespace
from ..times import TimeLike
from ..types import Forgotten
from .drivers import Plan, drive, drive_async
from .messages import Message, MessageLike
from .routed import RoutedPlans
from .session_records import SessionInfo

if TYPE_CHECKING:
    from .summary import Summarizer

__all__ = ["AsyncSessions", "SessionInfo", "Sessions"]


class Sessions(RoutedPlans):
    """A namespace as a :class:`~synapsedb.conversation.store.MemoryStore`.

    ``Sessions(ns, searchable=False, ttl=None, entity=None, clock=None)``:

    - ``ns``: an embedded ``Namespace`` or a ``synapsedb.connect(url).namespace(..)``.
    - ``searchable``: also store each message with text as a memory (type ``event``, metadata
      ``{"role", "session"}``, plus the engine's ``stream`` and ``event_id``), so ``ns.query``
      and ``ns.recall`` reach old turns; ``append(..., searchable=)`` decides per message.
    - ``ttl``: seconds a session lives after its last message (sliding); None: forever.
      ``configure(id, ttl=)`` sets one session's own.
    - ``entity``: what the messages are about (default ``session:<id>``, per session). Naming a
      user (``"user:42"``) makes their turns reachable by ``ns.query(entity="user:42")`` and
      erased by ``ns.forget(entity="user:42", purge=True)``; ``purge(id)`` still erases the
      whole session, as the stream is named after the session entity.
    - ``clock``: the time TTLs are judged by (a ``synapsedb.clock.Clock``; default wall clock).
    """

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
        session: one ``ns.append``. Returns it as stored (``id``: the event id, ``ts``)."""
        return drive(self.ns, self._append(session_id, message, searchable, entity))

    def append_many(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        *,
        searchable: bool | None = None,
        entity: str | None = None,
    ) -> list[Message]:
        """Append several messages in order. All are checked first (bad input writes nothing);
        each is its own append, so a failure of the store midway keeps the ones before."""
        return drive(self.ns, self._append_many(session_id, messages, searchable, entity))

    def load(
        self,
        session_id: str,
        *,
        last: int | None = None,
        as_of: TimeLike | None = None,
        strategy: str | None = None,
        k: int | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
        keep: int | None = None,
        summary_tokens: int | None = None,
        summarizer: Summarizer | None = None,
    ) -> list[Message]:
        """The session's messages since its last clear, oldest first (``[]`` if it expired).
        ``last=N`` (at most 10,000): only the newest N, read from the end of the stream.
        ``as_of``: the session as it read then (before a clear: the messages it hid). Events
        of the stream that hold no message (no known ``role`` in their data) are skipped.
        ``strategy``: what a strategy of that name gives (``window``, ``token_buffer``,
        ``summary_buffer``...; its options ``k``, ``max_tokens``... : :mod:`.named`), not with
        ``last``/``as_of``. Over a remote namespace it runs on the server (one request; its
        model summarises) unless a ``summarizer`` is given."""
        opts = self._options(
            strategy,
            last,
            as_of,
            summarizer,
            k=k,
            max_tokens=max_tokens,
            model=model,
            keep=keep,
            summary_tokens=summary_tokens,
        )
        local = self._local(session_id, strategy, opts, summarizer)
        if local is not None:
            return local.load(session_id)  # type: ignore[no-any-return]
        return drive(self.ns, self._load_with(session_id, last, as_of, strategy, opts))

    def clear(self, session_id: str) -> None:
        """Empty the session for later loads: a write to its ``state`` fact (write scope), not
        an erasure. ``load(as_of=<before>)``, ``ns.events`` and ``ns.history`` still show what
        was there. Messages appended while the clear runs may stay visible."""
        drive(self.ns, self._clear(session_id))

    def configure(self, session_id: str, *, ttl: float | None) -> None:
        """Set this session's own ttl in seconds (None: it never expires, whatever the
        store's ttl)."""
        drive(self.ns, self._configure(session_id, ttl))

    def info(
        self, session_id: str, *, as_of: TimeLike | None = None, count_limit: int = 1000
    ) -> SessionInfo:
        """Counts and times of a session (:class:`SessionInfo`). ``count`` costs a read of up
        to ``count_limit`` events (max 10,000); past it, the count is a lower bound
        (``count_exact`` False): the engine keeps no per-stream counter."""
        return drive(self.ns, self._info(session_id, as_of, count_limit))

    def sessions(self, *, as_of: TimeLike | None = None) -> list[str]:
        """Ids of the sessions with messages since their last clear and not expired, sorted
        (every ``session:<id>`` stream counts, ``ns.remember``'s included). Two reads per
        session stream."""
        return drive(self.ns, self._sessions(as_of))

    def purge(self, session_id: str) -> Forgotten:
        """Erase the session: ``ns.forget(entity="session:<id>", purge=True)`` (admin scope
        over HTTP). Every event of its stream, whatever entity it is about, their searchable
        memories and the session's facts are erased; no read, ``as_of`` included, sees them."""
        return drive(self.ns, self._purge(session_id))

    def purge_expired(self) -> list[str]:
        """Erase every expired session (as :meth:`purge`); returns their ids."""
        return drive(self.ns, self._purge_expired())

    def search(
        self,
        session_id: str,
        text: str,
        *,
        k: int = 5,
        as_of: TimeLike | None = None,
        exclude: Sequence[str] = (),
    ) -> list[Message]:
        """The session's searchable messages (since its last clear) most relevant to ``text``:
        up to ``k``, in chronological order. Only messages stored searchable are found.
        ``exclude``: ids of messages left out of the search itself (at most 1,024), e.g. the
        message whose text is the query: kept in, it matches itself best and lends its score
        to its neighbours (the hybrid query's context boost)."""
        return drive(self.ns, self._search(session_id, text, k, as_of, exclude))


class AsyncSessions(RoutedPlans):
    """:class:`Sessions` with coroutines (an
    :class:`~synapsedb.conversation.store.AsyncMemoryStore`): the same constructor, methods
    and semantics. ``ns`` is a ``synapsedb.connect_async(url).namespace(..)`` (its calls are
    awaited) or an embedded ``Namespace`` (each operation runs in a worker thread,
    ``asyncio.to_thread``, so the event loop never waits on the disk). Given a synchronous
    ``synapsedb.connect(url).namespace(..)`` it works, but each call blocks the event loop."""

    __slots__ = ()

    async def _run(self, plan: Plan[Any]) -> Any:
        if isinstance(self.ns, Namespace):
            return await asyncio.to_thread(drive, self.ns, plan)
        return await drive_async(self.ns, plan)

    async def append(
        self,
        session_id: str,
        message: MessageLike,
        *,
        searchable: bool | None = None,
        entity: str | None = None,
    ) -> Message:
        """See :meth:`Sessions.append`."""
        return await self._run(self._append(session_id, message, searchable, entity))  # type: ignore[no-any-return]

    async def append_many(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        *,
        searchable: bool | None = None,
        entity: str | None = None,
    ) -> list[Message]:
        """See :meth:`Sessions.append_many`."""
        return await self._run(self._append_many(session_id, messages, searchable, entity))  # type: ignore[no-any-return]

    async def load(
        self,
        session_id: str,
        *,
        last: int | None = None,
        as_of: TimeLike | None = None,
        strategy: str | None = None,
        k: int | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
        keep: int | None = None,
        summary_tokens: int | None = None,
        summarizer: Summarizer | None = None,
    ) -> list[Message]:
        """See :meth:`Sessions.load` (the strategy is the async twin)."""
        opts = self._options(
            strategy,
            last,
            as_of,
            summarizer,
            k=k,
            max_tokens=max_tokens,
            model=model,
            keep=keep,
            summary_tokens=summary_tokens,
        )
        local = self._local(session_id, strategy, opts, summarizer, asynchronous=True)
        if local is not None:
            return await local.load(session_id)  # type: ignore[no-any-return]
        return await self._run(self._load_with(session_id, last, as_of, strategy, opts))  # type: ignore[no-any-return]

    async def clear(self, session_id: str) -> None:
        """See :meth:`Sessions.clear`."""
        await self._run(self._clear(session_id))

    async def configure(self, session_id: str, *, ttl: float | None) -> None:
        """See :meth:`Sessions.configure`."""
        await self._run(self._configure(session_id, ttl))

    async def info(
        self, session_id: str, *, as_of: TimeLike | None = None, count_limit: int = 1000
    ) -> SessionInfo:
        """See :meth:`Sessions.info`."""
        return await self._run(self._info(session_id, as_of, count_limit))  # type: ignore[no-any-return]

    async def sessions(self, *, as_of: TimeLike | None = None) -> list[str]:
        """See :meth:`Sessions.sessions`."""
        return await self._run(self._sessions(as_of))  # type: ignore[no-any-return]

    async def purge(self, session_id: str) -> Forgotten:
        """See :meth:`Sessions.purge`."""
        return await self._run(self._purge(session_id))  # type: ignore[no-any-return]

    async def purge_expired(self) -> list[str]:
        """See :meth:`Sessions.purge_expired`."""
        return await self._run(self._purge_expired())  # type: ignore[no-any-return]

    async def search(
        self,
        session_id: str,
        text: str,
        *,
        k: int = 5,
        as_of: TimeLike | None = None,
        exclude: Sequence[str] = (),
    ) -> list[Message]:
        """See :meth:`Sessions.search`."""
        return await self._run(self._search(session_id, text, k, as_of, exclude))  # type: ignore[no-any-return]
