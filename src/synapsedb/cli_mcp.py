"""``synapsedb mcp``: SynapseDB as an MCP server on standard input and output.

With ``--data DIR`` the process opens the data directory itself (embedded: the directory's
owner, every namespace in it reachable); otherwise it is a client of the server at ``--url``,
whose ``--api-key`` decides tenant and scopes as for any request. Tools default to
``--namespace`` and write as ``--agent``. Standard output carries only MCP messages; errors at
start go to standard error, and to the host as the JSON-RPC error answering its
``initialize`` (what hosts display), with exit status 2 (docs/integrations/mcp.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_parser"]

DESCRIPTION = (
    "Serve SynapseDB to an MCP client (Claude Desktop, an IDE, an agent framework) over stdio: "
    "tools remember, recall (as_of, filters), get/set facts, history, forget, lineage and "
    "record_answer, and the namespace's entities as resources. --data DIR opens a data "
    "directory in this process; without it the tools call the server at --url with --api-key."
)


def add_parser(sub: Any, remote: argparse.ArgumentParser) -> None:
    """Register ``mcp`` (``remote`` gives ``--url``, ``--api-key``, ``--namespace``,
    ``--agent``)."""
    p = sub.add_parser(
        "mcp",
        parents=[remote],
        help="an MCP server on stdio (embedded with --data, else a client of --url)",
        description=DESCRIPTION,
    )
    p.add_argument(
        "--data",
        help="data directory to open in this process (embedded); without "
        "it, the server at --url is used",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import anyio

    import synapsedb
    from synapsedb.errors import SynapseError
    from synapsedb.integrations.mcp.backend import LocalBackend
    from synapsedb.integrations.mcp.stdio import refuse_stdio, serve_stdio

    db = None
    try:
        db = (
            synapsedb.open(args.data)
            if args.data
            else synapsedb.connect(args.url, api_key=args.api_key)
        )
        backend = LocalBackend(db, args.namespace, agent=args.agent)  # checks both names
    except SynapseError as err:  # on stderr, and to the host's initialize, which it shows
        if db is not None:
            db.close()
        print(f"error [{err.code}]: {err.message}", file=sys.stderr, flush=True)
        refuse_stdio(err)
        return 2
    try:
        anyio.run(serve_stdio, backend)
    finally:
        db.close()
    return 0
