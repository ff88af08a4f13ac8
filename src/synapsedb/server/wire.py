"""Wire encoding and request parsing shared by every route: value objects as JSON (msgspec),
the one error body, Server-Sent Events frames, and the checked readers of bodies and query
parameters (bad input is a 422 naming the field)."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import numpy as np
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..errors import (
    PayloadTooLargeError,
    QuotaExceededError,
    SynapseError,
    UnauthorizedError,
    ValidationError,
)
from .auth import agent_for

MAX_BODY = 8 * 1024 * 1024


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


def error_response(err: SynapseError) -> Response:
    headers = {}
    if isinstance(err, QuotaExceededError) and "retry_after" in err.details:
        headers["Retry-After"] = str(max(1, round(err.details["retry_after"] + 0.5)))
    if isinstance(err, UnauthorizedError):
        headers["WWW-Authenticate"] = "Bearer"
    return Response(
        encoder.encode({"error": err.to_dict()}),
        status_code=err.http_status,
        media_type="application/json",
        headers=headers,
    )


async def read_body(request: Request) -> dict[str, Any]:
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


def time_param(request: Request, name: str) -> str | float | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        return float(raw)  # epoch seconds
    except ValueError:
        return raw  # ISO-8601: the engine parses and validates


def agent_of(request: Request, body: dict[str, Any] | None = None) -> str | None:
    """The agent the request acts as: its ``agent`` field or ``X-Agent`` header, held to the
    agents its API key is bound to (auth.agent_for)."""
    if body is not None and body.get("agent") is not None:
        return agent_for(request, body["agent"])
    return agent_for(request, request.headers.get("x-agent"))


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
