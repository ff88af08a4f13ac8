"""Input validation. Every check raises ValidationError naming the field and the limit.

Validation is pure (it reads no database state) and runs in the caller's thread before anything
is queued for writing, so bad input never reaches storage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from .config import Settings
from .errors import ValidationError
from .times import to_us
from .validtime import BoundsPatch, check_bounds, given_bounds

__all__ = [
    "INTERNAL_PREFIX",
    "MemoryInput",
    "check_agent",
    "check_entity",
    "check_filter_size",
    "check_id",
    "check_id_list",
    "check_key",
    "check_namespace",
    "check_no_nul",
    "check_query_text",
    "check_session_id",
    "check_ttl",
    "check_types",
    "check_vector",
    "check_version",
    "dump_json",
    "is_internal_entity",
    "memory_input",
    "memory_patch",
    "routable",
]

NAMESPACE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
TYPE_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_NAME_CHARS = 256
MAX_AGENT_CHARS = 128
MAX_JSON_DEPTH = 32
MAX_TTL_S = 100 * 365 * 86_400
MAX_SESSION_ID_CHARS = 200  # leaves room for "session:" within MAX_NAME_CHARS

MEMORY_FIELDS = frozenset(
    {
        "id",
        "content",
        "type",
        "metadata",
        "embedding",
        "salience",
        "ts",
        "agent",
        "pinned",
        "ttl",
        "valid_from",
        "valid_to",
    }
)
PATCH_FIELDS = MEMORY_FIELDS - {"id"}


@dataclass(slots=True)
class MemoryInput:
    """A validated memory write. ``ts_us`` None means "now, at commit"."""

    id: str | None
    entity: str
    content: str
    type: str
    meta_json: str
    vec: np.ndarray | None
    salience: float
    ts_us: int | None
    agent: str | None
    pinned: bool
    ttl: float | None
    source: str = "caller"  # who made ``vec``: "caller", or the embedder's name


def check_namespace(name: Any) -> str:
    if not isinstance(name, str) or not NAMESPACE_RE.match(name):
        raise ValidationError(
            f"namespace: {name!r} is not a valid name; use 1-64 characters of [a-z0-9._-] "
            "starting with a letter or digit",
            field="namespace",
            limit=64,
        )
    return name


def _check_name(value: Any, field: str, limit: int = MAX_NAME_CHARS) -> str:
    if not isinstance(value, str):
        raise ValidationError(
            f"{field}: expected a string, got {type(value).__name__}", field=field
        )
    if not value or value.isspace():
        raise ValidationError(f"{field}: must not be empty", field=field)
    if len(value) > limit:
        raise ValidationError(
            f"{field}: {len(value)} characters, over the limit of {limit}",
            field=field,
            limit=limit,
        )
    return check_no_nul(value, field)


def check_entity(value: Any, field: str = "entity") -> str:
    return _check_name(value, field)


def check_key(value: Any, field: str = "key") -> str:
    return _check_name(value, field)


# Entities SynapseDB keeps for its own bookkeeping in a namespace (the memory loop's jobs and
# settings): not tenant data, left out of listings, recall and the MCP resources.
INTERNAL_PREFIX = "synapsedb:"


def is_internal_entity(entity: str) -> bool:
    """Whether ``entity`` is one of SynapseDB's own (``synapsedb:...``), not a tenant's."""
    return entity.startswith(INTERNAL_PREFIX)


def check_agent(value: Any, field: str = "agent") -> str | None:
    if value is None:
        return None
    return _check_name(value, field, MAX_AGENT_CHARS)


def check_version(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(
            f"{field}: expected a non-negative integer version, got {value!r}", field=field
        )
    return value


def _check_json(value: Any, field: str, depth: int = 0) -> None:
    """Reject what JSON cannot carry faithfully: NaN/inf, non-string keys, odd types, deep nesting."""
    if depth > MAX_JSON_DEPTH:
        raise ValidationError(
            f"{field}: nested deeper than {MAX_JSON_DEPTH} levels",
            field=field,
            limit=MAX_JSON_DEPTH,
        )
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{field}: {value} is not valid JSON", field=field)
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if type(k) is not str:
                raise ValidationError(
                    f"{field}: object keys must be strings, got {type(k).__name__}", field=field
                )
            t = type(v)  # plain scalars need no recursion (nor a field path built for them)
            if t is str or t is int or t is bool or v is None or (t is float and math.isfinite(v)):
                continue
            _check_json(v, f"{field}.{k}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            t = type(v)
            if t is str or t is int or t is bool or v is None or (t is float and math.isfinite(v)):
                continue
            _check_json(v, f"{field}[{i}]", depth + 1)
        return
    raise ValidationError(f"{field}: {type(value).__name__} is not a JSON value", field=field)


def dump_json(value: Any, field: str, limit: int) -> str:
    """Validate and serialize a JSON value; enforce ``limit`` bytes of compact JSON."""
    _check_json(value, field)
    try:
        raw = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError) as exc:  # e.g. integers beyond 64 bits
        raise ValidationError(f"{field}: not serializable as JSON ({exc})", field=field) from None
    if len(raw) > limit:
        raise ValidationError(
            f"{field}: {len(raw)} bytes of JSON, over the limit of {limit}",
            field=field,
            limit=limit,
        )
    return raw.decode()


def _content(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(
            f"{field}: expected a string, got {type(value).__name__}", field=field
        )
    # len(str) <= bytes <= 4*len(str): only encode when the answer is not obvious.
    if len(value) * 4 > limit:
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise ValidationError(
                f"{field}: {size} bytes, over the limit of {limit}", field=field, limit=limit
            )
    if not value.strip():
        raise ValidationError(f"{field}: must not be empty", field=field)
    check_no_nul(value, field)
    return value


def check_no_nul(value: str, field: str) -> str:
    """Refuse NUL characters in text that is stored: PostgreSQL's text cannot hold them, and
    the same input must be valid on every backend."""
    if "\x00" in value:
        raise ValidationError(
            f"{field}: must not contain NUL characters (\\u0000) at position {value.index(chr(0))}",
            field=field,
        )
    return value


def check_vector(value: Any, field: str, max_dim: int) -> np.ndarray:
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "fiu":  # no booleans, objects or strings as numbers
            raise ValidationError(
                f"{field}: expected numbers, got an array of {value.dtype}", field=field
            )
    elif isinstance(value, str | bytes | Mapping) or not hasattr(value, "__len__"):
        raise ValidationError(f"{field}: expected a list of numbers", field=field)
    else:
        if len(value) > max_dim:
            raise ValidationError(
                f"{field}: {len(value)} dimensions, over the limit of {max_dim}",
                field=field,
                limit=max_dim,
            )
        _check_numbers(value, field)
    try:
        vec = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise ValidationError(f"{field}: expected a list of numbers", field=field) from None
    if vec.ndim != 1 or vec.shape[0] == 0:
        raise ValidationError(
            f"{field}: expected a flat, non-empty list of numbers, got shape {vec.shape}",
            field=field,
        )
    if vec.shape[0] > max_dim:
        raise ValidationError(
            f"{field}: {vec.shape[0]} dimensions, over the limit of {max_dim}",
            field=field,
            limit=max_dim,
        )
    if not np.isfinite(vec).all():
        raise ValidationError(f"{field}: contains NaN or infinity", field=field)
    if vec is value:  # never alias the caller's array
        vec = vec.copy()
    vec.setflags(write=False)
    return vec


def _check_numbers(value: Sequence[Any], field: str) -> None:
    """Every entry a number: a boolean is not 1.0, nor a string "1" a number (numpy would
    convert both). Names the first offender, ``embedding[i]``."""
    kinds = set(map(type, value))
    if kinds <= {float, int}:  # the common case, without a Python-level loop
        return
    for i, item in enumerate(value):
        if isinstance(item, bool | np.bool_) or not isinstance(
            item, int | float | np.integer | np.floating
        ):
            raise ValidationError(
                f"{field}[{i}]: expected a number, got {type(item).__name__}",
                field=f"{field}[{i}]",
            )


def _salience(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValidationError(
            f"{field}: expected a number from 0 to 1, got {value!r}", field=field, limit=1
        )
    return float(value)


def check_ttl(value: Any, field: str = "ttl") -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValidationError(
            f"{field}: expected a positive number of seconds, got {value!r}", field=field
        )
    if value > MAX_TTL_S:  # an expiry time must stay a time (and fit the store's integers)
        raise ValidationError(
            f"{field}: {value!r} seconds, over the limit of {MAX_TTL_S} (100 years)",
            field=field,
            limit=MAX_TTL_S,
        )
    return float(value)


def _type(value: Any, field: str) -> str:
    if not isinstance(value, str) or not TYPE_RE.match(value):
        raise ValidationError(
            f"{field}: {value!r} is not a valid type; use a lowercase word of up to 32 "
            "characters ([a-z][a-z0-9_-]*)",
            field=field,
            limit=32,
        )
    return value


def _pinned(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{field}: expected true or false, got {value!r}", field=field)
    return value


def _unknown(payload: Mapping[str, Any], allowed: frozenset[str], prefix: str) -> None:
    for key in payload:
        if key not in allowed:
            raise ValidationError(
                f"{prefix}{key}: unknown field; allowed: {', '.join(sorted(allowed))}",
                field=f"{prefix}{key}",
            )


def memory_input(
    entity: Any,
    payload: Any,
    settings: Settings,
    *,
    agent: str | None = None,
    prefix: str = "",
) -> MemoryInput:
    """Validate a memory write: ``payload`` is the content string or a dict of fields."""
    entity = check_entity(entity, f"{prefix}entity")
    if isinstance(payload, str):
        payload = {"content": payload}
    elif not isinstance(payload, Mapping):
        raise ValidationError(
            f"{prefix or 'memory'}: expected a string or an object, got {type(payload).__name__}",
            field=prefix.rstrip(".") or "memory",
        )
    _unknown(payload, MEMORY_FIELDS, prefix)
    if "content" not in payload:
        raise ValidationError(f"{prefix}content: required", field=f"{prefix}content")
    mid = payload.get("id")
    if mid is not None:
        check_id(mid, f"{prefix}id")
    meta = payload.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        raise ValidationError(
            f"{prefix}metadata: expected an object, got {type(meta).__name__}",
            field=f"{prefix}metadata",
        )
    bounds = given_bounds(payload, prefix)
    if bounds:  # stored in the metadata (epoch seconds), over what it says itself
        meta = {**(meta or {}), **bounds}
    if meta is None:
        meta_json = "{}"
    else:
        if "valid_from" in meta or "valid_to" in meta:
            check_bounds(meta, prefix, bounds)
        meta_json = dump_json(meta, f"{prefix}metadata", settings.max_metadata_bytes)
    emb = payload.get("embedding")
    ts = payload.get("ts")
    return MemoryInput(
        id=mid,
        entity=entity,
        content=_content(payload["content"], f"{prefix}content", settings.max_content_bytes),
        type=_type(payload.get("type", "fact"), f"{prefix}type"),
        meta_json=meta_json,
        vec=None if emb is None else check_vector(emb, f"{prefix}embedding", settings.max_dim),
        salience=_salience(payload.get("salience", 0.5), f"{prefix}salience"),
        ts_us=None if ts is None else to_us(ts, f"{prefix}ts"),
        agent=check_agent(payload.get("agent", agent), f"{prefix}agent"),
        pinned=_pinned(payload.get("pinned", False), f"{prefix}pinned"),
        ttl=check_ttl(payload.get("ttl"), f"{prefix}ttl"),
    )


def memory_patch(patch: Any, settings: Settings) -> dict[str, Any]:
    """Validate an update: only the given fields change (``metadata`` is replaced whole, but
    the valid_from/valid_to it does not name are kept: see :class:`BoundsPatch`, under
    ``bounds``; a top-level ``valid_from``/``valid_to`` of None removes that bound)."""
    if not isinstance(patch, Mapping):
        raise ValidationError(
            f"changes: expected an object, got {type(patch).__name__}", field="changes"
        )
    _unknown(patch, PATCH_FIELDS, "")
    if not patch:
        raise ValidationError("changes: nothing to update", field="changes")
    out: dict[str, Any] = {}
    given = given_bounds(patch, clear=True)
    for key, value in patch.items():
        if key == "content":
            out["content"] = _content(value, "content", settings.max_content_bytes)
        elif key == "type":
            out["type"] = _type(value, "type")
        elif key == "metadata":
            if value is not None and not isinstance(value, Mapping):
                raise ValidationError(
                    f"metadata: expected an object, got {type(value).__name__}", field="metadata"
                )
            if value and ("valid_from" in value or "valid_to" in value):
                merged = {**value, **given}  # a bound given as None is removed
                check_bounds(
                    {k: v for k, v in merged.items() if not (k in given and v is None)}, "", given
                )
            out["meta_json"] = dump_json(value or {}, "metadata", settings.max_metadata_bytes)
        elif key == "embedding":
            out["vec"] = (
                None if value is None else check_vector(value, "embedding", settings.max_dim)
            )
        elif key == "salience":
            out["salience"] = _salience(value, "salience")
        elif key == "ts":
            out["ts_us"] = to_us(value, "ts")
        elif key == "agent":
            out["agent"] = check_agent(value)
        elif key == "pinned":
            out["pinned"] = _pinned(value, "pinned")
        elif key == "ttl":
            out["ttl"] = check_ttl(value, "ttl")
    if given or "meta_json" in out:
        out["bounds"] = BoundsPatch(given, settings.max_metadata_bytes)
    return out


def check_types(types: Iterable[str] | None) -> frozenset[str] | None:
    if types is None:
        return None
    if isinstance(types, str):
        return frozenset((types,))
    if isinstance(types, Mapping) or not isinstance(types, Iterable):
        raise ValidationError("types: expected a non-empty list of type names", field="types")
    out = frozenset(t if isinstance(t, str) else None for t in types)  # unhashables: None
    if not out or not all(isinstance(t, str) for t in out):
        raise ValidationError("types: expected a non-empty list of type names", field="types")
    return out


def check_id(value: Any, field: str) -> str:
    """A caller-chosen id (memory id, answer id): up to 128 characters of [A-Za-z0-9._:-]."""
    if not isinstance(value, str) or not ID_RE.match(value):
        raise ValidationError(
            f"{field}: {value!r} is not a valid id; use up to 128 characters of [A-Za-z0-9._:-]",
            field=field,
            limit=128,
        )
    return value


def check_id_list(value: Any, field: str, limit: int) -> list[str]:
    """A list of ids (duplicates dropped, order kept)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValidationError(f"{field}: expected a list of ids", field=field)
    if not all(isinstance(v, str) and v for v in value):
        raise ValidationError(f"{field}: every entry must be a non-empty string", field=field)
    if len(value) > limit:
        raise ValidationError(
            f"{field}: {len(value)} ids, over the limit of {limit}", field=field, limit=limit
        )
    return list(dict.fromkeys(value))


