"""``synapsedb mcp``: the MCP server over standard input and output, for one database this
process opened (embedded, or a remote server through the client).

When it cannot start (the data directory is held by another process, a bad namespace ...),
saying so on standard error alone is not enough: a host that started the command shows its
user only "Connection closed". :func:`refuse_stdio` answers the host's first request (its
``initialize``) with a JSON-RPC error carrying the reason, which hosts display, then ends.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from ...errors import SynapseError
from .backend import Backend, LocalBackend

__all__ = ["REFUSED", "refuse_stdio", "run_stdio", "serve_stdio"]

REFUSED = -32000  # JSON-RPC's first server-defined error code: the server could not start


async def serve_stdio(backend: Backend) -> None:
    """Serve one MCP client on this process's stdin/stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    from .server import build_server

    server = build_server(backend)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(db: Any, namespace: str = "default", *, agent: str | None = None) -> None:
    """Serve ``db`` (``synapsedb.open(path)`` or ``synapsedb.connect(url)``) over stdio, tools
    defaulting to ``namespace`` and writing as ``agent``."""
    import anyio

    anyio.run(serve_stdio, LocalBackend(db, namespace, agent=agent))


def refuse_stdio(
    err: SynapseError, stdin: IO[str] | None = None, stdout: IO[str] | None = None
) -> None:
    """Answer the first request read from ``stdin`` (MCP's stdio transport: one JSON-RPC
    message a line) with a JSON-RPC error saying ``err`` (``code: message``; ``data`` the HTTP
    API's error body), then return; at end of input, return without a word. Notifications
    and lines that are not JSON-RPC requests are skipped."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    error = {
        "code": REFUSED,
        "message": f"{err.code}: {err.message}",
        "data": {"error": err.to_dict()},
    }
    for line in stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and "method" in msg and msg.get("id") is not None:
            stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error}) + "\n")
            stdout.flush()
            return
