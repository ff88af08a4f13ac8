"""Import of a namespace's export (transfer.py) into an empty namespace.

An import is checked as strictly as the writes it records (the same parsers: content, type,
metadata, vector, salience, TTL, ids, configuration), and more: versions increase per chain,
vectors have the namespace record's dimension, and no system time is later than the importing
server's clock, so an import never moves the commit clock that every namespace shares. Integer
bounds (versions, counts, event ids, dim) are the loader's (``loader.py``), so what an import
accepts always loads after a restart, with room left for the writes that follow it. The
first bad record fails the whole import with a ValidationError naming ``records[i].field``,
and nothing is written. The import commits alone (no other write shares its transaction).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import ValidationError
from ..times import EARLIEST_US, LATEST_US, format_us
from ..types import NamespaceConfig
from ..validation import (
    check_agent,
    check_entity,
    check_id,
    check_id_list,
    check_key,
    check_ttl,
    dump_json,
    memory_input,
)
from .lifecycle import check_config
from .loader import IMPORT_MAX_COUNTER, IMPORT_MAX_EVENT_PART, MAX_DIM
from .transfer import ACCESS, ANSWER, ERASURE, EVENT, FACT, FORMAT, MEMORY, QUERY, TIER
from .writer import Op, Tx

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["ImportNamespace", "import_batch"]


LOG_TEXT_LIMIT = 1 << 20  # logged query and answer texts and requests: 1 MiB each at most
MAX_LIST = 10_000
_NAMESPACE = ("format", "created_us", "dim", "embedder", "config")
_KINDS = ("namespace", "memory", "fact", "event", "query", "answer", "tier", "access", "erasure")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fields(rec: dict[str, Any], names: tuple[str, ...], where: str, optional: bool) -> None:
    for key in rec:
        if key != "kind" and key not in names:
            raise ValidationError(
                f"{where}.{key}: unknown field; allowed: kind, {', '.join(names)}",
                field=f"{where}.{key}",
            )
    if not optional:
        for name in names:
            if name not in rec:
                raise ValidationError(f"{where}.{name}: required", field=f"{where}.{name}")


def _integer(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValidationError(
            f"{field}: expected an integer from {lo} to {hi}, got {_show(value)}",
            field=field,
            limit=hi,
        )
    return value


def _flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{field}: expected true or false, got {_show(value)}", field=field)
    return value


def _log_text(value: Any, field: str) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) > LOG_TEXT_LIMIT):
        raise ValidationError(
            f"{field}: expected null or a string of at most {LOG_TEXT_LIMIT} characters",
            field=field,
            limit=LOG_TEXT_LIMIT,
        )
    return value


def _list_of(value: Any, field: str, shape: str, ok: Any) -> str:
    """``value`` as JSON text, when it is a list whose every item passes ``ok``."""
    if not isinstance(value, list) or len(value) > MAX_LIST or not all(ok(v) for v in value):
        raise ValidationError(f"{field}: expected a list of {shape}", field=field, limit=MAX_LIST)
    return dump_json(value, field, LOG_TEXT_LIMIT)


def _entity_list(value: Any, field: str) -> str:
    """An answer's entities as JSON text: a list of entity names."""
    if not isinstance(value, list) or len(value) > MAX_LIST:
        raise ValidationError(
            f"{field}: expected a list of entity names", field=field, limit=MAX_LIST
        )
    return orjson.dumps([check_entity(e, f"{field}[{i}]") for i, e in enumerate(value)]).decode()


def _is_ref(value: Any) -> bool:  # [memory id, version]
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and type(value[1]) is int
        and value[1] > 0
    )


def _is_hit(value: Any) -> bool:  # [memory id, version, score]
    return (
        isinstance(value, list)
        and len(value) == 3
        and _is_ref(value[:2])
        and type(value[2]) in (int, float)
        and math.isfinite(value[2])
    )


