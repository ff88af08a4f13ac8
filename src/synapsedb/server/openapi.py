"""The one OpenAPI document (``/openapi.json``) and a browsable rendering of it (``/docs``).

Both come from the operations table (:data:`synapsedb.surface.OPERATIONS`): each row's route,
its parameters and body fields with their kinds' schemas, and its answer, whose schema msgspec
generates from the value object the route returns, so the document cannot drift from the code.
It is what client generators read: a test generates a Python client with
openapi-python-client and runs the core story through it (tests/api/test_generated_client.py).
``/docs`` is plain HTML built from the same document: no scripts or assets from elsewhere.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

import msgspec
import numpy as np

from .. import __version__
from ..surface import Operation
from ..surface.operation import Field
from ..types import Message, WhoAmI

__all__ = ["WhoAmI", "build_document", "render_html"]

# JSON lines; also under the name generated clients know for bytes (the server takes and
# gives both: routes/admin.py)
NDJSON = {
    media: {"schema": {"type": "string", "format": "binary"}}
    for media in ("application/x-ndjson", "application/octet-stream")
}
STREAMS = {  # answers that are no JSON value
    "ndjson": NDJSON,
    "text": {"text/plain": {"schema": {"type": "string"}}},
    "event-stream": {"text/event-stream": {"schema": {"type": "string"}}},
}
INCLUDE: dict[str, Any] = {
    "name": "include",
    "in": "query",
    "required": False,
    "schema": {"type": "string"},
    "description": "embedding: each memory's vector too (left out by default)",
}
AGENT: dict[str, Any] = {
    "name": "X-Agent",
    "in": "header",
    "required": False,
    "schema": {"type": "string"},
    "description": "the agent acting (a key bound to agents must name one of them)",
}
ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
            "required": ["code", "message", "details"],
        }
    },
    "required": ["error"],
}


def _hook(tp: Any) -> dict[str, Any]:
    if tp is np.ndarray:
        return {"type": "array", "items": {"type": "number"}}
    raise NotImplementedError


def _plain_arrays(schema: Any) -> Any:
    """msgspec writes a tuple as ``prefixItems`` with ``"items": false``; generators refuse
    a boolean schema there, so the tuple's items are described by ``prefixItems`` alone (with
    its length fixed by minItems/maxItems)."""
    if isinstance(schema, dict):
        return {k: _plain_arrays(v) for k, v in schema.items() if not (k == "items" and v is False)}
    if isinstance(schema, list):
        return [_plain_arrays(v) for v in schema]
    return schema


def _described(field: Field) -> dict[str, Any]:
    schema = dict(field.kind.schema)
    if field.at == "query" and "type" not in schema:  # a query string carries text (a time)
        schema = {"type": "string", **{k: v for k, v in schema.items() if k != "anyOf"}}
    if field.doc:
        schema["description"] = field.doc
    return schema


def _parameters(op: Operation) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {
            "name": f.name,
            "in": f.at,
            "required": f.at == "path" or f.required,
            "schema": _described(f) if f.at == "query" else {"type": "string"},
            **({"description": f.doc} if f.doc else {}),
        }
        for f in op.where("path", "query")
    ]
    if op.namespaced:
        params.insert(
            0,
            {
                "name": "ns",
                "in": "path",
                "required": True,
                "schema": {"type": "string"},
                "description": "the namespace",
            },
        )
    if op.memories:
        params.append(INCLUDE)
    if op.where("agent"):
        params.append(AGENT)
    return params


def _request_body(op: Operation) -> dict[str, Any] | None:
    if op.body == "ndjson":
        return {"required": True, "content": NDJSON}
    fields, spreads = op.where("body"), op.where("spread")
    if not fields and not spreads:
        return None
    props = {f.name: _described(f) for f in fields}
    for f in spreads:
        props.update(f.properties)
    if op.agent_in_body:
        props["agent"] = {"type": "string", "description": "the agent acting"}
    schema: dict[str, Any] = {"type": "object", "properties": props}
    required = [f.name for f in fields if f.required]
    if required:
        schema["required"] = required
    if not any(f.rest for f in spreads):
        schema["additionalProperties"] = False
    body_required = bool(required) or any(f.rest for f in spreads)
    return {"required": body_required, "content": {"application/json": {"schema": schema}}}


def _alternatives(answer: Any) -> tuple[Any, ...]:
    """The types an answer may be (none for an answer that is no JSON value)."""
    if isinstance(answer, str):
        return ()
    return answer if isinstance(answer, tuple) else (answer,)


def build_document(operations: Iterable[Operation]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations`` (the rows of the operations table)."""
    ops = list(operations)
    answers = sorted({t for op in ops for t in _alternatives(op.answer)} | {Message}, key=repr)
    schemas, components = msgspec.json.schema_components(
        answers, schema_hook=_hook, ref_template="#/components/schemas/{name}"
    )
    by_type = dict(zip(answers, _plain_arrays(schemas), strict=True))
    components = _plain_arrays(components)
    components["Error"] = ERROR
    paths: dict[str, Any] = {}
    for op in ops:
        content: dict[str, Any] | None = (
            STREAMS.get(op.answer) if isinstance(op.answer, str) else None
        )
        if content is None:
            options = [by_type[t] for t in _alternatives(op.answer)]
            schema = options[0] if len(options) == 1 else {"anyOf": options}
            content = {"application/json": {"schema": schema}}
        entry: dict[str, Any] = {
            "operationId": op.operation_id,
            "summary": op.summary,
            "parameters": _parameters(op),
            "responses": {
                str(op.status): {"description": op.summary, "content": content},
                "default": {
                    "description": "an error",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                    },
                },
            },
        }
        if op.scope is not None:
            entry["x-scope"] = op.scope
        body = _request_body(op)
        if body is not None:
            entry["requestBody"] = body
        paths.setdefault(op.route, {})[op.method.lower()] = entry
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "SynapseDB",
            "version": __version__,
            "description": "Memory for LLM agents: KV facts, memories, streams, hybrid "
            "query, time travel, lineage.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }


