"""The operations table: one row per route of the HTTP API (see :class:`.operation.Operation`).

The OpenAPI document, the server's routes, scopes and plain handlers, and the clients'
requests are made from these rows, and a congruence test runs every row embedded and over
HTTP. To add a parameter to an operation: a line in the protocol (:mod:`.namespace`), a
:class:`Field` here, and the engine's code (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError
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
    MemoryAccess,
    Message,
    NamespaceConfig,
    QueryResult,
    Recalled,
    Remembered,
    SessionInfo,
    SessionMessages,
    Snapshot,
    Stats,
    WhoAmI,
)
from .kinds import BOOL, FLOAT, INT, JSON, OBJECT, STR, STRINGS, TIME, VECTOR, Kind, json_value
from .operation import Field, Operation

__all__ = ["BY_NAME", "MEMORY_FIELDS", "OPERATIONS", "SUMMARISING", "by_route"]

# -- fields that many rows share ---------------------------------------------------------------

AGENT = Field("agent", at="agent", doc="the agent acting (or the X-Agent header)")
AS_OF = Field("as_of", TIME, "query", doc="what was visible then (system time)")


def query(name: str, kind: Kind = STR, doc: str = "", **more: Any) -> Field:
    return Field(name, kind, "query", doc=doc, **more)


def path(name: str, arg: str, *, positional: bool = False) -> Field:
    return Field(name, STR, "path", required=True, arg=arg, positional=positional)


# the fields of a memory, as ``write`` takes them (``write``'s body, ``write_many``'s items)
MEMORY_FIELDS: dict[str, dict[str, Any]] = {
    "content": {"type": "string"},
    "type": {"type": "string"},
    "metadata": OBJECT.schema,
    "embedding": VECTOR.schema,
    "salience": {"type": "number"},
    "ts": TIME.schema,
    "agent": {"type": "string"},
    "pinned": {"type": "boolean"},
    "ttl": {"type": "number"},
    "id": {"type": "string"},
    "valid_from": TIME.schema,
    "valid_to": TIME.schema,
}


def _memory_body(memory: Any, field: str) -> dict[str, Any]:
    """``write``'s memory as body fields: a content string, or its own fields."""
    body = json_value({"content": memory} if isinstance(memory, str) else memory, "")
    if not isinstance(body, dict):
        raise ValidationError(
            f"{field}: expected a content string or an object of memory "
            f"fields, got {type(memory).__name__}",
            field=field,
        )
    return body


class _Items(Kind):
    """``write_many``'s items: each ``{"entity": ..., <memory fields>}`` or an
    ``(entity, memory)`` pair, which travels as the former."""

    def to_json(self, value: Any, field: str) -> Any:
        if isinstance(value, list | tuple):
            value = [
                {"entity": item[0], **_memory_body(item[1], f"{field}[{i}]")}
                if isinstance(item, tuple) and len(item) == 2
                else item
                for i, item in enumerate(value)
            ]
        return json_value(value, field)


ITEMS = _Items(
    "list of memories",
    {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"entity": {"type": "string"}, **MEMORY_FIELDS},
            "required": ["entity"],
        },
    },
)
MESSAGE = Kind("message", {"$ref": "#/components/schemas/Message"})
MESSAGES = Kind(
    "list of messages", {"type": "array", "items": {"$ref": "#/components/schemas/Message"}}
)
CONFIG_FIELDS: dict[str, dict[str, Any]] = {n: {} for n in NamespaceConfig.__dataclass_fields__}


def _one_of(body: dict[str, Any], first: str, second: str) -> str:
    """Which of two alternative body fields was given (422 unless exactly one)."""
    if (first in body) == (second in body):
        raise ValidationError(
            f"{first}: give {first} or {second}, not both"
            if first in body
            else f"{first}: required (or {second})",
            field=first,
        )
    return first if first in body else second


def _facts(ns: Any, a: dict[str, Any]) -> Any:
    if a.get("key") is None:
        return ns.facts(a["entity"], as_of=a.get("as_of"))
    return ns.get(a["entity"], a["key"], as_of=a.get("as_of"))


def _session_append(ns: Any, a: dict[str, Any]) -> Any:
    one = _one_of(a, "message", "messages") == "message"
    sid = a["session_id"]
    kw = {"searchable": a.get("searchable"), "entity": a.get("entity")}
    if one:
        return ns.sessions.append(sid, a["message"], **kw).to_dict()
    return [m.to_dict() for m in ns.sessions.append_many(sid, a["messages"], **kw)]


