"""The filter language: parsing and validation into a small tree, plus a per-record evaluator.

Syntax (Mongo-like)::

    {"type": "preference"}                                # equality
    {"ts": {"$gte": "2025-10-01", "$lt": "2025-11-01"}}   # several operators: all must hold
    {"$or": [{"agent": "intake"}, {"salience": {"$gt": 0.8}}]}
    {"metadata.order.status": {"$in": ["open", "pending"]}, "$not": {"tags": {"$contains": "spam"}}}

Fields: the built-ins ``id``, ``entity``, ``type``, ``agent``, ``ts``, ``salience``, ``pinned``;
anything else is a metadata path (``channel`` and ``metadata.channel`` are the same; dots walk
into nested objects). Operators: ``$eq $ne $gt $gte $lt $lte $in $nin $exists $contains`` on a
field, ``$and $or $not`` to combine. ``ts`` values are times (ISO-8601 or epoch seconds).

Semantics: comparisons hold only between values of the same kind (numbers with numbers, strings
with strings); ``$ne`` and ``$nin`` also match when the field is missing; ``$contains`` means
substring for a string and membership for an array. A malformed filter is a ValidationError
whose ``field`` says where (e.g. ``filter.$or[1].ts.$gt``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..times import to_us

__all__ = ["BUILTIN_FIELDS", "And", "Cond", "Node", "Not", "Or", "matches", "parse_filter"]

BUILTIN_FIELDS = frozenset({"id", "entity", "type", "agent", "ts", "salience", "pinned"})
FIELD_OPS = frozenset(
    {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$contains"}
)
MAX_NODES = 256
MAX_IN = 1024
_STRING_FIELDS = frozenset({"id", "entity", "type", "agent"})


@dataclass(frozen=True, slots=True)
class Cond:
    """``field op value``. ``field`` is a built-in name or ``("metadata", path...)``."""

    field: str | tuple[str, ...]
    op: str
    value: Any


@dataclass(frozen=True, slots=True)
class And:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    part: Node


Node = Cond | And | Or | Not


class _Parser:
    def __init__(self) -> None:
        self.nodes = 0

    def fail(self, where: str, why: str) -> ValidationError:
        return ValidationError(f"{where}: {why}", field=where)

    def count(self, where: str) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ValidationError(
                f"{where}: filter has more than {MAX_NODES} conditions",
                field=where,
                limit=MAX_NODES,
            )

    def node(self, obj: Any, where: str) -> Node:
        if not isinstance(obj, Mapping):
            raise self.fail(where, f"expected an object, got {type(obj).__name__}")
        if not obj:
            raise self.fail(where, "empty filter object")
        parts: list[Node] = []
        for key, value in obj.items():
            if not isinstance(key, str):
                raise self.fail(where, "keys must be strings")
            at = f"{where}.{key}"
            if key in ("$and", "$or"):
                if not isinstance(value, list) or not value:
                    raise self.fail(at, "expected a non-empty list of filters")
                subs = tuple(self.node(v, f"{at}[{i}]") for i, v in enumerate(value))
                parts.append(And(subs) if key == "$and" else Or(subs))
            elif key == "$not":
                parts.append(Not(self.node(value, at)))
            elif key.startswith("$"):
                raise self.fail(at, f"unknown operator {key!r}; combine with $and, $or, $not")
            else:
                parts.extend(self.field(key, value, at))
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def field(self, name: str, spec: Any, where: str) -> list[Node]:
        path = _field_path(name, where)
        if not (isinstance(spec, Mapping) and spec and all(str(k).startswith("$") for k in spec)):
            self.count(where)
            return [Cond(path, "$eq", self.value(path, "$eq", spec, where))]
        out: list[Node] = []
        for op, value in spec.items():
            at = f"{where}.{op}"
            if op not in FIELD_OPS:
                raise self.fail(
                    at, f"unknown operator {op!r}; allowed: {', '.join(sorted(FIELD_OPS))}"
                )
            self.count(at)
            out.append(Cond(path, op, self.value(path, op, value, at)))
        return out

    def value(self, path: str | tuple[str, ...], op: str, value: Any, where: str) -> Any:
        if op == "$exists":
            if not isinstance(value, bool):
                raise self.fail(where, "expected true or false")
            return value
        if op in ("$in", "$nin"):
            if not isinstance(value, list):
                raise self.fail(where, "expected a list of values")
            if len(value) > MAX_IN:
                raise ValidationError(
                    f"{where}: {len(value)} values, over the limit of {MAX_IN}",
                    field=where,
                    limit=MAX_IN,
                )
            return tuple(self.scalar(path, v, f"{where}[{i}]") for i, v in enumerate(value))
        if op == "$contains":
            if path in ("ts", "salience", "pinned"):
                raise self.fail(where, f"$contains does not apply to {path}")
            return self.scalar(path, value, where)
        scalar = self.scalar(path, value, where)
        if op in ("$gt", "$gte", "$lt", "$lte") and not isinstance(scalar, int | float | str):
            raise self.fail(where, f"{op} needs a number, string or time")
        if op in ("$gt", "$gte", "$lt", "$lte") and isinstance(scalar, bool):
            raise self.fail(where, f"{op} needs a number, string or time")
        return scalar

    def scalar(self, path: str | tuple[str, ...], value: Any, where: str) -> Any:
        if path == "ts":
            return to_us(value, where)
        if path == "salience":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self.fail(where, "expected a number")
            return float(value)
        if path == "pinned":
            if not isinstance(value, bool):
                raise self.fail(where, "expected true or false")
            return value
        if path in _STRING_FIELDS:
            if not isinstance(value, str):
                raise self.fail(where, "expected a string (use $exists for a missing agent)")
            return value
        if value is None or isinstance(value, str | bool | int):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise self.fail(where, "NaN and infinity are not comparable")
            return value
        raise self.fail(
            where, f"expected a string, number, boolean or null, got {type(value).__name__}"
        )


def _field_path(name: str, where: str) -> str | tuple[str, ...]:
    if name in BUILTIN_FIELDS:
        return name
    parts = name.split(".")
    if parts[0] == "metadata":
        parts = parts[1:]
    if not parts or any(not p for p in parts):
        raise ValidationError(f"{where}: {name!r} is not a valid field path", field=where)
    return ("metadata", *parts)


def parse_filter(obj: Any) -> Node | None:
    """Validate a filter object; None stays None (no filtering)."""
    if obj is None:
        return None
    return _Parser().node(obj, "filter")


# -- per-record evaluation (reference semantics; the indexes vectorize the same rules) --------

_MISSING = object()


def lookup(meta: Any, path: tuple[str, ...]) -> Any:
    """Walk ``path`` (without the leading ``"metadata"``) into ``meta``."""
    cur = meta
    for part in path:
        if not isinstance(cur, Mapping) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "num"
    if isinstance(v, str):
        return "str"
    return "other"


def _eq(a: Any, b: Any) -> bool:
    return _kind(a) == _kind(b) and a == b


def compare(op: str, actual: Any, want: Any) -> bool:
    """Apply one field operator to a present value ``actual``."""
    if op == "$eq":
        return _eq(actual, want)
    if op == "$ne":
        return not _eq(actual, want)
    if op == "$in":
        return any(_eq(actual, w) for w in want)
    if op == "$nin":
        return not any(_eq(actual, w) for w in want)
    if op == "$contains":
        if isinstance(actual, str):
            return isinstance(want, str) and want in actual
        if isinstance(actual, list):
            return any(_eq(x, want) for x in actual)
        return False
    kind = _kind(actual)
    if kind not in ("num", "str") or kind != _kind(want):
        return False
    if op == "$gt":
        return bool(actual > want)
    if op == "$gte":
        return bool(actual >= want)
    if op == "$lt":
        return bool(actual < want)
    return bool(actual <= want)  # $lte


def matches(node: Node, fields: Mapping[str, Any], meta: Any) -> bool:
    """Evaluate ``node`` for one record given its built-in ``fields`` and parsed metadata."""
    if isinstance(node, And):
        return all(matches(p, fields, meta) for p in node.parts)
    if isinstance(node, Or):
        return any(matches(p, fields, meta) for p in node.parts)
    if isinstance(node, Not):
        return not matches(node.part, fields, meta)
    if isinstance(node.field, str):
        actual = fields.get(node.field)
        if actual is None:  # a built-in without a value (no agent) counts as missing
            actual = _MISSING
    else:
        actual = lookup(meta, node.field[1:])
    if node.op == "$exists":
        return (actual is not _MISSING) == node.value
    if actual is _MISSING:
        return node.op in ("$ne", "$nin")
    return compare(node.op, actual, node.value)