def render_html(doc: dict[str, Any]) -> str:
    """A readable page of the document: every route, its parameters and answer."""
    e = html.escape
    rows = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            params = ", ".join(
                f"{p['name']}{'' if p['required'] else '?'}" for p in op["parameters"]
            )
            body = op.get("requestBody", {}).get("content", {})
            fields = ""
            for spec in body.values():
                props = spec.get("schema", {}).get("properties")
                fields = ", ".join(props) if props else "JSON lines"
            status = next(iter(op["responses"]))
            content = op["responses"][status]["content"]
            schema = next(iter(content.values()))["schema"]
            answer = schema.get("$ref", "").rsplit("/", 1)[-1] or schema.get("type", "")
            if schema.get("type") == "array" and "$ref" in schema.get("items", {}):
                answer = f"list of {schema['items']['$ref'].rsplit('/', 1)[-1]}"
            rows.append(
                f"<tr><td><b>{e(method.upper())}</b></td><td><code>{e(path)}</code></td>"
                f"<td>{e(op['summary'])}</td><td>{e(params)}</td><td>{e(fields)}</td>"
                f"<td>{e(status)} {e(answer)}</td></tr>"
            )
    schemas = "".join(
        f"<h3 id='{e(n)}'>{e(n)}</h3><pre>{e(msgspec.json.format(msgspec.json.encode(s)).decode())}</pre>"
        for n, s in doc["components"]["schemas"].items()
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>SynapseDB API</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{padding:4px 8px;border-bottom:1px "
        "solid #ddd;vertical-align:top}pre{background:#f6f6f6;padding:8px}</style></head><body>"
        f"<h1>SynapseDB API {e(doc['info']['version'])}</h1><p>{e(doc['info']['description'])} "
        "The machine-readable document is <a href='/openapi.json'>/openapi.json</a>; errors are "
        '<code>{"error": {code, message, details}}</code>.</p><table><tr><th>method</th>'
        "<th>path</th><th>does</th><th>query</th><th>body</th><th>answer</th></tr>"
        + "".join(rows)
        + "</table><h2>Schemas</h2>"
        + schemas
        + "</body></html>"
    )
