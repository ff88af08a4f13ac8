"""Valid time: when a memory was true in the world, kept apart from when it was recorded.

A memory's valid interval is two optional keys of its metadata, ``valid_from`` and
``valid_to``, in epoch seconds (numbers): the memory holds from ``valid_from`` (inclusive; open
when absent) until ``valid_to`` (exclusive; open when absent). Writers give them as top-level
fields of a memory in any form a time takes (ISO-8601, epoch seconds, datetime), stored as
float epoch seconds; given directly in ``metadata`` they must already be numbers. Being
metadata, they travel with export/import and every version keeps its own in ``history``.

``valid_at=T`` on reads keeps the memories whose interval contains T. It is a filter over the
two metadata keys (:func:`valid_at_filter`), composed with the caller's filter, so it runs
inside the search like any filter and means the same per record (:func:`valid_at_matches`).
System time (``as_of``) picks which version is read; valid time is then asked of that version.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import ValidationError
from .query.filters import And, Cond, Node, Or, matches
from .times import TimeLike, format_us, to_us

__all__ = [
    "VALID_FIELDS",
    "BoundsPatch",
    "check_bounds",
    "given_bounds",
    "not_ended_filter",
    "valid_at_filter",
    "valid_at_matches",
    "valid_at_seconds",
]

VALID_FIELDS = ("valid_from", "valid_to")
_FROM = ("metadata", "valid_from")
_TO = ("metadata", "valid_to")


def valid_at_seconds(value: TimeLike, field: str = "valid_at") -> float:
    """A time in any accepted form as epoch seconds, the unit bounds are stored in. Bounds and
    ``valid_at`` go through this one conversion, so an instant equals itself exactly."""
    return to_us(value, field) / 1_000_000


def given_bounds(
    payload: Mapping[str, Any], prefix: str = "", *, clear: bool = False
) -> dict[str, float | None]:
    """The ``valid_from``/``valid_to`` given as top-level fields of a memory, in epoch seconds.
    ``None`` means "not given" on a write and "remove this bound" on an update (``clear``)."""
    out: dict[str, float | None] = {}
    for key in VALID_FIELDS:
        if key in payload:
            value = payload[key]
            if value is not None:
                out[key] = valid_at_seconds(value, f"{prefix}{key}")
            elif clear:
                out[key] = None
    return out


def check_bounds(meta: Mapping[str, Any], prefix: str = "", given: Collection[str] = ()) -> None:
    """Check the bounds in ``meta``: each a number of epoch seconds within years 1..9999, and
    ``valid_to`` after ``valid_from``. ``given`` names the bounds that came as top-level fields,
    so an error names the field the caller wrote (``valid_to`` or ``metadata.valid_to``)."""
    for key in VALID_FIELDS:
        if key in meta and key not in given:
            value, field = meta[key], f"{prefix}metadata.{key}"
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValidationError(
                    f"{field}: expected epoch seconds (a number), got {type(value).__name__}; "
                    f"pass a top-level {key} to give it as an ISO-8601 time or datetime",
                    field=field,
                )
            to_us(value, field)  # finite, within the years a time can hold
    start, end = meta.get("valid_from"), meta.get("valid_to")
    if start is not None and end is not None and end <= start:
        key = "valid_from" if "valid_from" in given and "valid_to" not in given else "valid_to"
        field = f"{prefix}{key}" if key in given else f"{prefix}metadata.{key}"
        raise ValidationError(
            f"{field}: valid_to ({format_us(to_us(end, field))}) must be after valid_from "
            f"({format_us(to_us(start, field))})",
            field=field,
        )


@dataclass(frozen=True, slots=True)
class BoundsPatch:
    """The valid time part of an ``update``, applied to the previous version by the writer.

    ``given`` holds the bounds given as top-level fields (epoch seconds; None removes one).
    When ``metadata`` is replaced whole, the bounds it does not name are kept from the previous
    version: replacing metadata does not change when the memory was true. The merged
    interval is checked again (``valid_to`` after ``valid_from``); ``limit`` is the metadata
    size limit the merged metadata must still meet.
    """

    given: Mapping[str, float | None]
    limit: int

    def apply(self, prev_json: str, new_json: str | None) -> str:
        """The new version's metadata JSON, from the previous version's and the new one (None
        when ``metadata`` was not given)."""
        prev = orjson.loads(prev_json)
        meta: MutableMapping[str, Any] = dict(prev) if new_json is None else orjson.loads(new_json)
        kept = False
        if new_json is not None:
            for key in VALID_FIELDS:
                old = prev.get(key)
                if key not in meta and isinstance(old, int | float) and not isinstance(old, bool):
                    meta[key], kept = old, True
        if not self.given and not kept:
            return prev_json if new_json is None else new_json
        for key, value in self.given.items():
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value
        check_bounds(meta, "", self.given)
        raw = orjson.dumps(meta)
        if len(raw) > self.limit:
            raise ValidationError(
                f"metadata: {len(raw)} bytes of JSON with valid_from/valid_to, over the limit "
                f"of {self.limit}",
                field="metadata",
                limit=self.limit,
            )
        return raw.decode()


def valid_at_filter(t: float) -> Node:
    """The filter node of ``valid_at=t`` (epoch seconds): no ``valid_from`` or
    ``valid_from <= t``, and no ``valid_to`` or ``valid_to > t``."""
    return And(
        (
            Or((Cond(_FROM, "$exists", False), Cond(_FROM, "$lte", t))),
            Or((Cond(_TO, "$exists", False), Cond(_TO, "$gt", t))),
        )
    )


def not_ended_filter(t: float) -> Node:
    """The filter node of the memories whose valid interval has not ended at ``t`` (epoch
    seconds): no ``valid_to``, or ``valid_to > t``. A query's default: what an UPDATE closed (or
    any memory past its ``valid_to``) is left out; one not yet valid (a plan) stays."""
    return Or((Cond(_TO, "$exists", False), Cond(_TO, "$gt", t)))


def valid_at_matches(node: Node, meta_json: str) -> bool:
    """Whether a memory with metadata ``meta_json`` passes ``node`` (:func:`valid_at_filter`):
    the per-record evaluator of the filter language, skipping the JSON parse for the memories
    whose metadata holds no bound (all of them, in a namespace without valid time)."""
    if "valid_" not in meta_json:
        return True
    return matches(node, {}, orjson.loads(meta_json))
