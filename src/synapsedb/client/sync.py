"""The remote client: ``synapsedb.connect(url)`` has the methods, arguments and return types
of ``synapsedb.open(path)``, and raises the same exception classes (rebuilt from the server's
error codes)."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from ..errors import ClosedError, StorageError
from ..validation import check_agent, check_namespace
from . import calls
from .calls import Call
from .feeds import Feed, FeedOptions
from .namespace import RemoteNamespace

__all__ = ["RemoteDatabase", "RemoteNamespace", "tls_context"]


class RemoteDatabase:
    """A SynapseDB server. ``client`` lets tests (or callers) supply their own httpx.Client."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        client: httpx.Client | None = None,
        verify: str | bool = True,
        cert: str | tuple[str, str] | None = None,
        include: Iterable[str] | str | None = None,
    ) -> None:
        self.include = calls.check_include(include)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = client or _client(url, timeout, verify, cert)
        self._http.headers.update(headers)
        self._own = client is None
        self._closed = False

    def _run(self, call: Call) -> Any:
        if self._closed:
            raise ClosedError("the client is closed")
        headers = {"X-Agent": call.agent} if call.agent else {}
        content, content_type = calls.request_body(call)
        if content_type is not None:
            headers["Content-Type"] = content_type
        params = calls.request_params(call, self.include)
        try:
            resp = self._http.request(
                call.method, call.path, params=params, content=content, headers=headers
            )
        except httpx.TransportError as exc:
            raise StorageError(f"server unreachable: {exc}") from exc
        if resp.status_code >= 400:
            raise calls.error_of(resp.status_code, resp.content)
        return calls.decode_answer(call, resp.content)

    def _feed(
        self, call: Call, kind: str, decode: Callable[[str, str], Any], options: FeedOptions
    ) -> Feed[Any]:
        if self._closed:
            raise ClosedError("the client is closed")
        return Feed(self._http, call, kind, decode, options)

    def namespace(self, name: str, *, agent: str | None = None) -> RemoteNamespace:
        """A handle on namespace ``name`` of the server (the methods of an embedded one)."""
        return RemoteNamespace(self, check_namespace(name), check_agent(agent))

    def namespaces(self) -> list[str]:
        """Names of the namespaces the caller may see, sorted."""
        return self._run(calls.namespaces())  # type: ignore[no-any-return]

    def close(self) -> None:
        if not self._closed and self._own:
            self._http.close()
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> RemoteDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tls_context(verify: str | bool, cert: str | tuple[str, str] | None) -> ssl.SSLContext | bool:
    """``verify``: True, False or a CA bundle path; ``cert``: a client certificate (mutual
    TLS) as a PEM path or (cert, key) paths."""
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
    return ctx


def _client(
    url: str, timeout: float, verify: str | bool, cert: str | tuple[str, str] | None
) -> httpx.Client:
    return httpx.Client(base_url=url.rstrip("/"), timeout=timeout, verify=tls_context(verify, cert))
