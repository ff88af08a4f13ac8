"""What each remote operation sends and what it returns, made from the operations table.

:func:`build` turns a call of an API method (its name and arguments) into a :class:`Call`: the
method's row in :data:`synapsedb.surface.OPERATIONS` gives the route and where each argument
travels, and each field's kind encodes it (refusing, with the engine's error, what the wire
would change). A Call is a request plus the type its answer decodes to: the same value objects
as the embedded API (:mod:`synapsedb.types`). The sync and async clients only execute calls,
so the two can never drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import msgspec
import numpy as np

from ..errors import SynapseError, ValidationError, error_from_code
from ..surface import BY_NAME, Operation
from ..surface.kinds import json_value
from ..types import Fact, Forgotten, Memory, Message
from ..validation import check_session_id, routable

__all__ = ["Call", "build", "decode", "decode_answer", "error_of"]


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str
    type: Any  # what the answer decodes to ("ndjson": JSON lines, decoded to a list)
    params: dict[str, Any] | None = None
    content: bytes | None = None
    content_type: str | None = None
    agent: str | None = None
    reply: Callable[[Any], Any] | None = None  # shapes the decoded answer (sync and async alike)
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


def _numpy_scalar(obj: Any) -> Any:
    """msgspec's hook for what a checked vector may still hold (numpy scalars)."""
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode {type(obj).__name__}")


_body_encoder = msgspec.json.Encoder(enc_hook=_numpy_scalar)

INCLUDE = ("embedding",)  # what a client may ask answers to add (``include``)


def check_include(include: Iterable[str] | str | None) -> tuple[str, ...]:
    """The ``include`` argument of a client: names from INCLUDE (``("embedding",)``: answers
    holding memories carry their vectors, as embedded ones do); a ValidationError otherwise."""
    if include is None:
        return ()
    names = (include,) if isinstance(include, str) else tuple(include)
    for name in names:
        if name not in INCLUDE:
            raise ValidationError(
                f"include: expected one of {', '.join(INCLUDE)}, got {name!r}", field="include"
            )
    return tuple(sorted(set(names)))


def request_params(call: Call, include: tuple[str, ...]) -> dict[str, Any] | None:
    """The call's query parameters, with ``include`` when its answer holds memories."""
    if not include or not call.memories:
        return call.params
    return {**(call.params or {}), "include": ",".join(include)}


def request_body(call: Call) -> tuple[bytes | None, str | None]:
    """The request's body and content type (JSON encoded by msgspec: a batch of 1,000 384-d
    vectors takes about a tenth of the time the standard library's json needs)."""
    return call.content, call.content_type


def base(ns: str) -> str:
    return f"/v1/namespaces/{quote(ns, safe='')}"


def _segment(value: Any, field: str) -> str:
    """A path parameter as one percent-encoded segment (``.`` and ``..`` too, so that no
    client or proxy takes them for dot segments)."""
    if field == "sid":
        value = check_session_id(value)
        if not routable(value):
            raise ValidationError(
                f"session_id: {value!r} holds '/', which a URL path segment cannot carry; "
                "Sessions(ns) keeps such sessions through the events and facts routes",
                field="session_id",
            )
    elif not isinstance(value, str):
        raise ValidationError(f"{field}: expected a string, got {value!r}", field=field)
    segment = quote(value, safe="")
    return segment.replace(".", "%2E") if segment in (".", "..") else segment


def request(op: Operation, ns: str, args: Mapping[str, Any], agent: str | None) -> Call:
    """The request of one operation with ``args`` (the API method's arguments by name)."""
    path = op.route.replace("{ns}", quote(ns, safe=""), 1) if op.namespaced else op.path
    params: dict[str, Any] = {}
    body: dict[str, Any] = {}
    for f in op.fields:
        value = args.get(f.argument)
        if f.at == "agent":
            agent = agent if value is None else value
        elif f.at == "path":
            path = path.replace("{" + f.name + "}", _segment(value, f.name))
        elif value is None and not f.null:
            continue
        elif f.at == "query":
            params[f.name] = f.kind.to_query(value, f.name)
        elif f.at == "spread":
            body.update(f.encode(value, f.name))  # type: ignore[misc]
        else:
            body[f.name] = f.kind.to_json(value, f.name)
    content = None
    if op.body == "json" and op.where("body", "spread"):
        content = _body_encoder.encode(body)
    return Call(
        op.method,
        path,
        op.answer,
        params or None,
        content,
        "application/json" if content is not None else None,
        agent,
        op.reply,
        op.memories,
    )


