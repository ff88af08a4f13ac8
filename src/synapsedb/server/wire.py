"""Wire encoding and request parsing shared by every route: value objects as JSON (msgspec),
the one error body, Server-Sent Events frames, and the checked readers of bodies and query
parameters (bad input is a 422 naming the field)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import msgspec
import numpy as np
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from ..errors import (
    MethodNotAllowedError,
    NotOwnerError,
    PayloadTooLargeError,
    QuotaExceededError,
    RequestTimeoutError,
    SynapseError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
    ValidationError,
)
from ..types import Memory, Snapshot
from .auth import agent_for
from .limits import MAX_BODY, MAX_CURSOR_CHARS, MAX_DEPTH, Limits


def enc_hook(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, frozenset | set):
        return sorted(obj)
    raise TypeError(f"cannot encode {type(obj).__name__}")


encoder = msgspec.json.Encoder(enc_hook=enc_hook)


def encode(value: Any) -> bytes:
    """A value object (or a list of them, or plain JSON values) as JSON bytes."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = plain(value)
    elif isinstance(value, list):
        value = [plain(v) if dataclasses.is_dataclass(v) else v for v in value]
    return encoder.encode(value)


def json_response(value: Any, status: int = 200) -> Response:
    return Response(encode(value), status_code=status, media_type="application/json")


