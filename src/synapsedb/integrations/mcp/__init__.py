"""SynapseDB as an MCP server (the official ``mcp`` SDK; ``pip install 'synapsedb[mcp]'``).

* ``synapsedb mcp --data DIR`` (embedded) or ``synapsedb mcp --url URL --api-key KEY``: stdio,
  for MCP clients that start servers as commands (:func:`run_stdio`);
* ``synapsedb serve`` answers MCP's streamable HTTP at ``/mcp`` (:class:`McpEndpoint`), where
  the API key of each request decides tenant and scopes exactly as for the REST routes.

Tools (:mod:`.tools`): remember, remember_conversation, recall (``as_of``, filters),
get_memory, get_fact, set_fact, history, forget, lineage, record_answer. Resources
(:mod:`.resources`): a namespace's entities and what is known about each. docs/integrations/mcp.md
has the client configuration. The SDK is imported only by :mod:`.server` and :mod:`.stdio`
(and by the HTTP endpoint at its first request), so ``synapsedb serve`` starts without it.
"""

from __future__ import annotations

from .backend import Backend, Bound, LocalBackend
from .http import McpEndpoint, ServedBackend
from .tools import TOOLS, ToolSpec

__all__ = ["TOOLS", "Backend", "Bound", "LocalBackend", "McpEndpoint", "ServedBackend", "ToolSpec"]
