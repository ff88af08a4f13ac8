"""Export of a whole namespace, losslessly, as a stream of JSON records (import: importing.py).

Export yields every stored row of the namespace: its settings, every memory version (hot and
cold, tombstones and erased skeletons included) with its original id, version and system time,
every fact version, every stream event, the query log, the answers, the tier log and the access
counts. Import writes such a stream into an empty namespace in one transaction and keeps all of
it, so ``as_of`` reads, history, lineage and audit answer on the new server exactly as on the old.
The format is one JSON object per line (``kind`` first); ``format`` 1 is this layout, and the
column lists below name each kind's fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

if TYPE_CHECKING:
    from ..storage.base import Storage

__all__ = ["FORMAT", "export_records"]

FORMAT = 1
INF = 1 << 62

MEMORY = (
    "id",
    "version",
    "recorded_us",
    "created_us",
    "entity",
    "type",
    "content",
    "metadata",
    "embedding",
    "salience",
    "ts_us",
    "agent",
    "pinned",
    "ttl",
    "expires_us",
    "deleted",
    "erased",
)
FACT = (
    "entity",
    "key",
    "version",
    "recorded_us",
    "created_us",
    "value",
    "agent",
    "ttl",
    "expires_us",
    "deleted",
    "erased",
)
EVENT = (
    "stream",
    "ms",
    "seq",
    "recorded_us",
    "entity",
    "ts_us",
    "agent",
    "content",
    "data",
    "memory_id",
    "erased",
)
QUERY = ("id", "recorded_us", "agent", "text", "request", "hits")
ANSWER = (
    "id",
    "recorded_us",
    "agent",
    "text",
    "query_ids",
    "cited",
    "memories",
    "erased",
    "entities",
)
TIER = ("id", "recorded_us", "tier", "score", "reason")
ACCESS = ("id", "count", "last_us")
ERASURE = ("recorded_us", "agent", "subject", "counts")
_JSON_TEXT = {
    "metadata",
    "value",
    "data",
    "request",
    "hits",
    "query_ids",
    "cited",
    "memories",
    "counts",
    "entities",
}


def _record(kind: str, names: tuple[str, ...], row: tuple[Any, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind}
    for name, value in zip(names, row, strict=True):
        if name == "embedding":
            value = None if value is None else np.frombuffer(value, dtype=np.float32).tolist()
        elif name in _JSON_TEXT and value is not None:
            value = orjson.loads(value)
        elif name in ("pinned", "deleted", "erased"):
            value = bool(value)
        out[name] = value
    return out


def export_records(storage: Storage, ns: str) -> Iterator[dict[str, Any]]:
    rows = storage.export_rows(ns)
    row: tuple[Any, ...]  # each kind's named row, read by the column lists above
    for _name, created_us, dim, embedder, config in rows.namespaces:
        yield {
            "kind": "namespace",
            "format": FORMAT,
            "created_us": created_us,
            "dim": dim,
            "embedder": embedder,
            "config": None if config is None else orjson.loads(config),
        }
    for row in rows.memories:
        yield _record("memory", MEMORY, row[1:])
    for row in rows.facts:
        yield _record("fact", FACT, row[1:])
    for row in rows.events:
        yield _record("event", EVENT, row[1:])
    for row in storage.scan_queries(ns, 0, INF):
        yield _record("query", QUERY, row)
    for row in storage.scan_answers(ns, 0, INF):
        yield _record("answer", ANSWER, row)
    for row in storage.scan_tiers(ns, 0, INF):
        yield _record("tier", TIER, row)
    for row in rows.access:
        yield _record("access", ACCESS, row[1:])
    for row in storage.scan_erasures(ns, 0, INF):  # the subject stays the source's keyed hash
        yield _record("erasure", ERASURE, row)
