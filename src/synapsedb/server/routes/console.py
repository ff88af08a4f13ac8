"""The web console at ``/ui`` (docs/console.md) and ``/v1/whoami``, which tells a client what
its key may do.

The console is static files shipped in the package (``synapsedb/server/console``): no build
step, no CDN. They are read once, when the app is made, and served by name from that fixed
set (a name outside it is 404: nothing in a path reaches the file system). The page talks to
the public API only, with the user's key, so it can show and do exactly what the key can.

Every console answer carries headers that keep the page to itself: a Content-Security-Policy
allowing scripts, styles and requests from this origin only (no inline script, no eval), no
framing, no sniffing, no referrer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...errors import NotFoundError, SynapseError
from ..auth import authenticate_header
from ..keys import ApiKey
from ..wire import error_response, json_response

__all__ = ["SECURITY_HEADERS", "Console", "whoami"]

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


class Console:
    """The console's files, read once from the package: ``page`` answers ``/ui`` and ``asset``
    ``/ui/{asset}``."""

    def __init__(self) -> None:
        folder = resources.files("synapsedb.server").joinpath("console")
        assets: dict[str, Asset] = {}
        for item in folder.iterdir():
            suffix = "." + item.name.rsplit(".", 1)[-1] if "." in item.name else ""
            if item.is_file() and suffix in MEDIA_TYPES:
                body = item.read_bytes()
                etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
                assets[item.name] = Asset(body, MEDIA_TYPES[suffix], etag)
        if "index.html" not in assets:
            raise RuntimeError("the console's index.html is missing from the package")
        self.assets = assets

    def _answer(self, request: Request, asset: Asset) -> Response:
        headers = {**SECURITY_HEADERS, "ETag": asset.etag}
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        return Response(asset.body, media_type=asset.media_type, headers=headers)

    async def page(self, request: Request) -> Response:
        return self._answer(request, self.assets["index.html"])

    async def asset(self, request: Request) -> Response:
        name = request.path_params["asset"]
        asset = self.assets.get(name)
        if asset is None:
            err = NotFoundError(f"no console file {name[:100]!r}", path=request.url.path[:200])
            return error_response(err)
        return self._answer(request, asset)


def describe(key: ApiKey | None, auth: str) -> dict[str, Any]:
    """What a key may do, as its tenant may know it (never the secret)."""
    if key is None:  # ``none`` mode: nothing is checked, every scope works
        return {
            "auth": auth,
            "key": None,
            "tenant": None,
            "scopes": ["read", "write", "admin"],
            "namespaces": None,
            "agents": None,
        }
    return {
        "auth": auth,
        "key": key.id,
        "tenant": key.tenant,
        "scopes": list(key.scopes),
        "namespaces": None if key.namespaces is None else sorted(key.namespaces),
        "agents": None if key.agents is None else list(key.agents),
    }


async def whoami(request: Request) -> Response:
    """The caller's key: its id, tenant, scopes, namespaces (null: any) and agents (null: any);
    401 without a live key in ``keys`` mode. A client (the console) learns from it which
    controls to offer; the API still checks every request."""
    state = request.app.state
    try:
        key = authenticate_header(state, request.headers.get("authorization", ""))
    except SynapseError as err:
        return error_response(err)
    return json_response(describe(key, state.auth))
