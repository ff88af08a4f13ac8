"""A small JSON-schema subset: enough to check a model's structured answer, nothing more.

Supported keywords: ``type`` (a name or a list of names, so ``["string", "null"]`` makes a
value nullable), ``properties``, ``required``, ``additionalProperties`` (a boolean or a
schema), ``items``, ``enum``, ``minimum`` and ``maximum`` (inclusive). Annotations
(``title``, ``description``, ``default``, ``examples``, ``$schema``, ``$comment``, ``$id``) are
allowed and ignored. Any other keyword (``pattern``, ``anyOf``, ``$ref`` ...) is refused by
:func:`check_schema` rather than silently not enforced.

:func:`validate` answers a list of messages, one per violation, each naming the place with a
JSONPath-like path (``$.memories[2].confidence: expected number, got string``); an empty list
means the value conforms.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError

__all__ = ["check_schema", "validate"]

TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "minimum",
        "maximum",
    }
)
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$schema", "$comment", "$id"}
)
MAX_ERRORS = 10  # violations reported per value (a repair prompt needs the first few)


def check_schema(schema: Any, field: str = "schema") -> None:
    """Raise :class:`~synapsedb.errors.ValidationError` naming the place (``schema.properties
    .name.type``) if ``schema`` uses a keyword outside the subset or a malformed value."""
    if not isinstance(schema, Mapping):
        raise ValidationError(f"{field}: expected a JSON schema object", field=field)
    for key in schema:
        if key not in KEYWORDS and key not in ANNOTATIONS:
            raise ValidationError(
                f"{field}: unsupported keyword {key!r} (supported: {', '.join(sorted(KEYWORDS))})",
                field=f"{field}.{key}",
            )
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not names or any(n not in TYPES for n in names):
            raise ValidationError(
                f"{field}.type: expected one of {', '.join(TYPES)} or a list of them, "
                f"got {schema['type']!r}",
                field=f"{field}.type",
            )
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        raise ValidationError(
            f"{field}.properties: expected an object", field=f"{field}.properties"
        )
    for name, sub in props.items():
        check_schema(sub, f"{field}.properties.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValidationError(
            f"{field}.required: expected a list of property names", field=f"{field}.required"
        )
    extra = schema.get("additionalProperties", True)
    if not isinstance(extra, bool):
        check_schema(extra, f"{field}.additionalProperties")
    if "items" in schema:
        check_schema(schema["items"], f"{field}.items")
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        raise ValidationError(f"{field}.enum: expected a non-empty list", field=f"{field}.enum")
    for bound in ("minimum", "maximum"):
        value = schema.get(bound, 0)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValidationError(
                f"{field}.{bound}: expected a finite number, got {value!r}",
                field=f"{field}.{bound}",
            )


def validate(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """The violations of ``schema`` (a schema :func:`check_schema` accepts) in ``value``, a
    value as :func:`json.loads` returns it; at most :data:`MAX_ERRORS`, empty if it conforms."""
    errors: list[str] = []
    _check(value, schema, "$", errors)
    return errors[:MAX_ERRORS]


def type_name(value: Any) -> str:
    """The JSON type of a decoded value (``True`` is a boolean, not an integer)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is(value: Any, name: str) -> bool:
    actual = type_name(value)
    if name == "number":
        return actual in ("integer", "number")
    if name == "integer":  # JSON has one number type: 3.0 is an integer
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    return actual == name


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, ``1`` is ``1.0``."""
    ta, tb = type_name(a), type_name(b)
    numeric = ("integer", "number")
    if ta in numeric and tb in numeric:
        return bool(a == b)
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if ta == "object":
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"


def _check(value: Any, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if len(errors) >= MAX_ERRORS:
        return
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, n) for n in names):
            errors.append(f"{path}: expected {' or '.join(names)}, got {type_name(value)}")
            return
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        allowed = ", ".join(json.dumps(e) for e in schema["enum"])
        errors.append(f"{path}: expected one of {allowed}, got {json.dumps(value)}")
    if type_name(value) in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} is less than the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} is more than the maximum {schema['maximum']}")
    if isinstance(value, dict):
        _check_object(value, schema, path, errors)
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{i}]", errors)


def _check_object(
    value: dict[str, Any], schema: Mapping[str, Any], path: str, errors: list[str]
) -> None:
    props: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in value:
            errors.append(f"{_child(path, name)}: required property missing")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in props:
            _check(item, props[key], _child(path, key), errors)
        elif extra is False:
            errors.append(f"{_child(path, key)}: property not allowed by the schema")
        elif isinstance(extra, Mapping):
            _check(item, extra, _child(path, key), errors)