class _Import:
    """Checks a record stream as strictly as the writes it records and builds storage rows.

    System times (``recorded_us``, ``created_us``, access times) must lie between the epoch
    and this server's clock: an import brings history, never a future, so the commit clock is
    left alone. Event times and expiries must be times a datetime can hold. Version chains
    must increase; vectors must have the namespace record's dimension; ids must be unique."""

    def __init__(self, ns: str, settings: Settings, now_us: int) -> None:
        self.ns, self.settings, self.now_us = ns, settings, now_us
        self.dim: int | None = None
        self.latest = (0, "")  # the latest system time seen, and the field holding it
        self.b: dict[str, Any] = {
            k: []
            for k in (
                "memories",
                "facts",
                "events",
                "queries",
                "answers",
                "tiers",
                "access",
                "erased_mem",
                "erased_fact",
                "erased_event",
                "erased_answer",
                "erasures",
            )
        }
        self.b["namespace"], self.b["config"] = None, None
        self.mem_tips: dict[str, tuple[int, int, str]] = {}  # id -> version, recorded, entity
        self.fact_tips: dict[tuple[str, str], tuple[int, int]] = {}
        self.stream_tips: dict[str, tuple[int, int]] = {}
        self.ids: dict[str, set[str]] = {"query": set(), "answer": set(), "access": set()}
        self.refs: list[tuple[str, str]] = []  # (field, memory id) of tier and access records

    def sys_time(self, value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValidationError(
                f"{field}: expected integer microseconds since 1970, got {_show(value)}",
                field=field,
            )
        if value > self.now_us:
            raise ValidationError(
                f"{field}: {value} is later than this server's clock ({self.now_us} = "
                f"{format_us(self.now_us)}); an import brings history, not times to come",
                field=field,
                limit=self.now_us,
            )
        if value > self.latest[0]:
            self.latest = (value, field)
        return value

    def unique(self, kind: str, value: str, field: str) -> None:
        if value in self.ids[kind]:
            raise ValidationError(f"{field}: a second {kind} record with id {value!r}", field=field)
        self.ids[kind].add(value)

    def stamps(self, rec: dict[str, Any], where: str) -> tuple[int, int, int]:
        """A memory or fact version's ``version``, ``recorded_us`` and ``created_us`` (not
        later than ``recorded_us``)."""
        version = _integer(rec["version"], f"{where}.version", 1, IMPORT_MAX_COUNTER)
        recorded = self.sys_time(rec["recorded_us"], f"{where}.recorded_us")
        created = self.sys_time(rec["created_us"], f"{where}.created_us")
        if created > recorded:
            raise ValidationError(
                f"{where}.created_us: later than recorded_us", field=f"{where}.created_us"
            )
        return version, recorded, created

    # -- records ----------------------------------------------------------------------------------

    def namespace(self, rec: dict[str, Any], where: str) -> None:
        if self.b["namespace"] is not None:
            raise ValidationError(f"{where}: a second 'namespace' record", field=where)
        if rec.get("format") != FORMAT:
            raise ValidationError(
                f"{where}.format: expected {FORMAT}, got {_show(rec.get('format'))}",
                field=f"{where}.format",
            )
        _fields(rec, _NAMESPACE, where, optional=True)
        if "created_us" not in rec:
            raise ValidationError(f"{where}.created_us: required", field=f"{where}.created_us")
        created = self.sys_time(rec["created_us"], f"{where}.created_us")
        dim = rec.get("dim")
        if dim is not None:
            dim = _integer(dim, f"{where}.dim", 1, min(self.settings.max_dim, MAX_DIM))
        embedder = rec.get("embedder")
        if embedder is not None:
            embedder = check_agent(embedder, f"{where}.embedder")
        config = rec.get("config")
        if config is not None:
            if not isinstance(config, dict):
                raise ValidationError(
                    f"{where}.config: expected an object, got {type(config).__name__}",
                    field=f"{where}.config",
                )
            try:
                cfg = check_config(NamespaceConfig(), config)  # the parser configure() uses
            except ValidationError as exc:
                field = f"{where}.config.{exc.field}"
                raise ValidationError(f"{where}.config.{exc.message}", field=field) from None
            self.b["config"] = orjson.dumps(dataclasses.asdict(cfg)).decode()
        self.dim = dim
        self.b["namespace"] = (self.ns, created, dim, embedder)

    def memory(self, rec: dict[str, Any], where: str) -> None:
        _fields(rec, MEMORY, where, optional=False)
        mid = check_id(rec["id"], f"{where}.id")
        version, recorded, created = self.stamps(rec, where)
        entity = check_entity(rec["entity"], f"{where}.entity")
        deleted = _flag(rec["deleted"], f"{where}.deleted")
        erased = _flag(rec["erased"], f"{where}.erased")
        tip = self.mem_tips.get(mid)
        if tip is not None:
            self.follows(where, f"memory {mid!r}", tip[:2], version, recorded)
            if entity != tip[2]:
                raise ValidationError(
                    f"{where}.entity: memory {mid!r} is about {tip[2]!r}", field=f"{where}.entity"
                )
        self.mem_tips[mid] = (version, recorded, entity)
        payload = {
            k: rec[k]
            for k in (
                "content",
                "type",
                "metadata",
                "embedding",
                "salience",
                "agent",
                "pinned",
                "ttl",
            )
        }
        if erased:  # stored blank whatever the record says; the rest is checked as written
            payload.update(content="(erased)", metadata=None, embedding=None)
        item = memory_input(entity, payload, self.settings, prefix=f"{where}.")
        emb = None
        if item.vec is not None:
            field = f"{where}.embedding"
            if self.dim is None:
                raise ValidationError(f"{field}: the namespace record has no dim", field=field)
            if item.vec.shape[0] != self.dim:
                raise ValidationError(
                    f"{field}: {item.vec.shape[0]} dimensions, the namespace "
                    f"record says dim {self.dim}",
                    field=field,
                    limit=self.dim,
                )
            emb = item.vec.tobytes()
        ts_us = _integer(rec["ts_us"], f"{where}.ts_us", EARLIEST_US, LATEST_US)
        expires = rec["expires_us"]
        if expires is not None:
            expires = _integer(expires, f"{where}.expires_us", EARLIEST_US, LATEST_US)
        content, meta = ("", "{}") if erased else (item.content, item.meta_json)
        self.b["memories"].append(
            (
                self.ns,
                mid,
                version,
                recorded,
                created,
                entity,
                item.type,
                content,
                meta,
                emb,
                item.salience,
                ts_us,
                item.agent,
                int(item.pinned),
                item.ttl,
                expires,
                int(deleted),
            )
        )
        if erased:
            self.b["erased_mem"].append((self.ns, mid))

    def follows(self, where: str, what: str, tip: tuple[int, int], version: int, us: int) -> None:
        if version <= tip[0]:
            raise ValidationError(
                f"{where}.version: {version} after version {tip[0]} of {what}; "
                "versions must increase",
                field=f"{where}.version",
            )
        if us < tip[1]:
            raise ValidationError(
                f"{where}.recorded_us: earlier than the previous version of {what}",
                field=f"{where}.recorded_us",
            )

    def fact(self, rec: dict[str, Any], where: str) -> None:
        _fields(rec, FACT, where, optional=False)
        entity = check_entity(rec["entity"], f"{where}.entity")
        key = check_key(rec["key"], f"{where}.key")
        version, recorded, created = self.stamps(rec, where)
        erased = _flag(rec["erased"], f"{where}.erased")
        tip = self.fact_tips.get((entity, key))
        if tip is not None:
            self.follows(where, f"fact {entity!r}/{key!r}", tip, version, recorded)
        self.fact_tips[(entity, key)] = (version, recorded)
        value = (
            "null"
            if erased
            else dump_json(rec["value"], f"{where}.value", self.settings.max_value_bytes)
        )
        expires = rec["expires_us"]
        if expires is not None:
            expires = _integer(expires, f"{where}.expires_us", EARLIEST_US, LATEST_US)
        self.b["facts"].append(
            (
                self.ns,
                entity,
                key,
                version,
                recorded,
                created,
                value,
                check_agent(rec["agent"], f"{where}.agent"),
                check_ttl(rec["ttl"], f"{where}.ttl"),
                expires,
                int(_flag(rec["deleted"], f"{where}.deleted")),
            )
        )
        if erased:
            self.b["erased_fact"].append((self.ns, entity, key))

    def event(self, rec: dict[str, Any], where: str) -> None:
        _fields(rec, EVENT, where, optional=False)
        stream = check_entity(rec["stream"], f"{where}.stream")
        key = (
            _integer(rec["ms"], f"{where}.ms", 0, IMPORT_MAX_EVENT_PART),
            _integer(rec["seq"], f"{where}.seq", 0, IMPORT_MAX_EVENT_PART),
        )
        tail = self.stream_tips.get(stream)
        if tail is not None and key <= tail:
            raise ValidationError(
                f"{where}.seq: event {key[0]}-{key[1]} after {tail[0]}-"
                f"{tail[1]} in stream {stream!r}; ids must increase",
                field=f"{where}.seq",
            )
        self.stream_tips[stream] = key
        recorded = self.sys_time(rec["recorded_us"], f"{where}.recorded_us")
        entity = check_entity(rec["entity"], f"{where}.entity")
        erased = _flag(rec["erased"], f"{where}.erased")
        content = ""  # erased: stored blank
        if not erased:  # checked as append() checks it
            content = memory_input(
                entity, {"content": rec["content"]}, self.settings, prefix=f"{where}."
            ).content
        data = rec["data"]
        if data is not None and not erased:
            if not isinstance(data, dict):
                raise ValidationError(f"{where}.data: expected an object", field=f"{where}.data")
            data = dump_json(data, f"{where}.data", self.settings.max_value_bytes)
        memory_id = rec["memory_id"]
        if memory_id is not None:
            memory_id = check_id(memory_id, f"{where}.memory_id")
        if erased:
            self.b["erased_event"].append((self.ns, stream, *key))
        self.b["events"].append(
            (
                self.ns,
                stream,
                *key,
                recorded,
                entity,
                _integer(rec["ts_us"], f"{where}.ts_us", EARLIEST_US, LATEST_US),
                check_agent(rec["agent"], f"{where}.agent"),
                content,
                None if erased else data,
                memory_id,
            )
        )

    def query(self, rec: dict[str, Any], where: str) -> None:
        _fields(rec, QUERY, where, optional=False)
        qid = check_id(rec["id"], f"{where}.id")
        self.unique("query", qid, f"{where}.id")
        request = rec["request"]
        if not isinstance(request, dict):
            raise ValidationError(f"{where}.request: expected an object", field=f"{where}.request")
        self.b["queries"].append(
            (
                self.ns,
                qid,
                self.sys_time(rec["recorded_us"], f"{where}.recorded_us"),
                check_agent(rec["agent"], f"{where}.agent"),
                _log_text(rec["text"], f"{where}.text"),
                dump_json(request, f"{where}.request", LOG_TEXT_LIMIT),
                _list_of(rec["hits"], f"{where}.hits", "[memory id, version, score]", _is_hit),
            )
        )

    def answer(self, rec: dict[str, Any], where: str) -> None:
        # ``erased`` (a purge took the text) and ``entities`` came after format 1's first
        # exports: optional
        rec = {"erased": False, "entities": [], **rec}
        _fields(rec, ANSWER, where, optional=False)
        aid = check_id(rec["id"], f"{where}.id")
        self.unique("answer", aid, f"{where}.id")
        if _flag(rec["erased"], f"{where}.erased"):
            self.b["erased_answer"].append((self.ns, aid))
            rec["text"] = None
        query_ids = check_id_list(rec["query_ids"], f"{where}.query_ids", MAX_LIST)
        self.b["answers"].append(
            (
                self.ns,
                aid,
                self.sys_time(rec["recorded_us"], f"{where}.recorded_us"),
                check_agent(rec["agent"], f"{where}.agent"),
                _log_text(rec["text"], f"{where}.text"),
                orjson.dumps(query_ids).decode(),
                *(
                    _list_of(rec[k], f"{where}.{k}", "[memory id, version]", _is_ref)
                    for k in ("cited", "memories")
                ),
                _entity_list(rec["entities"], f"{where}.entities"),
            )
        )

    def tier(self, rec: dict[str, Any], where: str) -> None:
        _fields(rec, TIER, where, optional=False)
        mid = check_id(rec["id"], f"{where}.id")
        self.refs.append((f"{where}.id", mid))
        if rec["tier"] not in ("hot", "cold"):
            raise ValidationError(
                f"{where}.tier: expected 'hot' or 'cold', got {_show(rec['tier'])}",
                field=f"{where}.tier",
            )
        score = rec["score"]
        if score is not None and (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise ValidationError(
                f"{where}.score: expected null or a number", field=f"{where}.score"
            )
        if not isinstance(rec["reason"], str) or len(rec["reason"]) > LOG_TEXT_LIMIT:
            raise ValidationError(f"{where}.reason: expected a string", field=f"{where}.reason")
        self.b["tiers"].append(
            (
                self.ns,
                mid,
                self.sys_time(rec["recorded_us"], f"{where}.recorded_us"),
                rec["tier"],
                score,
                rec["reason"],
            )
        )

    def access(self, rec: dict[str, Any], where: str) -> None:
        _fields(rec, ACCESS, where, optional=False)
        mid = check_id(rec["id"], f"{where}.id")
        self.unique("access", mid, f"{where}.id")
        self.refs.append((f"{where}.id", mid))
        self.b["access"].append(
            (
                self.ns,
                mid,
                _integer(rec["count"], f"{where}.count", 0, IMPORT_MAX_COUNTER),
                self.sys_time(rec["last_us"], f"{where}.last_us"),
            )
        )

    def erasure(self, rec: dict[str, Any], where: str) -> None:
        _fields(rec, ERASURE, where, optional=False)
        subject, counts = rec["subject"], rec["counts"]
        if not isinstance(subject, str) or not 0 < len(subject) <= 128:
            raise ValidationError(
                f"{where}.subject: expected a keyed hash (a string of up to 128 characters)",
                field=f"{where}.subject",
            )
        if not isinstance(counts, dict) or not all(
            type(v) is int and v >= 0 for v in counts.values()
        ):
            raise ValidationError(
                f"{where}.counts: expected an object of counts", field=f"{where}.counts"
            )
        self.b["erasures"].append(
            (
                self.ns,
                self.sys_time(rec["recorded_us"], f"{where}.recorded_us"),
                check_agent(rec["agent"], f"{where}.agent"),
                subject,
                dump_json(counts, f"{where}.counts", LOG_TEXT_LIMIT),
            )
        )

    def finish(self) -> dict[str, Any]:
        if self.b["namespace"] is None:
            raise ValidationError(
                "records: no 'namespace' record (not an export?)", field="records"
            )
        for field, mid in self.refs:
            if mid not in self.mem_tips:
                raise ValidationError(f"{field}: no memory {mid!r} among the records", field=field)
        self.b["latest"] = self.latest
        return self.b


def import_batch(
    ns: str, records: Iterable[Any], settings: Settings, now_us: int
) -> dict[str, Any]:
    """Check a record stream and turn it into storage rows (nothing is written here).

    Every record is checked before anything is written; the first bad one raises
    ValidationError naming ``records[i].field``. ``now_us``: this server's present (no
    imported system time may be later)."""
    if isinstance(records, dict | str | bytes):
        raise ValidationError("records: expected a list of export records", field="records")
    recs = list(records)
    for i, rec in enumerate(recs):
        if not isinstance(rec, dict) or "kind" not in rec:
            raise ValidationError(
                f"records[{i}]: expected an object with a 'kind'", field=f"records[{i}]"
            )
        if rec["kind"] not in _KINDS:
            raise ValidationError(
                f"records[{i}].kind: unknown kind {_show(rec['kind'])}", field=f"records[{i}].kind"
            )
    state = _Import(ns, settings, now_us)
    for i, rec in enumerate(recs):  # the namespace record first: memories need its dim
        if rec["kind"] == "namespace":
            state.namespace(rec, f"records[{i}]")
    for i, rec in enumerate(recs):
        if rec["kind"] != "namespace":
            getattr(state, rec["kind"])(rec, f"records[{i}]")
    return state.finish()


class ImportNamespace(Op):
    """Writes a checked record stream into an empty namespace, in a batch of its own (nothing
    it brings can fail another namespace's write)."""

    __slots__ = ("data", "ns")
    exclusive = True

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
        latest, field = d["latest"]
        if latest > tx.now_us:  # checked against the clock when read; the clock may step back
            raise ValidationError(
                f"{field}: {latest} is later than this server's clock ({tx.now_us}); an import "
                "brings history, not times to come",
                field=field,
                limit=tx.now_us,
            )
        batch.namespaces.append(d["namespace"])
        if d["config"] is not None:
            batch.configs.append((d["config"], self.ns))
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
        batch.erased_events.extend(d["erased_event"])
        batch.erased_answers.extend(d["erased_answer"])
        tx.reloads.append(self.ns)  # the namespace is built from what was stored
        return len(d["memories"])