def check_query_text(value: Any, limit: int) -> str | None:
    """A query text: a string of at most ``limit`` characters (None: no text)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"text: expected a string, got {type(value).__name__}", field="text")
    if len(value) > limit:
        raise ValidationError(
            f"text: {len(value)} characters, over the limit of {limit}", field="text", limit=limit
        )
    return check_no_nul(value, "text")


def check_filter_size(value: Any, limit: int) -> None:
    """Bound a query filter before it is parsed or logged: nesting at most MAX_JSON_DEPTH
    levels, at most ``limit`` bytes as compact JSON (times count by their text)."""
    if value is None:
        return
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:  # iterative: a deeply nested filter must not exhaust the Python stack
        item, depth = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            if depth >= MAX_JSON_DEPTH:
                raise ValidationError(
                    f"filter: nested deeper than {MAX_JSON_DEPTH} levels",
                    field="filter",
                    limit=MAX_JSON_DEPTH,
                )
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)
    try:
        size = len(orjson.dumps(value, default=str))
    except (TypeError, orjson.JSONEncodeError):
        return  # not JSON at all: the filter parser names what is wrong
    if size > limit:
        raise ValidationError(
            f"filter: {size} bytes of JSON, over the limit of {limit}", field="filter", limit=limit
        )


def check_session_id(value: Any, field: str = "session_id") -> str:
    """1-200 characters, not blank, no control characters. The limit leaves room for the
    ``session:`` prefix within the engine's 256-character entity names."""
    if not isinstance(value, str):
        raise ValidationError(
            f"{field}: expected a string, got {type(value).__name__}", field=field
        )
    if not value or value.isspace():
        raise ValidationError(f"{field}: must not be empty", field=field)
    if len(value) > MAX_SESSION_ID_CHARS:
        raise ValidationError(
            f"{field}: {len(value)} characters, over the limit of {MAX_SESSION_ID_CHARS}",
            field=field,
            limit=MAX_SESSION_ID_CHARS,
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValidationError(f"{field}: must not contain control characters", field=field)
    return value


def routable(session_id: str) -> bool:
    """Whether a (valid) session id can be one URL path segment: not when it holds ``/``,
    which servers decode from ``%2F`` before routing."""
    return "/" not in session_id
