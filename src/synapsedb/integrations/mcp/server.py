"""The MCP server (the official SDK's low-level ``Server``) over a :class:`Backend`.

Tools are listed with the schemas of :mod:`.tools`; a call is checked, bound to its namespace
by the backend (over HTTP: the API key of the request carrying it, with the scope the tool
needs) and run in a worker thread, since namespace methods wait for commits or the embedder.
A SynapseError becomes a tool error (``isError``) whose structured content is the HTTP API's
error body, ``{"error": {"code", "message", "details"}}``, so a client sees the same code and
field as a REST caller; the text content carries the same JSON for models that read only text.
Resource errors are JSON-RPC errors whose ``data`` is that body.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ... import __version__
from ...errors import SynapseError
from .backend import Backend, Bound
from .encode import to_json
from .resources import TEMPLATES, entities_uri, entity_uri, page, parse_uri
from .schemas import output_schema
from .tools import TOOLS, ToolSpec, check_arguments

__all__ = ["RESOURCE_NOT_FOUND", "build_server", "error_body"]

log = logging.getLogger("synapsedb.mcp")

RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for an unknown resource
JSON = "application/json"
INSTRUCTIONS = (
    "SynapseDB is a shared memory for agents. remember stores a memory about an entity; recall "
    "finds memories by meaning (as_of: what was known at a past moment; filter, types, "
    "since/until: narrower); get_fact/set_fact keep versioned key-value facts; history shows "
    "every version; forget tombstones (history keeps it). After answering from recalled "
    "memories, record_answer with the recall's query_id lets lineage show what the answer "
    "rested on. Resources: each entity of the namespace and what is known about it."
)

Ctx = ServerRequestContext[Any, Any]


def error_body(err: SynapseError) -> dict[str, Any]:
    """The HTTP API's error body for ``err``."""
    return {"error": to_json(err.to_dict())}


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema(),
        output_schema=output_schema(spec.name),
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )


def _result(value: Any) -> types.CallToolResult:
    data = to_json(value)
    if not isinstance(data, dict):
        data = {"result": data}
    text = json.dumps(data, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)


def _error_result(err: SynapseError) -> types.CallToolResult:
    body = error_body(err)
    text = json.dumps(body, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=body, is_error=True
    )


def _rpc_error(err: SynapseError) -> MCPError:
    code = {404: RESOURCE_NOT_FOUND, 422: types.INVALID_PARAMS}.get(
        err.http_status, types.INTERNAL_ERROR
    )
    return MCPError(code=code, message=f"{err.code}: {err.message}", data=error_body(err))


def _published(err: SynapseError, bound: Bound | None) -> SynapseError:
    return err if bound is None else bound.publish(err)


def build_server(backend: Backend, *, name: str = "synapsedb") -> Server[Any]:
    """An MCP server whose every tool and resource reaches namespaces through ``backend``."""

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return types.ListToolsResult(tools=[_tool(spec) for spec in TOOLS.values()])

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        spec = TOOLS.get(params.name)
        if spec is None:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"unknown tool {params.name[:100]!r}; the tools are {', '.join(TOOLS)}",
            )
        bound = None
        try:
            args = check_arguments(spec, params.arguments)
            bound = backend.bind(ctx.request, args.pop("namespace", None), spec.scope_for(args))
            ns = bound.ns
            value = await anyio.to_thread.run_sync(lambda: spec.run(ns, args))
        except SynapseError as err:
            return _error_result(_published(err, bound))
        except Exception:  # a bug: logged, and still the one error shape
            log.exception("MCP tool %s failed", spec.name)
            return _error_result(SynapseError("internal error (logged on the server)"))
        return _result(value)

    async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        bound = None
        try:
            bound = backend.bind(ctx.request, None, "read")
            ns = bound.ns
            cursor = params.cursor if params is not None else None
            chunk, after = await anyio.to_thread.run_sync(lambda: page(ns, cursor))
        except SynapseError as err:
            raise _rpc_error(_published(err, bound)) from None
        public = bound.public
        found = []
        if params is None or params.cursor is None:
            found.append(
                types.Resource(
                    uri=entities_uri(public),
                    name=f"{public}: entities",
                    mime_type=JSON,
                    description=f"The entities of namespace {public!r} with something visible",
                )
            )
        for entity in chunk:
            found.append(
                types.Resource(
                    uri=entity_uri(public, entity),
                    name=entity,
                    title=entity,
                    mime_type=JSON,
                    description=f"What is known about {entity} in namespace {public!r}: its "
                    "facts, memories and events",
                )
            )
        return types.ListResourcesResult(resources=found, next_cursor=after)

    async def list_templates(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=uri, name=tname, description=doc, mime_type=JSON
                )
                for tname, uri, doc in TEMPLATES
            ]
        )

    async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> Any:
        bound = None
        try:
            ref = parse_uri(params.uri)
            bound = backend.bind(ctx.request, ref.namespace, "read")
            ns = bound.ns
            value = await anyio.to_thread.run_sync(lambda: ref.read(ns))
        except SynapseError as err:
            raise _rpc_error(_published(err, bound)) from None
        except Exception:
            log.exception("MCP resource %s failed", params.uri[:200])
            raise _rpc_error(SynapseError("internal error (logged on the server)")) from None
        text = json.dumps(to_json(value), ensure_ascii=False)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, text=text, mime_type=JSON)]
        )

    return Server(
        name,
        version=__version__,
        title="SynapseDB",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
