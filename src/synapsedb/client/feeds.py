"""Live feeds (Server-Sent Events) as iterators that survive a dropped connection.

``mem.follow(stream)`` (a stream's events) and ``mem.changes()`` (every change committed in the
namespace) answer a :class:`Feed` (sync client: ``for item in feed``) or an
:class:`AsyncFeed` (async client: ``async for item in feed``). A cut connection (a restart,
a proxy, a network blip) is reopened with ``Last-Event-ID`` set to the last item yielded, so
the server resumes after it: nothing missed, nothing twice. The semantics are the TypeScript
client's (clients/typescript/src/sse.ts):

* ``after`` resumes after an id (``feed.last_event_id`` of an earlier feed, in any process);
* ``idle_timeout`` (seconds without items) asks the server to end a quiet feed, and then the
  iteration ends; a feed the server ends sooner was cut, and is resumed;
* ``retries`` reconnections in a row may fail (waiting ``retry_delay`` seconds, doubled after
  each failure up to ``retry_max_delay``) before the iteration raises StorageError;
* an error the server answers (a bad argument, a revoked key) is raised at once, as the class
  the embedded API raises;
* ``close()`` (or leaving a ``with`` block, or ``break``) ends the feed and its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import httpx
import msgspec

from ..errors import ClosedError, StorageError, SynapseError, ValidationError
from ..types import Event
from . import calls
from .calls import Call

__all__ = ["AsyncFeed", "Change", "EventParser", "Feed", "FeedOptions", "ServerSentEvent"]

T = TypeVar("T")

# The server sends a comment every 15 s on a quiet feed: three missed mean the peer is gone.
READ_TIMEOUT_S = 45.0


@dataclass(frozen=True, slots=True)
class Change:
    """One committed change of a namespace, from ``changes()``: ``id`` resumes after it (as
    ``after``); ``target`` is a memory's id, a fact's key, or ``stream/event-id``."""

    id: str
    namespace: str
    at: datetime
    agent: str | None
    action: str  # write, update, delete, set, unset, append
    entity: str | None
    target: str
    version: int | None


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    id: str
    event: str
    data: str


class EventParser:
    """The WHATWG event-stream rules over lines: ``data`` lines joined by newlines, ``id`` kept
    across events, comments and unknown fields ignored; a blank line ends an event."""

    def __init__(self) -> None:
        self.last_id = ""
        self.event = ""
        self.data: list[str] = []

    def line(self, line: str) -> ServerSentEvent | None:
        if line == "":
            if not self.data:
                self.event = ""
                return None
            out = ServerSentEvent(self.last_id, self.event or "message", "\n".join(self.data))
            self.event, self.data = "", []
            return out
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self.data.append(value)
        elif name == "event":
            self.event = value
        elif name == "id" and "\0" not in value:
            self.last_id = value
        return None


@dataclass(frozen=True, slots=True)
class FeedOptions:
    after: str | None = None
    idle_timeout: float | None = None
    retries: int = 5
    retry_delay: float = 0.25
    retry_max_delay: float = 5.0

    def __post_init__(self) -> None:
        if self.after is not None and not isinstance(self.after, str):
            raise ValidationError("after: expected an event id (a string)", field="after")
        _seconds("idle_timeout", self.idle_timeout, allow_none=True)
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ValidationError(
                f"retries: expected 0 or more, got {self.retries!r}", field="retries"
            )
        _seconds("retry_delay", self.retry_delay)
        _seconds("retry_max_delay", self.retry_max_delay)


def _seconds(name: str, value: Any, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0:
        raise ValidationError(f"{name}: expected seconds (0 or more), got {value!r}", field=name)


def decode_event(data: str, _id: str) -> Event:
    """An ``event`` of ``follow``: the stream's Event."""
    return calls.decode(data.encode(), Event)  # type: ignore[no-any-return]


def decode_change(data: str, id: str) -> Change:
    """A ``change`` of ``changes``: its fields and the event id it came with."""
    fields = msgspec.json.decode(data)
    if not isinstance(fields, dict):
        raise StorageError(f"the feed sent a change that is not an object: {data[:200]!r}")
    return msgspec.convert({**fields, "id": id}, Change)


