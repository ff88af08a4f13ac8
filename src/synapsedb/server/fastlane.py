"""The fast lane: the hottest read answered in front of the web framework (see FastLane)."""

from __future__ import annotations

import http
import re
import time
from typing import Any
from urllib.parse import unquote_plus

from starlette.routing import Route

from ..engine import Database
from ..surface import BY_NAME
from .gate import enter, failed
from .metrics import Metrics
from .middleware import RequestGuard, observed, request_context
from .observe import current
from .wire import encode, error_response

FACTS = BY_NAME["facts"]  # the row this lane answers, called as its plain handler calls it
assert FACTS.call is not None
FACTS_CALL = FACTS.call

JSON_HEADERS = (b"content-type", b"application/json")
Headers = list[tuple[bytes, bytes]]
HeadLines = tuple[tuple[bytes, bytes], ...]

# what a request head must look like for the connection itself to answer it (read_head):
# anything else, however valid, is parsed by uvicorn's parser and goes through the framework
_TARGET = re.compile(
    rb"/v1/namespaces/[A-Za-z0-9._~!$&'()*+,;=:@-]+/facts\?[A-Za-z0-9._~!$&'()*+,;=:@/?%-]*"
)
_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VALUE = re.compile(rb"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?|")
# header blocks read lately -> what read_head made of them (None: not plain); a client sends
# the same header lines with every request
_seen_heads: dict[bytes, HeadLines | None] = {}
_UNSEEN: Any = object()
MAX_REMEMBERED_HEADS, MAX_REMEMBERED_HEAD = 128, 1024  # entries, bytes of one
# headers that shape the message or the connection (a body, its framing, an upgrade, a close):
# uvicorn's parser decides what they mean
_FRAMING = frozenset(
    {
        b"content-length",
        b"transfer-encoding",
        b"connection",
        b"upgrade",
        b"expect",
        b"te",
        b"trailer",
        b"keep-alive",
        b"proxy-connection",
    }
)


def status_line(status: int) -> bytes:
    """The status line uvicorn writes for ``status``."""
    try:
        phrase = http.HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


STATUS_LINES = {status: status_line(status) for status in range(100, 600)}


def read_head(data: bytes) -> tuple[bytes, bytes, HeadLines] | None:
    """(path, query string, headers with lowercased names) when ``data`` is exactly one
    ``GET /v1/namespaces/<ns>/facts?... HTTP/1.1`` request head in its plainest form, else
    None. Plainest: no body nor anything after the head, nothing that frames the message
    or the connection (Content-Length, Transfer-Encoding, Connection, Upgrade, Expect...),
    no escapes in the path, header lines ``name: value`` with printable ASCII only. Every
    head accepted here means the same to uvicorn's parser (httptools); all others are left
    to it (tests/api/test_fast_connection.py)."""
    end = data.find(b"\r\n\r\n")
    if end < 0 or end + 4 != len(data):
        return None
    line_end = data.find(b"\r\n")
    parts = data[:line_end].split(b" ")
    if len(parts) != 3 or parts[0] != b"GET" or parts[2] != b"HTTP/1.1":
        return None
    target = parts[1]
    if _TARGET.fullmatch(target) is None:
        return None
    block = data[line_end + 2 : end]  # the header lines (a client sends the same ones again)
    headers = _seen_heads.get(block, _UNSEEN)
    if headers is _UNSEEN:
        headers = _read_headers(block)
        if len(block) <= MAX_REMEMBERED_HEAD:
            if len(_seen_heads) >= MAX_REMEMBERED_HEADS:
                _seen_heads.clear()
            _seen_heads[block] = headers
    if headers is None:
        return None
    path, _, query = target.partition(b"?")
    return path, query, headers


def _read_headers(block: bytes) -> HeadLines | None:
    headers: list[tuple[bytes, bytes]] = []
    for line in block.split(b"\r\n") if block else ():
        name, colon, value = line.partition(b":")
        if not colon or _NAME.fullmatch(name) is None:
            return None
        value = value.lstrip(b" \t")
        if _VALUE.fullmatch(value) is None:
            return None
        name = name.lower()
        if name in _FRAMING:
            return None
        headers.append((name, value))
    return tuple(headers)


