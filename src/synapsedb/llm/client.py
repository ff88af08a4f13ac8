"""The chat clients: :class:`ChatClient` (blocking, ``httpx.Client``) and
:class:`AsyncChatClient` (``httpx.AsyncClient``).

Both only perform the steps that :mod:`synapsedb.llm.protocol` yields (send a request, sleep
before a retry); every decision is made there, once. Each client keeps its own circuit
breaker and remembers which structured-output mode its endpoint accepts.
"""

from __future__ import annotations

import asyncio
import random as _random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from ..config import LLMSettings
from ..errors import ClosedError, UpstreamError
from . import forward, protocol
from .breaker import BreakerState, CircuitBreaker
from .forward import ChunkStream, Completion
from .protocol import Outcome, Send, Session, Steps
from .wire import ChatReply

__all__ = ["AsyncChatClient", "ChatClient"]

T = TypeVar("T")
Messages = Sequence[Mapping[str, Any]]


def _limits(settings: LLMSettings) -> httpx.Limits:
    keep = min(20, settings.max_connections)  # httpx's default of idle connections kept
    return httpx.Limits(max_connections=settings.max_connections, max_keepalive_connections=keep)


class _Base:
    """What the two clients have in common besides I/O."""

    _session: Session
    _closed: bool

    @property
    def settings(self) -> LLMSettings:
        return self._session.settings

    @property
    def configured(self) -> bool:
        """False when no base URL is set: calls raise UpstreamError(configured=False) at once;
        callers are expected to check this and degrade instead."""
        return self._session.settings.configured

    @property
    def breaker_state(self) -> BreakerState:
        """``closed``, ``open`` or ``half_open`` (an open breaker past its cooldown)."""
        return self._session.breaker.state

    @property
    def structured_mode(self) -> str:
        """The structured-output mode the next :meth:`chat_json` will use: ``json_schema``,
        ``json_object`` or ``prompt`` (it only moves down that list, when refused)."""
        return self._session.mode

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._session.redact.url or '(not configured)'}>"

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the LLM client is closed")


