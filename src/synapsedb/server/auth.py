"""Who may do what: the server's auth mode, API keys, scopes, rates, the agents a key may act
as, and the engine namespace a tenant's name means.

The mode is decided once, when the app is made, never from what ``keys.db`` holds at the time
of a request: in ``keys`` mode every /v1 request needs a live key (none live: every request is
401, the server never turns open); in ``none`` mode nothing is checked, and names holding the
tenant separator ``..`` are refused, so an open server cannot reach tenants' namespaces left in
the data directory by a keyed past.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from starlette.requests import Request

from ..errors import (
    ForbiddenError,
    SynapseError,
    UnauthorizedError,
    ValidationError,
)
from ..validation import check_namespace
from .keys import OPERATOR, SEP, ApiKey, KeyStore, tenant_namespace

AuthMode = Literal["keys", "none"]
AUTH_MODES: tuple[AuthMode, ...] = ("keys", "none")


def authorize(request: Request, scope: str) -> ApiKey | None:
    """The request's API key in ``keys`` mode (None in ``none`` mode); raises 401/403/429."""
    return authorize_header(request.app.state, request.headers.get("authorization", ""), scope)


def authenticate_header(state: Any, header: str) -> ApiKey | None:
    """The live key a ``Authorization: Bearer`` header carries, rate-limited; None in ``none``
    mode. Raises 401 (no valid key: also when no key is live at all) or 429."""
    if state.auth == "none":
        return None
    keys: KeyStore = state.keys
    token = header[7:].strip() if header.lower().startswith("bearer ") else ""
    key = keys.authenticate(token) if token else None
    if key is None:
        raise UnauthorizedError("a valid API key is required: Authorization: Bearer <key>")
    rates = state.rates
    rates.take(f"key:{key.id}", key.rate, what=f"key {key.id}: over {key.rate} requests/s")
    tenant_rate = keys.tenant_rate(key.tenant)
    rates.take(
        f"tenant:{key.tenant}",
        tenant_rate,
        what=f"tenant {key.tenant!r}: over {tenant_rate} requests/s",
    )
    return key


def authorize_header(state: Any, header: str, scope: str) -> ApiKey | None:
    key = authenticate_header(state, header)
    if key is not None and scope not in key.scopes:
        raise ForbiddenError(f"this key lacks the {scope!r} scope", scope=scope)
    return key


def require_scope(request: Request, scope: str) -> None:
    key: ApiKey | None = request.state.key
    if key is not None and scope not in key.scopes:
        raise ForbiddenError(f"this key lacks the {scope!r} scope", scope=scope)


def is_operator(key: ApiKey | None) -> bool:
    return key is not None and OPERATOR in key.scopes


def still_authorized(state: Any, key: ApiKey | None) -> bool:
    """Whether ``key`` is still live (long-lived answers ask again as they go)."""
    return key is None or state.keys.is_live(key.id)


def public_view(request: Request, obj: Any) -> Any:
    """Objects naming their namespace show the name the client used."""
    if hasattr(obj, "namespace"):
        return dataclasses.replace(obj, namespace=request.state.ns)
    return obj


def name_publicly(err: SynapseError, internal: str, public: str) -> None:
    """In ``err``'s message and details, the engine namespace ``internal`` (``<tenant>..<name>``)
    becomes ``public``, the name the tenant uses in every other answer: the inverse of
    :func:`engine_namespace`, for errors leaving a namespaced route."""
    if internal == public:
        return
    message = err.message.replace(internal, public)
    details = {
        k: v.replace(internal, public) if isinstance(v, str) else v for k, v in err.details.items()
    }
    if message != err.message or details != err.details:
        err.message, err.details, err.args = message, details, (message,)


def engine_namespace(key: ApiKey | None, name: str) -> str:
    """The engine namespace a request for ``name`` means (per tenant with a key)."""
    name = check_namespace(name)
    if key is None:
        if SEP in name:
            raise ValidationError(
                f"namespace: {name!r} must not contain {SEP!r} (tenants' namespaces are "
                "reached only with their API keys)",
                field="namespace",
            )
        return name
    if key.namespaces is not None and name not in key.namespaces:
        raise ForbiddenError(f"this key cannot use namespace {name!r}")
    return tenant_namespace(key.tenant, name)


def visible_namespaces(key: ApiKey | None, names: list[str]) -> dict[str, str]:
    """Engine namespace -> the name the caller knows it by, for the namespaces it may see:
    its tenant's (and of those, the key's own list), or with no key the untenanted ones."""
    if key is None:
        return {n: n for n in names if SEP not in n}
    prefix = key.tenant + SEP
    mine = {n: n[len(prefix) :] for n in names if n.startswith(prefix)}
    if key.namespaces is not None:
        mine = {n: public for n, public in mine.items() if public in key.namespaces}
    return mine


def agent_for(request: Request, named: str | None) -> str | None:
    """The agent a request acts as: the one it names (``X-Agent`` or an ``agent`` field), which
    a key bound to agents must list (403 otherwise); unnamed, a key bound to one agent acts as
    that agent, and one bound to several must name one (422)."""
    key: ApiKey | None = getattr(request.state, "key", None)
    if key is None or key.agents is None:
        return named
    if named is None:
        if len(key.agents) == 1:
            return key.agents[0]
        raise ValidationError(
            f"agent: this key acts as one of {', '.join(key.agents)}; name it in X-Agent "
            "or the agent field",
            field="agent",
        )
    if named not in key.agents:
        raise ForbiddenError(
            f"agent: this key cannot act as {named!r}; it is bound to {', '.join(key.agents)}",
            field="agent",
        )
    return named


def check_agents(request: Request, *payloads: Any) -> None:
    """Memories and events may name their own ``agent``: for a key bound to agents, each named
    one must be among them (403); unnamed ones take the request's agent."""
    for payload in payloads:
        if isinstance(payload, Mapping) and payload.get("agent") is not None:
            agent_for(request, payload["agent"])