def _session_clear(ns: Any, a: dict[str, Any]) -> Any:
    if a.get("purge"):
        return ns.sessions.purge(a["session_id"])
    ns.sessions.clear(a["session_id"])
    return {"session_id": a["session_id"], "cleared": True}


def _session_configure(ns: Any, a: dict[str, Any]) -> Any:
    ns.sessions.configure(a["session_id"], ttl=a["ttl"])
    return {"session_id": a["session_id"], "ttl": a["ttl"]}


def _cache_invalidate(ns: Any, a: dict[str, Any]) -> Any:
    everything = a.pop("all", False)
    if not isinstance(everything, bool):
        raise ValidationError("all: expected true or false", field="all")
    if everything:
        others = sorted(set(a) - {"match_literals"})
        if others:
            raise ValidationError(f"{others[0]}: not with all", field=others[0])
        return {"invalidated": ns.cache.clear()}
    return {"invalidated": ns.cache.invalidate(**a)}


def _nothing(_: Any) -> None:
    return None


def _erasure(a: dict[str, Any]) -> str | None:
    """``purge=true`` erases: it needs the admin scope (as ``forget`` with purge)."""
    return "admin" if a.get("purge") else None


# the strategies whose load stores the summary they fold (so a load needs the write scope)
SUMMARISING = frozenset({"summary", "summary_buffer"})


SID = path("sid", "session_id")
TTL = query("ttl", FLOAT, "the sessions' ttl in seconds (a session's own wins)")
CACHE_SCOPE = Field("scope", doc="the function or tool name the entry belongs to")
MATCH_LITERALS = Field("match_literals", BOOL, doc="numbers and identifiers must match exactly")
INCLUDE_DOC = "embedding: each memory's vector too (left out by default)"