class ChatClient(_Base):
    """A blocking client for an OpenAI-compatible ``POST /chat/completions`` endpoint.

    ``transport`` replaces httpx's network transport (``httpx.MockTransport`` ...); ``sleep``,
    ``clock`` (monotonic seconds, for the breaker) and ``random`` (in [0, 1), for jitter) let
    tests run retries and cooldowns without waiting. Safe to share between threads.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self._session = Session(settings, clock=clock, random=random)
        self._sleep = sleep
        self._http = httpx.Client(
            transport=transport,
            timeout=settings.timeout_s,
            headers=self._session.headers(),
            limits=_limits(settings),
        )
        self._closed = False

    def chat(
        self,
        messages: Messages,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
    ) -> ChatReply:
        """The model's answer to ``messages`` (OpenAI message dicts: ``role``, ``content``)."""
        return self._run(
            protocol.chat(
                self._session, messages, temperature=temperature, max_tokens=max_tokens, stop=stop
            )
        )

    def chat_json(
        self,
        messages: Messages,
        schema: Mapping[str, Any],
        *,
        name: str,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        """A JSON object matching ``schema`` (see :mod:`synapsedb.llm.schema` for the keywords
        checked), named ``name`` in the request (1-64 of ``[A-Za-z0-9_-]``)."""
        return self._run(
            protocol.chat_json(
                self._session,
                messages,
                schema,
                name=name,
                temperature=temperature,
                max_tokens=max_tokens,
            )
        )

    def _run(self, steps: Steps[T]) -> T:
        self._check_open()
        outcome: Outcome = None
        try:
            while True:
                step = steps.send(outcome)
                if isinstance(step, Send):
                    outcome = self._post(step)
                else:
                    self._sleep(step.seconds)
                    outcome = None
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            steps.close()

    def _post(self, step: Send) -> httpx.Response | httpx.TransportError:
        try:
            return self._http.post(self._session.url, content=step.content)
        except httpx.TransportError as exc:
            return exc

    def close(self) -> None:
        if not self._closed:
            self._http.close()
        self._closed = True

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncChatClient(_Base):
    """The same client for asyncio: :meth:`chat` and :meth:`chat_json` are coroutines with
    the same arguments and results as :class:`ChatClient`'s. ``sleep`` is awaited."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self._session = Session(settings, clock=clock, random=random)
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            transport=transport,
            timeout=settings.timeout_s,
            headers=self._session.headers(),
            limits=_limits(settings),
        )
        self._closed = False

    async def chat(
        self,
        messages: Messages,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
    ) -> ChatReply:
        return await self._run(
            protocol.chat(
                self._session, messages, temperature=temperature, max_tokens=max_tokens, stop=stop
            )
        )

    async def chat_json(
        self,
        messages: Messages,
        schema: Mapping[str, Any],
        *,
        name: str,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        return await self._run(
            protocol.chat_json(
                self._session,
                messages,
                schema,
                name=name,
                temperature=temperature,
                max_tokens=max_tokens,
            )
        )

    async def forward(
        self,
        body: Mapping[str, Any],
        *,
        breaker: CircuitBreaker | None = None,
        on_close: Callable[[], object] | None = None,
    ) -> Completion | ChunkStream:
        """Send the caller's own chat-completions request ``body`` as it is (the memory proxy),
        with the configured ``model`` when it names none, this client's API key, timeouts,
        retries and breaker (``breaker``: the caller's own instead, e.g. its tenant's).
        Answers a :class:`~synapsedb.llm.forward.Completion` (not streamed, or a 4xx the
        request caused: its body without the API key or the upstream's address) or, for
        ``"stream": true``, a :class:`~synapsedb.llm.forward.ChunkStream` over the upstream's
        events, opened once its 2xx status has arrived: retries happen only before that.
        UpstreamError when the upstream fails first; ValidationError (nothing sent) when
        ``body`` is not a chat-completions request or asks for more output tokens than
        ``proxy_max_tokens``. ``on_close`` is called once the upstream's connection is done
        with: on return of a Completion, when a ChunkStream is closed, or on any error."""
        handed_over = False
        try:
            request = forward.request_body(
                body, self.settings.model, self.settings.models, self.settings.proxy_max_tokens
            )
            out = await self._forward(request, breaker or self._session.breaker, on_close)
            handed_over = isinstance(out, ChunkStream)
            return out
        finally:
            if on_close is not None and not handed_over:
                on_close()

    async def _forward(
        self,
        request: dict[str, Any],
        breaker: CircuitBreaker,
        on_close: Callable[[], object] | None,
    ) -> Completion | ChunkStream:
        streamed = request.get("stream") is True
        resp, _ = await self._run(
            protocol.forward(self._session, request, breaker),
            post=self._open if streamed else self._post,
        )
        if streamed and resp.status_code < 300 and forward.is_stream(resp):
            return forward.ChunkStream(
                resp, error=self._session.error, on_broken=breaker.fail, on_close=on_close
            )
        try:
            await resp.aread()
        except httpx.TransportError as exc:
            breaker.fail()
            raise self._session.error(
                f"the answer broke off ({type(exc).__name__}: {exc})", status=resp.status_code
            ) from None
        finally:
            await resp.aclose()
        try:
            return forward.completion(resp, self._session.error, self._session.redact.hide_bytes)
        except UpstreamError:
            breaker.fail()
            raise

    async def _open(self, step: Send) -> httpx.Response | httpx.TransportError:
        """POST and answer once the headers are in: a 2xx stays open for its events (the
        caller closes it), anything else is read and closed (retries look at its body)."""
        request = self._http.build_request(
            "POST", self._session.url, content=step.content, headers={"Accept": "text/event-stream"}
        )
        try:
            resp = await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            return exc
        if resp.status_code < 300:
            return resp
        try:
            await resp.aread()
        except httpx.TransportError as exc:
            return exc
        finally:
            await resp.aclose()
        return resp

    async def _run(
        self,
        steps: Steps[T],
        post: Callable[[Send], Awaitable[httpx.Response | httpx.TransportError]] | None = None,
    ) -> T:
        self._check_open()
        post = post or self._post
        outcome: Outcome = None
        try:
            while True:
                step = steps.send(outcome)
                if isinstance(step, Send):
                    outcome = await post(step)
                else:
                    await self._sleep(step.seconds)
                    outcome = None
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            steps.close()

    async def _post(self, step: Send) -> httpx.Response | httpx.TransportError:
        try:
            return await self._http.post(self._session.url, content=step.content)
        except httpx.TransportError as exc:
            return exc

    async def aclose(self) -> None:
        if not self._closed:
            await self._http.aclose()
        self._closed = True

    async def __aenter__(self) -> AsyncChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
