"""How a cache entry is named and matched: the checks on every input (scope, key, params,
tags, value, ttl, threshold), the entry's stable id, and its *exact signature*.

A lookup hits an entry when the two keys mean the same (cosine of their embeddings at least
the threshold) **and** their exact signatures are equal. The signature holds what meaning
must not blur:

- the key's *literals*: every run of letters and digits that holds a digit (``123`` in
  "order #123", ``4321`` in "user:4321", ``v2``), as a set, so "refund policy for order 123"
  never answers "refund policy for order 456" however close the sentences embed;
- ``params``: any JSON value the caller says must match exactly (a tool's ``k=5``, the
  non-text arguments of a ``@cacheable`` function);
- for a key over :data:`SEMANTIC_CHARS` characters, a hash of the whole key: the embedding
  model reads only about its first 256 word pieces, so two long keys that differ near their
  ends would embed alike; they are matched exactly instead.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from typing import Any

import orjson

from ..errors import ValidationError
from ..validation import check_ttl

__all__ = [
    "ENTITY_PREFIX",
    "MAX_KEY_BYTES",
    "MAX_PARAMS_BYTES",
    "MAX_TAGS",
    "MAX_VALUE_BYTES",
    "SEMANTIC_CHARS",
    "TYPE",
    "check_key",
    "check_params",
    "check_scope",
    "check_tag",
    "check_tags",
    "check_threshold",
    "check_ttl_s",
    "check_value",
    "entity_of",
    "entry_id",
    "literals",
    "normalize",
    "scope_of",
    "signature",
]

TYPE = "cache"  # the memory type of cache entries
ENTITY_PREFIX = "synapsedb:cache:"  # entries of scope S are memories (and facts) of this + S
MAX_KEY_BYTES = 4096  # UTF-8 bytes of a key (the key is also kept in the entry's metadata)
SEMANTIC_CHARS = 1000  # longer keys are matched exactly (the model would cut them)
MAX_PARAMS_BYTES = 4096  # compact JSON of params
MAX_VALUE_BYTES = 60_000  # compact JSON of a cached value (under the KV fact limit of 64 KiB)
MAX_TAGS = 16
MAX_SCOPE_CHARS = 128
MAX_TAG_CHARS = 64
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:<>/-]*$")  # function and tool names
_LITERAL_RE = re.compile(r"[^\W_]*\d[^\W_]*")  # a run of letters and digits holding a digit


def check_scope(value: Any, field: str = "scope") -> str:
    """A function or tool name: 1-128 characters of ``[A-Za-z0-9_.:<>/-]`` (a qualified name
    such as ``search.docs`` or ``module.f.<locals>.g``)."""
    return _name(value, field, MAX_SCOPE_CHARS)


def check_tag(value: Any, field: str = "tag") -> str:
    return _name(value, field, MAX_TAG_CHARS)


def _name(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(
            f"{field}: expected a string, got {type(value).__name__}", field=field
        )
    if len(value) > limit:
        raise ValidationError(
            f"{field}: {len(value)} characters, over the limit of {limit}", field=field, limit=limit
        )
    if not _NAME_RE.match(value):
        raise ValidationError(
            f"{field}: {value[:80]!r} is not a valid name; use 1-{limit} characters of "
            "[A-Za-z0-9_.:<>/-], not starting with a punctuation mark",
            field=field,
            limit=limit,
        )
    return value


def check_tags(value: Any, field: str = "tags") -> list[str]:
    """At most MAX_TAGS distinct tags, sorted."""
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise ValidationError(f"{field}: expected a list of tags", field=field)
    tags = sorted({check_tag(t, f"{field}[{i}]") for i, t in enumerate(value)})
    if len(tags) > MAX_TAGS:
        raise ValidationError(
            f"{field}: {len(tags)} tags, over the limit of {MAX_TAGS}", field=field, limit=MAX_TAGS
        )
    return tags


def check_key(value: Any, field: str = "key") -> str:
    """A key text: a non-blank string of at most MAX_KEY_BYTES UTF-8 bytes, no NUL."""
    if not isinstance(value, str):
        raise ValidationError(
            f"{field}: expected a string, got {type(value).__name__}", field=field
        )
    if not value.strip():
        raise ValidationError(f"{field}: must not be empty", field=field)
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        raise ValidationError(
            f"{field}: {size} bytes, over the limit of {MAX_KEY_BYTES}",
            field=field,
            limit=MAX_KEY_BYTES,
        )
    if "\x00" in value:
        raise ValidationError(f"{field}: must not contain NUL characters", field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"{field}: not valid Unicode (a lone surrogate)", field=field
        ) from None
    return value


def _json(value: Any, field: str, limit: int) -> bytes:
    """``value`` as compact JSON with sorted keys, refusing what JSON cannot carry."""
    _check_json(value, field, 0)
    try:
        raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ValidationError(f"{field}: not a JSON value ({exc})", field=field) from None
    if len(raw) > limit:
        raise ValidationError(
            f"{field}: {len(raw)} bytes of JSON, over the limit of {limit}",
            field=field,
            limit=limit,
        )
    return raw


def _check_json(value: Any, field: str, depth: int) -> None:
    if depth > 32:
        raise ValidationError(f"{field}: nested deeper than 32 levels", field=field, limit=32)
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return
    if kind is float:
        if not math.isfinite(value):
            raise ValidationError(f"{field}: {value} is not valid JSON", field=field)
        return
    if kind is dict:
        for k, v in value.items():
            if type(k) is not str:
                raise ValidationError(
                    f"{field}: object keys must be strings, got {k!r}", field=field
                )
            _check_json(v, f"{field}.{k}", depth + 1)
        return
    if kind is list or kind is tuple:
        for i, v in enumerate(value):
            _check_json(v, f"{field}[{i}]", depth + 1)
        return
    raise ValidationError(
        f"{field}: a {kind.__name__} is not a JSON value; cache numbers, strings, booleans, "
        "null, lists and objects",
        field=field,
    )


def check_value(value: Any, field: str = "value") -> bytes:
    """A cached value: JSON, at most MAX_VALUE_BYTES compact; returns its encoding."""
    return _json(value, field, MAX_VALUE_BYTES)


def check_params(value: Any, field: str = "params") -> bytes:
    """Exact-match parameters: JSON (None: none), at most MAX_PARAMS_BYTES compact."""
    return b"" if value is None else _json(value, field, MAX_PARAMS_BYTES)


def check_threshold(value: Any, field: str = "threshold") -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= 1
    ):
        raise ValidationError(
            f"{field}: expected a cosine similarity above 0 and at most 1, got {value!r}",
            field=field,
            limit=1,
        )
    return float(value)


def check_ttl_s(value: Any, field: str = "ttl") -> float:
    ttl = check_ttl(value, field)
    if ttl is None:
        raise ValidationError(f"{field}: cache entries need a ttl in seconds", field=field)
    return ttl


def normalize(key: str) -> str:
    """The key as exact matching sees it: case folded, runs of white space as one space."""
    return " ".join(key.casefold().split())


def literals(key: str) -> list[str]:
    """The key's literals (see the module docstring), case folded, sorted, distinct."""
    return sorted(set(_LITERAL_RE.findall(key.casefold())))


def signature(key: str, params: bytes, *, match_literals: bool = True) -> str:
    """The exact part of a key: its literals (unless ``match_literals`` is off), its params'
    JSON, and a hash of the whole normalized key when it is too long to embed whole."""
    h = hashlib.sha256()
    h.update(b"L" + orjson.dumps(literals(key) if match_literals else []))
    h.update(b"P" + params)
    if len(key) > SEMANTIC_CHARS:
        h.update(b"K" + normalize(key).encode("utf-8"))
    return h.hexdigest()[:32]


def entry_id(scope: str, key: str, sig: str) -> str:
    """The memory id of the entry for (scope, normalized key, signature): storing the same
    key again replaces its entry (a new version) instead of adding a second one."""
    h = hashlib.sha256("\x00".join((scope, normalize(key), sig)).encode("utf-8"))
    return "cache-" + h.hexdigest()[:40]


def entity_of(scope: str) -> str:
    return ENTITY_PREFIX + scope


def scope_of(entity: str) -> str | None:
    return entity[len(ENTITY_PREFIX) :] if entity.startswith(ENTITY_PREFIX) else None


def scopes_in(entities: Iterable[str]) -> list[str]:
    return sorted(s for e in entities if (s := scope_of(e)) is not None)
