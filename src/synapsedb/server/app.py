"""The HTTP JSON API: ``create_app(db)`` returns an ASGI app over an open Database.

Routes are thin: they parse the request, call the same Namespace methods as embedded use, and
encode the same value objects (msgspec: fast, and dataclasses and datetimes as they are). Every
error leaves as one JSON body ``{"error": {"code", "message", "details"}}`` with the status of
its class in the error tree; bad input is a 4xx and changes nothing.

Pure in-memory reads run on the event loop; writes and queries (which wait for a commit or
embed text) run in the thread pool, so concurrent writers share group commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from ..config import LLMSettings
from ..engine import Database, Namespace
from ..engine.lifecycle import RateLimiter
from ..errors import (
    MethodNotAllowedError,
    NotFoundError,
    SynapseError,
    ValidationError,
)
from ..surface import OPERATIONS, Operation
from .auth import AUTH_MODES, AuthMode
from .fastlane import FastLane
from .feed import ChangeFeed, FeedLimit
from .forward import Forwarder
from .gate import enter, failed
from .keys import KeyStore
from .limits import Limits
from .metrics import Metrics, PlacementMetrics
from .middleware import Observe, RequestGuard, observed
from .observe import Tracing
from .openapi import build_document, render_html
from .plain import plain_handler
from .proxy import Proxy, ProxyMetrics, openai_error
from .routes import admin, feeds, proxy, service, sessions
from .routes.console import Console, whoami
from .wire import encoder, error_response

__all__ = ["create_app"]

log = logging.getLogger("synapsedb.server")

Handler = Callable[[Request, Namespace], Awaitable[Response]]


def _ns_route(
    path: str,
    handler: Handler,
    methods: list[str],
    scope: str,
    *,
    errors: Callable[[SynapseError], Response] = error_response,
    prefix: str = "/v1/namespaces/{ns}",  # "": ``path`` is the whole path
) -> Route:
    """A route over one namespace: the key authorized for ``scope``, the tenant's namespace
    resolved (the path's ``{ns}``, or without one the proxy's default namespace), errors
    answered by ``errors`` (the one JSON error body; OpenAI's shape on the proxy routes)."""

    async def endpoint(request: Request) -> Response:
        internal = name = None
        try:
            db: Database = request.app.state.db
            name = request.path_params.get("ns") or request.app.state.proxy.namespace
            key, internal = enter(
                request.app.state, request.headers.get("authorization", ""), scope, name
            )
            request.state.key, request.state.ns = key, name
            owner = db.core.owner_of(internal)  # sharded placement: None when served here
            if owner is not None:
                return await _elsewhere(request, handler, internal, owner)
            return await handler(request, db.namespace(internal))
        except Exception as exc:  # the one error body (gate.failed), a bug's traceback logged
            return errors(failed(exc, internal, name, f"{request.method} {request.url.path}"))

    return Route(prefix + path, endpoint, methods=methods)


async def _elsewhere(request: Request, handler: Handler, ns: str, owner: str) -> Response:
    """A request for a namespace another process owns: forwarded to it once (forward.py);
    NotOwnerError while nobody owns it, or after one hop already."""
    forwarder: Forwarder | None = request.app.state.forwarder
    placement = request.app.state.db.core.placement
    if not owner or Forwarder.hops(request):  # the share moved lately: look again, once
        await run_in_threadpool(placement.look)
        owner = placement.owner_of(ns)
        if owner is None:  # (it is this process's after all)
            return await handler(request, request.app.state.db.namespace(ns))
    if not owner or forwarder is None or Forwarder.hops(request):
        raise placement.not_owner(ns, owner)
    return await forwarder.forward(request, ns, owner)


def _proxy_route(path: str, handler: Handler) -> Route:
    """A memory proxy route: OpenAI's error shape; it stores turns, so it needs ``write``."""
    return _ns_route(path, handler, ["POST"], "write", errors=openai_error, prefix="")


# the rows of the operations table whose handlers are written by hand: live feeds, JSON lines,
# a session load with what its strategy did, the memory proxy, and the service's own routes
OWN: dict[str, Callable[..., Awaitable[Response]]] = {
    "follow": feeds.follow_events,
    "changes": feeds.follow_changes,
    "export": admin.export_ns,
    "import_records": admin.import_ns,
    "sessions.load": sessions.load,
    "proxy.chat_completions": proxy.chat_completions,
    "proxy.responses": proxy.responses,
    "proxy.default_chat_completions": proxy.chat_completions,
    "proxy.default_responses": proxy.responses,
    "healthz": service.healthz,
    "readyz": service.readyz,
    "metrics": service.metrics,
    "namespaces": service.list_namespaces,
    "whoami": whoami,
}


def _route(op: Operation) -> Route:
    """The route of one row of the operations table: its plain handler (or its own), behind
    the namespace's checks when it is under a namespace."""
    handler = OWN[op.name] if op.handler == "own" else plain_handler(op)
    if op.name.startswith("proxy."):
        return _proxy_route(op.route, handler)
    if op.namespaced:
        assert op.scope is not None, op.name
        return _ns_route(op.path, handler, [op.method], op.scope)
    return Route(op.path, handler, methods=[op.method])


class App(Starlette):
    """The framework app, with the request guard and then the fast lane in front of
    everything it does."""

    fast: FastLane | None = None
    guard: RequestGuard = RequestGuard()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (err := self.guard.check(scope)) is not None:
            start = time.perf_counter()
            await error_response(err)(scope, receive, send)
            observed(
                self.state.metrics, scope, "unmatched", err.http_status, time.perf_counter() - start
            )
            return
        fast = self.fast
        if fast is not None and scope["type"] == "http" and (args := fast.match(scope)):
            await fast.serve(scope, send, args)
            return
        await super().__call__(scope, receive, send)


async def not_found(request: Request, exc: Exception) -> Response:
    return error_response(NotFoundError(f"no route {request.method} {request.url.path}"))


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    allowed = sorted(
        {
            m
            for route in request.app.routes
            if isinstance(route, Route) and route.matches(request.scope)[0] is not Match.NONE
            for m in route.methods or ()
        }
    )
    return error_response(
        MethodNotAllowedError(
            f"method {request.method} is not allowed on {request.url.path}; allowed: "
            f"{', '.join(allowed)}",
            allowed=allowed,
        )
    )


def create_app(
    db: Database,
    keys: KeyStore | None = None,
    tracing: Tracing | None = None,
    *,
    auth: AuthMode | None = None,
    max_feeds_per_key: int = 32,
    limits: Limits | None = None,
    allowed_hosts: Iterable[str] | None = None,
    llm: LLMSettings | None = None,
    proxy_namespace: str = "default",
    fast_lane: bool = True,
) -> App:
    """The ASGI app over ``db``. ``auth`` is decided here, once: ``keys`` (the default when a
    ``keys`` store is given) makes every /v1 request need a live key of that store, and with
    none live every request is 401 (tenants are isolated); ``none`` (the default without a
    store) checks nothing and refuses tenants' ``..`` names (the CLI then binds loopback).
    ``max_feeds_per_key`` caps each key's live feeds. ``tracing`` (off by default) exports
    OpenTelemetry spans; the app shuts it down. ``limits`` holds the body deadline (its
    connection limits are the server's: ``Limits.uvicorn_options``); ``allowed_hosts`` the
    Host names served (None: any; the CLI gives loopback servers their loopback names).
    ``llm`` is the upstream model of the memory proxy (``.../chat/completions``,
    ``.../responses``: docs/proxy.md; none: those routes answer 503), ``proxy_namespace`` the
    namespace of ``/v1/chat/completions`` and ``/v1/responses``. ``fast_lane`` (on unless
    tracing is) answers ``GET .../facts?entity=&key=`` in front of the framework, through the
    same checks (fastlane.py); off, the route answers it (bench/bench_http.py compares)."""
    auth = auth or ("none" if keys is None else "keys")
    if auth not in AUTH_MODES:
        raise ValidationError(f"auth: expected keys or none, got {auth!r}", field="auth")
    if auth == "keys" and keys is None:
        raise ValidationError("auth: 'keys' needs a KeyStore", field="auth")
    feed_limit = FeedLimit(max_feeds_per_key)
    tracing = tracing or Tracing()
    memory_proxy = Proxy(db, llm, namespace=proxy_namespace)
    from ..integrations.mcp.http import McpEndpoint  # it imports .auth: not at module level

    mcp = McpEndpoint()  # MCP's streamable HTTP (docs/integrations/mcp.md)
    console = Console()  # the web console's files (docs/console.md)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with mcp.running():
                yield
        finally:
            await memory_proxy.aclose()
            if app.state.forwarder is not None:
                await app.state.forwarder.aclose()
            app.state.metrics.detach()
            app.state.feed.detach()
            if tracing.enabled:
                db.observers.query.remove(tracing.query_stages)
            tracing.shutdown()

    routes = [
        Route("/openapi.json", service.openapi, methods=["GET"], include_in_schema=False),
        Route("/docs", service.docs, methods=["GET"], include_in_schema=False),
        Route("/ui", console.page, methods=["GET"], include_in_schema=False),  # the web console
        Route("/ui/{asset}", console.asset, methods=["GET"], include_in_schema=False),
        *(_route(op) for op in OPERATIONS),
        Route("/mcp", mcp, methods=["POST"], include_in_schema=False),  # auth: McpEndpoint
    ]
    app = App(
        routes=routes,
        exception_handlers={404: not_found, 405: method_not_allowed},
        lifespan=lifespan,
    )
    document = build_document(OPERATIONS)
    app.state.openapi = encoder.encode(document)
    app.state.docs_html = render_html(document)
    app.state.metrics = Metrics(db)
    app.state.metrics.registry.register(PlacementMetrics(db, app.state))
    app.state.metrics.registry.register(ProxyMetrics(memory_proxy))
    if tracing.enabled:
        db.observers.query.append(tracing.query_stages)
    app.add_middleware(Observe, metrics=app.state.metrics, tracing=tracing)
    placement = db.core.placement
    # sharded placement: requests for the others' namespaces go to them (forward.py)
    app.state.forwarder = Forwarder(placement.address) if placement is not None else None
    if fast_lane and not tracing.enabled and placement is None:  # spans are made on the
        # framework's path; with sharded placement every request first asks who owns it
        facts_get = next(
            r
            for r in routes
            if isinstance(r, Route) and r.path.endswith("/facts") and "GET" in (r.methods or ())
        )
        app.fast = FastLane(facts_get, db, app.state, app.state.metrics)
    app.state.db = db
    app.state.proxy = memory_proxy
    app.state.feed = ChangeFeed(db)
    app.state.warmup = service.Warmup(db)
    app.state.warmup.start()
    app.state.keys = keys
    app.state.auth = auth
    app.state.feed_limit = feed_limit
    app.state.limits = limits or Limits()
    app.state.import_slot = asyncio.Semaphore(1)  # imports hold their records in memory
    app.state.body_reads = {}  # tenant -> request bodies being received (wire.read_raw)
    app.guard = RequestGuard(allowed_hosts)
    app.state.rates = RateLimiter()
    return app
