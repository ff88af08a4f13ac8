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
import dataclasses
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any
from urllib.parse import unquote_plus

import msgspec
import numpy as np
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..engine import Database, Namespace
from ..engine.lifecycle import RateLimiter
from ..engine.lineage import WRITE_ACTIONS
from ..engine.namespace import MAX_LIMIT
from ..errors import (
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    QuotaExceededError,
    SynapseError,
    UnauthorizedError,
    ValidationError,
)
from ..times import to_datetime
from ..validation import check_entity, check_namespace
from .feed import ChangeFeed, Cursor, change_us, entry_json, matches
from .keys import SEP, ApiKey, KeyStore, tenant_namespace
from .metrics import Metrics
from .observe import RequestContext, Tracing, current, parse_traceparent, request_id_from
from .openapi import build_document, render_html

__all__ = ["create_app"]

log = logging.getLogger("synapsedb.server")

MAX_BODY = 8 * 1024 * 1024


def _enc(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, frozenset | set):
        return sorted(obj)
    raise TypeError(f"cannot encode {type(obj).__name__}")


_encoder = msgspec.json.Encoder(enc_hook=_enc)


def encode(value: Any) -> bytes:
    """A value object (or a list of them, or plain JSON values) as JSON bytes."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = _plain(value)
    elif isinstance(value, list):
        value = [_plain(v) if dataclasses.is_dataclass(v) else v for v in value]
    return _encoder.encode(value)


def json_response(value: Any, status: int = 200) -> Response:
    return Response(encode(value), status_code=status, media_type="application/json")


def _plain(obj: Any) -> Any:
    """A dataclass as a dict (QueryResult keeps its fields, not its list behaviour)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def error_response(err: SynapseError) -> Response:
    headers = {}
    if isinstance(err, QuotaExceededError) and "retry_after" in err.details:
        headers["Retry-After"] = str(max(1, round(err.details["retry_after"] + 0.5)))
    if isinstance(err, UnauthorizedError):
        headers["WWW-Authenticate"] = "Bearer"
    return Response(
        _encoder.encode({"error": err.to_dict()}),
        status_code=err.http_status,
        media_type="application/json",
        headers=headers,
    )


def authorize(request: Request, scope: str) -> ApiKey | None:
    """The request's API key, when the server has keys; raises 401/403/429 as it fits."""
    return _authorize(request.app.state, request.headers.get("authorization", ""), scope)


def _authorize(state: Any, header: str, scope: str) -> ApiKey | None:
    keys: KeyStore | None = state.keys
    if keys is None or not keys.enabled:
        return None
    token = header[7:].strip() if header.lower().startswith("bearer ") else ""
    key = keys.authenticate(token) if token else None
    if key is None:
        raise UnauthorizedError("a valid API key is required: Authorization: Bearer <key>")
    if scope not in key.scopes:
        raise ForbiddenError(f"this key lacks the {scope!r} scope", scope=scope)
    rates = state.rates
    rates.take(f"key:{key.id}", key.rate, what=f"key {key.id}: over {key.rate} requests/s")
    tenant_rate = keys.tenant_rate(key.tenant)
    rates.take(f"tenant:{key.tenant}", tenant_rate,
               what=f"tenant {key.tenant!r}: over {tenant_rate} requests/s")  # fmt: skip
    return key


def _require(request: Request, scope: str) -> None:
    key: ApiKey | None = request.state.key
    if key is not None and scope not in key.scopes:
        raise ForbiddenError(f"this key lacks the {scope!r} scope", scope=scope)


def _public(request: Request, obj: Any) -> Any:
    """Objects naming their namespace show the name the client used."""
    if hasattr(obj, "namespace"):
        return dataclasses.replace(obj, namespace=request.state.ns)
    return obj


async def _body(request: Request) -> dict[str, Any]:
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > MAX_BODY:
        raise PayloadTooLargeError(
            f"body: {size} bytes, over the limit of {MAX_BODY}", field="body", limit=MAX_BODY
        )
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise PayloadTooLargeError(
            f"body: over the limit of {MAX_BODY} bytes", field="body", limit=MAX_BODY
        )
    if not raw:
        return {}
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ValidationError(f"body: invalid JSON ({exc})", field="body") from None
    if not isinstance(body, dict):
        raise ValidationError("body: expected a JSON object", field="body")
    return body


