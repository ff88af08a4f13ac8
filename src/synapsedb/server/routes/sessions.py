"""Routes of conversation sessions (synapsedb.conversation, docs/conversation.md): append, load
(with a strategy), clear or purge, configure, list, info, search, purge the expired. Parse,
call ``Sessions`` over the embedded namespace, encode: the Python clients' ``Sessions`` over
HTTP make one of these requests per operation and get what an embedded ``Sessions`` returns,
every TTL judged by the database's clock.

Scopes: reads and searches need ``read``; appends, clears and ``configure`` ``write``; purges
``admin`` (as ``forget`` with ``purge``). A load with a summarising strategy (``summary``, ``summary_buffer``) writes the
session's ``summary`` fact as it folds new turns, so that GET needs ``write`` too: a summary
computed and thrown away would send the whole unsummarised history to the model on every load.
Its model is the server's (the memory loop's LLM, ``SYNAPSEDB_LLM_*``); none: extractive.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...conversation import Message, Sessions
from ...conversation.named import ALL_OPTIONS, INT_OPTIONS, SUMMARISING, check
from ...conversation.routed import MAX_APPEND
from ...conversation.summary import PREFIX, Summarizer
from ...engine import Namespace
from ...errors import ValidationError
from ..auth import require_scope
from ..wire import agent_of, int_param, json_response, pick, read_body, time_param

APPEND_FIELDS = {"message", "messages", "searchable", "entity", "agent"}
SEARCH_FIELDS = {"text", "k", "as_of", "exclude", "ttl"}
LOAD_PARAMS = frozenset({"last", "as_of", "ttl", "strategy", *ALL_OPTIONS})
INFO_PARAMS = frozenset({"as_of", "count_limit", "ttl"})
LIST_PARAMS = frozenset({"as_of", "ttl"})
CLEAR_PARAMS = frozenset({"purge"})


def _params(request: Request, allowed: frozenset[str]) -> None:
    for name in request.query_params:
        if name not in allowed:
            raise ValidationError(f"{name}: unknown parameter; allowed: "
                                  f"{', '.join(sorted(allowed))}", field=name)  # fmt: skip


def _ttl(request: Request) -> Any:
    raw = request.query_params.get("ttl")
    if raw is None:
        return None
    try:
        return float(raw)  # Sessions checks it (positive, finite, at most the engine's limit)
    except ValueError:
        raise ValidationError(f"ttl: expected seconds, got {raw!r}", field="ttl") from None


def _sessions(request: Request, mem: Namespace, agent: str | None = None, *,
              ttl: Any = None) -> Sessions:  # fmt: skip
    """``Sessions`` over the request's namespace, acting as ``agent``, judging TTLs by the
    database's clock (the server's notion of now); its ttl the ``ttl`` parameter's."""
    db = request.app.state.db
    ns = db.namespace(mem.name, agent=agent) if agent is not None else mem
    return Sessions(ns, ttl=_ttl(request) if ttl is None else ttl, clock=db.clock)


def _messages(msgs: list[Message]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in msgs]


async def append(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), APPEND_FIELDS)
    if ("message" in body) == ("messages" in body):
        raise ValidationError("message: give one message, or messages (a list), not both"
                              if "message" in body else "message: required (or messages)",
                              field="message")  # fmt: skip
    store = _sessions(request, mem, agent_of(request, body))
    sid = request.path_params["sid"]
    kw = {"searchable": body.get("searchable"), "entity": body.get("entity")}
    if "message" in body:
        one = await run_in_threadpool(lambda: store.append(sid, body["message"], **kw))
        return json_response(one.to_dict(), 201)
    msgs = body["messages"]
    if isinstance(msgs, list) and len(msgs) > MAX_APPEND:
        raise ValidationError(f"messages: {len(msgs)} messages, over the limit of {MAX_APPEND} "
                              "per request", field="messages", limit=MAX_APPEND)  # fmt: skip
    out = await run_in_threadpool(lambda: store.append_many(sid, msgs, **kw))
    return json_response(_messages(out), 201)


