"""The filter language: parsing and validation into a small tree, plus a per-record evaluator.

Syntax (Mongo-like)::

    {"type": "preference"}                                # equality
    {"ts": {"$gte": "2025-10-01", "$lt": "2025-11-01"}}   # several operators: all must hold
    {"$or": [{"agent": "intake"}, {"salience": {"$gt": 0.8}}]}
    {"metadata.order.status": {"$in": ["open", "pending"]}, "$not": {"tags": {"$contains": "spam"}}}

    {"position": {"$near": {"point": [12, 22], "radius": 5}}}       # within 5 of (12, 22)
    {"position": {"$within": {"box": [[0, 0], [10, 30]]}}}          # inside a box, edges in

Fields: the built-ins ``id``, ``entity``, ``type``, ``agent``, ``ts``, ``salience``, ``pinned``;
anything else is a metadata path (``channel`` and ``metadata.channel`` are the same; dots walk
into nested objects). Operators: ``$eq $ne $gt $gte $lt $lte $in $nin $exists $contains`` on a
field, ``$near $within`` on a metadata path holding a position, ``$and $or $not`` to combine.
``ts`` values are times (ISO-8601 or epoch seconds).

Semantics: comparisons hold only between values of the same kind (numbers with numbers, strings
with strings); ``$ne`` and ``$nin`` also match when the field is missing; ``$contains`` means
substring for a string and membership for an array. A malformed filter is a ValidationError
whose ``field`` says where (e.g. ``filter.$or[1].ts.$gt``).

Positions: ``$near`` takes ``{"point": [x, y], "radius": r}`` and holds when the field is a list
of as many numbers as the point (2 or 3: ``[x, y]`` or ``[x, y, z]``) at Euclidean distance
``<= r``; ``$within`` takes ``{"box": [[x0, y0], [x1, y1]]}`` (two opposite corners in either
order) and holds when every coordinate lies between the corners', edges included. A field that
is missing, not a list of numbers, or of another length does not match (so ``$not`` of either
matches it). Coordinates and the radius must be finite, the radius ``>= 0``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..times import to_us

__all__ = [
    "BUILTIN_FIELDS",
    "And",
    "Box",
    "Cond",
    "Near",
    "Node",
    "Not",
    "Or",
    "matches",
    "parse_filter",
    "position_of",
    "value_kind",
]

BUILTIN_FIELDS = frozenset({"id", "entity", "type", "agent", "ts", "salience", "pinned"})
FIELD_OPS = frozenset(
    {
        "$eq",
        "$ne",
        "$gt",
        "$gte",
        "$lt",
        "$lte",
        "$in",
        "$nin",
        "$exists",
        "$contains",
        "$near",
        "$within",
    }
)
GEO_OPS = frozenset({"$near", "$within"})
GEO_DIMS = (2, 3)
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


@dataclass(frozen=True, slots=True)
class Near:
    """The value of ``$near``: within ``radius`` (Euclidean) of ``point``."""

    point: tuple[float, ...]
    radius: float

    def holds(self, pos: tuple[float, ...]) -> bool:
        return sum((a - b) ** 2 for a, b in zip(pos, self.point, strict=True)) <= self.radius**2


@dataclass(frozen=True, slots=True)
class Box:
    """The value of ``$within``: ``lo[i] <= x[i] <= hi[i]`` for every coordinate."""

    lo: tuple[float, ...]
    hi: tuple[float, ...]

    def holds(self, pos: tuple[float, ...]) -> bool:
        return all(lo <= x <= hi for x, lo, hi in zip(pos, self.lo, self.hi, strict=True))


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
        if op in GEO_OPS:
            if not isinstance(path, tuple):
                raise self.fail(where, f"{op} applies to a metadata path holding a position")
            return self.near(value, where) if op == "$near" else self.box(value, where)
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

    def near(self, value: Any, where: str) -> Near:
        if not isinstance(value, Mapping) or set(value) != {"point", "radius"}:
            raise self.fail(where, 'expected {"point": [x, y], "radius": r}')
        point = self.coords(value["point"], f"{where}.point")
        radius = self.coord(value["radius"], f"{where}.radius")
        if radius < 0:
            raise ValidationError(
                f"{where}.radius: must be >= 0, got {radius}", field=f"{where}.radius", limit=0
            )
        return Near(point, radius)

    def box(self, value: Any, where: str) -> Box:
        if not isinstance(value, Mapping) or set(value) != {"box"}:
            raise self.fail(where, 'expected {"box": [[x0, y0], [x1, y1]]}')
        corners = value["box"]
        at = f"{where}.box"
        if not isinstance(corners, list) or len(corners) != 2:
            raise self.fail(at, "expected two corners [[x0, y0], [x1, y1]]")
        a = self.coords(corners[0], f"{at}[0]")
        b = self.coords(corners[1], f"{at}[1]")
        if len(a) != len(b):
            raise self.fail(at, f"corners of {len(a)} and {len(b)} coordinates")
        return Box(tuple(map(min, a, b)), tuple(map(max, a, b)))

    def coords(self, value: Any, where: str) -> tuple[float, ...]:
        if not isinstance(value, list) or len(value) not in GEO_DIMS:
            raise self.fail(where, "expected a list of 2 or 3 numbers ([x, y] or [x, y, z])")
        return tuple(self.coord(v, f"{where}[{i}]") for i, v in enumerate(value))

    def coord(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, f"expected a number, got {type(value).__name__}")
        f = float(value)
        if not math.isfinite(f):
            raise self.fail(where, "NaN and infinity are not coordinates")
        return f

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


def value_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "num"
    if isinstance(v, str):
        return "str"
    return "other"


def _eq(a: Any, b: Any) -> bool:
    return value_kind(a) == value_kind(b) and a == b


def position_of(value: Any, dims: int) -> tuple[float, ...] | None:
    """``value`` as a position of ``dims`` finite coordinates, or None if it is not one."""
    if not isinstance(value, list) or len(value) != dims:
        return None
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        f = float(v)
        if not math.isfinite(f):
            return None
        out.append(f)
    return tuple(out)


def compare(op: str, actual: Any, want: Any) -> bool:
    """Apply one field operator to a present value ``actual``."""
    if isinstance(want, Near):
        pos = position_of(actual, len(want.point))
        return pos is not None and want.holds(pos)
    if isinstance(want, Box):
        pos = position_of(actual, len(want.lo))
        return pos is not None and want.holds(pos)
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
    kind = value_kind(actual)
    if kind not in ("num", "str") or kind != value_kind(want):
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