def _int(request: Request, name: str, default: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValidationError(f"{name}: expected an integer, got {raw!r}", field=name) from None


def _limit(request: Request, default: int) -> int:
    value = _int(request, "limit", default)
    return default if value is None else value  # 0 and negatives reach the engine's checks


def _time(request: Request, name: str) -> str | float | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        return float(raw)  # epoch seconds
    except ValueError:
        return raw  # ISO-8601: the engine parses and validates


def _agent(request: Request, body: dict[str, Any] | None = None) -> str | None:
    if body is not None and body.get("agent") is not None:
        return body["agent"]  # type: ignore[no-any-return]
    return request.headers.get("x-agent")


Handler = Callable[[Request, Namespace], Awaitable[Response]]


def _engine_namespace(key: ApiKey | None, name: str) -> str:
    """The engine namespace a request for ``name`` means (per tenant once keys exist)."""
    name = check_namespace(name)
    if key is None:
        return name
    if key.namespaces is not None and name not in key.namespaces:
        raise ForbiddenError(f"this key cannot use namespace {name!r}")
    return tenant_namespace(key.tenant, name)


def _ns_route(path: str, handler: Handler, methods: list[str], scope: str) -> Route:
    async def endpoint(request: Request) -> Response:
        try:
            key = authorize(request, scope)
            db: Database = request.app.state.db
            name = request.path_params["ns"]
            internal = _engine_namespace(key, name)
            request.state.key, request.state.ns = key, name
            return await handler(request, db.namespace(internal))
        except SynapseError as err:
            return error_response(err)
        except (TypeError, ValueError) as exc:  # a JSON value of the wrong shape
            return error_response(ValidationError(f"body: {exc}", field="body"))
        except Exception:  # a bug: still one JSON error body, and the traceback in the log
            log.exception("unexpected error in %s %s", request.method, request.url.path)
            return error_response(SynapseError("internal error (logged on the server)"))

    return Route("/v1/namespaces/{ns}" + path, endpoint, methods=methods)


def _pick(body: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    for key in body:
        if key not in allowed:
            raise ValidationError(
                f"{key}: unknown field; allowed: {', '.join(sorted(allowed))}", field=key
            )
    return body


# -- memories ---------------------------------------------------------------------------------


async def write_memory(request: Request, mem: Namespace) -> Response:
    body = await _body(request)
    if "entity" not in body:
        raise ValidationError("entity: required", field="entity")
    entity = body.pop("entity")
    agent = _agent(request)
    m = await run_in_threadpool(mem.write, entity, body, agent=agent)
    return json_response(m, 201)


async def write_memories(request: Request, mem: Namespace) -> Response:
    body = _pick(await _body(request), {"items", "agent"})
    items = body.get("items")
    if not isinstance(items, list):
        raise ValidationError("items: expected a list of memories", field="items")
    out = await run_in_threadpool(mem.write_many, items, agent=_agent(request, body))
    return json_response(out, 201)


async def list_memories(request: Request, mem: Namespace) -> Response:
    types = request.query_params.getlist("types") or None
    out = mem.memories(
        request.query_params.get("entity"),
        types=types,
        as_of=_time(request, "as_of"),
        limit=_limit(request, 100),
    )
    return json_response(out)


async def get_memory(request: Request, mem: Namespace) -> Response:
    return json_response(mem.get(request.path_params["id"], as_of=_time(request, "as_of")))


async def update_memory(request: Request, mem: Namespace) -> Response:
    body = _pick(await _body(request), {"changes", "if_version", "agent"})
    out = await run_in_threadpool(
        mem.update, request.path_params["id"], body.get("changes", {}),
        if_version=body.get("if_version"), agent=_agent(request, body),
    )  # fmt: skip
    return json_response(out)


async def delete_memory(request: Request, mem: Namespace) -> Response:
    out = await run_in_threadpool(
        mem.delete, request.path_params["id"],
        if_version=_int(request, "if_version"), agent=_agent(request),
    )  # fmt: skip
    return json_response(out)


async def memory_history(request: Request, mem: Namespace) -> Response:
    return json_response(mem.history(request.path_params["id"], as_of=_time(request, "as_of")))


# -- KV facts ---------------------------------------------------------------------------------


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if value is None:
        raise ValidationError(f"{name}: required query parameter", field=name)
    return value


async def get_facts(request: Request, mem: Namespace) -> Response:
    entity = _required(request, "entity")
    key = request.query_params.get("key")
    as_of = _time(request, "as_of")
    if key is None:
        return json_response(mem.facts(entity, as_of=as_of))
    return json_response(mem.get(entity, key, as_of=as_of))


async def set_fact(request: Request, mem: Namespace) -> Response:
    body = _pick(await _body(request), {"entity", "key", "value", "if_version", "ttl", "agent"})
    for name in ("entity", "key", "value"):
        if name not in body:
            raise ValidationError(f"{name}: required", field=name)
    out = await run_in_threadpool(
        mem.set, body["entity"], body["key"], body["value"], if_version=body.get("if_version"),
        ttl=body.get("ttl"), agent=_agent(request, body),
    )  # fmt: skip
    return json_response(out)


async def delete_fact(request: Request, mem: Namespace) -> Response:
    out = await run_in_threadpool(
        mem.delete, _required(request, "entity"), _required(request, "key"),
        if_version=_int(request, "if_version"), agent=_agent(request),
    )  # fmt: skip
    return json_response(out)


async def fact_history(request: Request, mem: Namespace) -> Response:
    out = mem.history(
        _required(request, "entity"), _required(request, "key"), as_of=_time(request, "as_of")
    )
    return json_response(out)


# -- streams ----------------------------------------------------------------------------------


async def append_event(request: Request, mem: Namespace) -> Response:
    body = _pick(await _body(request), {"entity", "event", "stream", "searchable", "agent"})
    if "entity" not in body or "event" not in body:
        raise ValidationError("entity, event: required", field="entity" if "entity" not in body
                              else "event")  # fmt: skip
    out = await run_in_threadpool(
        mem.append, body["entity"], body["event"], stream=body.get("stream"),
        agent=_agent(request, body), searchable=body.get("searchable", True),
    )  # fmt: skip
    return json_response(out, 201)


async def read_events(request: Request, mem: Namespace) -> Response:
    q = request.query_params
    out = mem.events(
        _required(request, "stream"), start=q.get("start"), end=q.get("end"),
        after=q.get("after"), since=_time(request, "since"), until=_time(request, "until"),
        limit=_limit(request, 100), order=q.get("order", "asc"),  # type: ignore[arg-type]
        as_of=_time(request, "as_of"),
    )  # fmt: skip
    return json_response(out)


# -- query, lineage, lifecycle ----------------------------------------------------------------

QUERY_FIELDS = {"text", "embedding", "entity", "filter", "k", "mode", "as_of", "min_score",
                "types", "since", "until", "dedup", "explain", "agent", "tiers"}  # fmt: skip


async def query(request: Request, mem: Namespace) -> Response:
    body = _pick(await _body(request), QUERY_FIELDS)
    body["agent"] = _agent(request, body)
    text = body.pop("text", None)
    if text is None and body.get("embedding") is not None:
        # Nothing to embed: a sub-millisecond in-memory search, cheaper on the event loop than
        # the hop to a worker thread and back (the query log is written by the next commit).
        return json_response(mem.query(None, **body))
    out = await run_in_threadpool(lambda: mem.query(text, **body))
    return json_response(out)


async def record_answer(request: Request, mem: Namespace) -> Response:
    body = _pick(await _body(request), {"answer_id", "query_ids", "agent", "text", "cited"})
    if "answer_id" not in body or "query_ids" not in body:
        raise ValidationError("answer_id, query_ids: required", field="answer_id")
    out = await run_in_threadpool(
        mem.record_answer, body["answer_id"], body["query_ids"], agent=_agent(request, body),
        text=body.get("text"), cited=body.get("cited"),
    )  # fmt: skip
    return json_response(out, 201)


async def lineage(request: Request, mem: Namespace) -> Response:
    return json_response(await run_in_threadpool(mem.lineage, request.path_params["answer_id"]))


async def audit(request: Request, mem: Namespace) -> Response:
    q = request.query_params
    out = await run_in_threadpool(
        mem.audit, q.get("entity"), agent=q.get("agent"), since=_time(request, "since"),
        until=_time(request, "until"), limit=_limit(request, 1000),
    )  # fmt: skip
    return json_response(out)


async def snapshot(request: Request, mem: Namespace) -> Response:
    out = mem.snapshot(_required(request, "entity"), as_of=_time(request, "as_of"))
    return json_response(out)


async def forget(request: Request, mem: Namespace) -> Response:
    body = _pick(await _body(request), {"id", "entity", "purge", "agent"})
    if body.get("purge"):
        _require(request, "admin")
    out = await run_in_threadpool(
        mem.forget, body.get("id"), entity=body.get("entity"), purge=body.get("purge", False),
        agent=_agent(request, body),
    )  # fmt: skip
    return json_response(out)


async def maintain(request: Request, mem: Namespace) -> Response:
    body = _pick(await _body(request), {"dry_run"})
    out = await run_in_threadpool(mem.maintain, dry_run=body.get("dry_run", False))
    return json_response(_public(request, out))


async def follow_events(request: Request, mem: Namespace) -> Response:
    """Server-Sent Events: the stream's events after ``after`` (or the Last-Event-ID header),
    then each new one as it is appended; a comment line every 15 s keeps proxies open."""
    stream = _required(request, "stream")
    after = request.headers.get("last-event-id") or request.query_params.get("after")
    mem.events(stream, after=after, limit=1)  # validate the arguments before streaming
    poll = 0.1
    idle_timeout = _idle_timeout(request)

    async def feed() -> Any:
        last = after
        idle = quiet = 0.0
        while not await request.is_disconnected():
            batch = mem.events(stream, after=last, limit=500)
            for ev in batch:
                last = ev.id
                yield _sse(ev.id, "event", _plain(ev))
            if batch:
                idle = quiet = 0.0
                continue
            if idle_timeout is not None and quiet >= idle_timeout:
                return
            await asyncio.sleep(poll)
            idle += poll
            quiet += poll
            if idle >= 15:
                idle = 0.0
                yield b": keep-alive\n\n"

    return _event_stream(feed())


def _idle_timeout(request: Request) -> float | None:
    raw = request.query_params.get("idle_timeout")
    try:
        value = None if raw is None else float(raw)
    except ValueError:
        value = -1.0
    if value is not None and not 0 <= value < float("inf"):
        raise ValidationError(f"idle_timeout: expected seconds, got {raw!r}", field="idle_timeout")
    return value


def _event_stream(events: Any) -> StreamingResponse:
    """A Server-Sent Events answer from an async generator of encoded events."""
    return StreamingResponse(
        events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


def _sse(event_id: str, kind: str, value: Any) -> bytes:
    return f"id: {event_id}\nevent: {kind}\ndata: ".encode() + _encoder.encode(value) + b"\n\n"


async def follow_changes(request: Request, mem: Namespace) -> Response:
    """Server-Sent Events: every change committed in the namespace (memory writes, updates and
    deletes, fact sets and unsets, stream appends), optionally about one ``entity``; from now,
    from ``since`` (a time: history first), or after ``after`` / Last-Event-ID."""
    feed: ChangeFeed = request.app.state.feed
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    since = _time(request, "since")
    entity = request.query_params.get("entity")
    if entity is not None:
        entity = check_entity(entity)
    idle_timeout = _idle_timeout(request)
    public, ns = request.state.ns, mem.name
    db: Database = request.app.state.db
    # Taken before any replay: changes numbered after ``seq`` may also be in the replay, but
    # only those committed at or after ``fence`` (system time only moves forward).
    seq, fence = feed.seq, db.last_commit_us
    replay_from: str | float | int | datetime | None = since
    if raw:
        cursor = Cursor.parse(raw, "after")
        replay_from = to_datetime(cursor.sys_us)
        if cursor.boot == feed.boot and feed.after(ns, cursor.seq)[1]:
            seq, replay_from = cursor.seq, None  # exact: every later change is in the ring
    if replay_from is not None:
        mem.audit(entity, since=replay_from, limit=1)  # bad arguments: 422 before streaming
    seen: set[tuple[str, str, int | None]] = set()

    async def history() -> Any:
        """The durable history from ``replay_from``, a page of the audit trail at a time."""
        t, boundary = replay_from, set()
        while True:
            page = await run_in_threadpool(mem.audit, entity, since=t, limit=MAX_LIMIT)
            for entry in page:
                key = (entry.action, entry.target, entry.version)
                if entry.action in WRITE_ACTIONS and key not in boundary:
                    if change_us(entry) >= fence:
                        seen.add(key)
                    yield entry
            if len(page) < MAX_LIMIT:
                return
            t = page[-1].at  # the next page starts at the last instant, minus what was sent
            boundary = {(e.action, e.target, e.version) for e in page if e.at == t}
            if page[0].at == t:  # a whole page in one microsecond: step past it
                t, boundary = to_datetime(change_us(page[-1]) + 1), set()

    async def changes() -> Any:
        last = seq
        if replay_from is not None:  # resuming from these ids replays from history again
            async for entry in history():
                yield _sse(f"{change_us(entry)}-r-0", "change", entry_json(entry, public))
        quiet = keep_alive = 0.0
        while not await request.is_disconnected():
            items, complete, newest = feed.after(ns, last)
            if not complete:
                return  # fell behind the ring: the client resumes from its last id (history)
            sent = False
            for n, entry in items:
                if (entry.action, entry.target, entry.version) in seen:
                    continue
                if matches(entry, entity):
                    sent = True
                    yield _sse(feed.cursor(n, entry), "change", entry_json(entry, public))
            last = newest
            if sent:
                quiet = keep_alive = 0.0
                continue
            if idle_timeout is not None and quiet >= idle_timeout:
                return
            wait = 1.0 if idle_timeout is None else min(1.0, max(idle_timeout - quiet, 0.01))
            started = time.monotonic()
            await feed.wait(last, wait)  # woken by the next commit; 1 s to notice a disconnect
            waited = time.monotonic() - started
            quiet += waited
            keep_alive += waited
            if keep_alive >= 15:
                keep_alive = 0.0
                yield b": keep-alive\n\n"

    return _event_stream(changes())


async def export_ns(request: Request, mem: Namespace) -> Response:
    records = await run_in_threadpool(lambda: list(mem.export()))

    def lines() -> Any:
        for rec in records:
            yield _encoder.encode(rec) + b"\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def import_ns(request: Request, mem: Namespace) -> Response:
    raw = await request.body()  # admin only; no 8 MiB cap: a namespace can be large
    try:
        records = [msgspec.json.decode(line) for line in raw.splitlines() if line.strip()]
    except msgspec.DecodeError as exc:
        raise ValidationError(f"body: not JSON lines ({exc})", field="body") from None
    n = await run_in_threadpool(mem.import_records, records)
    return json_response({"imported": n}, 201)


async def get_config(request: Request, mem: Namespace) -> Response:
    return json_response(mem.config)


async def set_config(request: Request, mem: Namespace) -> Response:
    body = await _body(request)
    return json_response(await run_in_threadpool(lambda: mem.configure(**body)))


async def entities(request: Request, mem: Namespace) -> Response:
    return json_response(mem.entities(as_of=_time(request, "as_of")))


async def streams(request: Request, mem: Namespace) -> Response:
    return json_response(mem.streams(as_of=_time(request, "as_of")))


async def stats(request: Request, mem: Namespace) -> Response:
    return json_response(_public(request, mem.stats()))


# -- service routes ---------------------------------------------------------------------------


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


class _Warmup:
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
    """Ready: storage open and the embedding model in memory (503 while loading or broken)."""
    db: Database = request.app.state.db
    if db.closed:
        return json_response({"status": "closed"}, 503)
    warmup: _Warmup = request.app.state.warmup
    if not db.embedding.loaded:
        warmup.start()
        if warmup.error is not None:
            return json_response({"status": "model_failed", "error": warmup.error}, 503)
        return json_response({"status": "loading_model"}, 503)
    return json_response(
        {"status": "ready", "namespaces": len(db.namespaces()),
         "indexing_rows_pending": db.indexing_pending}
    )  # fmt: skip


async def openapi(request: Request) -> Response:
    return Response(request.app.state.openapi, media_type="application/json")


async def docs(request: Request) -> Response:
    return Response(request.app.state.docs_html, media_type="text/html; charset=utf-8")


async def metrics(request: Request) -> Response:
    try:
        authorize(request, "admin")  # its labels name namespaces: operators only, once keys exist
    except SynapseError as err:
        return error_response(err)
    m: Metrics = request.app.state.metrics
    return Response(m.render(), media_type=Metrics.CONTENT_TYPE)


access_log = logging.getLogger("synapsedb.access")

_JSON_HEADERS = (b"content-type", b"application/json")


class _FastLane:
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
        ctx = _context(scope)[0]
        token = current.set(ctx)  # log lines written meanwhile carry the request id
        status = 500
        try:
            status, body, headers = self._answer(scope, *args)
            await send({"type": "http.response.start", "status": status,
                        "headers": [_JSON_HEADERS, (b"content-length", str(len(body)).encode()),
                                    (b"x-request-id", ctx.request_id.encode()), *headers]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})
        finally:
            scope["route"] = self.route
            _observed(self.metrics, scope, self.route.path, status, time.perf_counter() - start)
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
                if name == b"authorization":
                    auth = value.decode("latin-1")
            api_key = _authorize(self.state, auth, "read")
            fact = self.db.namespace(_engine_namespace(api_key, ns)).get(entity, key)
            return 200, _encoder.encode(fact), []  # a Fact encodes as its fields
        except SynapseError as err:
            response = error_response(err)
        except (TypeError, ValueError) as exc:
            response = error_response(ValidationError(f"query: {exc}", field="query"))
        except Exception:  # a bug: still one JSON error body, and the traceback in the log
            log.exception("unexpected error in GET %s", scope["path"])
            response = error_response(SynapseError("internal error (logged on the server)"))
        extra = [(k, v) for k, v in response.raw_headers if k not in (b"content-type",
                                                                        b"content-length")]  # fmt: skip
        return response.status_code, bytes(response.body), extra


class _Observe:
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
        ctx, parent, state = _context(scope)
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
            _observed(self.metrics, scope, path, status, time.perf_counter() - start)
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
                otel_context.detach(otel_token)
            current.reset(token)


def _context(scope: Any) -> tuple[RequestContext, str | None, str | None]:
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


def _observed(metrics: Metrics, scope: Any, route: str, status: int, seconds: float) -> None:
    """After a request: its latency in the metrics and, at INFO, an access log line."""
    metrics.request_timer(route, scope["method"], status).observe(seconds)
    if access_log.isEnabledFor(logging.INFO):
        access_log.info(
            "%s %s %d", scope["method"], scope["path"], status,
            extra={"method": scope["method"], "path": scope["path"], "route": route,
                   "status": status, "duration_ms": round(seconds * 1000, 3)},
        )  # fmt: skip


class App(Starlette):
    """The framework app, with the fast lane in front of everything it does."""

    fast: _FastLane | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        fast = self.fast
        if fast is not None and scope["type"] == "http" and (args := fast.match(scope)):
            await fast.serve(scope, send, args)
            return
        await super().__call__(scope, receive, send)


async def list_namespaces(request: Request) -> Response:
    try:
        key = authorize(request, "read")
    except SynapseError as err:
        return error_response(err)
    names = request.app.state.db.namespaces()
    if key is None:
        return json_response([n for n in names if SEP not in n])
    prefix = key.tenant + SEP
    mine = [n[len(prefix) :] for n in names if n.startswith(prefix)]
    if key.namespaces is not None:
        mine = [n for n in mine if n in key.namespaces]
    return json_response(mine)


async def not_found(request: Request, exc: Exception) -> Response:
    return error_response(NotFoundError(f"no route {request.method} {request.url.path}"))


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    err = ValidationError(f"method {request.method} is not allowed on {request.url.path}")
    return Response(_encoder.encode({"error": {**err.to_dict(), "code": "method_not_allowed"}}),
                    status_code=405, media_type="application/json")  # fmt: skip


def create_app(db: Database, keys: KeyStore | None = None, tracing: Tracing | None = None) -> App:
    """The ASGI app over ``db``. With a ``keys`` store holding live keys, every /v1 request
    needs one (tenants are isolated); without, access is open (the CLI then binds loopback).
    ``tracing`` (off by default) exports OpenTelemetry spans; the app shuts it down."""
    tracing = tracing or Tracing()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            app.state.metrics.detach()
            app.state.feed.detach()
            if tracing.enabled:
                db.observers.query.remove(tracing.query_stages)
            tracing.shutdown()

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"], include_in_schema=False),
        Route("/docs", docs, methods=["GET"], include_in_schema=False),
        Route("/v1/namespaces", list_namespaces, methods=["GET"]),
        _ns_route("/memories", write_memory, ["POST"], "write"),
        _ns_route("/memories", list_memories, ["GET"], "read"),
        _ns_route("/memories:batch", write_memories, ["POST"], "write"),
        _ns_route("/memories/{id}", get_memory, ["GET"], "read"),
        _ns_route("/memories/{id}", update_memory, ["PATCH"], "write"),
        _ns_route("/memories/{id}", delete_memory, ["DELETE"], "write"),
        _ns_route("/memories/{id}/history", memory_history, ["GET"], "read"),
        _ns_route("/facts", get_facts, ["GET"], "read"),
        _ns_route("/facts", set_fact, ["PUT"], "write"),
        _ns_route("/facts", delete_fact, ["DELETE"], "write"),
        _ns_route("/facts/history", fact_history, ["GET"], "read"),
        _ns_route("/events", append_event, ["POST"], "write"),
        _ns_route("/events", read_events, ["GET"], "read"),
        _ns_route("/events/follow", follow_events, ["GET"], "read"),
        _ns_route("/changes", follow_changes, ["GET"], "read"),
        _ns_route("/query", query, ["POST"], "read"),
        _ns_route("/answers", record_answer, ["POST"], "write"),
        _ns_route("/answers/{answer_id}/lineage", lineage, ["GET"], "read"),
        _ns_route("/audit", audit, ["GET"], "read"),
        _ns_route("/snapshot", snapshot, ["GET"], "read"),
        _ns_route("/forget", forget, ["POST"], "write"),
        _ns_route("/maintain", maintain, ["POST"], "admin"),
        _ns_route("/export", export_ns, ["GET"], "admin"),
        _ns_route("/import", import_ns, ["POST"], "admin"),
        _ns_route("/config", get_config, ["GET"], "read"),
        _ns_route("/config", set_config, ["PUT"], "admin"),
        _ns_route("/entities", entities, ["GET"], "read"),
        _ns_route("/streams", streams, ["GET"], "read"),
        _ns_route("/stats", stats, ["GET"], "read"),
    ]
    app = App(
        routes=routes,
        exception_handlers={404: not_found, 405: method_not_allowed},
        lifespan=lifespan,
    )
    documented = [(m, r.path) for r in routes if r.include_in_schema
                  for m in sorted(r.methods or ()) if m != "HEAD"]  # fmt: skip
    document = build_document(documented)
    app.state.openapi = _encoder.encode(document)
    app.state.docs_html = render_html(document)
    app.state.metrics = Metrics(db)
    if tracing.enabled:
        db.observers.query.append(tracing.query_stages)
    app.add_middleware(_Observe, metrics=app.state.metrics, tracing=tracing)
    if not tracing.enabled:  # spans are made on the framework's path
        facts_get = next(r for r in routes if isinstance(r, Route) and r.path.endswith("/facts")
                         and "GET" in (r.methods or ()))  # fmt: skip
        app.fast = _FastLane(facts_get, db, app.state, app.state.metrics)
    app.state.db = db
    app.state.feed = ChangeFeed(db)
    app.state.warmup = _Warmup(db)
    app.state.warmup.start()
    app.state.keys = keys
    app.state.rates = RateLimiter()
    return app
