"""llama-cpp-python's OpenAI-compatible server, taught OpenAI's ``json_schema`` response format.

Run with .venv-llm's interpreter (it imports llama_cpp, which .venv never has), by
``tests/support/local_llm.py``; it takes ``python -m llama_cpp.server``'s arguments (``--model``,
``--model_alias``, ``--host``, ``--port``, ``--n_ctx``, ``--n_threads`` ...) plus ``--raw``.

Why: llama-cpp-python 0.3.36 accepts ``response_format`` types ``text`` and ``json_object``
only; its own extension ``{"type": "json_object", "schema": {...}}`` compiles the schema to a
grammar that constrains decoding. OpenAI's format, ``{"type": "json_schema", "json_schema":
{"name", "schema", "strict"}}`` (which llama.cpp's C++ ``llama-server``, vLLM, Ollama and OpenAI
accept), fails its request validation and is answered with a 500. :class:`JsonSchemaFormat`
rewrites the second form into the first before the app sees it, so a client asking in OpenAI's
format gets the same grammar-constrained answer; nothing else in a request or an answer changes.
``--raw`` serves the app as released, without the rewrite.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def rewrite(body: bytes) -> bytes:
    """``body`` with an OpenAI ``json_schema`` response format replaced by llama-cpp-python's
    ``json_object`` + ``schema``; any other body (not JSON, another format) unchanged."""
    try:
        request = json.loads(body)
    except ValueError:
        return body
    fmt = request.get("response_format") if isinstance(request, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return body
    spec = fmt.get("json_schema")
    replaced: dict[str, Any] = {"type": "json_object"}
    if isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
        replaced["schema"] = spec["schema"]
    request["response_format"] = replaced
    return json.dumps(request).encode()


class JsonSchemaFormat:
    """ASGI middleware: applies :func:`rewrite` to the body of ``POST .../chat/completions``."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"].endswith("/chat/completions")
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = rewrite(b"".join(chunks))
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:  # after the body: whatever comes next (a disconnect)
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)


def main(argv: list[str]) -> None:
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args_from_model(parser, Settings)
    parser.add_argument("--raw", action="store_true", help="serve without the json_schema rewrite")
    args = parser.parse_args(argv)
    server = parse_model_from_args(ServerSettings, args)
    app = create_app(
        server_settings=server, model_settings=[parse_model_from_args(ModelSettings, args)]
    )
    uvicorn.run(app if args.raw else JsonSchemaFormat(app), host=server.host, port=server.port)


if __name__ == "__main__":
    main(sys.argv[1:])
