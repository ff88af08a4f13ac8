"""ScriptedUpstream: a stand-in for a hosted model (OpenAI, vLLM, Ollama ...) in tests.

It is a real HTTP server on 127.0.0.1 (a free port, a ThreadingHTTPServer in a thread) that
speaks OpenAI's ``POST /v1/chat/completions`` wire format, non-streaming and streaming
(``"stream": true`` answers server-sent events, ``data: {chunk}`` lines ending with
``data: [DONE]``), so code under test crosses a real socket exactly as with a hosted model.
What it answers comes from a script, not a model:

- a queue of :class:`Reply` values (``push``), taken one per chat request, or
- a function of the :class:`Request` (``responder``), used when the queue is empty.

A reply can be text, JSON, an error status with a body and ``Retry-After``, a slow answer,
a dropped connection, or a stream cut off after some chunks. ``refuse_formats`` makes it
refuse ``response_format`` types the way an older server does (a 400 naming the parameter),
without consuming the script. Every request it receives is recorded in :attr:`requests`.

    with ScriptedUpstream([Reply.text("Hello!"), Reply.error(503, retry_after=1)]) as up:
        settings = LLMSettings(base_url=up.base_url, model="any")
        ...
        assert up.requests[0].body["messages"][0]["content"] == "Hi"
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Reply", "Request", "ScriptedUpstream"]

MODEL = "scripted-model"


@dataclass(frozen=True)
class Request:
    """One request the upstream received (any path), in arrival order."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    body: Any  # the decoded JSON body (None if absent or not JSON)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def response_format(self) -> dict[str, Any] | None:
        fmt = (self.body or {}).get("response_format")
        return fmt if isinstance(fmt, dict) else None

    @property
    def stream(self) -> bool:
        return bool((self.body or {}).get("stream"))


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``content`` is the assistant's text (a 200). ``body``, when given, is answered as it is
    instead, with ``status`` (an error status without a body answers an OpenAI error object). ``delay_s`` waits before answering (cut short
    when the upstream closes); ``drop`` closes the connection without a word; ``chunks`` is how
    a streamed answer is split (default: word by word) and ``drop_after`` cuts the stream off
    after that many content chunks. ``headers`` are added to the answer.
    """

    content: str = ""
    status: int = 200
    body: bytes | dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False
    finish_reason: str = "stop"
    model: str | None = None
    refusal: str | None = None
    chunks: tuple[str, ...] | None = None
    chunk_delay_s: float = 0.0
    drop_after: int | None = None

    @classmethod
    def text(cls, content: str, **kw: Any) -> Reply:
        return cls(content=content, **kw)

    @classmethod
    def json(cls, value: Any, **kw: Any) -> Reply:
        """An answer whose text is ``value`` as JSON (what a structured-output call wants)."""
        return cls(content=json.dumps(value), **kw)

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "scripted failure",
        *,
        retry_after: float | str | None = None,
        kind: str = "server_error",
        param: str | None = None,
    ) -> Reply:
        """An OpenAI-shaped error answer, with ``Retry-After`` if given."""
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
        return cls(status=status, body=body, headers=headers)

    @classmethod
    def slow(cls, seconds: float, content: str = "late") -> Reply:
        return cls(content=content, delay_s=seconds)

    @classmethod
    def dropped(cls) -> Reply:
        """Close the connection without answering (a crashed or restarted server)."""
        return cls(drop=True)


Script = Reply | str | dict[str, Any]
Responder = Callable[[Request], Script]


def _as_reply(item: Script) -> Reply:
    if isinstance(item, Reply):
        return item
    if isinstance(item, str):
        return Reply.text(item)
    return Reply.json(item)


class ScriptedUpstream:
    """A stand-in for a hosted OpenAI-compatible model; see the module docstring."""

    def __init__(
        self,
        replies: Iterable[Script] = (),
        *,
        responder: Responder | None = None,
        refuse_formats: Iterable[str] = (),
        model: str = MODEL,
    ) -> None:
        self._queue: deque[Reply] = deque(_as_reply(r) for r in replies)
        self.responder = responder
        self.refuse_formats = frozenset(refuse_formats)
        self.model = model
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.upstream = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True, name="scripted-upstream"
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``http://127.0.0.1:<port>/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: Script) -> None:
        """Queue replies for the next chat requests, in order."""
        with self._lock:
            self._queue.extend(_as_reply(r) for r in replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        return len(self._queue)

    def chat_requests(self) -> list[Request]:
        """The chat-completion requests received so far."""
        return [r for r in list(self.requests) if r.path.endswith("/chat/completions")]

    def close(self) -> None:
        self._stopping.set()  # cuts slow answers short
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedUpstream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- used by the handler -------------------------------------------------------------------

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _next(self, request: Request) -> Reply:
        fmt = request.response_format
        if fmt is not None and fmt.get("type") in self.refuse_formats:
            return Reply.error(
                400,
                f"response_format type '{fmt.get('type')}' is not supported by this server",
                kind="invalid_request_error",
                param="response_format",
            )
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return _as_reply(self.responder(request))
        return Reply.error(500, "the script has no reply left for this request")

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    upstream: ScriptedUpstream

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a timeout under test, a dropped connection) is expected;
        anything else is a bug in the script and is printed."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in separate writes: with Nagle's algorithm the body waits for
    # the client's delayed ACK (~40 ms per answer on Linux), which a hosted model does not add
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        request = self._read()
        self.server.upstream._record(request)
        if request.path.rstrip("/").endswith("/models"):
            model = self.server.upstream.model
            self._json(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
        else:
            self._json(404, _error_body(f"no route GET {request.path}", "not_found"))

    def do_POST(self) -> None:
        request = self._read()
        upstream = self.server.upstream
        upstream._record(request)
        if not request.path.endswith("/chat/completions"):
            self._json(404, _error_body(f"no route POST {request.path}", "not_found"))
            return
        if not isinstance(request.body, dict) or not request.messages:
            self._json(400, _error_body("messages: required", "invalid_request_error"))
            return
        reply = upstream._next(request)
        upstream._wait(reply.delay_s)
        if reply.drop:
            self._drop()
        elif reply.status != 200 or reply.body is not None:
            body = reply.body if reply.body is not None else _error_body("scripted", "error")
            self._send(reply.status, body, reply.headers)
        elif request.stream:
            self._stream(request, reply)
        else:
            self._json(200, _completion(request, reply, upstream.model), reply.headers)

    # -- helpers -------------------------------------------------------------------------------

    def _read(self) -> Request:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        return Request(self.command, self.path, headers, raw, body)

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send(self, status: int, body: bytes | dict[str, Any], headers: dict[str, str]) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self._send(status, body, headers or {})

    def _stream(self, request: Request, reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        upstream = self.server.upstream
        for n, chunk in enumerate(_chunks(request, reply, upstream.model)):
            if reply.drop_after is not None and n > reply.drop_after:
                self._drop()  # the role chunk, then ``drop_after`` content chunks
                return
            line = b"data: " + (chunk if isinstance(chunk, bytes) else json.dumps(chunk).encode())
            self._chunk(line + b"\n\n")
            if n > 0:
                upstream._wait(reply.chunk_delay_s)
        self._chunk(b"")  # the terminating zero-length chunk

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _error_body(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _words(text: str) -> int:
    return len(text.split())


def _usage(request: Request, content: str) -> dict[str, int]:
    prompt = sum(
        _words(m.get("content") or "")
        for m in request.messages
        if isinstance(m.get("content"), str)
    )
    done = _words(content)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def _ids() -> tuple[str, int]:
    return f"chatcmpl-scripted-{time.monotonic_ns():x}", int(time.time())


def _completion(request: Request, reply: Reply, default_model: str) -> dict[str, Any]:
    ident, created = _ids()
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.refusal is not None:
        message.update(content=None, refusal=reply.refusal)
    return {
        "id": ident,
        "object": "chat.completion",
        "created": created,
        "model": reply.model or (request.body or {}).get("model") or default_model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": _usage(request, reply.content),
    }


def _chunks(request: Request, reply: Reply, default_model: str) -> Iterator[dict[str, Any] | bytes]:
    """The SSE payloads of a streamed answer: a role chunk, the content chunks, a final chunk
    with the finish reason, a usage chunk if ``stream_options.include_usage``, ``[DONE]``."""
    ident, created = _ids()
    model = reply.model or (request.body or {}).get("model") or default_model

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    pieces = reply.chunks
    if pieces is None:
        words = reply.content.split(" ")
        pieces = tuple(w if i == len(words) - 1 else w + " " for i, w in enumerate(words))
    for piece in pieces:
        if piece:
            yield chunk({"content": piece})
    yield chunk({}, reply.finish_reason)
    options = (request.body or {}).get("stream_options") or {}
    if options.get("include_usage"):
        usage = {**chunk({}), "choices": [], "usage": _usage(request, reply.content)}
        yield usage
    yield b"[DONE]"
