"""Service routes outside the namespaces: health, readiness, metrics, the API document,
and the list of namespaces a caller may see."""

from __future__ import annotations

import logging
import threading
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...engine import Database
from ...errors import (
    ForbiddenError,
    SynapseError,
)
from ..auth import authenticate_header, authorize, is_operator, visible_namespaces
from ..metrics import Metrics
from ..wire import (
    error_response,
    json_response,
)

log = logging.getLogger("synapsedb.server")

# -- service routes ---------------------------------------------------------------------------


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


class Warmup:
    """Loads the embedding model once, in a thread, so /readyz can say when it is in memory."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.error: str | None = None
        self._started = False
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._started or self.db.embedding.loaded:
                return
            self._started = True
        threading.Thread(target=self._run, name="synapsedb-warmup", daemon=True).start()

    def _run(self) -> None:
        try:
            _ = self.db.embedding.model
        except Exception as exc:  # reported by /readyz; queries then fail with the same cause
            log.exception("embedding model failed to load")
            self.error = f"{type(exc).__name__}: {exc}"


async def readyz(request: Request) -> Response:
    """Ready: storage open and the embedding model in memory (503 while loading or broken).
    How many rows wait for indexing is server-wide, so with keys only an operator sees it;
    how many namespaces exist is never said (it would count other tenants'). The operator's
    view adds whether an erasure waits for its WAL truncation and the namespaces that could not
    be loaded, each with its repair."""
    db: Database = request.app.state.db
    if db.closed:
        return json_response({"status": "closed"}, 503)
    warmup: Warmup = request.app.state.warmup
    if not db.embedding.loaded:
        warmup.start()
        if warmup.error is not None:
            return json_response({"status": "model_failed", "error": warmup.error}, 503)
        return json_response({"status": "loading_model"}, 503)
    if request.app.state.auth == "keys":
        try:
            key = authenticate_header(request.app.state, request.headers.get("authorization", ""))
        except SynapseError:  # a probe without a key is still told whether the server is ready
            key = None
        if not is_operator(key):
            return json_response(
                {
                    "status": "ready",
                    "llm": _loop_status(db).get("llm"),
                    "proxy": request.app.state.proxy.status()["upstream"],
                }
            )
    # ready while namespaces still load (each loads at its first request): the operator is
    # told how many wait, and the bad ones found so far; nothing here waits for the rest
    return json_response(
        {
            "status": "ready",
            "indexing_rows_pending": db.indexing_pending,
            "erasure_pending": db.erasure_pending,
            "namespaces_loading": db.loading_pending,
            "unavailable_namespaces": db.unavailable_namespaces(load=False),
            "memory_loop": _loop_status(db),
            "proxy": request.app.state.proxy.status(),
        }
    )


def _loop_status(db: Database) -> dict[str, Any]:
    """The memory loop's state: its LLM (``absent``, ``ok``, ``unavailable``) and queue. Ready
    either way: without an LLM turns are stored and extraction waits (docs/memory-loop.md)."""
    status = getattr(db.memory_loop, "status", None)
    return status() if status is not None else {"llm": "absent"}


async def openapi(request: Request) -> Response:
    return Response(request.app.state.openapi, media_type="application/json")


async def docs(request: Request) -> Response:
    return Response(request.app.state.docs_html, media_type="text/html; charset=utf-8")


async def metrics(request: Request) -> Response:
    """Everything for an operator key (and in ``none`` mode, less tenants' namespaces); for a
    tenant's ``admin`` key, only the memories of its own namespaces, by its names."""
    state = request.app.state
    m: Metrics = state.metrics
    try:
        key = authenticate_header(state, request.headers.get("authorization", ""))
        if key is None:
            body = m.render(lambda names: visible_namespaces(None, names))
        elif is_operator(key):
            body = m.render()
        elif "admin" in key.scopes:
            body = m.render(lambda names: visible_namespaces(key, names), server_wide=False)
        else:
            raise ForbiddenError("this key lacks the 'admin' scope (or 'operator')", scope="admin")
    except SynapseError as err:
        return error_response(err)
    return Response(body, media_type=Metrics.CONTENT_TYPE)


async def list_namespaces(request: Request) -> Response:
    try:
        key = authorize(request, "read")
    except SynapseError as err:
        return error_response(err)
    names = request.app.state.db.namespaces()
    return json_response(sorted(visible_namespaces(key, names).values()))
