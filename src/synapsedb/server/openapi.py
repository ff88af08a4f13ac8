"""The one OpenAPI document (``/openapi.json``) and a browsable rendering of it (``/docs``).

Response schemas are generated from the value objects the routes return (msgspec), so they
cannot drift from the code; every route must have an entry in :data:`OPERATIONS` (tested).
``/docs`` is plain HTML built from the same document: no scripts or assets from elsewhere.
"""

from __future__ import annotations

import html
from typing import Any

import msgspec
import numpy as np

from .. import __version__
from ..types import (
    AuditEntry,
    CacheEntry,
    CacheHit,
    CacheStats,
    Event,
    Fact,
    Forgotten,
    Lineage,
    MaintenanceReport,
    Memory,
    Message,
    NamespaceConfig,
    QueryResult,
    Recalled,
    Remembered,
    SessionInfo,
    SessionMessages,
    Snapshot,
    Stats,
)

__all__ = ["OPERATIONS", "WhoAmI", "build_document", "render_html"]


class WhoAmI(msgspec.Struct, forbid_unknown_fields=True):
    """``GET /v1/whoami``'s answer (routes/console.py ``describe``; a test holds the two
    together): what the caller's key may do, never its secret."""

    auth: str  # the server's auth mode: none or keys
    key: str | None  # the key's id (null in none mode)
    tenant: str | None
    scopes: list[str]
    namespaces: list[str] | None  # null: any namespace
    agents: list[str] | None  # null: any agent