def plain(obj: Any) -> Any:
    """A dataclass as a dict (QueryResult keeps its fields, not its list behaviour)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


# -- lean answers: a memory's vector only when asked for (``?include=embedding``) ------------

INCLUDE = ("embedding",)  # what ``include`` may name
_LEAN_FIELDS = tuple(f.name for f in dataclasses.fields(Memory) if f.name != "embedding")


def include_param(request: Request) -> frozenset[str]:
    """The ``include`` query parameter: what an answer adds to its lean default. Repeated or
    comma-separated (``include=embedding``); anything else is a 422 naming ``include``."""
    out: set[str] = set()
    for raw in request.query_params.getlist("include"):
        for part in raw.split(","):
            name = part.strip()
            if name not in INCLUDE:
                raise ValidationError(
                    f"include: expected one of {', '.join(INCLUDE)}, got {name!r}",
                    field="include",
                )  # fmt: skip
            out.add(name)
    return frozenset(out)


def lean(value: Any) -> Any:
    """``value`` (a Memory, a list of them, a Snapshot) with every memory's vector left out:
    384 floats are about 8 KB of JSON, which a caller rarely wants back."""
    if isinstance(value, Memory):
        return {name: getattr(value, name) for name in _LEAN_FIELDS}
    if isinstance(value, list):
        return [lean(v) for v in value]
    if isinstance(value, Snapshot):
        return {**plain(value), "memories": [lean(m) for m in value.memories]}
    return value


def memory_response(value: Any, include: frozenset[str], status: int = 200) -> Response:
    """An answer holding memories: lean unless ``include`` names ``embedding``."""
    return json_response(value if "embedding" in include else lean(value), status)


def error_response(err: SynapseError) -> Response:
    return Response(
        encoder.encode({"error": err.to_dict()}),
        status_code=err.http_status,
        media_type="application/json",
        headers=error_headers(err),
    )


def error_headers(err: SynapseError) -> dict[str, str]:
    """The headers an error answer carries, whatever the shape of its body."""
    headers = {}
    if isinstance(err, QuotaExceededError | NotOwnerError) and "retry_after" in err.details:
        headers["Retry-After"] = str(max(1, round(err.details["retry_after"] + 0.5)))
    if isinstance(err, UnauthorizedError):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(err, MethodNotAllowedError) and "allowed" in err.details:
        headers["Allow"] = ", ".join(err.details["allowed"])
    if isinstance(err, RequestTimeoutError | PayloadTooLargeError) or getattr(
        err, "unread_body", False
    ):
        headers["Connection"] = "close"  # the rest of the body is never read: end the connection
    return headers


async def read_body(request: Request) -> dict[str, Any]:
    """The request's JSON object: ``Content-Type: application/json`` (415 otherwise, even
    when empty: a web page can post a form or ``text/plain`` to a local server without asking
    the browser first), at most MAX_BODY bytes (413), received within the body deadline
    (408), nested at most MAX_DEPTH levels (422)."""
    require_media_type(request, "application/json")
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > MAX_BODY:
        raise PayloadTooLargeError(
            f"body: {size} bytes, over the limit of {MAX_BODY}", field="body", limit=MAX_BODY
        )
    raw = await read_raw(request, MAX_BODY)
    if not raw:
        return {}
    body = decode_json(raw, "body")
    if not isinstance(body, dict):
        raise ValidationError(f"body: expected a JSON object, got {json_type(body)}", field="body")
    return body


def require_media_type(request: Request, expected: str) -> None:
    """415 unless the request says its body is ``expected`` (parameters such as charset
    are allowed)."""
    raw = request.headers.get("content-type")
    media = (raw or "").split(";", 1)[0].strip().lower()
    if media != expected:
        got = "none" if raw is None else repr(raw[:100])
        raise UnsupportedMediaTypeError(
            f"content-type: expected {expected}, got {got}",
            field="content-type", expected=expected,
        )  # fmt: skip


async def read_raw(request: Request, limit: int | None) -> bytes:
    """The request body, read within the server's body deadline (``Limits.body_timeout`` for
    each MAX_BODY bytes, so a large import gets time in proportion): a client that sends
    its headers and then stalls or trickles gets 408 and the connection is closed, instead
    of holding it forever. Over ``limit`` bytes: 413, without reading the rest."""
    limits: Limits = request.app.state.limits
    with _body_slot(request, limits):
        return await _read_raw(request, limits, limit)


@contextlib.contextmanager
def _body_slot(request: Request, limits: Limits) -> Iterator[None]:
    """Count the bodies a tenant is sending at once; over ``max_body_reads_per_tenant`` the
    request answers 429 at once instead of holding a connection slot while it trickles."""
    key = getattr(request.state, "key", None)
    if key is None:  # open mode (one user on loopback) or a route outside the namespaces
        yield
        return
    reading: dict[str, int] = request.app.state.body_reads
    if reading.get(key.tenant, 0) >= limits.max_body_reads_per_tenant:
        err = QuotaExceededError(
            f"tenant {key.tenant!r}: {limits.max_body_reads_per_tenant} request bodies are "
            "being received already; send this one when one of those has arrived",
            limit=limits.max_body_reads_per_tenant, retry_after=1.0,
        )  # fmt: skip
        err.unread_body = True  # type: ignore[attr-defined]  # answered with Connection: close
        raise err
    reading[key.tenant] = reading.get(key.tenant, 0) + 1
    try:
        yield
    finally:
        reading[key.tenant] -= 1
        if not reading[key.tenant]:
            del reading[key.tenant]


async def _read_raw(request: Request, limits: Limits, limit: int | None) -> bytes:
    timeout = limits.body_timeout
    chunks: list[bytes] = []
    size = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        async with asyncio.timeout_at(start + timeout) as deadline:
            async for chunk in request.stream():
                size += len(chunk)
                if limit is not None and size > limit:
                    raise PayloadTooLargeError(
                        f"body: over the limit of {limit} bytes", field="body", limit=limit
                    )
                chunks.append(chunk)
                deadline.reschedule(start + timeout * (1 + size // MAX_BODY))
    except TimeoutError:
        raise RequestTimeoutError(
            f"body: not received within {timeout:g} s ({size} bytes arrived)",
            field="body", limit=timeout,
        ) from None  # fmt: skip
    except ClientDisconnect:
        raise ValidationError(
            f"body: the client closed the connection after {size} bytes", field="body"
        ) from None
    return b"".join(chunks)


def decode_json(raw: bytes, field: str) -> Any:
    """Decode JSON, refusing nesting deeper than MAX_DEPTH (422 naming ``field`` and the
    limit) before any code walks the value recursively."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ValidationError(f"{field}: invalid JSON ({exc})", field=field) from None
    except RecursionError:  # far deeper than MAX_DEPTH: the decoder's own guard stopped it
        raise too_deep(field) from None
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:  # fewer brackets cannot nest deeper
        check_depth(value, field)
    return value


