"""What one connection or request may hold of the server: sizes, nesting, deadlines, counts.

A slow or hostile client must not be able to hold the server: every connection has until
``header_timeout`` to send a request's headers (at most ``max_header_bytes`` of them), and
``body_timeout`` per MAX_BODY bytes of body; idle keep-alive connections close after
``keep_alive``; past ``max_connections`` open connections, the longest-waiting one without a
request in progress is closed. uvicorn offers the keep-alive timeout, ``limit_concurrency``
(a 503 answer while that many connections or requests are open, counting the asker's),
``backlog`` and, for h11 only, ``h11_max_incomplete_event_size``; it has no deadline for
headers or bodies and never closes a connection to make room, so :func:`guarded_protocol`
adds the header deadline, the header size cap and the eviction, and the body deadline is
kept where bodies are read (``wire.read_raw``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import PayloadTooLargeError, RequestTimeoutError, SynapseError, ValidationError

__all__ = [
    "MAX_BODY",
    "MAX_CURSOR_CHARS",
    "MAX_DEPTH",
    "Limits",
    "guarded_protocol",
    "raw_error",
]

MAX_BODY = 8 * 1024 * 1024  # bytes of a JSON request body (an import has no cap: admin only)
MAX_DEPTH = 64  # nesting of lists and objects in a JSON body
MAX_CURSOR_CHARS = 128  # a Last-Event-ID or ``after`` cursor

log = logging.getLogger("synapsedb.server")


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-connection limits of one server (``synapsedb serve`` options of the same names)."""

    body_timeout: float = 30.0  # seconds to receive a request body, per MAX_BODY bytes
    header_timeout: float = 10.0  # seconds from connect (or the last answer) to full headers
    keep_alive: float = 5.0  # seconds an idle keep-alive connection stays open
    max_connections: int = 1024  # open connections; then the longest-waiting one is closed
    max_header_bytes: int = 64 * 1024  # bytes of a request line and headers
    backlog: int = 2048  # connections the kernel queues before accept
    # an import's body (held in memory while it is checked): one tenant's admin must not be
    # able to take the whole server's memory
    max_import_bytes: int = 256 * 1024 * 1024
    # request bodies one tenant may be sending at once: stalled bodies of one tenant's keys
    # cannot hold every connection slot (the others' requests would answer 503)
    max_body_reads_per_tenant: int = 64
    # seconds a stop (SIGTERM, Ctrl-C) waits for requests in flight before closing what is
    # still open: live feeds never end by themselves, and would hold the stop forever
    shutdown_timeout: float = 10.0

    def __post_init__(self) -> None:
        for name in ("body_timeout", "header_timeout", "keep_alive", "shutdown_timeout"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (0 < value < math.inf)
            ):
                raise ValidationError(
                    f"{name}: expected a positive number of seconds, got {value!r}", field=name
                )
        for name in (
            "max_connections",
            "max_header_bytes",
            "backlog",
            "max_import_bytes",
            "max_body_reads_per_tenant",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(
                    f"{name}: expected a positive integer, got {value!r}", field=name
                )

    def uvicorn_options(self) -> dict[str, Any]:
        """Keyword arguments for ``uvicorn.run`` / ``uvicorn.Config`` that enforce these."""
        return {
            "timeout_keep_alive": self.keep_alive,
            "timeout_graceful_shutdown": self.shutdown_timeout,
            "limit_concurrency": self.max_connections + 1,  # the newcomer over a busy limit
            "backlog": self.backlog,
            "h11_max_incomplete_event_size": self.max_header_bytes,
            "http": guarded_protocol(self),
        }


def raw_error(err: SynapseError) -> bytes:
    """A whole HTTP/1.1 answer in the one error shape, closing the connection: for the
    protocol level, where no ASGI app is running."""
    body = msgspec.json.encode({"error": err.to_dict()})
    reason = {408: "Request Timeout", 413: "Content Too Large"}.get(err.http_status, "Error")
    head = (
        f"HTTP/1.1 {err.http_status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def guarded_protocol(limits: Limits, base: type[Any] | None = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (``base``: httptools when installed, else h11) with:

    * a header deadline: from connect, or from the end of the previous answer, the next
      request's headers must be complete within ``header_timeout``; else 408 and close (or a
      quiet close when nothing was sent), so a connection that trickles headers cannot be
      held open forever (uvicorn's keep-alive timer stops at the first byte);
    * a header size cap: over ``max_header_bytes`` before the headers end, 413 and close
      (httptools has no limit of its own);
    * room for requests: a connection arriving when ``max_connections`` are open closes
      the one that has waited longest without a request in progress (idle, or still
      sending headers), so slow or idle connections cannot crowd out real requests nor
      use up file descriptors. When every connection has a request in progress, uvicorn's
      ``limit_concurrency`` (``max_connections + 1``) answers the newcomer's requests 503
      and closes it.

    * on httptools' connection, the fast lane answered by the connection itself: a plain
      ``GET /v1/namespaces/{ns}/facts?entity=&key=`` head arriving whole in one read between
      requests (``FastLane.answer_head``) is answered without an ASGI task, request cycle or
      second write, in the state uvicorn would leave (keep-alive, the header deadline, the
      request count); everything else is parsed by uvicorn as before.

    It reads only the protocol's ``cycle`` (the request being answered), ``connections``,
    ``transport`` and ``loop``, which both of uvicorn's implementations have, and for the
    fast lane httptools' ``pipeline``, ``flow``, ``tasks``, ``limit_concurrency``,
    ``server_state``, ``access_log`` and keep-alive timer."""
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        base = AutoHTTPProtocol

    order = itertools.count()  # breaks ties between connections accepted at one instant
    # only httptools' connection answers the fast lane itself: its parser holds nothing
    # between requests, and its state there is the attributes used in _answered_here
    answers_itself = _is_httptools(base)

    class GuardedProtocol(base):  # type: ignore[misc, valid-type]
        _deadline: asyncio.TimerHandle | None = None
        _pending = 0  # bytes received while no request is being answered
        _tail = b""  # the last bytes of those, to find a header end split across reads

        _since = (0.0, 0)  # when it began waiting for a request: its place in eviction order
        _answered = (-math.inf, 0)  # when it last answered a request itself (_answered_here)

        _lane: Any = None  # the app's fast lane, when this connection may answer it itself
        _mid_message = False  # httptools' parser is inside a message (began, not complete)
        timeout_keep_alive_task: asyncio.TimerHandle | None  # uvicorn's keep-alive timer

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            # uvicorn's own access log (off in ``synapsedb serve``) is written on its path
            serves_itself = (
                answers_itself
                and not self.access_log
                and all(hasattr(self, name) for name in _HTTPTOOLS_STATE)
            )  # another uvicorn's httptools connection may keep its state otherwise
            self._lane = fast_lane_of(self.config) if serves_itself else None
            self._since = (self.loop.time(), next(order))
            if len(self.connections) > limits.max_connections:
                self._evict_one()
            self._arm()

        def _evict_one(self) -> bool:
            """At the limit, make room: close the connection that has waited longest
            without a request in progress (idle keep-alive, or still sending its headers),
            so that slow or idle connections cannot crowd out requests."""
            waiting = [
                c
                for c in self.connections
                if c is not self
                and isinstance(c, GuardedProtocol)
                and c._between_requests()
                and not c.transport.is_closing()
            ]
            if not waiting:
                log.warning(
                    "connection limit of %d reached with every connection busy: "
                    "new requests answer 503",
                    limits.max_connections,
                )
                return False
            victim = min(waiting, key=lambda c: c._since)
            victim._disarm()
            victim.transport.close()
            # no longer counted from now (its connection_lost may run after this request's
            # headers are read, and limit_concurrency counts this set)
            self.connections.discard(victim)
            return True

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._lane is not None and self._answered_here(data):
                return
            if self._between_requests():
                if self._deadline is None:
                    self._since = (self.loop.time(), next(order))
                    self._arm()
                # only the bytes up to the end of the headers count: a client may send its
                # headers and body in one write (httpx does), and the body has its own limits
                window = self._tail + data
                end = window.find(b"\r\n\r\n")
                header_bytes = self._pending + (len(data) if end < 0 else end + 4 - len(self._tail))
                self._pending += len(data)
                self._tail = window[-3:]
                if header_bytes > limits.max_header_bytes and self._awaiting_headers():
                    self._refuse(
                        PayloadTooLargeError(
                            f"headers: over the limit of {limits.max_header_bytes} bytes",
                            field="headers",
                            limit=limits.max_header_bytes,
                        )
                    )
                    return
            super().data_received(data)
            if self._deadline is not None and not self._between_requests():
                self._disarm()  # a request's headers are complete: the body has its own deadline

        def _answered_here(self, data: bytes) -> bool:
            """Answer ``data`` here when it is one whole plain request head for the fast lane
            (FastLane.answer_head) arriving between requests, in the state uvicorn would
            leave: the same bytes written (in one write instead of two), the keep-alive
            timer re-armed, the request counted; the header deadline and eviction order as
            for a request whose headers came in one read. Else False: uvicorn parses it."""
            if (
                self._pending
                or self.pipeline
                or len(data) > limits.max_header_bytes
                or not self._between_requests()
                or self._mid_message  # the parser holds part of a message
                or not self._awaiting_headers()  # the rest of an answered request's body
                or self.flow.write_paused
                or self.transport.is_closing()
                or (
                    self.limit_concurrency is not None  # over it: uvicorn's 503
                    and (
                        len(self.connections) >= self.limit_concurrency
                        or len(self.tasks) >= self.limit_concurrency
                    )
                )
            ):
                return False
            lane, guard = self._lane
            answer = lane.answer_head(data, guard, self.server_state.default_headers)
            if answer is None:
                return False
            now = self.loop.time()
            self._since = self._answered = (now, next(order))
            if self._deadline is not None:
                self._disarm()
            response, keep_alive = answer
            self.transport.write(response)
            self.server_state.total_requests += 1
            if not keep_alive:
                self.transport.close()
            elif self.timeout_keep_alive_task is None:
                self.timeout_keep_alive_task = self.loop.call_later(
                    self.timeout_keep_alive, self.timeout_keep_alive_handler
                )
            # else the armed keep-alive timer stays: when it fires, it waits on for the
            # time left since this answer (a timer fewer to make and cancel per request)
            return True

        def on_message_begin(self) -> None:  # httptools' parser callbacks
            self._mid_message = True
            super().on_message_begin()

        def on_message_complete(self) -> None:
            self._mid_message = False
            super().on_message_complete()

        def timeout_keep_alive_handler(self) -> None:
            idle = self.loop.time() - self._answered[0]
            if idle < self.timeout_keep_alive:  # answered here since the timer was armed
                self.timeout_keep_alive_task = self.loop.call_later(
                    self.timeout_keep_alive - idle, self.timeout_keep_alive_handler
                )
                return
            super().timeout_keep_alive_handler()

        def _between_requests(self) -> bool:
            cycle = self.cycle
            return cycle is None or bool(cycle.response_complete)

        def _awaiting_headers(self) -> bool:
            """Between requests with the last body fully read (not draining a body the app
            answered without reading)."""
            cycle = self.cycle
            return cycle is None or not cycle.more_body

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(limits.header_timeout, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self._pending = 0
            self._tail = b""

        def _expire(self) -> None:
            self._deadline = None
            if not self._between_requests() or self.transport.is_closing():
                return
            if self._pending and self._awaiting_headers():
                self._refuse(
                    RequestTimeoutError(
                        f"headers: not received within {limits.header_timeout:g} s",
                        field="headers",
                        limit=limits.header_timeout,
                    )
                )
            else:
                self.transport.close()

        def _refuse(self, err: SynapseError) -> None:
            self._disarm()
            if not self.transport.is_closing():
                self.transport.write(raw_error(err))
                self.transport.close()

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol


# what _answered_here reads and sets of uvicorn's httptools connection
_HTTPTOOLS_STATE = (
    "pipeline",
    "flow",
    "tasks",
    "connections",
    "limit_concurrency",
    "server_state",
    "timeout_keep_alive_task",
    "timeout_keep_alive",
)


def _is_httptools(base: type[Any]) -> bool:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools not installed
        return False
    return issubclass(base, HttpToolsProtocol)


def fast_lane_of(config: Any) -> tuple[Any, Any] | None:
    """(the fast lane, the request guard) of the app uvicorn serves, when a connection may
    answer the fast lane without running the app: the app (``create_app``'s, with its fast
    lane on: tracing off) is served as it is, or only behind uvicorn's proxy-headers
    middleware (which changes nothing the fast lane reads), with no root path."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    app = config.app
    loaded = config.loaded_app
    if isinstance(loaded, ProxyHeadersMiddleware):
        loaded = loaded.app
    if loaded is not app or config.root_path:
        return None
    lane, guard = getattr(app, "fast", None), getattr(app, "guard", None)
    if lane is None or guard is None or not hasattr(lane, "answer_head"):
        return None
    return lane, guard