Q = "query"
# Answers holding memories leave their vectors out unless asked (docs/http.md#lean-answers)
INCLUDE = ("include", "string", False, "embedding: each memory's vector too (left out by default)")
# (method, path) -> summary, query parameters [(name, type, required)], body fields, answer
OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/healthz"): {"summary": "Alive", "answer": dict},
    ("GET", "/readyz"): {"summary": "Storage open and serving", "answer": dict},
    ("GET", "/metrics"): {
        "summary": "Prometheus metrics (admin key once keys exist)",
        "answer": "text",
    },
    ("GET", "/v1/namespaces"): {"summary": "Namespace names", "answer": list[str]},
    ("GET", "/v1/whoami"): {
        "summary": "The caller's key: auth mode, key id, tenant, scopes, namespaces and agents "
        "(null: any); 401 without a live key in keys mode",
        "answer": WhoAmI,
    },
    ("POST", "/memories"): {
        "summary": "Write a memory",
        "status": 201,
        "params": [INCLUDE],
        "answer": Memory,
        "body": [
            "entity",
            "content",
            "type",
            "metadata",
            "embedding",
            "salience",
            "ts",
            "agent",
            "pinned",
            "ttl",
            "id",
            "valid_from",
            "valid_to",
        ],
    },
    ("GET", "/memories"): {
        "summary": "List memories, newest event time first",
        "params": [
            ("entity", "string", False),
            ("types", "string", False),
            ("as_of", "string", False),
            ("valid_at", "string", False),
            ("limit", "integer", False),
            ("before", "string", False, "a memory id: the page after it (older), to page"),
            INCLUDE,
        ],
        "answer": list[Memory],
    },
    ("POST", "/memories:batch"): {
        "summary": "Write many memories, all or none",
        "status": 201,
        "params": [INCLUDE],
        "body": ["items", "agent"],
        "answer": list[Memory],
    },
    ("GET", "/memories/{id}"): {
        "summary": "One memory",
        "params": [("as_of", "string", False), INCLUDE],
        "answer": Memory,
    },
    ("PATCH", "/memories/{id}"): {
        "summary": "Update a memory (a new version)",
        "params": [INCLUDE],
        "body": ["changes", "if_version", "agent"],
        "answer": Memory,
    },
    ("DELETE", "/memories/{id}"): {
        "summary": "Delete a memory (tombstone)",
        "params": [("if_version", "integer", False), INCLUDE],
        "answer": Memory,
    },
    ("GET", "/memories/{id}/history"): {
        "summary": "Every version of a memory",
        "params": [("as_of", "string", False), INCLUDE],
        "answer": list[Memory],
    },
    ("GET", "/facts"): {
        "summary": "One KV fact (entity and key) or an entity's facts",
        "params": [
            ("entity", "string", True),
            ("key", "string", False),
            ("as_of", "string", False),
        ],
        "answer": Fact,
    },
    ("PUT", "/facts"): {
        "summary": "Set a KV fact",
        "body": ["entity", "key", "value", "if_version", "ttl", "agent"],
        "answer": Fact,
    },
    ("DELETE", "/facts"): {
        "summary": "Delete a KV fact (tombstone)",
        "params": [
            ("entity", "string", True),
            ("key", "string", True),
            ("if_version", "integer", False),
        ],
        "answer": Fact,
    },
    ("GET", "/facts/history"): {
        "summary": "Every version of a KV fact",
        "params": [("entity", "string", True), ("key", "string", True), ("as_of", "string", False)],
        "answer": list[Fact],
    },
    ("POST", "/events"): {
        "summary": "Append to a stream (and a searchable event memory)",
        "status": 201,
        "body": ["entity", "event", "stream", "searchable", "agent"],
        "answer": Event,
    },
    ("GET", "/events"): {
        "summary": "Read a stream",
        "params": [
            ("stream", "string", True),
            ("start", "string", False),
            ("end", "string", False),
            ("after", "string", False),
            ("since", "string", False),
            ("until", "string", False),
            ("limit", "integer", False),
            ("order", "string", False),
            ("as_of", "string", False),
        ],
        "answer": list[Event],
    },
    ("GET", "/events/follow"): {
        "summary": "Server-Sent Events: follow a stream live",
        "params": [
            ("stream", "string", True),
            ("after", "string", False),
            ("idle_timeout", "number", False),
        ],
        "answer": "event-stream",
    },
    ("GET", "/changes"): {
        "summary": "Server-Sent Events: follow every change committed in the namespace",
        "params": [
            ("entity", "string", False),
            ("since", "string", False),
            ("after", "string", False),
            ("idle_timeout", "number", False),
        ],
        "answer": "event-stream",
    },
    ("POST", "/query"): {
        "summary": "Hybrid query by meaning and keywords, inside filters",
        "body": [
            "text",
            "embedding",
            "entity",
            "filter",
            "k",
            "mode",
            "as_of",
            "valid_at",
            "min_score",
            "types",
            "since",
            "until",
            "dedup",
            "explain",
            "agent",
            "tiers",
            "include_ended",
        ],
        "answer": QueryResult,
    },
    ("POST", "/answers"): {
        "summary": "Record an answer and what it was built on",
        "status": 201,
        "body": ["answer_id", "query_ids", "agent", "text", "cited", "entities"],
        "answer": Lineage,
    },
    ("POST", "/chat/completions"): {
        "summary": "Memory proxy: OpenAI chat completions (stream or not) with the entity's "
        "memories, forwarded to the upstream model (docs/proxy.md; OpenAI's error shape)",
        "answer": dict,
    },
    ("POST", "/responses"): {
        "summary": "Memory proxy: OpenAI's Responses API (input, instructions, "
        "previous_response_id, stream) over the upstream model (docs/proxy.md)",
        "answer": dict,
    },
    ("POST", "/v1/chat/completions"): {
        "summary": "Memory proxy in the server's default namespace (--proxy-namespace)",
        "answer": dict,
    },
    ("POST", "/v1/responses"): {
        "summary": "Memory proxy's Responses API in the default namespace (--proxy-namespace)",
        "answer": dict,
    },
    ("POST", "/remember"): {
        "summary": "Store conversation turns and extract typed memories (the memory loop)",
        "body": ["messages", "entity", "session", "agent", "memories", "wait"],
        "answer": Remembered,
    },
    ("POST", "/recall"): {
        "summary": "The memories a conversation's last turn needs, as a context block",
        "body": [
            "messages",
            "text",
            "entity",
            "budget_tokens",
            "k",
            "threshold",
            "rewrite",
            "agent",
        ],
        "answer": Recalled,
    },
    ("GET", "/sessions"): {
        "summary": "Ids of the conversation sessions with messages (not cleared, not expired)",
        "params": [("as_of", "string", False), ("ttl", "number", False)],
        "answer": list[str],
    },
    ("GET", "/sessions/{sid}"): {
        "summary": "A session's counts and times",
        "params": [
            ("as_of", "string", False),
            ("count_limit", "integer", False),
            ("ttl", "number", False),
        ],
        "answer": SessionInfo,
    },
    ("DELETE", "/sessions/{sid}"): {
        "summary": "Clear a session (history keeps it), or purge=true: erase it (admin)",
        "params": [("purge", "boolean", False)],
        "answer": dict,
    },
    ("PUT", "/sessions/{sid}"): {
        "summary": "Set a session's own ttl in seconds (null: it never expires)",
        "body": ["ttl", "agent"],
        "answer": dict,
    },
    ("POST", "/sessions:purge_expired"): {
        "summary": "Erase every expired session (admin); their ids",
        "body": ["ttl", "agent"],
        "answer": list[str],
    },
    ("POST", "/sessions/{sid}/search"): {
        "summary": "A session's searchable messages most relevant to a text, oldest first",
        "body": ["text", "k", "as_of", "exclude", "ttl"],
        "answer": list[Message],
    },
    ("POST", "/sessions/{sid}/messages"): {
        "summary": "Append a message, or a list of messages, to a session",
        "status": 201,
        "body": ["message", "messages", "searchable", "entity", "agent"],
        "answer": Message | list[Message],
    },
    ("GET", "/sessions/{sid}/messages"): {
        "summary": "A session's messages, all, the last N, as of a time, or as a strategy "
        "gives them (summary strategies store the summary: write scope)",
        "params": [
            ("last", "integer", False),
            ("as_of", "string", False),
            ("ttl", "number", False),
            ("strategy", "string", False),
            ("k", "integer", False),
            ("max_tokens", "integer", False),
            ("model", "string", False),
            ("keep", "integer", False),
            ("summary_tokens", "integer", False),
        ],
        "answer": SessionMessages,
    },
    ("GET", "/answers/{answer_id}/lineage"): {
        "summary": "An answer's lineage",
        "answer": Lineage,
    },
    ("GET", "/audit"): {
        "summary": "Who wrote and read what, when",
        "params": [
            ("entity", "string", False),
            ("agent", "string", False),
            ("since", "string", False),
            ("until", "string", False),
            ("limit", "integer", False),
        ],
        "answer": list[AuditEntry],
    },
    ("GET", "/snapshot"): {
        "summary": "Everything known about an entity at a moment",
        "params": [("entity", "string", True), ("as_of", "string", False), INCLUDE],
        "answer": Snapshot,
    },
    ("POST", "/forget"): {
        "summary": "Forget a memory or an entity (purge: erase; admin)",
        "body": ["id", "entity", "purge", "agent"],
        "answer": Forgotten,
    },
    ("POST", "/maintain"): {
        "summary": "Run maintenance (admin)",
        "body": ["dry_run"],
        "answer": MaintenanceReport,
    },
    ("GET", "/export"): {"summary": "Every stored row as JSON lines (admin)", "answer": "ndjson"},
    ("POST", "/import"): {
        "summary": "Import JSON lines into an empty namespace (admin)",
        "status": 201,
        "body": "ndjson",
        "answer": dict,
    },
    ("GET", "/config"): {"summary": "Lifecycle settings", "answer": NamespaceConfig},
    ("PUT", "/config"): {
        "summary": "Change lifecycle settings (admin)",
        "body": "config",
        "answer": NamespaceConfig,
    },
    ("GET", "/entities"): {
        "summary": "Entity names with something visible, sorted (all of them without limit: "
        "page a large namespace)",
        "params": [
            ("as_of", "string", False),
            ("prefix", "string", False, "only names starting with it"),
            ("after", "string", False, "only names sorting after it: the last of a page"),
            ("limit", "integer", False, "at most this many, 1 to 10,000 (default: all)"),
        ],
        "answer": list[str],
    },
    ("GET", "/streams"): {
        "summary": "Stream names with an event visible, sorted (all of them without limit: "
        "page a large namespace)",
        "params": [
            ("as_of", "string", False),
            ("prefix", "string", False, "only names starting with it"),
            ("after", "string", False, "only names sorting after it: the last of a page"),
            ("limit", "integer", False, "at most this many, 1 to 10,000 (default: all)"),
        ],
        "answer": list[str],
    },
    ("GET", "/stats"): {"summary": "Counts and bytes", "answer": Stats},
    ("POST", "/cache:lookup"): {
        "summary": "Semantic cache: the entry of a scope whose key means the same (null: a miss)",
        "body": ["key", "scope", "params", "threshold", "match_literals", "agent"],
        "answer": CacheHit | None,
    },
    ("POST", "/cache"): {
        "summary": "Semantic cache: store a JSON value under a key in a scope",
        "status": 201,
        "body": ["key", "value", "scope", "params", "ttl", "tags", "match_literals", "agent"],
        "answer": CacheEntry,
    },
    ("POST", "/cache:invalidate"): {
        "summary": "Semantic cache: remove entries by key, tag, prefix or scope, or all",
        "body": ["key", "scope", "params", "tag", "prefix", "all", "match_literals", "agent"],
        "answer": dict[str, int],
    },
    ("GET", "/cache/stats"): {
        "summary": "Semantic cache: entries, and the server's hits, misses, stores",
        "answer": CacheStats,
    },
}
NS_PREFIX = "/v1/namespaces/{ns}"