# -- API methods that one row does not serve alone --------------------------------------------


@dataclass(frozen=True, slots=True)
class Routed:
    """The row a method's call goes to, with its arguments; ``answer`` and ``reply`` replace
    the row's when the row serves two methods (None: the row's)."""

    name: str
    args: dict[str, Any]
    answer: Any = None
    reply: Callable[[Any], Any] | None = None


def _by_key(memory: str, fact: str, plural: bool = False) -> Callable[[dict[str, Any]], Routed]:
    """A method that reads or changes a memory (one argument) or a KV fact (entity, key)."""

    def route(a: dict[str, Any]) -> Routed:
        if a.get("key") is None:
            return Routed(memory, a, list[Memory] if plural else Memory)
        return Routed(fact, a, list[Fact] if plural else Fact)

    return route


ROUTED: dict[str, Callable[[dict[str, Any]], Routed]] = {
    "get": lambda a: (
        Routed("get", a, Memory)
        if a.get("key") is None
        else Routed(
            "facts", {"entity": a["target"], "key": a["key"], "as_of": a.get("as_of")}, Fact
        )
    ),
    "delete": _by_key("delete", "delete_fact"),
    "history": _by_key("history", "fact_history", plural=True),
    "facts": lambda a: Routed("facts", {**a, "key": None}, list[Fact]),
    "sessions.append_many": lambda a: Routed(
        "sessions.append", {**a, "messages": _messages(a)}, list[Message]
    ),
    "sessions.append": lambda a: Routed(
        "sessions.append", {**a, "message": _message(a["message"])}, Message
    ),
    "sessions.purge": lambda a: Routed(
        "sessions.clear", {**a, "purge": True}, Forgotten, lambda out: out
    ),
    "sessions.clear": lambda a: Routed("sessions.clear", a, dict[str, Any]),
    "cache.clear": lambda a: Routed("cache.invalidate", {**a, "all": True}),
}


def build(method: str, ns: str, args: dict[str, Any], agent: str | None) -> Call:
    """The request a call of API method ``method`` makes (``query``, ``sessions.load``), in
    namespace ``ns``, acting as ``agent`` unless the call names one."""
    routed = ROUTED[method](args) if method in ROUTED else Routed(method, args)
    op = BY_NAME[routed.name]
    if op.body == "ndjson":
        return _lines(op, ns, routed.args["records"])
    call = request(op, ns, routed.args, agent)
    if routed.answer is None and routed.reply is None:
        return call
    return Call(
        call.method,
        call.path,
        routed.answer or call.type,
        call.params,
        call.content,
        call.content_type,
        call.agent,
        routed.reply or call.reply,
        call.memories,
    )


def _message(value: Any, field: str = "message") -> dict[str, Any]:
    """A message as the route takes it: checked here, as embedded (bad input sends nothing);
    the store fills ``id`` and ``ts`` in."""
    body = Message.of(value, field).to_dict()
    body.pop("id", None)
    body.pop("ts", None)
    return body


def _messages(args: dict[str, Any]) -> Any:
    values = args.get("messages")
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValidationError("messages: expected a list of messages", field="messages")
    return [_message(m, f"messages[{i}]") for i, m in enumerate(values)]


def _lines(op: Operation, ns: str, records: Iterable[Any]) -> Call:
    enc = msgspec.json.Encoder()
    body = b"".join(
        enc.encode(json_value(r, f"records[{i}]")) + b"\n" for i, r in enumerate(records)
    )
    return Call(
        op.method,
        op.route.replace("{ns}", quote(ns, safe=""), 1),
        op.answer,
        None,
        body,
        "application/x-ndjson",
        None,
        op.reply,
    )


def decode_answer(call: Call, raw: bytes) -> Any:
    if call.type == "ndjson":
        out: Any = iter([msgspec.json.decode(line) for line in raw.splitlines() if line.strip()])
    else:
        out = decode(raw, call.type)
    return call.reply(out) if call.reply is not None else out


def follow(ns: str, stream: str) -> Call:
    """The live feed of a stream's events (Server-Sent Events; ``feeds.Feed`` reads it)."""
    return request(BY_NAME["follow"], ns, {"stream": stream}, None)


def changes(ns: str, entity: str | None, since: Any) -> Call:
    """The live feed of a namespace's changes (Server-Sent Events)."""
    return request(BY_NAME["changes"], ns, {"entity": entity, "since": since}, None)


def namespaces() -> Call:
    return request(BY_NAME["namespaces"], "", {}, None)
