"""The async remote client: ``synapsedb.connect_async(url)`` has the methods of the embedded
API, each a coroutine of the same return type (:class:`~synapsedb.surface.AsyncNamespaceAPI`).

Its namespaces (``aio_namespace.py``) are generated from the same protocol as the sync
client's, and every method builds its request with the same code
(:func:`synapsedb.client.calls.build`), so the two cannot drift apart. The live feeds
(``follow``, ``changes``) go to ``_feed``, which here answers an
:class:`~synapsedb.client.feeds.AsyncFeed` (``async for``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import httpx

from ..errors import ClosedError, StorageError
from ..validation import check_agent, check_namespace
from . import calls
from .aio_namespace import AsyncRemoteNamespace
from .calls import Call
from .feeds import AsyncFeed, FeedOptions
from .sync import tls_context

__all__ = ["AsyncRemoteDatabase", "AsyncRemoteNamespace"]


class AsyncRemoteDatabase:
    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        client: httpx.AsyncClient | None = None,
        verify: str | bool = True,
        cert: str | tuple[str, str] | None = None,
        include: Iterable[str] | str | None = None,
    ) -> None:
        self.include = calls.check_include(include)
        self._http = client or _client(url, timeout, verify, cert)
        if api_key:
            self._http.headers["Authorization"] = f"Bearer {api_key}"
        self._own = client is None
        self._closed = False

    async def _run(self, call: Call) -> Any:
        if self._closed:
            raise ClosedError("the client is closed")
        headers = {"X-Agent": call.agent} if call.agent else {}
        content, content_type = calls.request_body(call)
        if content_type is not None:
            headers["Content-Type"] = content_type
        params = calls.request_params(call, self.include)
        try:
            resp = await self._http.request(
                call.method, call.path, params=params, content=content, headers=headers
            )
        except httpx.TransportError as exc:
            raise StorageError(f"server unreachable: {exc}") from exc
        if resp.status_code >= 400:
            raise calls.error_of(resp.status_code, resp.content)
        return calls.decode_answer(call, resp.content)

    def _feed(
        self, call: Call, kind: str, decode: Callable[[str, str], Any], options: FeedOptions
    ) -> AsyncFeed[Any]:
        if self._closed:
            raise ClosedError("the client is closed")
        return AsyncFeed(self._http, call, kind, decode, options)

    def namespace(self, name: str, *, agent: str | None = None) -> AsyncRemoteNamespace:
        """A namespace whose methods are coroutines (``await mem.get(id)``)."""
        return AsyncRemoteNamespace(self, check_namespace(name), check_agent(agent))

    async def namespaces(self) -> list[str]:
        return await self._run(calls.namespaces())  # type: ignore[no-any-return]

    async def close(self) -> None:
        if not self._closed and self._own:
            await self._http.aclose()
        self._closed = True

    async def __aenter__(self) -> AsyncRemoteDatabase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _client(
    url: str, timeout: float, verify: str | bool, cert: str | tuple[str, str] | None
) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=url.rstrip("/"), timeout=timeout, verify=tls_context(verify, cert)
    )