class _State:
    """What sync and async feeds share: the resume point, the backoff and the end rule."""

    def __init__(
        self, call: Call, kind: str, decode: Callable[[str, str], Any], options: FeedOptions
    ) -> None:
        self.call, self.kind, self.decode, self.options = call, kind, decode, options
        self.last_event_id = options.after
        self.failures = 0
        self.delay = options.retry_delay
        self.closed = False
        self.started = False
        # changes replayed after a restart start at the last one's microsecond: those of that
        # microsecond already yielded are skipped (the server's ids cannot tell them apart)
        self.boundary_us, self.boundary = -1, set[tuple[Any, ...]]()

    def request(self) -> tuple[dict[str, Any], dict[str, str]]:
        params = dict(self.call.params or {})
        if self.options.idle_timeout is not None:
            params["idle_timeout"] = self.options.idle_timeout
        headers = {"Accept": "text/event-stream"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        return params, headers

    def start(self) -> None:
        if self.started:
            raise ClosedError(
                "a feed can be iterated once; open another with after=feed.last_event_id"
            )
        self.started = True

    def item(self, ev: ServerSentEvent) -> tuple[bool, Any]:
        """(True, item) for an event of this feed; an ``error`` event raises its error."""
        if ev.event == "error":
            raise calls.error_of(401, ev.data.encode())
        if ev.event != self.kind:
            return False, None
        value = self.decode(ev.data, ev.id)
        if isinstance(value, Change) and self.repeated(value):
            return False, None
        self.last_event_id = ev.id
        self.failures, self.delay = 0, self.options.retry_delay
        return True, value

    def repeated(self, change: Change) -> bool:
        """Whether ``change`` was yielded already (a replay from durable history repeats the
        changes of the microsecond it resumes at)."""
        head = change.id.split("-", 1)[0]
        us = int(head) if head.isdigit() else -1
        key = (change.action, change.target, change.version, change.entity)
        if us != self.boundary_us:
            self.boundary_us, self.boundary = us, set()
        elif key in self.boundary:
            return True
        self.boundary.add(key)
        return False

    def ended_idle(self, quiet_since: float) -> bool:
        """The server ended the feed: after idle_timeout that is the end (True); sooner, it
        was cut (a restart, or this reader fell behind the server's buffer) and resumes."""
        idle = self.options.idle_timeout
        if idle is None:
            return False
        return time.monotonic() - quiet_since >= idle - min(1.0, idle / 2)

    def failed(self, exc: BaseException) -> float:
        """Count a failed connection: the seconds to wait before the next, or raise (errors
        that are not the connection's or the server's are the caller's own: raised as are)."""
        if not isinstance(exc, httpx.TransportError | httpx.StreamError | SynapseError):
            raise exc
        if isinstance(exc, SynapseError) and not isinstance(exc, StorageError):
            raise exc  # the server said no: retrying would not change that
        self.failures += 1
        if self.failures > self.options.retries:
            if isinstance(exc, SynapseError):
                raise exc
            raise StorageError(
                f"feed lost after {self.options.retries} reconnections: {exc}"
            ) from exc
        wait, self.delay = self.delay, min(self.delay * 2, self.options.retry_max_delay)
        return wait


def _timeout(http_timeout: httpx.Timeout) -> httpx.Timeout:
    return httpx.Timeout(
        connect=http_timeout.connect,
        read=READ_TIMEOUT_S,
        write=http_timeout.write,
        pool=http_timeout.pool,
    )


class Feed(Generic[T]):
    """A live feed over the sync client: ``for item in feed`` (once); ``last_event_id`` is the
    id of the last item yielded (pass it as ``after`` to resume elsewhere)."""

    def __init__(
        self,
        http: httpx.Client,
        call: Call,
        kind: str,
        decode: Callable[[str, str], T],
        options: FeedOptions,
    ) -> None:
        self._http = http
        self._state = _State(call, kind, decode, options)
        self._stop = threading.Event()
        self._response: httpx.Response | None = None

    @property
    def last_event_id(self) -> str | None:
        return self._state.last_event_id

    def close(self) -> None:
        """End the feed: the iteration stops and the connection closes."""
        self._state.closed = True
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.close()

    def __enter__(self) -> Feed[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[T]:
        self._state.start()
        return self._run()

    def _run(self) -> Iterator[T]:
        st = self._state
        try:
            while not st.closed:
                quiet_since = time.monotonic()
                try:
                    params, headers = st.request()
                    with self._http.stream(
                        "GET",
                        st.call.path,
                        params=params,
                        headers=headers,
                        timeout=_timeout(self._http.timeout),
                    ) as resp:
                        self._response = resp
                        if resp.status_code >= 400:
                            raise calls.error_of(resp.status_code, resp.read())
                        parser = EventParser()
                        for line in resp.iter_lines():
                            if st.closed:
                                return
                            ev = parser.line(line)
                            if ev is None:
                                continue
                            wanted, value = st.item(ev)
                            if wanted:
                                yield value
                                quiet_since = time.monotonic()
                    if st.closed or st.ended_idle(quiet_since):
                        return
                    raise StorageError("the server ended the feed early")
                except Exception as exc:  # a close() from elsewhere may surface as any
                    # error of the closed connection
                    if st.closed:
                        return
                    wait = st.failed(exc)
                finally:
                    self._response = None
                if self._stop.wait(wait):
                    return
        finally:
            st.closed = True


class AsyncFeed(Generic[T]):
    """A live feed over the async client: ``async for item in feed`` (once)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        call: Call,
        kind: str,
        decode: Callable[[str, str], T],
        options: FeedOptions,
    ) -> None:
        self._http = http
        self._state = _State(call, kind, decode, options)
        self._stop: asyncio.Event | None = None
        self._response: httpx.Response | None = None

    @property
    def last_event_id(self) -> str | None:
        return self._state.last_event_id

    async def close(self) -> None:
        """End the feed: the iteration stops and the connection closes."""
        self._state.closed = True
        if self._stop is not None:
            self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                await response.aclose()

    async def __aenter__(self) -> AsyncFeed[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[T]:
        self._state.start()
        return self._run()

    async def _run(self) -> AsyncIterator[T]:
        st = self._state
        self._stop = asyncio.Event()
        try:
            while not st.closed:
                quiet_since = time.monotonic()
                try:
                    params, headers = st.request()
                    async with self._http.stream(
                        "GET",
                        st.call.path,
                        params=params,
                        headers=headers,
                        timeout=_timeout(self._http.timeout),
                    ) as resp:
                        self._response = resp
                        if resp.status_code >= 400:
                            raise calls.error_of(resp.status_code, await resp.aread())
                        parser = EventParser()
                        async for line in resp.aiter_lines():
                            if st.closed:
                                return
                            ev = parser.line(line)
                            if ev is None:
                                continue
                            wanted, value = st.item(ev)
                            if wanted:
                                yield value
                                quiet_since = time.monotonic()
                    if st.closed or st.ended_idle(quiet_since):
                        return
                    raise StorageError("the server ended the feed early")
                except Exception as exc:  # a close() from elsewhere may surface as any
                    # error of the closed connection
                    if st.closed:
                        return
                    wait = st.failed(exc)
                finally:
                    self._response = None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), wait)
                    return
        finally:
            st.closed = True
