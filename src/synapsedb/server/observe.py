"""Request context for logs and traces: request ids, JSON log lines, OpenTelemetry spans.

* Every request gets a request id (the caller's ``X-Request-ID`` when it is sane, else a new
  one), echoed in the answer's ``X-Request-ID`` header and carried by every log line written
  while the request runs.
* Log lines are JSON objects (``JsonFormatter``) with the request id and, when the caller sent
  a W3C ``traceparent`` or tracing is on, the trace and span ids.
* Tracing is off unless an exporter is chosen (``Tracing("otlp")``, ``"console"``, or any
  OpenTelemetry ``SpanExporter``): then one server span per request (continuing the caller's
  trace) and one child span per query stage (embed, vector, keyword, fuse). The provider is
  the app's own, never the process-global one, and nothing is sent anywhere else: no product
  telemetry, ever.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import ValidationError

__all__ = [
    "EXPORTERS",
    "JsonFormatter",
    "RateLimitFilter",
    "RequestContext",
    "Tracing",
    "configure_logging",
]

EXPORTERS = ("none", "otlp", "console")
STAGES = ("embed", "vector", "keyword", "fuse")  # the order a query runs them in

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@dataclass(slots=True)
class RequestContext:
    request_id: str
    trace_id: str | None = None
    span_id: str | None = None


current: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar(
    "synapsedb_request", default=None
)


def request_id_from(header: str | None) -> str:
    """The caller's request id when it is a sane token, else a fresh one."""
    if header and _REQUEST_ID.match(header):
        return header
    return fresh_request_id()


_spare_ids: list[str] = []  # fresh request ids, 256 read from the OS at a time
if hasattr(os, "register_at_fork"):  # a forked child must not hand out its parent's ids
    os.register_at_fork(after_in_child=_spare_ids.clear)


def fresh_request_id() -> str:
    """16 hex digits from os.urandom (read 256 ids at a time: a system call per request
    cost as much as the rest of making the request's context)."""
    try:
        return _spare_ids.pop()  # atomic: no lock needed between threads
    except IndexError:
        block = os.urandom(8 * 256).hex()
        _spare_ids.extend(block[i : i + 16] for i in range(16, len(block), 16))
        return block[:16]


