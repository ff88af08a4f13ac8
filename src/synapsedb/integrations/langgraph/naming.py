"""How LangGraph's names become SynapseDB entities and keys (docs/integrations/langgraph.md).

A store namespace ``("users", "u1", "memories")`` is the entity ``lgs:users.u1.memories``:
labels joined by ``.`` with ``%`` and ``.`` percent-encoded inside a label, so every tuple of
labels has exactly one entity and every such entity decodes back to its tuple. Its index
entries (one memory per embedded text) live on the twin entity ``lgx:...``, so listing
namespaces never sees them. A checkpointer thread is the entity ``lgt:<thread_id>`` (or
``lgh:<sha256>`` when the id is too long to be a name); its pending writes, one entity per
checkpoint, are ``lgw:<sha256 of thread, checkpoint namespace, checkpoint id>``.

Entities and fact keys are at most 256 characters (SynapseDB's name limit): a namespace or key
that does not fit is a ``ValidationError`` naming ``namespace`` or ``key`` and the limit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ...errors import ValidationError

__all__ = [
    "INDEX_PREFIX",
    "MAX_NAME",
    "STORE_PREFIX",
    "check_labels",
    "check_store_key",
    "decode_namespace",
    "digest_key",
    "encode_namespace",
    "encode_prefix",
    "index_entity",
    "index_memory_id",
    "is_thread_entity",
    "thread_entity",
    "writes_entity",
]

MAX_NAME = 256
STORE_PREFIX = "lgs:"
INDEX_PREFIX = "lgx:"
THREAD_PREFIX = "lgt:"
HASHED_THREAD_PREFIX = "lgh:"
WRITES_PREFIX = "lgw:"


def _escape(label: str) -> str:
    return label.replace("%", "%25").replace(".", "%2E")


def _unescape(label: str) -> str:
    return label.replace("%2E", ".").replace("%25", "%")


def check_labels(namespace: object, field: str = "namespace") -> tuple[str, ...]:
    """A namespace as LangGraph gives it: a tuple (or list) of strings without NUL."""
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        raise ValidationError(
            f"{field}: expected a tuple of strings, got {type(namespace).__name__}", field=field
        )
    labels = tuple(namespace)
    for i, label in enumerate(labels):
        if not isinstance(label, str):
            raise ValidationError(
                f"{field}[{i}]: expected a string label, got {type(label).__name__}",
                field=f"{field}[{i}]",
            )
        if "\x00" in label:
            raise ValidationError(
                f"{field}[{i}]: must not contain NUL characters", field=f"{field}[{i}]"
            )
    return labels


def encode_prefix(labels: Sequence[str]) -> str:
    """The joined, escaped form of some labels (no entity prefix)."""
    return ".".join(_escape(label) for label in labels)


def encode_namespace(namespace: object) -> str:
    """The entity of a store namespace; ValidationError when it is not a tuple of strings or
    does not fit in a name."""
    labels = check_labels(namespace)
    if not labels:
        raise ValidationError("namespace: must have at least one label", field="namespace")
    entity = STORE_PREFIX + encode_prefix(labels)
    if len(entity) > MAX_NAME:
        raise ValidationError(
            f"namespace: {len(entity) - len(STORE_PREFIX)} characters once joined and escaped, "
            f"over the limit of {MAX_NAME - len(STORE_PREFIX)}",
            field="namespace",
            limit=MAX_NAME - len(STORE_PREFIX),
        )
    return entity


def decode_namespace(entity: str) -> tuple[str, ...] | None:
    """The namespace of a store entity, or None for an entity that is not one."""
    if not entity.startswith(STORE_PREFIX):
        return None
    return tuple(_unescape(label) for label in entity[len(STORE_PREFIX) :].split("."))


def index_entity(store_entity: str) -> str:
    return INDEX_PREFIX + store_entity[len(STORE_PREFIX) :]


def index_memory_id(store_entity: str, key: str, i: int) -> str:
    """The id of the ``i``-th index memory of an item (deterministic: a new put replaces it)."""
    digest = hashlib.sha256(f"{store_entity}\x00{key}".encode()).hexdigest()[:40]
    return f"lgx-{digest}-{i}"


def check_store_key(key: object) -> str:
    if not isinstance(key, str):
        raise ValidationError(f"key: expected a string, got {type(key).__name__}", field="key")
    if not key or key.isspace():
        raise ValidationError("key: must not be empty", field="key")
    if len(key) > MAX_NAME:
        raise ValidationError(
            f"key: {len(key)} characters, over the limit of {MAX_NAME}", field="key", limit=MAX_NAME
        )
    if "\x00" in key:
        raise ValidationError("key: must not contain NUL characters", field="key")
    return key


def thread_entity(thread_id: object) -> str:
    """The entity of a checkpointer thread (readable when the id fits, hashed otherwise)."""
    if not isinstance(thread_id, str | int) or isinstance(thread_id, bool):
        raise ValidationError(
            f"thread_id: expected a string, got {type(thread_id).__name__}", field="thread_id"
        )
    tid = str(thread_id)
    if not tid:
        raise ValidationError("thread_id: must not be empty", field="thread_id")
    if len(tid) + 8 <= MAX_NAME and "\x00" not in tid:  # room for the "lgd:" data entity
        return THREAD_PREFIX + tid
    return HASHED_THREAD_PREFIX + hashlib.sha256(tid.encode("utf-8", "surrogatepass")).hexdigest()


def is_thread_entity(entity: str) -> bool:
    return entity.startswith((THREAD_PREFIX, HASHED_THREAD_PREFIX))


def writes_entity(thread: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """The entity that holds one checkpoint's pending writes."""
    raw = f"{thread}\x00{checkpoint_ns}\x00{checkpoint_id}".encode("utf-8", "surrogatepass")
    return WRITES_PREFIX + hashlib.sha256(raw).hexdigest()


def digest_key(prefix: str, *parts: str) -> str:
    """A fact key for parts that may be long or hold any character: ``prefix:`` then every
    part but the last length-prefixed (``<len>:<part>``), then the last (one string per tuple
    of parts); ``prefix#<sha256>`` when that does not fit in a name."""
    plain = prefix + ":" + "".join(f"{len(p)}:{p}" for p in parts[:-1]) + parts[-1]
    if len(plain) <= MAX_NAME and "\x00" not in plain:
        return plain
    raw = "\x00".join(parts).encode("utf-8", "surrogatepass")
    return prefix + "#" + hashlib.sha256(raw).hexdigest()
