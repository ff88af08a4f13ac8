"""MCP on ``synapsedb serve``: streamable HTTP at ``POST /mcp``.

Each request goes through the server's own checks before the SDK sees it: the API key
(``Authorization: Bearer``; 401, and 429 over the key's or tenant's rate, counted like any
request), ``Content-Type: application/json`` (415: a web page cannot post to a local server
without the browser asking first), and the body read within the server's body deadline and
per-tenant limit (408, 413, 429). Then every tool call and resource read is authorized
again with the scope it needs (``read``, ``write``, ``admin`` for an erasure), the namespace it
names is mapped to the key's tenant (``namespaces are per tenant``), and the agent is the
request's ``X-Agent`` held to the key's agents: the same functions the REST routes call
(``synapsedb.server.auth``), so MCP and REST cannot disagree on who may do what.

The transport is stateless with JSON answers: no session outlives a request, so nothing one
tenant opens is shared with (or can exhaust a table used by) another, and a key revoked
between two calls is refused at the next. The MCP SDK is imported at the first request (a
server that never sees one does not pay for it); without the ``mcp`` extra, ``/mcp`` is 404
saying so.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from ...errors import ClosedError, NotFoundError, SynapseError
from ...server.auth import (
    agent_for,
    authenticate_header,
    engine_namespace,
    name_publicly,
    require_scope,
)
from ...server.limits import MAX_BODY
from ...server.wire import encoder, error_headers, read_raw, require_media_type
from .backend import Bound

__all__ = ["McpEndpoint", "ServedBackend", "rpc_error_response"]

NAMESPACE_PARAM = "namespace"  # /mcp?namespace=support: the calls' default namespace
# JSON-RPC error codes of the endpoint's own refusals: the MCP specification's for an unknown
# resource and JSON-RPC's invalid params; every other refusal (a bad or revoked key, a missing
# scope, a rate, a body over the limit) is -32000, JSON-RPC's first server-defined code.
RPC_CODES = {404: -32002, 422: -32602}
RPC_SERVER_ERROR = -32000


def rpc_error_response(err: SynapseError) -> Response:
    """The endpoint's refusal of a request before MCP sees it: the HTTP status and headers of
    ``err`` (401 with ``WWW-Authenticate``, 429 with ``Retry-After`` ...) and a JSON-RPC error
    body, so that an MCP client shows ``code: message`` instead of a bare status (the SDKs
    raise the JSON-RPC error of a non-2xx answer); ``data`` is the HTTP API's error body.
    The request is not read for its id: ``id`` is null, which JSON-RPC allows for an error
    found before the id was."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": RPC_CODES.get(err.http_status, RPC_SERVER_ERROR),
            "message": f"{err.code}: {err.message}",
            "data": {"error": err.to_dict()},
        },
    }
    return Response(
        encoder.encode(body),
        status_code=err.http_status,
        media_type="application/json",
        headers=error_headers(err),
    )


class _ServedBound(Bound):
    def publish(self, err: SynapseError) -> SynapseError:
        name_publicly(err, self.internal, self.public)  # never the tenant's internal name
        return err


class ServedBackend:
    """Namespaces of the server's database, as the HTTP request carrying a call allows."""

    default_namespace = "default"

    def bind(self, request: Any, namespace: str | None, scope: str) -> Bound:
        if not isinstance(request, Request):  # the endpoint only serves HTTP
            raise SynapseError("MCP over HTTP: the call arrived without its HTTP request")
        require_scope(request, scope)
        public = namespace
        if public is None:
            public = request.query_params.get(NAMESPACE_PARAM, self.default_namespace)
        internal = engine_namespace(request.state.key, public)
        agent = agent_for(request, request.headers.get("x-agent"))
        db = request.app.state.db
        return _ServedBound(db.namespace(internal, agent=agent), public, internal)


class McpEndpoint:
    """The ASGI app of ``/mcp``; ``running()`` belongs in the server's lifespan (it holds the
    task group the SDK's session manager runs in, started at the first request)."""

    def __init__(self) -> None:
        self._group: anyio.abc.TaskGroup | None = None
        self._manager: Any = None
        self._lock: anyio.Lock | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self._lock = anyio.Lock()
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = self._manager = None
                group.cancel_scope.cancel()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        try:
            key = authenticate_header(request.app.state, request.headers.get("authorization", ""))
            request.state.key = key  # what require_scope, agent_for and the body limit read
            request.state.ns = None
            require_media_type(request, "application/json")
            body = await read_raw(request, MAX_BODY)
            manager = await self._session_manager()
        except SynapseError as err:
            await rpc_error_response(err)(scope, receive, send)
            return
        await manager.handle_request(scope, _replay(body, receive), send)

    async def _session_manager(self) -> Any:
        if self._manager is not None:
            return self._manager
        if self._group is None or self._lock is None:
            raise ClosedError(
                "the MCP endpoint is not running (the app's lifespan has not started, or has ended)"
            )
        async with self._lock:
            if self._manager is None:
                try:  # in a thread: the SDK takes a second or two to import
                    server_mod = await anyio.to_thread.run_sync(
                        importlib.import_module, "synapsedb.integrations.mcp.server"
                    )
                    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
                except ImportError as exc:
                    raise NotFoundError(
                        "no route POST /mcp: the MCP endpoint needs the mcp "
                        f"extra (pip install 'synapsedb[mcp]'; {exc})"
                    ) from None
                manager = StreamableHTTPSessionManager(
                    app=server_mod.build_server(ServedBackend()),
                    json_response=True,
                    stateless=True,
                    max_request_body_size=MAX_BODY,
                )
                await self._group.start(_run, manager)
                self._manager = manager
        return self._manager


async def _run(manager: Any, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives the body already read, then waits on the connection."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
