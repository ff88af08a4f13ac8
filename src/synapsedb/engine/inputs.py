"""Argument parsing for the namespace handle: limits, memory ids, batches, events, id ranges.

Each function checks one caller-supplied argument of a :class:`~synapsedb.engine.Namespace`
method and returns it in the form the engine uses, or raises ValidationError naming the field
(and the limit, where there is one). Field-level checks shared with the HTTP layer live in
:mod:`synapsedb.validation`; these are the ones only the namespace methods need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import Settings
from ..errors import ValidationError
from ..ids import parse_event_id
from ..validation import MemoryInput, dump_json, memory_input

__all__ = [
    "EVENT_FIELDS",
    "MAX_LIMIT",
    "BatchItems",
    "check_limit",
    "check_memory_id",
    "event_fields",
    "event_id_range",
    "memory_batch",
]

MAX_LIMIT = 10_000
EVENT_FIELDS = frozenset(
    {"content", "data", "ts", "agent", "salience", "metadata", "embedding", "pinned", "ttl"}
)
_MAX_ID = (1 << 62, 1 << 62)

BatchItems = Sequence[Mapping[str, Any] | tuple[str, str | Mapping[str, Any]]]


def check_limit(value: Any) -> int:
    """A result ``limit``: an integer from 1 to MAX_LIMIT."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ValidationError(
            f"limit: expected an integer from 1 to {MAX_LIMIT}, got {value!r}",
            field="limit",
            limit=MAX_LIMIT,
        )
    return value


def check_memory_id(value: Any) -> str:
    """A memory id: a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ValidationError(f"id: expected a memory id string, got {value!r}", field="id")
    return value


def memory_batch(
    items: BatchItems, settings: Settings, agent: Callable[[], str | None]
) -> tuple[list[MemoryInput], list[str]]:
    """The memories of a ``write_many`` call, each with the field prefix (``items[i].``) its
    errors are reported under. Each item is ``{"entity": ..., <fields>}`` or
    ``(entity, memory)``; at most ``max_batch_items`` of them. ``agent`` gives the default
    agent; it is called only for a non-empty batch (an empty one writes nothing, so its
    agent is never checked)."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise ValidationError("items: expected a list of memories", field="items")
    if not items:
        return [], []
    if len(items) > settings.max_batch_items:
        raise ValidationError(
            f"items: {len(items)} memories, over the limit of {settings.max_batch_items} per call",
            field="items",
            limit=settings.max_batch_items,
        )
    default_agent = agent()
    inputs, prefixes = [], []
    for i, raw in enumerate(items):
        prefix = f"items[{i}]."
        if isinstance(raw, tuple) and len(raw) == 2:
            entity, payload = raw
        elif isinstance(raw, Mapping):
            if "entity" not in raw:
                raise ValidationError(f"{prefix}entity: required", field=f"{prefix}entity")
            payload = {k: v for k, v in raw.items() if k != "entity"}
            entity = raw["entity"]
        else:
            raise ValidationError(
                f"items[{i}]: expected an object with 'entity' or an (entity, memory) pair",
                field=f"items[{i}]",
            )
        inputs.append(memory_input(entity, payload, settings, agent=default_agent, prefix=prefix))
        prefixes.append(prefix)
    return inputs, prefixes


def event_fields(
    event: str | Mapping[str, Any], settings: Settings
) -> tuple[str | Mapping[str, Any], str | None]:
    """An ``append`` event split into the memory payload it is stored as and its ``data``
    object as JSON (or None): only EVENT_FIELDS are allowed, and ``data`` stays on the event,
    not the memory."""
    data_json = None
    if isinstance(event, Mapping):
        for k in event:
            if k not in EVENT_FIELDS:
                raise ValidationError(
                    f"{k}: unknown event field; allowed: {', '.join(sorted(EVENT_FIELDS))}",
                    field=str(k),
                )
        data = event.get("data")
        if data is not None:
            if not isinstance(data, Mapping):
                raise ValidationError("data: expected an object", field="data")
            data_json = dump_json(data, "data", settings.max_value_bytes)
        event = {k: v for k, v in event.items() if k != "data"}
    return event, data_json


def event_id_range(
    start: str | None, end: str | None, after: str | None
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The inclusive (ms, seq) bounds of an ``events`` read by id: ``start``/``end``
    inclusive (``-`` and ``+`` are the open ends), ``after`` exclusive."""
    lo = (0, 0) if start in (None, "-") else parse_event_id(start, "start")
    hi = _MAX_ID if end in (None, "+") else parse_event_id(end, "end", default_seq=1 << 62)
    if after is not None:
        a_ms, a_seq = parse_event_id(after, "after", default_seq=1 << 62)
        lo = max(lo, (a_ms, a_seq + 1))
    return lo, hi
