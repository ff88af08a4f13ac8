"""``synapsedb mcp``: SynapseDB as an MCP server on standard input and output.

With ``--data DIR`` the process opens the data directory itself (embedded: the directory's
owner, every namespace in it reachable); otherwise it is a client of the server at ``--url``,
whose ``--api-key`` decides tenant and scopes as for any request. Tools default to
``--namespace`` and write as ``--agent``. Standard output carries only MCP messages; errors at
start go to standard error with exit status 2 (docs/integrations/mcp.md).
"""

from __future__ import annotations

import argparse
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
    p = sub.add_parser("mcp", parents=[remote], help="an MCP server on stdio (embedded with "
                       "--data, else a client of --url)", description=DESCRIPTION)  # fmt: skip
    p.add_argument("--data", help="data directory to open in this process (embedded); without "
                   "it, the server at --url is used")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import synapsedb
    from synapsedb.integrations.mcp.stdio import run_stdio

    db = (
        synapsedb.open(args.data)
        if args.data
        else synapsedb.connect(args.url, api_key=args.api_key)
    )
    try:
        run_stdio(db, args.namespace, agent=args.agent)
    finally:
        db.close()
    return 0
