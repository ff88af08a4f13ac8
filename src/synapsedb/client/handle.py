"""The bases of the generated client classes (``namespace.py``, ``aio_namespace.py``): what a
remote handle holds (its database, namespace and default agent) and how it sends one call,
and the live feeds, which only a server keeps (``follow``, ``changes``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..times import TimeLike
from ..types import Event
from . import calls, feeds
from .feeds import AsyncFeed, Change, Feed, FeedOptions

if TYPE_CHECKING:
    from .asyncio import AsyncRemoteDatabase
    from .sync import RemoteDatabase

__all__ = ["AsyncHandle", "AsyncNamespaceHandle", "Handle", "NamespaceHandle"]


class Handle:
    """A namespace (or its sessions, or its cache) of a server, acting as ``agent`` unless a
    call names another."""

    __slots__ = ("_agent", "_db", "name")

    def __init__(self, db: RemoteDatabase, name: str, agent: str | None) -> None:
        self._db, self.name, self._agent = db, name, agent

    def _call(self, method: str, args: dict[str, Any]) -> Any:
        """Send one call of API method ``method``; ``args``: its arguments by name (the
        method's ``locals()``, ``self`` among them)."""
        args = {k: v for k, v in args.items() if k != "self"}
        return self._db._run(calls.build(method, self.name, args, self._agent))


class AsyncHandle:
    """:class:`Handle` of the async client: each call a coroutine."""

    __slots__ = ("_agent", "_db", "name")

    def __init__(self, db: AsyncRemoteDatabase, name: str, agent: str | None) -> None:
        self._db, self.name, self._agent = db, name, agent

    async def _call(self, method: str, args: dict[str, Any]) -> Any:
        args = {k: v for k, v in args.items() if k != "self"}
        return await self._db._run(calls.build(method, self.name, args, self._agent))


def _options(after: Any, idle_timeout: Any, retries: Any, delay: Any, most: Any) -> FeedOptions:
    return FeedOptions(after, idle_timeout, retries, delay, most)


class NamespaceHandle(Handle):
    """A namespace of a server: the live feeds besides the API (``follow``, ``changes``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<synapsedb.RemoteNamespace {self.name!r}>"

    def follow(
        self,
        stream: str,
        *,
        after: str | None = None,
        idle_timeout: float | None = None,
        retries: int = 5,
        retry_delay: float = 0.25,
        retry_max_delay: float = 5.0,
    ) -> Feed[Event]:
        """Follow a stream live: its events after ``after`` (all without it), then each new
        one as it is committed, resuming with ``Last-Event-ID`` when the connection drops
        (``synapsedb.client.feeds``). ``for ev in mem.follow("user:1"): ...``; over the async
        client ``async for``. Ends with ``idle_timeout`` seconds without events, ``close()``
        or ``break``."""
        options = _options(after, idle_timeout, retries, retry_delay, retry_max_delay)
        return self._db._feed(calls.follow(self.name, stream), "event", feeds.decode_event, options)

    def changes(
        self,
        *,
        entity: str | None = None,
        since: TimeLike | None = None,
        after: str | None = None,
        idle_timeout: float | None = None,
        retries: int = 5,
        retry_delay: float = 0.25,
        retry_max_delay: float = 5.0,
    ) -> Feed[Change]:
        """Follow every change committed in the namespace (or about ``entity``), from now, from
        ``since`` (history first) or after ``after``; a dropped connection resumes after the
        last change yielded (exact on the same server process; after a restart, replayed
        from durable history)."""
        options = _options(after, idle_timeout, retries, retry_delay, retry_max_delay)
        return self._db._feed(
            calls.changes(self.name, entity, since), "change", feeds.decode_change, options
        )


class AsyncNamespaceHandle(AsyncHandle):
    """:class:`NamespaceHandle` of the async client: its feeds are read with ``async for``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<synapsedb.AsyncRemoteNamespace {self.name!r}>"

    def follow(
        self,
        stream: str,
        *,
        after: str | None = None,
        idle_timeout: float | None = None,
        retries: int = 5,
        retry_delay: float = 0.25,
        retry_max_delay: float = 5.0,
    ) -> AsyncFeed[Event]:
        """See :meth:`NamespaceHandle.follow`."""
        options = _options(after, idle_timeout, retries, retry_delay, retry_max_delay)
        return self._db._feed(calls.follow(self.name, stream), "event", feeds.decode_event, options)

    def changes(
        self,
        *,
        entity: str | None = None,
        since: TimeLike | None = None,
        after: str | None = None,
        idle_timeout: float | None = None,
        retries: int = 5,
        retry_delay: float = 0.25,
        retry_max_delay: float = 5.0,
    ) -> AsyncFeed[Change]:
        """See :meth:`NamespaceHandle.changes`."""
        options = _options(after, idle_timeout, retries, retry_delay, retry_max_delay)
        return self._db._feed(
            calls.changes(self.name, entity, since), "change", feeds.decode_change, options
        )
