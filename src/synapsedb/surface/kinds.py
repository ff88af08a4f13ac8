"""What a field of an operation carries, and how it crosses the wire: :class:`Kind`.

A kind gives a field its JSON schema (for the OpenAPI document), turns a Python argument into
what the query string or the JSON body carries (the clients), and a query-string value back
into the argument (the server). Both directions hold one rule, so an argument means the same
embedded and over HTTP: a value the wire would carry changed (a numpy integer sent as its
digits, a list flattened into repeated parameters, NaN becoming ``null``, a ``date`` becoming
a string) is refused before anything is sent, with the error the engine gives for it (the same
class, code and field); every other value travels as it is and the engine judges it on the
server, as it would embedded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..times import format_us, to_us

__all__ = [
    "BOOL",
    "FLOAT",
    "INT",
    "JSON",
    "MAX_DEPTH",
    "OBJECT",
    "STR",
    "STRINGS",
    "TIME",
    "VECTOR",
    "Kind",
    "json_value",
]

MAX_DEPTH = 64  # the server's limit on JSON nesting


@dataclass(frozen=True, slots=True)
class Kind:
    """One type of field value: ``name`` (for messages), ``schema`` (JSON Schema)."""

    name: str
    schema: dict[str, Any]

    def to_query(self, value: Any, field: str) -> Any:
        """The query-string value of ``value`` (a string or a list of them)."""
        raise ValidationError(
            f"{field}: a {self.name} cannot travel in a query string", field=field
        )

    def from_query(self, raw: list[str], field: str) -> Any:
        """The argument a query-string value stands for (the server); 422 when malformed."""
        return raw[-1]

    def to_json(self, value: Any, field: str) -> Any:
        """``value`` as the JSON body carries it unchanged (see :func:`json_value`)."""
        return json_value(value, field)


class _Str(Kind):
    def to_query(self, value: Any, field: str) -> Any:
        if isinstance(value, str):
            return value
        raise ValidationError(f"{field}: expected a string, got {value!r}", field=field)


class _Int(Kind):
    def to_query(self, value: Any, field: str) -> Any:
        if type(value) is int:
            return str(value)
        raise ValidationError(f"{field}: expected an integer, got {value!r}", field=field)

    def from_query(self, raw: list[str], field: str) -> Any:
        try:
            return int(raw[-1])
        except ValueError:
            raise ValidationError(
                f"{field}: expected an integer, got {raw[-1]!r}", field=field
            ) from None

    def to_json(self, value: Any, field: str) -> Any:
        if isinstance(value, np.integer):  # JSON would make it an int; the engine refuses it
            raise ValidationError(f"{field}: expected an integer, got {value!r}", field=field)
        return json_value(value, field)


class _Float(Kind):
    def to_query(self, value: Any, field: str) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return repr(float(value)) if isinstance(value, float) else str(value)
        raise ValidationError(f"{field}: expected a number, got {value!r}", field=field)

    def from_query(self, raw: list[str], field: str) -> Any:
        try:
            return float(raw[-1])
        except ValueError:
            raise ValidationError(
                f"{field}: expected a number, got {raw[-1]!r}", field=field
            ) from None


class _Bool(Kind):
    def to_query(self, value: Any, field: str) -> Any:
        if isinstance(value, bool):
            return "true" if value else "false"
        raise ValidationError(f"{field}: expected true or false, got {value!r}", field=field)

    def from_query(self, raw: list[str], field: str) -> Any:
        if raw[-1] not in ("true", "false"):
            raise ValidationError(f"{field}: expected true or false, got {raw[-1]!r}", field=field)
        return raw[-1] == "true"


class _Time(Kind):
    """A moment: ISO-8601 text or epoch seconds, as the engine's time arguments take it.
    Strings, booleans and finite numbers travel as they are (the server applies the engine's
    rules to them), datetimes as ISO-8601. A value the wire would change (a ``date``, NaN, a
    list) is checked here by the engine's own parser, which raises its error naming the field;
    were it to accept one, the exact instant is sent as ISO-8601."""

    def to_query(self, value: Any, field: str) -> Any:
        out = self.to_json(value, field)
        return out if isinstance(out, str) else str(out).lower()

    def to_json(self, value: Any, field: str) -> Any:
        if isinstance(value, str | bool):
            return value
        if isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, int | float) and math.isfinite(value):
            return int(value) if isinstance(value, int) else float(value)
        return format_us(to_us(value, field))


class _Strings(Kind):
    """A list of strings; in a query string, the parameter repeated. In a body, any other
    iterable (a tuple, a set) travels as a list, and a lone string as it is: the engine
    decides whether it stands for a list of one."""

    def to_query(self, value: Any, field: str) -> Any:
        return [value] if isinstance(value, str) else list(value)

    def from_query(self, raw: list[str], field: str) -> Any:
        return raw

    def to_json(self, value: Any, field: str) -> Any:
        if isinstance(value, Iterable) and not isinstance(value, str | Mapping | bytes):
            return json_value(list(value), field)
        return json_value(value, field)


STR = _Str("string", {"type": "string"})
INT = _Int("integer", {"type": "integer"})
FLOAT = _Float("number", {"type": "number"})
BOOL = _Bool("boolean", {"type": "boolean"})
TIME = _Time(
    "time",
    {"anyOf": [{"type": "string"}, {"type": "number"}], "description": "ISO-8601 or epoch seconds"},
)
STRINGS = _Strings("list of strings", {"type": "array", "items": {"type": "string"}})
VECTOR = Kind("vector", {"type": "array", "items": {"type": "number"}})
OBJECT = Kind("object", {"type": "object", "additionalProperties": True})
JSON = Kind("JSON value", {})


def json_value(value: Any, field: str, depth: int = 0) -> Any:
    """``value`` as JSON carries it unchanged, so the server sees what an embedded call sees.
    A value JSON would change is refused here, naming its place as the engine names it
    (``metadata.a``, ``items[0].ts``): NaN and infinities (JSON ``null``), a ``date``, ``time``
    or ``Decimal`` (a string), keys that are not strings. numpy scalars travel as the Python
    numbers they stand for; datetimes as ISO-8601."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        raise ValidationError(f"{field}: expected a finite number, got {value!r}", field=field)
    if depth >= MAX_DEPTH:
        raise ValidationError(
            f"{field}: nested deeper than {MAX_DEPTH} levels", field=field, limit=MAX_DEPTH
        )
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{field}: keys must be strings, got {key!r}", field=field)
            out[key] = json_value(item, f"{field}.{key}" if field else key, depth + 1)
        return out
    if isinstance(value, list | tuple):
        if len(value) > 16 and type(value[0]) is float and _finite_floats(value):
            return value  # a vector: checked at C speed, sent as it is (the server refuses
            # what is not a number in it, as the engine does)
        return [json_value(v, f"{field}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, np.ndarray):
        return json_value(value.tolist(), field, depth)
    if isinstance(value, np.generic):
        return json_value(value.item(), field, depth)
    if isinstance(value, datetime):
        return value.isoformat()
    for plain in (bool, int, float, str):  # subclasses (IntEnum, numpy's float64...)
        if isinstance(value, plain):
            return json_value(plain(value), field, depth)
    raise ValidationError(
        f"{field}: a {type(value).__name__} is not a JSON value; send a number, string, "
        "boolean, list or object",
        field=field,
    )


def _finite_floats(values: list[Any] | tuple[Any, ...]) -> bool:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return arr.ndim == 1 and bool(np.isfinite(arr).all())