# One row per operation, laid out by hand so the table reads as a table (the formatter would
# give each argument its own line, tripling its length): hence the one ``fmt: skip`` below.
OPERATIONS: tuple[Operation, ...] = (
    # -- memories
    Operation("write", "POST", "/memories", "write", "Write a memory", Memory, (
        Field("entity", required=True),
        Field("memory", at="spread", payload=True, rest=True, encode=_memory_body, decode=dict,
              properties=MEMORY_FIELDS),
        AGENT,
    ), status=201, memories=True),
    Operation("write_many", "POST", "/memories:batch", "write", "Write many memories, all or none",
              list[Memory], (Field("items", ITEMS, required=True, payload=True), AGENT),
              status=201, memories=True),
    Operation("update", "PATCH", "/memories/{id}", "write", "Add a version of a memory", Memory, (
        path("id", "id"),
        Field("changes", OBJECT, required=True, payload=True,
              doc="the fields to change; metadata is replaced whole"),
        Field("if_version", INT, doc="only if the current version is this one"),
        AGENT,
    ), memories=True),
    Operation("get", "GET", "/memories/{id}", "read", "A memory as of a time", Memory,
              (path("id", "target", positional=True), AS_OF), memories=True, inline=True),
    Operation("memories", "GET", "/memories", "read", "List memories, newest event time first",
              list[Memory], (
        query("entity"),
        query("types", STRINGS, "only these types (repeat the parameter)"),
        AS_OF,
        query("limit", INT, "at most this many, 1 to 10,000"),
        query("valid_at", TIME, "only those true then (valid time)"),
        query("before", doc="a memory id: the page after it (older)"),
    ), memories=True),
    Operation("delete", "DELETE", "/memories/{id}", "write", "Delete a memory (a tombstone)",
              Memory, (path("id", "target", positional=True), query("if_version", INT), AGENT),
              memories=True),
    Operation("history", "GET", "/memories/{id}/history", "read",
              "Every version of a memory, oldest first", list[Memory],
              (path("id", "target", positional=True), AS_OF), memories=True, inline=True),
    # -- KV facts
    Operation("accesses", "GET", "/accesses", "read",
              "How often and when last memories were read", list[MemoryAccess],
              (query("ids", STRINGS, "memory ids (repeat the parameter; at most 1,000)",
                     required=True, positional=True),)),
    Operation("facts", "GET", "/facts", "read",
              "A KV fact (with key), or every fact about the entity (without key)",
              Fact | list[Fact], (
        query("entity", required=True),
        query("key", doc="one fact: the answer is a Fact, else a list of them"),
        AS_OF,
    ), inline=True, call=_facts),
    Operation("set", "PUT", "/facts", "write", "Set a KV fact (a new version)", Fact, (
        Field("entity", required=True),
        Field("key", required=True),
        Field("value", JSON, required=True, null=True, doc="any JSON value"),
        Field("if_version", INT, doc="only if the current version is this one (0: absent)"),
        Field("ttl", FLOAT, doc="seconds"),
        AGENT,
    )),
    Operation("delete_fact", "DELETE", "/facts", "write", "Delete a KV fact (a tombstone)", Fact, (
        query("entity", required=True, arg="target", positional=True),
        query("key", required=True, positional=True),
        query("if_version", INT),
        AGENT,
    ), call=lambda ns, a: ns.delete(a["target"], a["key"], if_version=a.get("if_version"))),
    Operation("fact_history", "GET", "/facts/history", "read",
              "Every version of a KV fact, oldest first", list[Fact], (
        query("entity", required=True, arg="target", positional=True),
        query("key", required=True, positional=True),
        AS_OF,
    ), inline=True, call=lambda ns, a: ns.history(a["target"], a["key"], as_of=a.get("as_of"))),
    # -- streams
    Operation("append", "POST", "/events", "write", "Append an event to a stream", Event, (
        Field("entity", required=True),
        Field("event", JSON, required=True, payload=True, doc="text, or an object of fields"),
        Field("stream", doc="default: the entity's own stream"),
        Field("searchable", BOOL, doc="also store it as a memory (default true)"),
        AGENT,
    ), status=201),
    Operation("events", "GET", "/events", "read", "Read a stream", list[Event], (
        query("stream", required=True),
        query("start", doc="an event id, inclusive"),
        query("end", doc="an event id, inclusive"),
        query("after", doc="an event id, exclusive"),
        query("since", TIME), query("until", TIME),
        query("limit", INT), query("order", doc="asc or desc"),
        AS_OF,
    ), inline=True),
    Operation("follow", "GET", "/events/follow", "read", "Server-Sent Events: follow a stream live",
              "event-stream", (
        query("stream", required=True),
        query("after", doc="resume after this event id (or the Last-Event-ID header)"),
        query("idle_timeout", FLOAT, "end after this many seconds without events"),
    ), handler="own"),
    Operation("changes", "GET", "/changes", "read",
              "Server-Sent Events: follow every change committed in the namespace",
              "event-stream", (
        query("entity"), query("since", TIME, "history from then first"),
        query("after", doc="resume after this change id"),
        query("idle_timeout", FLOAT, "end after this many seconds without changes"),
    ), handler="own"),
    # -- retrieval
    Operation("query", "POST", "/query", "read",
              "Hybrid query by meaning and keywords, inside filters", QueryResult, (
        Field("text", doc="embedded and matched by keywords"),
        Field("embedding", VECTOR, doc="used as is"),
        Field("entity"), Field("filter", OBJECT, doc="the filter language (docs/concepts.md)"),
        Field("k", INT), Field("mode", doc="hybrid, vector or keyword"),
        Field("as_of", TIME), Field("valid_at", TIME), Field("min_score", FLOAT),
        Field("types", STRINGS), Field("since", TIME), Field("until", TIME),
        Field("dedup", BOOL), Field("explain", BOOL), AGENT, Field("tiers", STRINGS),
        Field("include_ended", BOOL, doc="keep memories whose valid time ended"),
    ), inline=lambda a: a.get("text") is None and a.get("embedding") is not None),
    # -- lineage and audit
    Operation("record_answer", "POST", "/answers", "write",
              "Record an answer and what it was built on", Lineage, (
        Field("answer_id", required=True), Field("query_ids", STRINGS, required=True), AGENT,
        Field("text"), Field("cited", STRINGS), Field("entities", STRINGS),
    ), status=201),
    Operation("lineage", "GET", "/answers/{answer_id}/lineage", "read", "An answer's lineage",
              Lineage, (path("answer_id", "answer_id"),)),
    Operation("audit", "GET", "/audit", "read", "Who wrote and read what, when",
              list[AuditEntry], (
        query("entity"), query("agent", doc="only what this agent did"),
        query("since", TIME), query("until", TIME), query("limit", INT),
    )),
    Operation("snapshot", "GET", "/snapshot", "read",
              "Everything known about an entity at a moment", Snapshot,
              (query("entity", required=True), AS_OF), memories=True, inline=True),
    # -- the memory loop
    Operation("remember", "POST", "/remember", "write",
              "Store conversation turns and extract typed memories (the memory loop)",
              Remembered, (
        Field("messages", JSON, required=True), Field("entity", required=True),
        Field("session"), AGENT, Field("memories", JSON), Field("wait", BOOL),
    )),
    Operation("recall", "POST", "/recall", "read",
              "The memories a conversation's last turn needs, as a context block", Recalled, (
        Field("messages_or_text", at="spread",
              encode=lambda v, f: {"text" if isinstance(v, str) else "messages": v},
              decode=lambda b: b[_one_of(b, "messages", "text")],
              properties={"messages": {"type": "array", "items": {}}, "text": {"type": "string"}}),
        Field("entity"), Field("budget_tokens", INT), Field("k", INT),
        Field("threshold", FLOAT), Field("rewrite"), AGENT,
    )),
    # -- lifecycle
    Operation("forget", "POST", "/forget", "write",
              "Forget a memory or an entity (purge: erase; admin)", Forgotten, (
        Field("id"), Field("entity"), Field("purge", BOOL), AGENT,
    ), escalate=_erasure),
    Operation("maintain", "POST", "/maintain", "admin", "Run maintenance (admin)",
              MaintenanceReport, (Field("dry_run", BOOL),)),
    Operation("export", "GET", "/export", "admin", "Every stored row as JSON lines (admin)",
              "ndjson", handler="own"),
    Operation("import_records", "POST", "/import", "admin",
              "Import JSON lines into an empty namespace (admin)", dict[str, int],
              status=201, handler="own", body="ndjson", reply=lambda d: int(d["imported"])),
    Operation("config", "GET", "/config", "read", "Lifecycle settings", NamespaceConfig,
              inline=True, call=lambda ns, a: ns.config),
    Operation("configure", "PUT", "/config", "admin", "Change lifecycle settings (admin)",
              NamespaceConfig, (
        Field("changes", at="spread", rest=True, encode=lambda v, f: json_value(dict(v), ""),
              decode=dict, properties=CONFIG_FIELDS),
    ), call=lambda ns, a: ns.configure(**a["changes"])),
    # -- overview
    Operation("entities", "GET", "/entities", "read",
              "Entity names with something visible, sorted (all of them without limit: page "
              "a large namespace)", list[str], (
        AS_OF, query("prefix", doc="only names starting with it"),
        query("after", doc="only names sorting after it: the last of a page"),
        query("limit", INT, "at most this many, 1 to 10,000 (default: all)"),
    )),
    Operation("streams", "GET", "/streams", "read",
              "Stream names with an event visible, sorted (all of them without limit: page a "
              "large namespace)", list[str], (
        AS_OF, query("prefix", doc="only names starting with it"),
        query("after", doc="only names sorting after it: the last of a page"),
        query("limit", INT, "at most this many, 1 to 10,000 (default: all)"),
    ), inline=True),
    Operation("stats", "GET", "/stats", "read", "Counts and bytes", Stats, inline=True),
    # -- conversation sessions (ns.sessions)
    Operation("sessions.ids", "GET", "/sessions", "read",
              "Ids of the conversation sessions with messages (not cleared, not expired)",
              list[str], (AS_OF, TTL)),
    Operation("sessions.info", "GET", "/sessions/{sid}", "read",
              "A session's counts and times", SessionInfo,
              (SID, AS_OF, query("count_limit", INT, "count at most this many messages"), TTL)),
    Operation("sessions.purge_expired", "POST", "/sessions:purge_expired", "admin",
              "Erase every expired session (admin); their ids", list[str],
              (Field("ttl", FLOAT), AGENT)),
    Operation("sessions.clear", "DELETE", "/sessions/{sid}", "write",
              "Clear a session (history keeps it), or purge=true: erase it (admin)",
              (Forgotten, dict[str, Any]), (SID, query("purge", BOOL), AGENT),
              escalate=_erasure, call=_session_clear, reply=_nothing),
    Operation("sessions.configure", "PUT", "/sessions/{sid}", "write",
              "Set a session's own ttl in seconds (null: it never expires)", dict[str, Any],
              (SID, Field("ttl", FLOAT, required=True, null=True), AGENT),
              call=_session_configure, reply=_nothing),
    Operation("sessions.search", "POST", "/sessions/{sid}/search", "read",
              "A session's searchable messages most relevant to a text, oldest first",
              list[Message], (
        SID, Field("text", required=True), Field("k", INT), Field("as_of", TIME),
        Field("exclude", STRINGS, doc="message ids left out of the search"), Field("ttl", FLOAT),
        AGENT,
    )),
    Operation("sessions.append", "POST", "/sessions/{sid}/messages", "write",
              "Append a message, or a list of messages, to a session", Message | list[Message], (
        SID, Field("message", MESSAGE), Field("messages", MESSAGES), Field("searchable", BOOL),
        Field("entity"), AGENT,
    ), status=201, call=_session_append),
    Operation("sessions.load", "GET", "/sessions/{sid}/messages", "read",
              "A session's messages, all, the last N, as of a time, or as a strategy gives them "
              "(summary strategies store the summary: write scope)", SessionMessages, (
        SID, query("last", INT), AS_OF, TTL, query("strategy"), query("k", INT),
        query("max_tokens", INT), query("model"), query("keep", INT),
        query("summary_tokens", INT),
        AGENT,
    ), handler="own", reply=lambda d: d.messages,
              escalate=lambda a: "write" if a.get("strategy") in SUMMARISING else None),
    # -- the semantic cache (ns.cache)
    Operation("cache.lookup", "POST", "/cache:lookup", "read",
              "Semantic cache: the entry of a scope whose key means the same (null: a miss)",
              CacheHit | None, (
        Field("key", required=True), CACHE_SCOPE, Field("params", JSON),
        Field("threshold", FLOAT), MATCH_LITERALS, AGENT,
    )),
    Operation("cache.store", "POST", "/cache", "write",
              "Semantic cache: store a JSON value under a key in a scope", CacheEntry, (
        Field("key", required=True), Field("value", JSON, required=True, null=True),
        CACHE_SCOPE, Field("params", JSON), Field("ttl", FLOAT), Field("tags", STRINGS),
        MATCH_LITERALS, AGENT,
    ), status=201),
    Operation("cache.invalidate", "POST", "/cache:invalidate", "write",
              "Semantic cache: remove entries by key, tag, prefix or scope, or all",
              dict[str, int], (
        Field("key"), CACHE_SCOPE, Field("params", JSON), Field("tag"), Field("prefix"),
        Field("all", BOOL), MATCH_LITERALS, AGENT,
    ), call=_cache_invalidate, reply=lambda d: d["invalidated"]),
    Operation("cache.stats", "GET", "/cache/stats", "read",
              "Semantic cache: entries, and the server's hits, misses, stores", CacheStats),
    # -- the service and the memory proxy (their own handlers)
    Operation("healthz", "GET", "/healthz", None, "Alive", dict[str, Any], namespaced=False,
              handler="own"),
    Operation("readyz", "GET", "/readyz", None, "Storage open and serving", dict[str, Any],
              namespaced=False, handler="own"),
    Operation("metrics", "GET", "/metrics", None,
              "Prometheus metrics (admin key once keys exist)", "text", namespaced=False,
              handler="own"),
    Operation("namespaces", "GET", "/v1/namespaces", None, "Namespace names", list[str],
              namespaced=False, handler="own"),
    Operation("whoami", "GET", "/v1/whoami", None,
              "The caller's key: auth mode, key id, tenant, scopes, namespaces and agents "
              "(null: any); 401 without a live key in keys mode", WhoAmI, namespaced=False,
              handler="own"),
    Operation("proxy.chat_completions", "POST", "/chat/completions", "write",
              "Memory proxy: OpenAI chat completions (stream or not) with the entity's "
              "memories, forwarded to the upstream model (docs/proxy.md; OpenAI's error shape)",
              dict[str, Any], handler="own"),
    Operation("proxy.responses", "POST", "/responses", "write",
              "Memory proxy: OpenAI's Responses API (input, instructions, "
              "previous_response_id, stream) over the upstream model (docs/proxy.md)",
              dict[str, Any], handler="own"),
    Operation("proxy.default_chat_completions", "POST", "/v1/chat/completions", "write",
              "Memory proxy in the server's default namespace (--proxy-namespace)",
              dict[str, Any], namespaced=False, handler="own"),
    Operation("proxy.default_responses", "POST", "/v1/responses", "write",
              "Memory proxy's Responses API in the default namespace (--proxy-namespace)",
              dict[str, Any], namespaced=False, handler="own"),
)  # fmt: skip

BY_NAME: Mapping[str, Operation] = {op.name: op for op in OPERATIONS}


def by_route(method: str, route: str) -> Operation:
    """The row of a route as the server lists it (``GET``, ``/v1/namespaces/{ns}/facts``)."""
    for op in OPERATIONS:
        if op.method == method and op.route == route:
            return op
    raise KeyError((method, route))
