"""The fast lane: the hottest read answered in front of the web framework (see FastLane)."""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import unquote_plus

from starlette.routing import Route

from ..engine import Database
from ..errors import SynapseError
from .auth import authorize_header, engine_namespace, name_publicly
from .metrics import Metrics
from .middleware import observed, request_context
from .observe import current
from .wire import (
    encoder,
    error_response,
)

log = logging.getLogger("synapsedb.server")

JSON_HEADERS = (b"content-type", b"application/json")


class FastLane:
    """The hottest read, ``GET /v1/namespaces/{ns}/facts?entity=E&key=K``, answered in front
    of the framework (no routing, request objects or middleware stack: about twice the
    requests per second on one core). Same checks as the routed handler (the key, its scope,
    namespace and rate, the tenant's namespace, validation, the one error shape) and the same
    request id, logs and metrics. Anything else (other routes or parameters, tracing on) goes
    to the framework."""

    PREFIX, SUFFIX = "/v1/namespaces/", "/facts"

    def __init__(self, route: Route, db: Database, state: Any, metrics: Metrics) -> None:
        self.route, self.db, self.state, self.metrics = route, db, state, metrics

    def match(self, scope: Any) -> tuple[str, str, str] | None:
        path = scope["path"]
        if scope["method"] != "GET" or not (
            path.startswith(self.PREFIX) and path.endswith(self.SUFFIX)
        ):
            return None
        return self._args(scope)

    async def serve(self, scope: Any, send: Any, args: tuple[str, str, str]) -> None:
        start = time.perf_counter()
        ctx = request_context(scope)[0]
        token = current.set(ctx)  # log lines written meanwhile carry the request id
        status = 500
        try:
            status, body, headers = self._answer(scope, *args)
            await send({"type": "http.response.start", "status": status,
                        "headers": [JSON_HEADERS, (b"content-length", str(len(body)).encode()),
                                    (b"x-request-id", ctx.request_id.encode()), *headers]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})
        finally:
            scope["route"] = self.route
            observed(self.metrics, scope, self.route.path, status, time.perf_counter() - start)
            current.reset(token)

    def _args(self, scope: Any) -> tuple[str, str, str] | None:
        ns = scope["path"][len(self.PREFIX) : -len(self.SUFFIX)]
        if not ns or "/" in ns:
            return None
        entity = key = None
        query = scope["query_string"].decode("latin-1")
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
        try:
            auth = ""
            for name, value in scope["headers"]:
                if name == b"authorization":  # the first, as the framework's routes read it
                    auth = value.decode("latin-1")
                    break
            api_key = authorize_header(self.state, auth, "read")
            internal = engine_namespace(api_key, ns)
            try:
                fact = self.db.namespace(internal).get(entity, key)
            except SynapseError as err:
                name_publicly(err, internal, ns)  # as the routed handler does
                raise
            return 200, encoder.encode(fact), []  # a Fact encodes as its fields
        except SynapseError as err:
            response = error_response(err)
        except Exception:  # a bug (bad input is a SynapseError): still one JSON error body,
            # and the traceback in the log
            log.exception("unexpected error in GET %s", scope["path"])
            response = error_response(SynapseError("internal error (logged on the server)"))
        extra = [(k, v) for k, v in response.raw_headers if k not in (b"content-type",
                                                                        b"content-length")]  # fmt: skip
        return response.status_code, bytes(response.body), extra
