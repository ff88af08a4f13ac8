"""ASGI middleware around every request: the request guard (Host, cursor headers), request
ids, trace context, latency metrics and the access log."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

from ..errors import HostNotAllowedError, SynapseError, ValidationError
from .limits import MAX_CURSOR_CHARS
from .metrics import Metrics
from .observe import RequestContext, Tracing, current, parse_traceparent, request_id_from

access_log = logging.getLogger("synapsedb.access")

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
MAX_HOST_VERDICTS = 256  # Host header values whose verdict a RequestGuard remembers


def host_name(value: str) -> str | None:
    """The host of a Host header (or an --allowed-hosts entry) without its port, lowercased;
    None when malformed. ``::1`` and ``[::1]:7379`` both give ``[::1]``."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        host, rest = (value[: end + 1], value[end + 1 :]) if end > 0 else ("", "")
    elif value.count(":") > 1:  # a bare IPv6 address (configuration only)
        host, rest = f"[{value}]", ""
    else:
        host, sep, port = value.partition(":")
        rest = sep + port
    if not host or (rest and not (rest[0] == ":" and rest[1:].isdigit())):
        return None
    return host


class RequestGuard:
    """Checks made on every request before anything else runs (the fast lane included):

    * ``Host``: with ``allowed_hosts`` (the CLI gives loopback servers LOOPBACK_HOSTS plus
      ``--allowed-hosts``), a request naming another host is refused with 421, so a web page
      cannot reach a local server through DNS rebinding (its requests name the attacker's
      host). ``None`` or ``"*"`` among them: any host.
    * ``Last-Event-ID`` and the ``after`` parameter (feed and stream cursors): at most
      MAX_CURSOR_CHARS characters (422), on every route."""

    def __init__(self, allowed_hosts: Iterable[str] | None = None) -> None:
        # Host header values seen -> served here: a client names the same host on every request
        self._verdicts: dict[bytes, bool] = {}
        hosts = None if allowed_hosts is None else list(allowed_hosts)
        if hosts is None or "*" in hosts:
            self.hosts: frozenset[str] | None = None
            return
        names = {h: host_name(h) for h in hosts}
        for given, name in names.items():
            if name is None:
                raise ValidationError(
                    f"allowed_hosts: {given!r} is not a host name", field="allowed_hosts"
                )
        self.hosts = frozenset(n for n in names.values() if n is not None)

    def check(self, scope: Any) -> SynapseError | None:
        """The error to answer with, or None to go on."""
        hosts = self.hosts
        seen = False
        for name, value in scope["headers"]:
            if name == b"host" and hosts is not None:
                seen = True
                served = self._verdicts.get(value)
                if served is None:
                    served = host_name(value.decode("latin-1")) in hosts
                    if len(self._verdicts) < MAX_HOST_VERDICTS:  # values are the client's
                        self._verdicts[value] = served
                if not served:
                    shown = value[:100].decode("latin-1")
                    return HostNotAllowedError(
                        f"Host: {shown!r} is not served here; allowed: "
                        f"{', '.join(sorted(hosts))} (add names with --allowed-hosts)",
                        field="host",
                    )
            elif name == b"last-event-id" and len(value) > MAX_CURSOR_CHARS:
                return ValidationError(
                    f"Last-Event-ID: {len(value)} characters, over the limit of {MAX_CURSOR_CHARS}",
                    field="Last-Event-ID",
                    limit=MAX_CURSOR_CHARS,
                )
        if hosts is not None and not seen:
            return HostNotAllowedError("Host: required", field="host")
        query = scope.get("query_string", b"")
        if b"after=" in query:  # the same bound for the cursor as a query parameter
            for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
                if name == "after" and len(value) > MAX_CURSOR_CHARS:
                    return ValidationError(
                        f"after: {len(value)} characters, over the limit of {MAX_CURSOR_CHARS}",
                        field="after",
                        limit=MAX_CURSOR_CHARS,
                    )
        return None


class Observe:
    """ASGI middleware around every request: a request id (``X-Request-ID`` in and out) and
    trace context for the log lines written meanwhile, a server span when tracing is on,
    latency per route template, method and status, and an access log line at INFO."""

    def __init__(self, app: Any, metrics: Metrics, tracing: Tracing) -> None:
        self.app, self.metrics, self.tracing = app, metrics, tracing

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        ctx, parent, state = request_context(scope)
        span = otel_token = None
        if self.tracing.enabled:
            from opentelemetry import context as otel_context
            from opentelemetry import trace

            carrier = {"traceparent": parent or "", "tracestate": state or ""}
            span = self.tracing.start_request(scope["method"], carrier)
            sc = span.get_span_context()
            ctx.trace_id, ctx.span_id = f"{sc.trace_id:032x}", f"{sc.span_id:016x}"
            otel_token = otel_context.attach(trace.set_span_in_context(span))
        token = current.set(ctx)
        rid_header = (b"x-request-id", ctx.request_id.encode())
        status = 500

        async def send_observed(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), rid_header]
            await send(message)

        try:
            await self.app(scope, receive, send_observed)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")
            observed(self.metrics, scope, path, status, time.perf_counter() - start)
            if span is not None:
                from opentelemetry import context as otel_context
                from opentelemetry.trace import Status, StatusCode

                span.update_name(f"{scope['method']} {path}")
                span.set_attribute("http.route", path)
                span.set_attribute("http.response.status_code", status)
                span.set_attribute("synapsedb.request_id", ctx.request_id)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
                span.end()
                if otel_token is not None:
                    otel_context.detach(otel_token)
            current.reset(token)


def request_context(scope: Any) -> tuple[RequestContext, str | None, str | None]:
    """The request's id and, from a W3C traceparent, the caller's trace (for the logs);
    also the raw traceparent and tracestate, for a server span."""
    rid = parent = state = None
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            rid = value.decode("latin-1")
        elif name == b"traceparent":
            parent = value.decode("latin-1")
        elif name == b"tracestate":
            state = value.decode("latin-1")
    ctx = RequestContext(request_id_from(rid))
    if (ids := parse_traceparent(parent)) is not None:
        ctx.trace_id, ctx.span_id = ids  # the caller's; a server span replaces them
    return ctx, parent, state


def observed(metrics: Metrics, scope: Any, route: str, status: int, seconds: float) -> None:
    """After a request: its latency in the metrics and, at INFO, an access log line."""
    metrics.request_timer(route, scope["method"], status).observe(seconds)
    if access_log.isEnabledFor(logging.INFO):
        access_log.info(
            "%s %s %d",
            scope["method"],
            scope["path"],
            status,
            extra={
                "method": scope["method"],
                "path": scope["path"],
                "route": route,
                "status": status,
                "duration_ms": round(seconds * 1000, 3),
            },
        )