async def load(request: Request, mem: Namespace) -> Response:
    _params(request, LOAD_PARAMS)
    q = request.query_params
    strategy = q.get("strategy")
    if strategy in SUMMARISING:
        require_scope(request, "write")  # the fold is stored (module docstring)
    last, as_of = int_param(request, "last"), time_param(request, "as_of")
    options: dict[str, Any] = {n: int_param(request, n) for n in INT_OPTIONS}
    options["model"] = q.get("model")
    options = check(strategy, options, last=last, as_of=as_of)
    agent, summarizer = None, None
    if strategy in SUMMARISING:
        agent = agent_of(request)
        loop = request.app.state.db.memory_loop
        summarizer = Summarizer(getattr(loop, "llm", None),
                                max_tokens=options.pop("summary_tokens", 300),
                                model=options.get("model"))  # fmt: skip
    store = _sessions(request, mem, agent)
    sid = request.path_params["sid"]
    msgs = await run_in_threadpool(lambda: store.load(sid, last=last, as_of=as_of,
                                                      strategy=strategy, summarizer=summarizer,
                                                      **options))  # fmt: skip
    summary = next((m.metadata["summary"] for m in msgs if m.role == "system" and m.metadata
                    and isinstance(m.metadata.get("summary"), dict)
                    and m.content.startswith(PREFIX)), None) if strategy in SUMMARISING else None  # fmt: skip
    return json_response({"messages": _messages(msgs), "strategy": strategy, "summary": summary})


async def clear(request: Request, mem: Namespace) -> Response:
    _params(request, CLEAR_PARAMS)
    raw = request.query_params.get("purge", "false")
    if raw not in ("true", "false"):
        raise ValidationError(f"purge: expected true or false, got {raw!r}", field="purge")
    if raw == "true":
        require_scope(request, "admin")  # an erasure, as forget with purge
    store, sid = _sessions(request, mem, agent_of(request)), request.path_params["sid"]
    if raw == "true":
        return json_response(await run_in_threadpool(store.purge, sid))
    await run_in_threadpool(store.clear, sid)
    return json_response({"session_id": sid, "cleared": True})


async def info(request: Request, mem: Namespace) -> Response:
    _params(request, INFO_PARAMS)
    store = _sessions(request, mem)
    sid = request.path_params["sid"]
    given = int_param(request, "count_limit")
    count_limit = 1000 if given is None else given
    out = await run_in_threadpool(lambda: store.info(sid, as_of=time_param(request, "as_of"),
                                                     count_limit=count_limit))  # fmt: skip
    return json_response(out)


async def list_sessions(request: Request, mem: Namespace) -> Response:
    _params(request, LIST_PARAMS)
    store = _sessions(request, mem)
    out = await run_in_threadpool(lambda: store.sessions(as_of=time_param(request, "as_of")))
    return json_response(out)


async def configure(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), {"ttl", "agent"})
    if "ttl" not in body:
        raise ValidationError("ttl: required (seconds, or null: never expires)", field="ttl")
    store, sid = _sessions(request, mem, agent_of(request, body)), request.path_params["sid"]
    await run_in_threadpool(lambda: store.configure(sid, ttl=body["ttl"]))
    return json_response({"session_id": sid, "ttl": body["ttl"]})


async def purge_expired(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), {"ttl", "agent"})  # admin scope: erasures
    store = _sessions(request, mem, agent_of(request, body), ttl=body.get("ttl"))
    return json_response(await run_in_threadpool(store.purge_expired))


async def search(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), SEARCH_FIELDS)
    if "text" not in body:
        raise ValidationError("text: required", field="text")
    store, sid = _sessions(request, mem, ttl=body.get("ttl")), request.path_params["sid"]
    out = await run_in_threadpool(lambda: store.search(
        sid, body["text"], k=body.get("k", 5), as_of=body.get("as_of"),
        exclude=body.get("exclude", ())))  # fmt: skip
    return json_response(_messages(out))
