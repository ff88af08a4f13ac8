"""The async remote client: ``await synapsedb.connect_async(url)`` ... the same methods as the
embedded API, each returning an awaitable of the same return type.

No method is written twice: namespaces are the sync client's :class:`RemoteNamespace`, whose
every method builds a :class:`~synapsedb.client.calls.Call` and hands it to its database's
``_run``; here ``_run`` is a coroutine, so each method returns one. The live feeds
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
from .calls import Call
from .feeds import AsyncFeed, FeedOptions
from .sync import RemoteNamespace

__all__ = ["AsyncRemoteDatabase"]


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
            resp = await self._http.request(call.method, call.path, params=params,
                                            content=content,
                                            headers=headers)  # fmt: skip
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

    def namespace(self, name: str, *, agent: str | None = None) -> RemoteNamespace:
        """A namespace whose methods return awaitables (``await mem.get(id)``)."""
        return RemoteNamespace(self, check_namespace(name), check_agent(agent))  # type: ignore[arg-type]

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
    """``verify``: True, False or a CA bundle path; ``cert``: a client certificate (mutual
    TLS) as a PEM path or (cert, key) paths."""
    import ssl

    ctx: ssl.SSLContext | bool = (
        verify if isinstance(verify, bool) else ssl.create_default_context(cafile=verify)
    )
    if cert is not None:
        if not isinstance(ctx, ssl.SSLContext):
            verify_server = ctx
            ctx = ssl.create_default_context()
            if not verify_server:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
        certfile, keyfile = (cert, None) if isinstance(cert, str) else cert
        ctx.load_cert_chain(certfile, keyfile)
    return httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout, verify=ctx)