def parse_traceparent(header: str | None) -> tuple[str, str] | None:
    """(trace id, parent span id) of a W3C traceparent header, or None when malformed."""
    if not header:
        return None
    m = _TRACEPARENT.match(header.strip().lower())
    if m is None or m.group(1) == "0" * 32 or m.group(2) == "0" * 16:
        return None
    return m.group(1), m.group(2)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, the request context, extras."""

    _SKIP = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        ctx = current.get()
        if ctx is not None:
            out["request_id"] = ctx.request_id
            if ctx.trace_id:
                out["trace_id"] = ctx.trace_id
            if ctx.span_id:
                out["span_id"] = ctx.span_id
        for key, value in vars(record).items():  # fields passed with extra={...}
            if key not in self._SKIP and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


@dataclass(slots=True)
class _Window:
    start: float
    count: int = 0
    suppressed: int = 0


class RateLimitFilter(logging.Filter):
    """At most ``burst`` identical warnings or errors per ``interval`` seconds; past that they
    are counted, not written, and one ``suppressed K similar lines`` summary follows when the
    interval is over (with the next line logged). A flood (a failing ``accept()`` logged
    165,884 lines in 10 s) cannot fill the disk or hide everything else.

    Lines are identical when logger, level and the first line of the message match (so a
    traceback or an address in a later line does not make them differ). INFO and below (the
    access log: one line per request by choice) pass untouched. ``emit`` writes a summary
    (the handler's ``handle``); ``clock`` is for tests."""

    def __init__(
        self,
        burst: int = 10,
        interval: float = 10.0,
        *,
        emit: Callable[[logging.LogRecord], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst, self.interval, self.emit, self.clock = burst, interval, emit, clock
        self._windows: dict[tuple[str, int, str], _Window] = {}
        self._swept = float("-inf")
        self._lock = threading.Lock()

    MAX_WINDOWS = 10_000  # distinct lines tracked at once; past that new ones pass uncounted

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or getattr(record, "summary", False):
            return True
        try:
            first = record.getMessage().split("\n", 1)[0][:200]
        except Exception:  # a malformed log call: let logging report it as it would
            return True
        key = (record.name, record.levelno, first)
        now = self.clock()
        with self._lock:
            done = self._sweep(now) if now - self._swept >= self.interval / 10 else []
            window = self._windows.get(key)
            if window is None and len(self._windows) < self.MAX_WINDOWS:
                window = self._windows[key] = _Window(now)
            allowed = True
            if window is not None:
                window.count += 1
                allowed = window.count <= self.burst
                window.suppressed += not allowed
        for summary in done:
            self._write(summary)
        return allowed

    def flush(self) -> None:
        """Write the summaries of every window now (at shutdown)."""
        with self._lock:
            done = self._sweep(float("inf"))
        for summary in done:
            self._write(summary)

    def _sweep(self, now: float) -> list[logging.LogRecord]:
        """Drop the windows that are over; the summaries of those that suppressed lines."""
        self._swept = now
        out = []
        for key, window in list(self._windows.items()):
            if now - window.start >= self.interval:
                del self._windows[key]
                if window.suppressed:
                    name, level, first = key
                    seconds = min(now, window.start + self.interval) - window.start
                    out.append(
                        logging.makeLogRecord(
                            {
                                "name": name,
                                "levelno": level,
                                "levelname": logging.getLevelName(level),
                                "msg": "suppressed %d similar lines in %.0f s: %s",
                                "args": (window.suppressed, seconds, first),
                                "summary": True,
                                "suppressed": window.suppressed,
                            }
                        )
                    )
        return out

    def _write(self, record: logging.LogRecord) -> None:
        if self.emit is not None:
            self.emit(record)
        else:
            logging.getLogger(record.name).handle(record)


def configure_logging(level: str = "warning", fmt: str = "json") -> None:
    """Route every logger (ours, uvicorn's, asyncio's) to standard error in the chosen format,
    through one handler whose RateLimitFilter bounds floods of identical warnings."""
    if fmt not in ("json", "text"):
        raise ValidationError(f"log_format: expected json or text, got {fmt!r}", field="log_format")
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(RateLimitFilter(emit=handler.handle))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True


class Tracing:
    """OpenTelemetry tracing for one app. ``exporter``: "none" (off, the default), "otlp"
    (OTLP over HTTP/protobuf to ``endpoint``, or the standard ``OTEL_EXPORTER_OTLP_*``
    environment, default http://localhost:4318/v1/traces), "console", or a SpanExporter."""

    def __init__(
        self, exporter: Any = "none", *, endpoint: str | None = None, service: str = "synapsedb"
    ) -> None:
        self.enabled = exporter != "none"
        self.tracer: Any = None
        self._provider: Any = None
        if not self.enabled:
            return
        if isinstance(exporter, str) and exporter not in EXPORTERS:
            raise ValidationError(
                f"otel_exporter: expected one of {', '.join(EXPORTERS)}, got {exporter!r}",
                field="otel_exporter",
            )
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
        except ImportError:
            raise ValidationError(
                "otel_exporter: tracing needs the OpenTelemetry SDK: pip install 'synapsedb[otel]'",
                field="otel_exporter",
            ) from None
        if exporter == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            except ImportError:
                raise ValidationError(
                    "otel_exporter: 'otlp' needs opentelemetry-exporter-otlp-proto-http: "
                    "pip install 'synapsedb[otel]'",
                    field="otel_exporter",
                ) from None
            exporter = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
        elif exporter == "console":
            exporter = ConsoleSpanExporter()
        from .. import __version__

        self._provider = TracerProvider(
            resource=Resource.create({"service.name": service, "service.version": __version__})
        )
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self._provider.get_tracer("synapsedb.server", __version__)

    def start_request(self, method: str, headers: dict[str, str]) -> Any:
        """A server span for one request, continuing the caller's trace when it sent one."""
        from opentelemetry.propagate import extract
        from opentelemetry.trace import SpanKind

        return self.tracer.start_span(
            f"{method}",
            context=extract(headers),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method},
        )

    def query_stages(self, mode: str, timings: dict[str, float]) -> None:
        """Child spans of the current request span, one per query stage. The engine measures
        each stage's duration; the spans are laid end to end, ending now, in the order the
        stages run (a stage that ran more than once, as with the cold tier, is one span)."""
        if self.tracer is None:
            return
        from opentelemetry import trace

        parent = trace.get_current_span()
        if not parent.get_span_context().is_valid:
            return
        ctx = trace.set_span_in_context(parent)
        end = time.time_ns()
        start = end - int(sum(timings.values()) * 1e9)
        for stage in sorted(timings, key=lambda s: STAGES.index(s) if s in STAGES else 99):
            stop = start + int(timings[stage] * 1e9)
            span = self.tracer.start_span(
                f"query.{stage}",
                context=ctx,
                start_time=start,
                attributes={"synapsedb.query.mode": mode, "synapsedb.query.stage": stage},
            )
            span.end(end_time=stop)
            start = stop

    def shutdown(self) -> None:
        """Export what is buffered, then stop (at server shutdown)."""
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None