class FastLane:
    """The hottest read, ``GET /v1/namespaces/{ns}/facts?entity=E&key=K``, answered in front
    of the framework (no routing, request objects or middleware stack). It runs the route's
    own functions: the request guard, :func:`gate.enter` (the key, its scope, rates, the
    tenant's namespace), the operations table's call of the ``facts`` row, :func:`gate.failed`
    and the one error body, and the same request id, logs and metrics
    (``middleware.observed``). Anything else (other routes or parameters, tracing on) goes to
    the framework. bench/bench_http.py measures it against the route in the same run.

    :meth:`answer_head` goes one step further for uvicorn's httptools connection
    (``limits.guarded_protocol``): a plain request head arriving whole in one read is
    answered by the connection itself, with no ASGI task, request cycle or second write."""

    PREFIX, SUFFIX = "/v1/namespaces/", "/facts"

    def __init__(self, route: Route, db: Database, state: Any, metrics: Metrics) -> None:
        self.route, self.db, self.state, self.metrics = route, db, state, metrics

    def match(self, scope: Any) -> tuple[str, str, str] | None:
        path = scope["path"]
        if scope["method"] != "GET" or not (
            path.startswith(self.PREFIX) and path.endswith(self.SUFFIX)
        ):
            return None
        return self._args(path, scope["query_string"])

    async def serve(self, scope: Any, send: Any, args: tuple[str, str, str]) -> None:
        try:
            status, headers, body = self.respond(scope, args)
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        finally:
            scope["route"] = self.route

    def respond(self, scope: Any, args: tuple[str, str, str]) -> tuple[int, Headers, bytes]:
        """The answer's status, headers and body; the request counted in the metrics and the
        access log, its id on the log lines written meanwhile. ``scope`` needs only
        ``method``, ``path`` and ``headers``."""
        start = time.perf_counter()
        ctx = request_context(scope)[0]
        token = current.set(ctx)  # log lines written meanwhile carry the request id
        status = 500
        try:
            status, body, extra = self._answer(scope, *args)
            return (
                status,
                [
                    JSON_HEADERS,
                    (b"content-length", b"%d" % len(body)),
                    (b"x-request-id", ctx.request_id.encode()),
                    *extra,
                ],
                body,
            )
        finally:
            observed(self.metrics, scope, self.route.path, status, time.perf_counter() - start)
            current.reset(token)

    def answer_head(
        self, data: bytes, guard: RequestGuard, default_headers: Headers
    ) -> tuple[bytes, bool] | None:
        """The whole HTTP answer to ``data`` when it is one plain request head (read_head)
        for this lane that the request guard lets through, and whether the connection stays
        open after it; else None (the framework answers it). ``default_headers``: the
        server's (uvicorn's ``date``), written first as uvicorn writes them."""
        head = read_head(data)
        if head is None:
            return None
        raw_path, query, headers = head
        path = raw_path.decode("ascii")
        scope = {"method": "GET", "path": path, "headers": headers, "query_string": query}
        args = self._args(path, query)
        if args is None or guard.check(scope) is not None:
            return None
        status, answer_headers, body = self.respond(scope, args)
        keep = True
        out = [STATUS_LINES[status]]
        for name, value in (*default_headers, *answer_headers):
            name = name.lower()
            if name == b"connection" and b"close" in value.lower():
                keep = False
            out += (name, b": ", value, b"\r\n")
        out += (b"\r\n", body)
        return b"".join(out), keep

    def _args(self, path: str, query_string: bytes) -> tuple[str, str, str] | None:
        if not (path.startswith(self.PREFIX) and path.endswith(self.SUFFIX)):
            return None
        ns = path[len(self.PREFIX) : -len(self.SUFFIX)]
        if not ns or "/" in ns:
            return None
        entity = key = None
        query = query_string.decode("latin-1")
        escaped = "%" in query or "+" in query
        for pair in query.split("&"):
            name, eq, value = pair.partition("=")
            if escaped:  # the same decoding as the framework's (parse_qsl), when it matters
                name, value = unquote_plus(name), unquote_plus(value)
            if name == "entity" and entity is None and eq:
                entity = value
            elif name == "key" and key is None and eq:
                key = value
            else:  # as_of, repeats, anything else: the routed handler
                return None
        if entity is None or key is None:
            return None
        return ns, entity, key

    def _answer(
        self, scope: Any, ns: str, entity: str, key: str
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """The route's answer by the route's own steps (gate.enter, the ``facts`` row's
        call, gate.failed), with no request object."""
        internal = None
        try:
            auth = ""
            for name, value in scope["headers"]:
                if name == b"authorization":  # the first, as the framework's routes read it
                    auth = value.decode("latin-1")
                    break
            _, internal = enter(self.state, auth, FACTS.scope or "read", ns)
            fact = FACTS_CALL(self.db.namespace(internal), {"entity": entity, "key": key})
            return 200, encode(fact), []
        except Exception as exc:
            response = error_response(failed(exc, internal, ns, f"GET {scope['path']}"))
        extra = [
            (k, v) for k, v in response.raw_headers if k not in (b"content-type", b"content-length")
        ]
        return response.status_code, bytes(response.body), extra
