"""What each remote operation sends and what it returns, independent of how it is sent.

A :class:`Call` is a request (method, path, query parameters, JSON body, agent) plus the type
its answer decodes to: the same value objects as the embedded API (:mod:`synapsedb.types`).
The sync client (and an async one) only execute calls, so the two can never drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import msgspec
import numpy as np

from ..errors import SynapseError, ValidationError, error_from_code
from ..times import format_us, to_us
from ..types import (
    AuditEntry,
    CacheEntry,
    CacheHit,
    CacheStats,
    Event,
    Fact,
    Forgotten,
    Lineage,
    MaintenanceReport,
    Memory,
    Message,
    NamespaceConfig,
    QueryResult,
    Recalled,
    Remembered,
    SessionInfo,
    Snapshot,
    Stats,
)
from ..validation import check_session_id, routable

__all__ = ["Call", "decode", "error_of"]


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str
    type: Any
    params: dict[str, Any] | None = None
    json: Any = None
    agent: str | None = None
    content: bytes | None = None  # a raw body (JSON lines), instead of ``json``
    lines: bool = False  # the answer is JSON lines, decoded to a list of objects
    post: Callable[[Any], Any] | None = None  # shapes the decoded answer (sync and async alike)
    memories: bool = False  # the answer holds memories: ``include`` may ask for their vectors


def _dec_hook(tp: Any, obj: Any) -> Any:
    if tp is np.ndarray:
        arr = np.asarray(obj, dtype=np.float32)
        arr.setflags(write=False)
        return arr
    raise NotImplementedError(f"cannot decode {tp!r}")


def decode(raw: bytes, tp: Any) -> Any:
    return msgspec.json.decode(raw, type=tp, dec_hook=_dec_hook)


def error_of(status: int, raw: bytes) -> SynapseError:
    """The exception a server error body stands for (the same class as embedded)."""
    try:
        body = msgspec.json.decode(raw)
        err = body["error"]
        return error_from_code(err["code"], err["message"], err.get("details") or {})
    except (msgspec.DecodeError, KeyError, TypeError):
        return SynapseError(f"HTTP {status}: {raw[:200].decode('utf-8', 'replace')}")


_TIME_FIELDS = frozenset({"as_of", "since", "until", "valid_at"})


def _t(value: Any, field: str) -> Any:
    """A time argument as the wire carries it (query string or JSON body), meaning the same
    instant as embedded. Strings, booleans and finite numbers travel as they are (the server
    applies the engine's rules to them), datetimes as ISO-8601. A value the wire would change
    (a ``date`` becomes an ISO string, NaN becomes JSON ``null``, i.e. "now", a list is
    flattened by the query string) is checked here by the engine's own :func:`to_us`, which
    raises its ValidationError naming ``field``; were it to accept such a value, the exact
    instant is sent as ISO-8601."""
    if isinstance(value, str | bool):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, int | float) and math.isfinite(value):
        return int(value) if isinstance(value, int) else float(value)
    return format_us(to_us(value, field))


def _params(**kwargs: Any) -> dict[str, Any]:
    return {k: _t(v, k) if k in _TIME_FIELDS else v for k, v in kwargs.items() if v is not None}


def _text(value: Any, field: str, what: str) -> str | None:
    """A string query parameter, or None. Anything else is refused here as the engine refuses
    it (a query string would carry ``3`` as ``"3"`` and a list as repeated parameters)."""
    if value is None or isinstance(value, str):
        return value
    raise ValidationError(f"{field}: expected {what}, got {value!r}", field=field)


def _whole(value: Any, field: str) -> int | None:
    """An integer query parameter, or None; a bool, float, list or numpy integer is refused
    here as the engine refuses it (the query string would carry it as digits). The range is
    the server's to check."""
    if value is None or type(value) is int:
        return value
    raise ValidationError(f"{field}: expected an integer, got {value!r}", field=field)


_body_encoder = msgspec.json.Encoder(enc_hook=lambda obj: _numpy_scalar(obj))


INCLUDE = ("embedding",)  # what a client may ask answers to add (``include``)


def check_include(include: Iterable[str] | str | None) -> tuple[str, ...]:
    """The ``include`` argument of a client: names from INCLUDE (``("embedding",)``: answers
    holding memories carry their vectors, as embedded ones do); a ValidationError otherwise."""
    if include is None:
        return ()
    names = (include,) if isinstance(include, str) else tuple(include)
    for name in names:
        if name not in INCLUDE:
            raise ValidationError(f"include: expected one of {', '.join(INCLUDE)}, got {name!r}",
                                  field="include")  # fmt: skip
    return tuple(sorted(set(names)))


def request_params(call: Call, include: tuple[str, ...]) -> dict[str, Any] | None:
    """The call's query parameters, with ``include`` when its answer holds memories."""
    if not include or not call.memories:
        return call.params
    return {**(call.params or {}), "include": ",".join(include)}


def request_body(call: Call) -> tuple[bytes | None, str | None]:
    """The request's body and content type. JSON is encoded by msgspec: a batch of 1,000
    384-d vectors takes about a tenth of the time the standard library's json needs."""
    if call.content is not None:
        return call.content, "application/x-ndjson"
    if call.json is not None:
        return _body_encoder.encode(wire_value(call.json, "")), "application/json"
    return None, None


MAX_DEPTH = 64  # the server's limit on JSON nesting


def wire_value(value: Any, field: str, depth: int = 0) -> Any:
    """``value`` as JSON carries it unchanged, so the server sees what an embedded call sees.
    A value JSON would change is refused here, naming its place as the engine names it
    (``metadata.a``, ``items[0].ts``): NaN and infinities (JSON ``null``), a ``date``, ``time``
    or ``Decimal`` (a string), keys that are not strings. numpy scalars travel as the Python
    numbers they stand for; datetimes as ISO-8601."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        raise ValidationError(f"{field}: expected a finite number, got {value!r}", field=field)
    if depth >= MAX_DEPTH:
        raise ValidationError(f"{field}: nested deeper than {MAX_DEPTH} levels", field=field,
                              limit=MAX_DEPTH)  # fmt: skip
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{field}: keys must be strings, got {key!r}", field=field)
            out[key] = wire_value(item, f"{field}.{key}" if field else key, depth + 1)
        return out
    if isinstance(value, list | tuple):
        if len(value) > 16 and type(value[0]) is float and _finite_floats(value):
            return value  # a vector: checked at C speed, sent as it is (the server refuses
            # what is not a number in it, as the engine does)
        return [wire_value(v, f"{field}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, np.ndarray):
        return wire_value(value.tolist(), field, depth)
    if isinstance(value, np.generic):
        return wire_value(value.item(), field, depth)
    if isinstance(value, datetime):
        return value.isoformat()
    for plain in (bool, int, float, str):  # subclasses (IntEnum, numpy's float64...)
        if isinstance(value, plain):
            return wire_value(plain(value), field, depth)
    raise ValidationError(
        f"{field}: a {type(value).__name__} is not a JSON value; send a number, string, "
        "boolean, list or object",
        field=field,
    )


def _finite_floats(values: list[Any] | tuple[Any, ...]) -> bool:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return arr.ndim == 1 and bool(np.isfinite(arr).all())


def _numpy_scalar(obj: Any) -> Any:
    """msgspec's hook for what a checked vector may still hold (numpy scalars)."""
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode {type(obj).__name__}")


def base(ns: str) -> str:
    return f"/v1/namespaces/{quote(ns, safe='')}"


# -- one function per operation ----------------------------------------------------------------


def write(ns: str, entity: str, memory: Any, agent: str | None) -> Call:
    body = {"content": memory} if isinstance(memory, str) else dict(memory)
    if isinstance(memory, Mapping) and not isinstance(body, dict):  # pragma: no cover
        raise TypeError("memory")
    return Call("POST", f"{base(ns)}/memories", Memory, json={"entity": entity, **body},
                agent=agent, memories=True)  # fmt: skip


def write_many(ns: str, items: Sequence[Any], agent: str | None) -> Call:
    out = []
    for item in items:
        if isinstance(item, tuple) and len(item) == 2:
            entity, payload = item
            payload = {"content": payload} if isinstance(payload, str) else payload
            out.append({"entity": entity, **payload})
        else:
            out.append(item)
    return Call("POST", f"{base(ns)}/memories:batch", list[Memory], json={"items": out},
                agent=agent, memories=True)  # fmt: skip


def update(ns: str, mid: str, changes: Mapping[str, Any], if_version: int | None,
           agent: str | None) -> Call:  # fmt: skip
    return Call("PATCH", f"{base(ns)}/memories/{quote(mid, safe='')}", Memory,
                json={"changes": changes, "if_version": if_version}, agent=agent,
                memories=True)  # fmt: skip


def get_memory(ns: str, mid: str, as_of: Any) -> Call:
    return Call("GET", f"{base(ns)}/memories/{quote(mid, safe='')}", Memory, _params(as_of=as_of),
                memories=True)  # fmt: skip


def get_fact(ns: str, entity: str, key: str, as_of: Any) -> Call:
    return Call("GET", f"{base(ns)}/facts", Fact, _params(entity=entity, key=key, as_of=as_of))


def memories(ns: str, entity: str | None, types: Iterable[str] | None, as_of: Any,
             limit: int, valid_at: Any = None, before: str | None = None) -> Call:  # fmt: skip
    params = _params(entity=entity, as_of=as_of, limit=limit, valid_at=valid_at,
                     before=_text(before, "before", "a memory id"))  # fmt: skip
    if types is not None:
        params["types"] = [types] if isinstance(types, str) else list(types)
    return Call("GET", f"{base(ns)}/memories", list[Memory], params, memories=True)


def delete_memory(ns: str, mid: str, if_version: int | None, agent: str | None) -> Call:
    return Call("DELETE", f"{base(ns)}/memories/{quote(mid, safe='')}", Memory,
                _params(if_version=if_version), agent=agent, memories=True)  # fmt: skip


def delete_fact(ns: str, entity: str, key: str, if_version: int | None, agent: str | None) -> Call:
    return Call("DELETE", f"{base(ns)}/facts", Fact,
                _params(entity=entity, key=key, if_version=if_version), agent=agent)  # fmt: skip


def memory_history(ns: str, mid: str, as_of: Any) -> Call:
    return Call("GET", f"{base(ns)}/memories/{quote(mid, safe='')}/history", list[Memory],
                _params(as_of=as_of), memories=True)  # fmt: skip


def fact_history(ns: str, entity: str, key: str, as_of: Any) -> Call:
    return Call("GET", f"{base(ns)}/facts/history", list[Fact],
                _params(entity=entity, key=key, as_of=as_of))  # fmt: skip


def set_fact(ns: str, entity: str, key: str, value: Any, if_version: int | None,
             ttl: float | None, agent: str | None) -> Call:  # fmt: skip
    return Call("PUT", f"{base(ns)}/facts", Fact, json={"entity": entity, "key": key,
                "value": value, "if_version": if_version, "ttl": ttl}, agent=agent)  # fmt: skip


def facts(ns: str, entity: str, as_of: Any) -> Call:
    return Call("GET", f"{base(ns)}/facts", list[Fact], _params(entity=entity, as_of=as_of))


def append(ns: str, entity: str, event: Any, stream: str | None, agent: str | None,
           searchable: bool) -> Call:  # fmt: skip
    return Call("POST", f"{base(ns)}/events", Event, json={"entity": entity,
                "event": event, "stream": stream, "searchable": searchable}, agent=agent)  # fmt: skip


def events(ns: str, stream: str, **kwargs: Any) -> Call:
    return Call("GET", f"{base(ns)}/events", list[Event], _params(stream=stream, **kwargs))


def follow(ns: str, stream: str) -> Call:
    """The live feed of a stream's events (Server-Sent Events; ``feeds.Feed`` reads it)."""
    return Call("GET", f"{base(ns)}/events/follow", None, _params(stream=stream))


def changes(ns: str, entity: str | None, since: Any) -> Call:
    """The live feed of a namespace's changes (Server-Sent Events)."""
    return Call("GET", f"{base(ns)}/changes", None, _params(entity=entity, since=since))


def query(ns: str, text: str | None, kwargs: dict[str, Any]) -> Call:
    body = {k: _t(v, k) if k in _TIME_FIELDS else v for k, v in kwargs.items()
            if v is not None}  # fmt: skip
    if "types" in body and isinstance(body["types"], str):
        body["types"] = [body["types"]]
    if "tiers" in body and isinstance(body["tiers"], str):
        body["tiers"] = [body["tiers"]]
    if text is not None:
        body["text"] = text
    agent = body.pop("agent", None)
    return Call("POST", f"{base(ns)}/query", QueryResult, json=body, agent=agent)


def record_answer(ns: str, answer_id: str, query_ids: Sequence[str], agent: str | None,
                  text: str | None, cited: Sequence[str] | None,
                  entities: Sequence[str] | None = None) -> Call:  # fmt: skip
    body = {"answer_id": answer_id, "query_ids": list(query_ids), "text": text,
            "cited": list(cited or [])}  # fmt: skip
    if entities is not None:
        body["entities"] = list(entities) if not isinstance(entities, str) else entities
    return Call("POST", f"{base(ns)}/answers", Lineage, json=body, agent=agent)


def remember(ns: str, body: dict[str, Any]) -> Call:
    body = {k: v for k, v in body.items() if v is not None}
    return Call("POST", f"{base(ns)}/remember", Remembered, json=body,
                agent=body.pop("agent", None))  # fmt: skip


def recall(ns: str, what: Any, body: dict[str, Any]) -> Call:
    body = {k: v for k, v in body.items() if v is not None}
    body["text" if isinstance(what, str) else "messages"] = what
    return Call("POST", f"{base(ns)}/recall", Recalled, json=body, agent=body.pop("agent", None))


# -- conversation sessions (docs/conversation.md) ---------------------------------------------


def _session(ns: str, session_id: Any) -> str:
    """The path of a session: its id as one percent-encoded segment (``.`` and ``..`` too, so
    that no client or proxy takes them for dot segments). An id holding ``/`` cannot be one:
    servers decode ``%2F`` before routing (``Sessions`` composes other routes for such ids)."""
    sid = check_session_id(session_id)
    if not routable(sid):
        raise ValidationError(
            f"session_id: {sid!r} holds '/', which a URL path segment cannot carry; "
            "Sessions(ns) keeps such sessions through the events and facts routes",
            field="session_id")  # fmt: skip
    segment = quote(sid, safe="")
    if segment in (".", ".."):
        segment = segment.replace(".", "%2E")
    return f"{base(ns)}/sessions/{segment}"


def _message_body(value: Any, field: str) -> dict[str, Any]:
    """A message as the route takes it: checked here, as embedded (bad input sends nothing);
    the store fills ``id`` and ``ts`` in."""
    body = Message.of(value, field).to_dict()
    body.pop("id", None)
    body.pop("ts", None)
    return body


def _messages_of(values: list[Any]) -> list[Message]:
    return [Message.of(v, f"messages[{i}]") for i, v in enumerate(values)]


def session_append(ns: str, session_id: str, message_or_messages: Any, searchable: bool | None,
                   entity: str | None, agent: str | None) -> Call:  # fmt: skip
    path = f"{_session(ns, session_id)}/messages"
    body: dict[str, Any] = {"searchable": searchable, "entity": entity}
    if isinstance(message_or_messages, list):
        body["messages"] = [_message_body(m, f"messages[{i}]")
                            for i, m in enumerate(message_or_messages)]  # fmt: skip
        return Call("POST", path, list[dict[str, Any]], json=_present(body), agent=agent,
                    post=_messages_of)  # fmt: skip
    body["message"] = _message_body(message_or_messages, "message")
    return Call("POST", path, dict[str, Any], json=_present(body), agent=agent,
                post=lambda d: Message.of(d))  # fmt: skip


def session_load(ns: str, session_id: str, agent: str | None, **params: Any) -> Call:
    return Call("GET", f"{_session(ns, session_id)}/messages", dict[str, Any], _params(**params),
                agent=agent, post=lambda d: _messages_of(d["messages"]))  # fmt: skip


def session_clear(ns: str, session_id: str, purge: bool, agent: str | None) -> Call:
    if purge:
        return Call("DELETE", _session(ns, session_id), Forgotten, {"purge": "true"}, agent=agent)
    return Call("DELETE", _session(ns, session_id), dict[str, Any], agent=agent,
                post=lambda _: None)  # fmt: skip


def session_list(ns: str, as_of: Any, ttl: float | None) -> Call:
    return Call("GET", f"{base(ns)}/sessions", list[str], _params(as_of=as_of, ttl=ttl))


def session_info(ns: str, session_id: str, **params: Any) -> Call:
    return Call("GET", _session(ns, session_id), SessionInfo, _params(**params))


def session_configure(ns: str, session_id: str, ttl: float | None, agent: str | None) -> Call:
    return Call("PUT", _session(ns, session_id), dict[str, Any], json={"ttl": ttl}, agent=agent,
                post=lambda _: None)  # fmt: skip


def session_purge_expired(ns: str, ttl: float | None, agent: str | None) -> Call:
    return Call("POST", f"{base(ns)}/sessions:purge_expired", list[str], json=_present({"ttl": ttl}),
                agent=agent)  # fmt: skip


def session_search(ns: str, session_id: str, text: str, body: dict[str, Any]) -> Call:
    body = _present({"text": text, **body})
    if "as_of" in body:
        body["as_of"] = _t(body["as_of"], "as_of")
    if "exclude" in body and isinstance(body["exclude"], tuple):
        body["exclude"] = list(body["exclude"])
    return Call("POST", f"{_session(ns, session_id)}/search", list[dict[str, Any]], json=body,
                post=_messages_of)  # fmt: skip


def _present(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


# -- the semantic cache (docs/cache.md) ------------------------------------------------------


def cache_lookup(ns: str, body: dict[str, Any]) -> Call:
    body = _present(body)
    return Call("POST", f"{base(ns)}/cache:lookup", CacheHit | None, json=body,
                agent=body.pop("agent", None))  # fmt: skip


def cache_store(ns: str, body: dict[str, Any]) -> Call:
    value = body.pop("value")
    body = {**_present(body), "value": value}  # a null value is a value
    return Call("POST", f"{base(ns)}/cache", CacheEntry, json=body, agent=body.pop("agent", None))


def cache_invalidate(ns: str, body: dict[str, Any]) -> Call:
    body = _present(body)
    if body.get("all") is False:
        del body["all"]
    return Call("POST", f"{base(ns)}/cache:invalidate", dict[str, int], json=body,
                agent=body.pop("agent", None), post=lambda d: d["invalidated"])  # fmt: skip


def cache_stats(ns: str) -> Call:
    return Call("GET", f"{base(ns)}/cache/stats", CacheStats)


def lineage(ns: str, answer_id: str) -> Call:
    return Call("GET", f"{base(ns)}/answers/{quote(answer_id, safe='')}/lineage", Lineage)


def audit(ns: str, entity: str | None, **kwargs: Any) -> Call:
    return Call("GET", f"{base(ns)}/audit", list[AuditEntry], _params(entity=entity, **kwargs))


def snapshot(ns: str, entity: str, as_of: Any) -> Call:
    return Call("GET", f"{base(ns)}/snapshot", Snapshot, _params(entity=entity, as_of=as_of),
                memories=True)  # fmt: skip


def forget(ns: str, mid: str | None, entity: str | None, purge: bool, agent: str | None) -> Call:
    return Call("POST", f"{base(ns)}/forget", Forgotten,
                json={"id": mid, "entity": entity, "purge": purge}, agent=agent)  # fmt: skip


def maintain(ns: str, dry_run: bool) -> Call:
    return Call("POST", f"{base(ns)}/maintain", MaintenanceReport, json={"dry_run": dry_run})


def get_config(ns: str) -> Call:
    return Call("GET", f"{base(ns)}/config", NamespaceConfig)


def configure(ns: str, changes: dict[str, Any]) -> Call:
    return Call("PUT", f"{base(ns)}/config", NamespaceConfig, json=changes)


def entities(ns: str, as_of: Any, prefix: str | None = None, after: str | None = None,
             limit: int | None = None) -> Call:  # fmt: skip
    params = _params(as_of=as_of, prefix=_text(prefix, "prefix", "a string"),
                     after=_text(after, "after", "an entity name"),
                     limit=_whole(limit, "limit"))  # fmt: skip
    return Call("GET", f"{base(ns)}/entities", list[str], params)


def streams(ns: str, as_of: Any, prefix: str | None = None, after: str | None = None,
            limit: int | None = None) -> Call:  # fmt: skip
    params = _params(as_of=as_of, prefix=_text(prefix, "prefix", "a string"),
                     after=_text(after, "after", "a stream name"),
                     limit=_whole(limit, "limit"))  # fmt: skip
    return Call("GET", f"{base(ns)}/streams", list[str], params)


def stats(ns: str) -> Call:
    return Call("GET", f"{base(ns)}/stats", Stats)


def export(ns: str) -> Call:
    return Call("GET", f"{base(ns)}/export", dict, lines=True, post=iter)


def import_records(ns: str, records: Iterable[Any]) -> Call:
    enc = msgspec.json.Encoder()
    body = b"".join(enc.encode(wire_value(r, f"records[{i}]")) + b"\n"
                    for i, r in enumerate(records))  # fmt: skip
    return Call("POST", f"{base(ns)}/import", dict, content=body,
                post=lambda d: int(d["imported"]))  # fmt: skip


def decode_answer(call: Call, raw: bytes) -> Any:
    if call.lines:
        out: Any = [msgspec.json.decode(line) for line in raw.splitlines() if line.strip()]
    else:
        out = decode(raw, call.type)
    return call.post(out) if call.post is not None else out


def namespaces() -> Call:
    return Call("GET", "/v1/namespaces", list[str])
