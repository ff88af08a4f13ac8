"""Forwarding a namespace's request to the process that owns it (sharded placement on
PostgreSQL, docs/deploy.md).

A request for a namespace another process owns is sent on to that process as it came: the
same method, path, query, headers (the API key among them: the owner authorizes it again)
and body; its answer comes back as it is, streamed (a change feed's events too). A request
travels one hop at most: one that was forwarded already (header
``X-SynapseDB-Forwarded-By``) and reaches a process that does not own the namespace either
(the share moved meanwhile) is answered ``not_owner`` (503, Retry-After), as is one whose
owner cannot be reached (it died, and its lease has not run out yet).
"""

from __future__ import annotations

import logging

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..errors import NotOwnerError

__all__ = ["FORWARDED", "Forwarder"]

log = logging.getLogger("synapsedb.server")

FORWARDED = "x-synapsedb-forwarded-by"  # the address of the process that forwarded it
# hop-by-hop headers (RFC 9110 7.6.1) and those the next hop sets itself
_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                  "transfer-encoding", "upgrade", "host", "content-length"})  # fmt: skip


class Forwarder:
    """One HTTP client for every forwarded request of this process (kept-alive connections
    to the other processes)."""

    def __init__(self, address: str, *, connect_timeout_s: float = 2.0) -> None:
        self.address = address
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            follow_redirects=False,
        )
        self.forwarded = 0  # requests sent on (a metric)

    @staticmethod
    def hops(request: Request) -> bool:
        """Whether the request was forwarded to this process already."""
        return FORWARDED in request.headers

    async def forward(self, request: Request, ns: str, owner: str) -> Response:
        """Send ``request`` to ``owner`` and answer with what it answers."""
        headers = [
            (k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in _HOP
        ]
        headers.append((FORWARDED.encode(), self.address.encode()))
        body = await request.body()
        url = owner + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            sent = self._client.build_request(request.method, url, headers=headers, content=body)
            resp = await self._client.send(sent, stream=True)
        except httpx.HTTPError as exc:
            log.warning("forwarding a request of namespace %r to %s failed: %r", ns, owner, exc)
            raise NotOwnerError(
                f"namespace {ns!r} is served by another process ({owner}), which cannot be "
                "reached now; retry in a moment (if it died, its namespaces move to the others "
                "when its lease runs out)",
                owner=owner,
                retry_after=1,
            ) from None
        self.forwarded += 1
        out = [(k, v) for k, v in resp.headers.raw if k.decode("latin-1").lower() not in _HOP]
        answer = StreamingResponse(
            resp.aiter_raw(), status_code=resp.status_code, background=BackgroundTask(resp.aclose)
        )
        answer.raw_headers = [
            *(h for h in answer.raw_headers if h[0] != b"content-type"),
            *((k.lower(), v) for k, v in out),
        ]
        if "content-length" in resp.headers:  # the same bytes, unchanged: the same length
            answer.raw_headers.append((b"content-length", resp.headers["content-length"].encode()))
        return answer

    async def aclose(self) -> None:
        await self._client.aclose()
