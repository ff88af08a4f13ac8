"""Serialized values (LangGraph's ``serde.dumps_typed``: a type tag and bytes) as KV facts.

A value is stored as ``{"t": type, "b": base64}`` in one fact when it fits in ``chunk_chars``
characters of base64, and otherwise as ``{"t": type, "n": count, "nonce": ...}`` with the
base64 split over ``count`` further facts (keys ``<prefix>x:...``) written first, so a reader
that sees the head finds every chunk. The nonce keeps a head's chunks its own when a key is
written twice.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from typing import Any

from ...errors import NotFoundError, StorageError, VersionConflictError
from ...times import TimeLike
from .naming import digest_key

__all__ = ["DEFAULT_CHUNK_CHARS", "chunk_keys", "is_chunk_key", "read_blob", "write_blob"]

DEFAULT_CHUNK_CHARS = 48_000  # base64 per fact: under SynapseDB's 64 KiB default value limit


def encode(typed: tuple[str, bytes]) -> tuple[str, str]:
    kind, data = typed
    return kind, base64.b64encode(data).decode("ascii")


def write_blob(
    ns: Any,
    entity: str,
    key: str,
    typed: tuple[str, bytes],
    chunk_chars: int,
    extra: Mapping[str, Any] | None = None,
    if_version: int | None = None,
) -> bool:
    """Store a typed value under (entity, key), with ``extra`` fields in its head. With
    ``if_version=0`` nothing is stored when the key exists; returns whether it was stored."""
    kind, text = encode(typed)
    head: dict[str, Any] = dict(extra or {})
    head["t"] = kind
    if len(text) <= chunk_chars:
        head["b"] = text
        return _set_head(ns, entity, key, head, if_version)
    nonce = uuid.uuid4().hex[:12]
    parts = [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    for i, part in enumerate(parts):
        ns.set(entity, digest_key(key[:2] + "x", key, nonce, str(i)), part)
    head["n"], head["nonce"] = len(parts), nonce
    if _set_head(ns, entity, key, head, if_version):
        return True
    for k in chunk_keys(key, head):  # lost the race: these chunks belong to nobody
        ns.delete(entity, k)
    return False


def _set_head(ns: Any, entity: str, key: str, head: dict[str, Any], if_version: int | None) -> bool:
    try:
        ns.set(entity, key, head, if_version=if_version)
    except VersionConflictError:
        return False
    return True


def chunk_keys(key: str, head: Mapping[str, Any]) -> list[str]:
    """The keys of a head's chunk facts (none when the value is inline)."""
    n = head.get("n")
    if not isinstance(n, int):
        return []
    return [digest_key(key[:2] + "x", key, str(head.get("nonce")), str(i)) for i in range(n)]


def is_chunk_key(key: str) -> bool:
    return key[2:3] == "x"


def read_blob(
    ns: Any, entity: str, key: str, head: Mapping[str, Any], as_of: TimeLike | None
) -> tuple[str, bytes]:
    """The typed value a head describes (its chunks read as of the same moment)."""
    kind = str(head["t"])
    if "b" in head:
        return kind, base64.b64decode(head["b"])
    parts = []
    for k in chunk_keys(key, head):
        try:
            parts.append(ns.get(entity, k, as_of=as_of).value)
        except NotFoundError:
            raise StorageError(
                f"checkpoint data {entity!r}/{key!r} is missing a chunk ({k!r})",
                entity=entity,
                key=key,
            ) from None
    return kind, base64.b64decode("".join(parts))
