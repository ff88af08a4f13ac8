"""Export and import of a whole namespace, losslessly, as a stream of JSON records.

Export yields every stored row of the namespace: its settings, every memory version (hot and
cold, tombstones and erased skeletons included) with its original id, version and system time,
every fact version, every stream event, the query log, the answers, the tier log and the access
counts. Import writes such a stream into an empty namespace in one transaction and keeps all of
it, so ``as_of`` reads, history, lineage and audit answer on the new server exactly as on the old.
The format is one JSON object per line (``kind`` first); ``format`` 1 is this layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from ..errors import ValidationError
from .writer import Op, Tx

if TYPE_CHECKING:
    from ..storage.base import Storage

__all__ = ["FORMAT", "ImportNamespace", "export_records", "import_batch"]

FORMAT = 1
INF = 1 << 62

MEMORY = ("id", "version", "recorded_us", "created_us", "entity", "type", "content", "metadata",
          "embedding", "salience", "ts_us", "agent", "pinned", "ttl", "expires_us", "deleted",
          "erased")  # fmt: skip
FACT = ("entity", "key", "version", "recorded_us", "created_us", "value", "agent", "ttl",
        "expires_us", "deleted", "erased")  # fmt: skip
EVENT = ("stream", "ms", "seq", "recorded_us", "entity", "ts_us", "agent", "content", "data",
         "memory_id", "erased")  # fmt: skip
QUERY = ("id", "recorded_us", "agent", "text", "request", "hits")
ANSWER = ("id", "recorded_us", "agent", "text", "query_ids", "cited", "memories")
TIER = ("id", "recorded_us", "tier", "score", "reason")
ACCESS = ("id", "count", "last_us")
ERASURE = ("recorded_us", "agent", "subject", "counts")
_JSON_TEXT = {"metadata", "value", "data", "request", "hits", "query_ids", "cited", "memories",
              "counts"}  # fmt: skip


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
    for _name, created_us, dim, embedder, config in rows.namespaces:
        yield {"kind": "namespace", "format": FORMAT, "created_us": created_us, "dim": dim,
               "embedder": embedder,
               "config": None if config is None else orjson.loads(config)}  # fmt: skip
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


def _row(rec: dict[str, Any], names: tuple[str, ...], where: str) -> list[Any]:
    out = []
    for name in names:
        if name not in rec:
            raise ValidationError(f"{where}.{name}: required", field=f"{where}.{name}")
        value = rec[name]
        if name == "embedding" and value is not None:
            value = np.asarray(value, dtype=np.float32).tobytes()
        elif name in _JSON_TEXT and value is not None:
            value = orjson.dumps(value).decode()
        elif name in ("pinned", "deleted", "erased"):
            value = int(bool(value))
        out.append(value)
    return out


def import_batch(ns: str, records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Check a record stream and turn it into storage rows (nothing is written here)."""
    b: dict[str, Any] = {k: [] for k in ("memories", "facts", "events", "queries", "answers",
                                          "tiers", "access", "erased_mem", "erased_fact",
                                          "erasures")}  # fmt: skip
    b["namespace"], b["config"], b["last_us"] = None, None, 0
    for i, rec in enumerate(records):
        where = f"records[{i}]"
        if not isinstance(rec, dict) or "kind" not in rec:
            raise ValidationError(f"{where}: expected an object with a 'kind'", field=where)
        kind = rec["kind"]
        if kind == "namespace":
            if rec.get("format") != FORMAT:
                raise ValidationError(f"{where}.format: expected {FORMAT}, got "
                                      f"{rec.get('format')!r}", field=f"{where}.format")  # fmt: skip
            b["namespace"] = (ns, rec["created_us"], rec.get("dim"), rec.get("embedder"))
            b["config"] = rec.get("config")
        elif kind == "memory":
            row = _row(rec, MEMORY, where)
            b["memories"].append((ns, *row[:-1]))
            if row[-1]:
                b["erased_mem"].append((ns, row[0]))
            b["last_us"] = max(b["last_us"], row[2])
        elif kind == "fact":
            row = _row(rec, FACT, where)
            b["facts"].append((ns, *row[:-1]))
            if row[-1]:
                b["erased_fact"].append((ns, row[0], row[1]))
            b["last_us"] = max(b["last_us"], row[3])
        elif kind == "event":
            row = _row(rec, EVENT, where)
            b["events"].append((ns, *row[:-1]))
            b["last_us"] = max(b["last_us"], row[3])
        elif kind == "query":
            b["queries"].append((ns, *_row(rec, QUERY, where)))
        elif kind == "answer":
            b["answers"].append((ns, *_row(rec, ANSWER, where)))
        elif kind == "tier":
            mid, us, tier, score, reason = _row(rec, TIER, where)
            b["tiers"].append((ns, mid, us, tier, score, reason))
        elif kind == "access":
            b["access"].append((ns, *_row(rec, ACCESS, where)))
        elif kind == "erasure":
            b["erasures"].append((ns, *_row(rec, ERASURE, where)))
        else:
            raise ValidationError(f"{where}.kind: unknown kind {kind!r}", field=f"{where}.kind")
    if b["namespace"] is None:
        raise ValidationError("records: no 'namespace' record (not an export?)", field="records")
    return b


class ImportNamespace(Op):
    __slots__ = ("data", "ns")

    def __init__(self, ns: str, data: dict[str, Any]) -> None:
        super().__init__(max(1, len(data["memories"]) + len(data["facts"]) + len(data["events"])))
        self.ns, self.data = ns, data

    def plan(self, tx: Tx) -> int:
        if self.ns in tx.states or self.ns in tx.new_ns:
            raise ValidationError(
                f"namespace: {self.ns!r} already holds data; import into a new namespace",
                field="namespace",
            )
        d, batch = self.data, tx.batch
        batch.namespaces.append(d["namespace"])
        if d["config"] is not None:
            batch.configs.append((orjson.dumps(d["config"]).decode(), self.ns))
        batch.memories.extend(d["memories"])
        batch.facts.extend(d["facts"])
        batch.events.extend(d["events"])
        batch.queries.extend(d["queries"])
        batch.answers.extend(d["answers"])
        batch.tiers.extend(d["tiers"])
        batch.access.extend(d["access"])
        batch.erasures.extend(d["erasures"])
        batch.expired_memories.extend(d["erased_mem"])  # flags them erased (content is gone)
        batch.expired_facts.extend(d["erased_fact"])
        tx.reloads.append(self.ns)
        tx.bump_us = max(tx.bump_us, d["last_us"])
        return len(d["memories"])
