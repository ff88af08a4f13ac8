"""LangGraph's store filters and namespace match conditions, checked before anything is read.

A search ``filter`` maps top-level value keys to a value (equality; a dict without ``$``
operators compares nested keys, a list compares element by element, as ``InMemoryStore`` does)
or to operators ``$eq $ne $gt $gte $lt $lte``. Where ``InMemoryStore`` would crash (``$gt`` on a
missing or non-numeric field) the item simply does not match, as in LangGraph's SQL stores. A
malformed filter is a ``ValidationError`` whose ``field`` says where (``filter.score.$gt``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ValidationError

__all__ = ["OPERATORS", "check_filter", "check_match_path", "matches", "path_matches"]

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_ORDERED = frozenset({"$gt", "$gte", "$lt", "$lte"})
MAX_FILTER_DEPTH = 32


def check_filter(flt: Any) -> dict[str, Any] | None:
    """Validate a search filter; returns it as a dict (None for no filter)."""
    if flt is None:
        return None
    if not isinstance(flt, Mapping):
        raise ValidationError(
            f"filter: expected an object of field: value, got {type(flt).__name__}",
            field="filter",
        )
    for key, cond in flt.items():
        if not isinstance(key, str):
            raise ValidationError(
                f"filter: keys must be field names, got {type(key).__name__}", field="filter"
            )
        if key.startswith("$"):
            raise ValidationError(
                f"filter.{key}: operators go inside a field ({{'field': {{'{key}': ...}}}}); "
                f"supported: {', '.join(sorted(OPERATORS))}",
                field=f"filter.{key}",
            )
        _check_condition(cond, f"filter.{key}", 1)
    return dict(flt)


def _check_condition(cond: Any, field: str, depth: int) -> None:
    if depth > MAX_FILTER_DEPTH:
        raise ValidationError(
            f"{field}: nested deeper than {MAX_FILTER_DEPTH} levels",
            field=field,
            limit=MAX_FILTER_DEPTH,
        )
    if isinstance(cond, Mapping):
        ops = [k for k in cond if isinstance(k, str) and k.startswith("$")]
        if ops:
            for op, arg in cond.items():
                if op not in OPERATORS:
                    raise ValidationError(
                        f"{field}.{op}: unsupported operator; supported: "
                        f"{', '.join(sorted(OPERATORS))}",
                        field=f"{field}.{op}",
                    )
                if op in _ORDERED and not _number(arg):
                    raise ValidationError(
                        f"{field}.{op}: expected a finite number, got {arg!r}",
                        field=f"{field}.{op}",
                    )
            return
        for k, v in cond.items():
            if not isinstance(k, str):
                raise ValidationError(f"{field}: keys must be strings", field=field)
            _check_condition(v, f"{field}.{k}", depth + 1)
    elif isinstance(cond, list | tuple):
        for i, v in enumerate(cond):
            _check_condition(v, f"{field}[{i}]", depth + 1)
    elif isinstance(cond, float) and not math.isfinite(cond):
        raise ValidationError(f"{field}: {cond} is not a comparable value", field=field)


def _number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a (checked) filter."""
    if not flt:
        return True
    return all(_compare(value.get(key), cond) for key, cond in flt.items())


def _compare(got: Any, cond: Any) -> bool:
    if isinstance(cond, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in cond):
            return all(_apply(got, op, arg) for op, arg in cond.items())
        if not isinstance(got, Mapping):
            return False
        return all(_compare(got.get(k), v) for k, v in cond.items())
    if isinstance(cond, list | tuple):
        return (
            isinstance(got, list | tuple)
            and len(got) == len(cond)
            and all(_compare(g, c) for g, c in zip(got, cond, strict=True))
        )
    return bool(got == cond)


def _apply(got: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(got == arg)
    if op == "$ne":
        return bool(got != arg)
    if not _number(got):  # an ordering needs a number on both sides
        return False
    x, y = float(got), float(arg)
    if op == "$gt":
        return x > y
    if op == "$gte":
        return x >= y
    if op == "$lt":
        return x < y
    return x <= y  # $lte


def check_match_path(path: Any, field: str) -> tuple[str, ...]:
    """A ``list_namespaces`` prefix or suffix: labels, ``*`` matching any one label."""
    if isinstance(path, str) or not isinstance(path, Sequence):
        raise ValidationError(f"{field}: expected a tuple of labels, got {path!r}", field=field)
    for i, label in enumerate(path):
        if not isinstance(label, str):
            raise ValidationError(
                f"{field}[{i}]: expected a string label, got {type(label).__name__}",
                field=f"{field}[{i}]",
            )
    return tuple(path)


def path_matches(kind: str, path: tuple[str, ...], namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with ``path``."""
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if kind == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))
