"""Forwarding a caller's own chat-completions request to the upstream, as it is: what the
memory proxy (``POST /v1/namespaces/{ns}/chat/completions``) sends on.

:meth:`AsyncChatClient.forward <synapsedb.llm.client.AsyncChatClient.forward>` answers one of

- :class:`Completion`: a whole answer (the request did not stream, or the upstream answered a
  4xx the caller caused, such as an unknown model), with the upstream's bytes and its JSON
  (a 4xx's with the server's API key and the upstream's address taken out);
- :class:`ChunkStream`: an async iterator over the upstream's server-sent events, each a
  :class:`Chunk` holding the exact bytes of its ``data`` and their JSON, so the proxy can
  re-emit them unchanged and accumulate the answer's text as they pass.

Failures before the first byte of a 2xx (unreachable, timeouts, 408, 429, 5xx after the
retries, an open breaker, no upstream configured) raise :class:`~synapsedb.errors.UpstreamError`;
a stream that breaks part-way raises it from the iteration, and counts as a failure for the
circuit breaker.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..errors import UpstreamError, ValidationError
from . import wire

__all__ = [
    "Chunk",
    "ChunkStream",
    "Completion",
    "SSEParser",
    "check_output_limit",
    "request_body",
]

MAX_EVENT = 1 << 20  # bytes of one server-sent event without its blank line: a broken upstream


OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens")  # a chat request's output limits


def request_body(
    body: Any, model: str, allowed: frozenset[str] = frozenset(), max_tokens: int | None = None
) -> dict[str, Any]:
    """The body to send for the caller's ``body``: the same keys and values, plus ``model``
    when it has none and one is configured. ValidationError naming the field when it is not a
    chat-completions request (``messages`` missing or malformed, ``stream`` not a boolean),
    names a model outside ``allowed`` (when not empty), or asks for more output tokens than
    ``max_tokens`` (``max_tokens``, ``max_completion_tokens``: the server's cap)."""
    if not isinstance(body, Mapping):
        raise ValidationError("body: expected a JSON object", field="body")
    out = dict(body)
    if "messages" not in out:
        raise ValidationError("messages: required", field="messages")
    wire.check_messages(out["messages"])
    stream = out.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ValidationError("stream: expected true or false", field="stream")
    for name in OUTPUT_LIMITS:
        check_output_limit(out.get(name), name, max_tokens)
    given = out.get("model")
    if given is not None and not isinstance(given, str):
        raise ValidationError("model: expected a string", field="model")
    if given and allowed and given not in allowed:
        raise ValidationError(
            f"model: {given[:100]!r} is not offered here; allowed: {', '.join(sorted(allowed))}",
            field="model",
        )
    if not given and model:
        out["model"] = model
    elif not given:
        out.pop("model", None)
    return out


def check_output_limit(value: Any, name: str, limit: int | None) -> None:
    """A caller's output-token limit ``name``: absent, or a positive integer of at most
    ``limit`` (the server's cap; None: no cap). ValidationError naming the field and the
    limit otherwise."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name}: expected a positive integer", field=name)
    if limit is not None and value > limit:
        raise ValidationError(
            f"{name}: {value} is over this server's limit of {limit} output tokens",
            field=name,
            limit=limit,
        )


@dataclass(frozen=True, slots=True)
class Completion:
    """A whole answer: the upstream's status, its body's bytes as sent, that body decoded
    (None when it is not a JSON object: only possible for a 4xx) and its content type."""

    status: int
    raw: bytes = field(repr=False)
    body: dict[str, Any] | None
    content_type: str = "application/json"

    @property
    def text(self) -> str:
        """The first choice's text ("" when it has none)."""
        return message_text(self.body)


def message_text(body: Mapping[str, Any] | None) -> str:
    """The text of the first choice of a chat completion ("" when it has none)."""
    try:
        content = body["choices"][0]["message"]["content"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One server-sent event of a streamed answer: its ``event`` name (None for the usual
    unnamed ones), its ``data`` exactly as sent, and that data decoded (None for ``[DONE]``
    or when it is not JSON)."""

    data: bytes
    value: Any
    event: str | None = None

    @property
    def done(self) -> bool:
        """The ``[DONE]`` sentinel that ends an OpenAI stream."""
        return self.data.strip() == b"[DONE]"

    @property
    def id(self) -> str | None:
        value = self.value
        return (
            value.get("id")
            if isinstance(value, dict) and isinstance(value.get("id"), str)
            else None
        )

    @property
    def text(self) -> str:
        """The first choice's text delta ("" when it has none)."""
        try:
            choice = next(c for c in self.value["choices"] if c.get("index", 0) == 0)
            content = choice["delta"].get("content")
        except (KeyError, TypeError, AttributeError, StopIteration):
            return ""
        return content if isinstance(content, str) else ""


@dataclass(slots=True)
class _Event:
    event: str | None = None
    data: list[bytes] = field(default_factory=list)


class SSEParser:
    """Server-sent events from the bytes of a stream as they arrive (lines end with ``\\n`` or
    ``\\r\\n``; a blank line ends an event; ``:`` lines are comments). Only events with data
    are answered; the data of several ``data:`` lines is joined with ``\\n``."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = _Event()

    def feed(self, data: bytes) -> list[Chunk]:
        self._buffer += data
        out: list[Chunk] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                break
            line, self._buffer = self._buffer[:end], self._buffer[end + 1 :]
            chunk = self._line(line[:-1] if line.endswith(b"\r") else line)
            if chunk is not None:
                out.append(chunk)
        if len(self._buffer) + sum(map(len, self._event.data)) > MAX_EVENT:
            raise ValueError(f"an event of the stream is over {MAX_EVENT} bytes")
        return out

    def close(self) -> list[Chunk]:
        """The last event, when the stream ended without a blank line after it."""
        chunk = self._line(self._buffer) if self._buffer else None
        self._buffer = b""
        last = self._line(b"")
        return [c for c in (chunk, last) if c is not None]

    def _line(self, line: bytes) -> Chunk | None:
        if not line:
            event, self._event = self._event, _Event()
            if not event.data:
                return None
            data = b"\n".join(event.data)
            return Chunk(data, _decode(data), event.event)
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._event.data.append(value)
        elif name == b"event":
            self._event.event = value.decode("utf-8", "replace")
        return None


def _decode(data: bytes) -> Any:
    if data.strip() == b"[DONE]":
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


class ChunkStream:
    """The events of a streamed answer, in order, as :class:`Chunk` values; ``[DONE]`` is the
    last one yielded (when the upstream sends it). Iterate once; :meth:`aclose` (or the end of
    the iteration) releases the connection, and then calls ``on_close`` (once). A transport
    error part-way raises UpstreamError and counts as a failure of the upstream
    (``on_broken``)."""

    def __init__(
        self,
        response: httpx.Response,
        *,
        error: Callable[..., UpstreamError],
        on_broken: Callable[[], object],
        on_close: Callable[[], object] | None = None,
    ) -> None:
        self.status = response.status_code
        self.headers = response.headers
        self.chunks = 0  # events yielded so far
        self._response = response
        self._error = error
        self._on_broken = on_broken
        self._on_close = on_close
        self._iterator: AsyncIterator[Chunk] | None = None

    def _closed(self) -> None:
        """The connection is released: tell ``on_close`` once."""
        done, self._on_close = self._on_close, None
        if done is not None:
            done()

    def __aiter__(self) -> AsyncIterator[Chunk]:
        if self._iterator is None:
            self._iterator = self._events()
        return self._iterator

    async def _events(self) -> AsyncIterator[Chunk]:
        parser = SSEParser()
        try:
            try:
                async for data in self._response.aiter_bytes():
                    for chunk in parser.feed(data):
                        self.chunks += 1
                        yield chunk
            except (httpx.TransportError, ValueError) as exc:
                self._on_broken()
                raise self._error(
                    f"the stream broke after {self.chunks} events ({type(exc).__name__}: {exc})",
                    status=self.status,
                    broken=True,
                ) from None
            for chunk in parser.close():
                self.chunks += 1
                yield chunk
        finally:
            try:
                await self._response.aclose()
            finally:
                self._closed()

    async def aclose(self) -> None:
        try:
            if self._iterator is not None:
                await self._iterator.aclose()  # type: ignore[attr-defined]
            await self._response.aclose()
        finally:
            self._closed()


def is_stream(response: httpx.Response) -> bool:
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "text/event-stream"


def completion(
    response: httpx.Response,
    error: Callable[..., UpstreamError],
    hide: Callable[[bytes], bytes] = lambda raw: raw,
) -> Completion:
    """A read answer as a Completion; a 2xx that is not a JSON object is UpstreamError. The
    body of a refusal (3xx, 4xx) goes through ``hide`` (the server's key and upstream address
    taken out: the caller sees it); a 2xx is kept byte for byte."""
    raw = response.content if response.status_code < 300 else hide(response.content)
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        if response.status_code < 300:
            raise error(
                f"not a chat completion: {wire.error_text(raw)}", status=response.status_code
            )
        body = None
    kind = response.headers.get("content-type", "application/json")
    return Completion(response.status_code, raw, body, kind)
