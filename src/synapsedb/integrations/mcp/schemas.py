"""The ``outputSchema`` of every MCP tool: the JSON Schema of its structured result.

Each is built from the value object the tool returns (``synapsedb.types``: Memory, Fact,
QueryResult, ...) with msgspec's schema generator, so a field added to a type is in the schema
at once. The JSON a tool sends is :func:`.encode.to_json` of that object: the same fields
without ``embedding`` (no vectors go to a model), times as RFC 3339 strings. An MCP client
(the official SDKs) checks every structured result against its tool's schema; error results
(``isError``) carry the HTTP API's error body instead and are not checked.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec
import numpy as np

from ...types import Fact, Forgotten, Lineage, Memory, QueryResult, Remembered

__all__ = ["output_schema"]

_TYPES = (Memory, Fact, QueryResult, Forgotten, Lineage, Remembered)
_DROPPED = ("embedding",)  # never sent (encode.to_json)


def _hook(tp: Any) -> dict[str, Any]:
    if tp is np.ndarray:
        return {"type": "array", "items": {"type": "number"}}
    raise NotImplementedError(tp)  # msgspec's way of saying: no schema for this type


@functools.cache
def _defs() -> dict[str, Any]:
    _, defs = msgspec.json.schema_components(_TYPES, schema_hook=_hook)
    for schema in defs.values():
        props, required = schema.get("properties", {}), schema.get("required", [])
        for name in _DROPPED:
            props.pop(name, None)
            if name in required:
                required.remove(name)
    return defs


def _ref(cls: type) -> dict[str, str]:
    return {"$ref": f"#/$defs/{cls.__name__}"}


def _object(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props)}


def output_schema(tool: str) -> dict[str, Any]:
    """The ``outputSchema`` of the tool named ``tool`` (an object schema with ``$defs``)."""
    defs = _defs()
    shape: dict[str, Any]
    if tool in ("remember", "get_memory"):
        shape = dict(defs["Memory"])
    elif tool == "set_fact":
        shape = dict(defs["Fact"])
    elif tool == "recall":
        shape = dict(defs["QueryResult"])
    elif tool == "forget":
        shape = dict(defs["Forgotten"])
    elif tool in ("lineage", "record_answer"):
        shape = dict(defs["Lineage"])
    elif tool == "remember_conversation":
        shape = dict(defs["Remembered"])
    elif tool == "get_fact":  # one fact (with key), or all of the entity's
        shape = {
            "type": "object",
            "anyOf": [
                _ref(Fact),
                _object(entity={"type": "string"}, facts={"type": "array", "items": _ref(Fact)}),
            ],
        }
    elif tool == "history":  # a memory's versions (id), or a fact's (entity and key)
        shape = _object(versions={"type": "array", "items": {"anyOf": [_ref(Memory), _ref(Fact)]}})
    else:
        raise KeyError(tool)
    return {**shape, "$defs": defs}
