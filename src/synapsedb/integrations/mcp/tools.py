"""The MCP tools: what each takes (a JSON Schema with a description per argument), the API
scope it needs, and the namespace method it calls.

Nothing here imports the MCP SDK or the server: a tool runs against any namespace handle with
the public API (``synapsedb.open(path).namespace(...)`` or ``synapsedb.connect(url)...``), so
the same tools serve stdio and the HTTP endpoint. Arguments are checked before anything runs:
an unknown or missing argument, or one of the wrong JSON type, is a ``ValidationError`` naming
it; values are then checked by the namespace methods as for any other caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ValidationError

__all__ = ["TOOLS", "ToolSpec", "check_arguments"]

TIME = {"type": ["string", "number"]}
NAMESPACE_DOC = (
    "Namespace to use; leave it out for the server's own (stdio: --namespace; "
    "HTTP: the endpoint's ?namespace=, else 'default')"
)


def _p(schema: Mapping[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "description": description}


def _time(description: str) -> dict[str, Any]:
    return _p(TIME, description + " (ISO-8601 like 2025-10-24T10:00:00Z, or epoch seconds)")


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its schema, the scope an API key needs for it, and what it runs."""

    name: str
    title: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    scope: str  # read, write (forget with purge: admin, see scope_for)
    run: Callable[[Any, dict[str, Any]], Any]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    def input_schema(self) -> dict[str, Any]:
        props = {**self.properties, "namespace": _p({"type": "string"}, NAMESPACE_DOC)}
        return {
            "type": "object",
            "properties": props,
            "required": list(self.required),
            "additionalProperties": False,
        }

    def scope_for(self, args: Mapping[str, Any]) -> str:
        """The scope this call needs: erasing (``forget`` with ``purge``) is admin, as over
        the REST route."""
        return "admin" if self.name == "forget" and args.get("purge") is True else self.scope


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def check_arguments(spec: ToolSpec, args: Any) -> dict[str, Any]:
    """The call's arguments, checked against ``spec``'s schema; null counts as left out."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ValidationError("arguments: expected an object", field="arguments")
    schema = spec.input_schema()["properties"]
    out: dict[str, Any] = {}
    for name, value in args.items():
        if name not in schema:
            raise ValidationError(
                f"{name}: not an argument of {spec.name}; expected {', '.join(sorted(schema))}",
                field=name,
            )
        prop = schema[name]
        if value is None and "type" in prop:  # null: left out (an untyped value may be null)
            continue
        kinds = prop.get("type")
        if kinds is not None:
            kinds = [kinds] if isinstance(kinds, str) else kinds
            if not any(_JSON_TYPES[k](value) for k in kinds):
                raise ValidationError(f"{name}: expected {' or '.join(kinds)}", field=name)
        items = prop.get("items", {}).get("type")
        if items is not None and not all(_JSON_TYPES[items](v) for v in value):
            raise ValidationError(f"{name}: expected a list of {items}s", field=name)
        out[name] = value
    for name in spec.required:
        if name not in out:
            raise ValidationError(f"{name}: required by {spec.name}", field=name)
    return out


def _only(args: Mapping[str, Any], *names: str) -> dict[str, Any]:
    return {n: args[n] for n in names if n in args}


# -- what each tool runs -----------------------------------------------------------------------

MEMORY_FIELDS = (
    "content",
    "type",
    "metadata",
    "salience",
    "ts",
    "valid_from",
    "valid_to",
    "ttl",
    "pinned",
)
QUERY_FIELDS = (
    "entity",
    "k",
    "as_of",
    "valid_at",
    "filter",
    "types",
    "since",
    "until",
    "mode",
    "min_score",
)


def _remember(ns: Any, a: dict[str, Any]) -> Any:
    return ns.write(a["entity"], _only(a, *MEMORY_FIELDS))


def _remember_conversation(ns: Any, a: dict[str, Any]) -> Any:
    return ns.remember(
        a["messages"], entity=a["entity"], session=a.get("session"), memories=a.get("memories")
    )


def _recall(ns: Any, a: dict[str, Any]) -> Any:
    return ns.query(a["query"], **_only(a, *QUERY_FIELDS))


def _get_memory(ns: Any, a: dict[str, Any]) -> Any:
    return ns.get(a["id"], as_of=a.get("as_of"))


def _get_fact(ns: Any, a: dict[str, Any]) -> Any:
    if "key" in a:
        return ns.get(a["entity"], a["key"], as_of=a.get("as_of"))
    return {"entity": a["entity"], "facts": ns.facts(a["entity"], as_of=a.get("as_of"))}


def _set_fact(ns: Any, a: dict[str, Any]) -> Any:
    return ns.set(
        a["entity"], a["key"], a["value"], if_version=a.get("if_version"), ttl=a.get("ttl")
    )


def _target(a: dict[str, Any], tool: str) -> tuple[str, ...]:
    """``id``, or ``entity`` and ``key``: exactly one of the two ways to name a thing."""
    if "id" in a:
        if "entity" in a or "key" in a:
            raise ValidationError(f"{tool}: give id, or entity and key, not both", field="id")
        return (a["id"],)
    if "entity" in a and "key" in a:
        return (a["entity"], a["key"])
    missing = "key" if "entity" in a else "entity" if "key" in a else "id"
    raise ValidationError(
        f"{tool}: give a memory id, or a fact's entity and key ({missing} is missing)",
        field=missing,
    )


def _history(ns: Any, a: dict[str, Any]) -> Any:
    return {"versions": ns.history(*_target(a, "history"), as_of=a.get("as_of"))}


def _forget(ns: Any, a: dict[str, Any]) -> Any:
    if ("id" in a) == ("entity" in a):
        raise ValidationError("forget: give a memory id or an entity (exactly one)", field="id")
    return ns.forget(a.get("id"), entity=a.get("entity"), purge=a.get("purge", False))


def _lineage(ns: Any, a: dict[str, Any]) -> Any:
    return ns.lineage(a["answer_id"])


def _record_answer(ns: Any, a: dict[str, Any]) -> Any:
    return ns.record_answer(
        a["answer_id"], a["query_ids"], text=a.get("text"), cited=a.get("cited")
    )


# -- the tools ---------------------------------------------------------------------------------

ENTITY = _p({"type": "string"}, "Who or what it is about, e.g. user:4321 or order:1458")
MEMORY_ID = _p({"type": "string"}, "A memory id, as returned by remember or recall")
AS_OF = _time("Answer as of this past moment (system time: what was known then)")

_TOOLS = [
    ToolSpec(
        "remember",
        "Remember",
        "Store a memory about an entity: a fact, preference, procedure, episode or event, "
        "searchable by meaning and keywords with recall. Returns the memory with its id.",
        {
            "entity": ENTITY,
            "content": _p({"type": "string"}, "The memory itself, in plain words"),
            "type": _p(
                {"type": "string"},
                "fact (default), preference, procedure, episode, "
                "event, or a type of your own (letters, digits, _ and -)",
            ),
            "metadata": _p(
                {"type": "object"},
                "JSON object kept with the memory; recall's filter can select on it",
            ),
            "salience": _p(
                {"type": "number", "minimum": 0, "maximum": 1},
                "How important it is, 0 to 1 (default 0.5)",
            ),
            "ts": _time("When it happened (event time; default now)"),
            "valid_from": _time("Since when it is true in the world"),
            "valid_to": _time("Until when it was true in the world (after valid_from)"),
            "ttl": _p(
                {"type": "number", "exclusiveMinimum": 0},
                "Seconds until it expires (default never)",
            ),
            "pinned": _p({"type": "boolean"}, "Never evicted to the cold tier"),
        },
        ("entity", "content"),
        "write",
        _remember,
    ),
    ToolSpec(
        "remember_conversation",
        "Remember a conversation",
        "Store conversation turns in the entity's session stream and turn them into typed "
        "memories (ADD/UPDATE/DELETE/NOOP against what is known). Extraction runs in the "
        "background with the server's LLM; memories you extracted yourself can be given.",
        {
            "messages": _p(
                {"type": "array", "items": {"type": "object"}},
                "Turns: objects with role (user, assistant, system, tool), content "
                "and optionally ts",
            ),
            "entity": ENTITY,
            "session": _p({"type": "string"}, "Session id (default: today's UTC date)"),
            "memories": _p(
                {"type": "array", "items": {"type": "object"}},
                "Memories already extracted: objects with type (fact, preference, "
                "procedure, episode) and content",
            ),
        },
        ("messages", "entity"),
        "write",
        _remember_conversation,
    ),
    ToolSpec(
        "recall",
        "Recall",
        "Find memories by meaning and keywords, best first, optionally as of a past moment and "
        "inside filters. Returns query_id (cite it with record_answer) and the hits.",
        {
            "query": _p({"type": "string"}, "What to look for, in words"),
            "entity": _p({"type": "string"}, "Only memories about this entity"),
            "k": _p({"type": "integer", "minimum": 1}, "How many hits at most (default 10)"),
            "as_of": AS_OF,
            "valid_at": _time("Only memories true in the world at this moment (valid time)"),
            "filter": _p(
                {"type": "object"},
                "Filter on fields and metadata, e.g. "
                '{"type": "preference"} or {"metadata.channel": {"$in": ["email"]}} '
                'or {"ts": {"$gte": "2025-10-01"}}',
            ),
            "types": _p({"type": "array", "items": {"type": "string"}}, "Only these memory types"),
            "since": _time("Only memories whose event time is at or after this"),
            "until": _time("Only memories whose event time is before this"),
            "mode": _p(
                {"type": "string", "enum": ["hybrid", "vector", "keyword"]},
                "hybrid (default): meaning and keywords; vector; keyword",
            ),
            "min_score": _p({"type": "number"}, "Drop hits scoring under this"),
        },
        ("query",),
        "read",
        _recall,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "get_memory",
        "Get a memory",
        "One memory by id, as it is now or as it was at as_of.",
        {"id": MEMORY_ID, "as_of": AS_OF},
        ("id",),
        "read",
        _get_memory,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "get_fact",
        "Get a fact",
        "A key-value fact about an entity (entity and key), or all of the entity's facts (key "
        "left out), now or as of a past moment.",
        {
            "entity": ENTITY,
            "key": _p({"type": "string"}, "The fact's key, e.g. order"),
            "as_of": AS_OF,
        },
        ("entity",),
        "read",
        _get_fact,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "set_fact",
        "Set a fact",
        "Set a key-value fact about an entity to any JSON value, as a new version (history "
        "keeps the old ones). if_version makes it a compare-and-set.",
        {
            "entity": ENTITY,
            "key": _p({"type": "string"}, "The fact's key, e.g. order"),
            "value": _p({}, "Any JSON value"),
            "if_version": _p(
                {"type": "integer", "minimum": 0},
                "Only if the current version is this (0: only if it does not exist)",
            ),
            "ttl": _p({"type": "number", "exclusiveMinimum": 0}, "Seconds until it expires"),
        },
        ("entity", "key", "value"),
        "write",
        _set_fact,
    ),
    ToolSpec(
        "history",
        "History",
        "Every version of a memory (id) or of a fact (entity and key), oldest first, with the "
        "agent that wrote each and when; as_of cuts the list at that moment.",
        {
            "id": MEMORY_ID,
            "entity": ENTITY,
            "key": _p({"type": "string"}, "The fact's key (with entity)"),
            "as_of": AS_OF,
        },
        (),
        "read",
        _history,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "forget",
        "Forget",
        "Forget one memory (id) or everything about an entity (entity): a tombstone that "
        "history and as_of reads still see. purge (entity only, admin) erases it from disk.",
        {
            "id": MEMORY_ID,
            "entity": ENTITY,
            "purge": _p(
                {"type": "boolean"},
                "Erase the entity's content from the files (needs "
                "an admin key over HTTP); history keeps only that an erasure happened",
            ),
        },
        (),
        "write",
        _forget,
        destructive=True,
    ),
    ToolSpec(
        "lineage",
        "Lineage",
        "What an answer recorded with record_answer was built on: the queries behind it and "
        "every memory version they returned, with the content as it was then.",
        {"answer_id": _p({"type": "string"}, "The answer's id")},
        ("answer_id",),
        "read",
        _lineage,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "record_answer",
        "Record an answer",
        "Record an answer you gave and the recall queries (their query_id) it was built on, "
        "so lineage can later show which memories it rested on.",
        {
            "answer_id": _p(
                {"type": "string"},
                "An id of your choosing for the answer (letters, digits, . _ : -; at most 128)",
            ),
            "query_ids": _p(
                {"type": "array", "items": {"type": "string"}},
                "query_id of each recall the answer used",
            ),
            "text": _p({"type": "string"}, "The answer's text"),
            "cited": _p(
                {"type": "array", "items": {"type": "string"}},
                "Ids of the memories the answer actually used",
            ),
        },
        ("answer_id", "query_ids"),
        "write",
        _record_answer,
    ),
]

TOOLS: dict[str, ToolSpec] = {t.name: t for t in _TOOLS}
