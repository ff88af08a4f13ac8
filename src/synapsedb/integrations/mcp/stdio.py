"""``synapsedb mcp``: the MCP server over standard input and output, for one database this
process opened (embedded, or a remote server through the client)."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from .backend import Backend, LocalBackend
from .server import build_server

__all__ = ["run_stdio", "serve_stdio"]


async def serve_stdio(backend: Backend) -> None:
    """Serve one MCP client on this process's stdin/stdout until it closes them."""
    server = build_server(backend)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(db: Any, namespace: str = "default", *, agent: str | None = None) -> None:
    """Serve ``db`` (``synapsedb.open(path)`` or ``synapsedb.connect(url)``) over stdio, tools
    defaulting to ``namespace`` and writing as ``agent``."""
    anyio.run(serve_stdio, LocalBackend(db, namespace, agent=agent))
