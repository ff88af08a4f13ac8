"""Who may do what: API keys, scopes, rates, and the engine namespace a tenant's name means."""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.requests import Request

from ..errors import (
    ForbiddenError,
    UnauthorizedError,
)
from ..validation import check_namespace
from .keys import ApiKey, KeyStore, tenant_namespace


def authorize(request: Request, scope: str) -> ApiKey | None:
    """The request's API key, when the server has keys; raises 401/403/429 as it fits."""
    return authorize_header(request.app.state, request.headers.get("authorization", ""), scope)


def authorize_header(state: Any, header: str, scope: str) -> ApiKey | None:
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


def require_scope(request: Request, scope: str) -> None:
    key: ApiKey | None = request.state.key
    if key is not None and scope not in key.scopes:
        raise ForbiddenError(f"this key lacks the {scope!r} scope", scope=scope)


def public_view(request: Request, obj: Any) -> Any:
    """Objects naming their namespace show the name the client used."""
    if hasattr(obj, "namespace"):
        return dataclasses.replace(obj, namespace=request.state.ns)
    return obj


def engine_namespace(key: ApiKey | None, name: str) -> str:
    """The engine namespace a request for ``name`` means (per tenant once keys exist)."""
    name = check_namespace(name)
    if key is None:
        return name
    if key.namespaces is not None and name not in key.namespaces:
        raise ForbiddenError(f"this key cannot use namespace {name!r}")
    return tenant_namespace(key.tenant, name)