def check_depth(value: Any, field: str, limit: int = MAX_DEPTH) -> None:
    """Raise 422 when ``value`` nests lists and objects deeper than ``limit`` levels (the
    value itself is level 1). Iterative, one level at a time."""
    level = [value] if type(value) in (dict, list) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            raise too_deep(field, limit)
        deeper: list[Any] = []
        for item in level:
            children = item.values() if type(item) is dict else item
            kinds = set(map(type, children))  # a vector of numbers is skipped at C speed
            if dict in kinds or list in kinds:
                deeper.extend(c for c in children if type(c) is dict or type(c) is list)
        level = deeper


def too_deep(field: str, limit: int = MAX_DEPTH) -> ValidationError:
    return ValidationError(
        f"{field}: JSON nested deeper than {limit} levels", field=field, limit=limit
    )


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for messages."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else "null"


def int_param(request: Request, name: str, default: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValidationError(f"{name}: expected an integer, got {raw!r}", field=name) from None


def limit_param(request: Request, default: int) -> int:
    value = int_param(request, "limit", default)
    return default if value is None else value  # 0 and negatives reach the engine's checks


def time_param(request: Request, name: str) -> str | None:
    # As given: the engine's parser tries ISO-8601 first (``20251024`` is a date), then epoch
    # seconds, exactly as for an embedded caller's string.
    return request.query_params.get(name)


def agent_of(request: Request, body: dict[str, Any] | None = None) -> str | None:
    """The agent the request acts as: its ``agent`` field or ``X-Agent`` header, held to the
    agents its API key is bound to (auth.agent_for)."""
    if body is not None and body.get("agent") is not None:
        return agent_for(request, body["agent"])
    return agent_for(request, request.headers.get("x-agent"))


def body_field(
    body: dict[str, Any],
    name: str,
    kinds: type | tuple[type, ...],
    what: str,
    default: Any = None,
    *,
    required: bool = False,
) -> Any:
    """A body field checked for its JSON type where it is parsed (422 naming the field), so a
    TypeError deeper down is a bug, not bad input. Missing or null: ``default``."""
    value = body.get(name)
    if value is None:
        if required:
            raise ValidationError(f"{name}: required", field=name)
        return default
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ValidationError(f"{name}: expected {what}, got {json_type(value)}", field=name)
    return value


def event_cursor_param(request: Request, *, header: bool = True) -> str | None:
    """Where a read or feed resumes: the ``Last-Event-ID`` header (with ``header``, for live
    feeds), else the ``after`` parameter, at most MAX_CURSOR_CHARS characters (422 naming
    which one, and the limit)."""
    raw = request.headers.get("last-event-id") if header else None
    name = "Last-Event-ID"
    if not raw:
        raw, name = request.query_params.get("after"), "after"
    if raw is not None and len(raw) > MAX_CURSOR_CHARS:
        raise ValidationError(
            f"{name}: {len(raw)} characters, over the limit of {MAX_CURSOR_CHARS}",
            field=name, limit=MAX_CURSOR_CHARS,
        )  # fmt: skip
    return raw


def pick(body: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    for key in body:
        if key not in allowed:
            raise ValidationError(
                f"{key}: unknown field; allowed: {', '.join(sorted(allowed))}", field=key
            )
    return body


def required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if value is None:
        raise ValidationError(f"{name}: required query parameter", field=name)
    return value


def idle_timeout_param(request: Request) -> float | None:
    raw = request.query_params.get("idle_timeout")
    try:
        value = None if raw is None else float(raw)
    except ValueError:
        value = -1.0
    if value is not None and not 0 <= value < float("inf"):
        raise ValidationError(f"idle_timeout: expected seconds, got {raw!r}", field="idle_timeout")
    return value


def event_stream(events: Any) -> StreamingResponse:
    """A Server-Sent Events answer from an async generator of encoded events."""
    return StreamingResponse(
        events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


def sse(event_id: str, kind: str, value: Any) -> bytes:
    return f"id: {event_id}\nevent: {kind}\ndata: ".encode() + encoder.encode(value) + b"\n\n"