def _hook(tp: Any) -> dict[str, Any]:
    if tp is np.ndarray:
        return {"type": "array", "items": {"type": "number"}}
    raise NotImplementedError


def key_of(method: str, path: str) -> tuple[str, str]:
    return (method, path.removeprefix(NS_PREFIX) if path.startswith(NS_PREFIX) else path)


def build_document(routes: list[tuple[str, str]]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes`` ((method, path) pairs of the app)."""
    types = sorted({op["answer"] for op in OPERATIONS.values() if not isinstance(op["answer"], str)},
                   key=repr)  # fmt: skip
    schemas, components = msgspec.json.schema_components(
        types, schema_hook=_hook, ref_template="#/components/schemas/{name}"
    )
    by_type = dict(zip(types, schemas, strict=True))
    error = {"type": "object", "properties": {"error": {"type": "object", "properties": {
        "code": {"type": "string"}, "message": {"type": "string"},
        "details": {"type": "object"}}}}}  # fmt: skip
    components["Error"] = error
    paths: dict[str, Any] = {}
    for method, path in routes:
        op = OPERATIONS[key_of(method, path)]
        answer = op["answer"]
        if answer == "text":
            content: dict[str, Any] = {"text/plain": {"schema": {"type": "string"}}}
        elif answer == "ndjson":
            content = {"application/x-ndjson": {"schema": {"type": "string"}}}
        elif answer == "event-stream":
            content = {"text/event-stream": {"schema": {"type": "string"}}}
        else:
            content = {"application/json": {"schema": by_type[answer]}}
        params = [{"name": n, "in": "query", "required": r, "schema": {"type": t},
                   **({"description": more[0]} if more else {})}
                  for n, t, r, *more in op.get("params", [])]  # fmt: skip
        for name in ("ns", "id", "answer_id", "sid"):
            if "{" + name + "}" in path:
                params.insert(0, {"name": name, "in": "path", "required": True,
                                  "schema": {"type": "string"}})  # fmt: skip
        entry: dict[str, Any] = {
            "summary": op["summary"],
            "parameters": params,
            "responses": {str(op.get("status", 200)): {"description": op["summary"],
                                                        "content": content},
                          "default": {"description": "an error",
                                      "content": {"application/json": {
                                          "schema": {"$ref": "#/components/schemas/Error"}}}}},
        }  # fmt: skip
        body = op.get("body")
        if body == "ndjson":
            entry["requestBody"] = {
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}}
            }
        elif body is not None:
            props: dict[str, Any] = {f: {} for f in body} if isinstance(body, list) else {}
            entry["requestBody"] = {"content": {"application/json": {"schema": {
                "type": "object", "properties": props}}}}  # fmt: skip
        paths.setdefault(path, {})[method.lower()] = entry
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
            params = ", ".join(f"{p['name']}{'' if p['required'] else '?'}"
                               for p in op["parameters"])  # fmt: skip
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
            rows.append(f"<tr><td><b>{e(method.upper())}</b></td><td><code>{e(path)}</code></td>"
                        f"<td>{e(op['summary'])}</td><td>{e(params)}</td><td>{e(fields)}</td>"
                        f"<td>{e(status)} {e(answer)}</td></tr>")  # fmt: skip
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
