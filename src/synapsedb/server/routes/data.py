"""Routes over memories, KV facts and streams: parse, call the Namespace, encode."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...engine import Namespace
from ...errors import (
    ValidationError,
)
from ..auth import check_agents
from ..wire import (
    agent_of,
    event_cursor_param,
    include_param,
    int_param,
    json_response,
    limit_param,
    memory_response,
    pick,
    read_body,
    required,
    time_param,
)

# -- memories ---------------------------------------------------------------------------------


async def write_memory(request: Request, mem: Namespace) -> Response:
    include = include_param(request)
    body = await read_body(request)
    if "entity" not in body:
        raise ValidationError("entity: required", field="entity")
    entity = body.pop("entity")
    check_agents(request, body)
    agent = agent_of(request)
    m = await run_in_threadpool(mem.write, entity, body, agent=agent)
    return memory_response(m, include, 201)


async def write_memories(request: Request, mem: Namespace) -> Response:
    include = include_param(request)
    body = pick(await read_body(request), {"items", "agent"})
    items = body.get("items")
    if not isinstance(items, list):
        raise ValidationError("items: expected a list of memories", field="items")
    check_agents(request, *items)
    out = await run_in_threadpool(mem.write_many, items, agent=agent_of(request, body))
    return memory_response(out, include, 201)


async def list_memories(request: Request, mem: Namespace) -> Response:
    types = request.query_params.getlist("types") or None
    include = include_param(request)
    entity, before = request.query_params.get("entity"), request.query_params.get("before")
    as_of, valid_at = time_param(request, "as_of"), time_param(request, "valid_at")
    limit = limit_param(request, 100)
    # in a worker thread: cold memories (and a cold ``before`` cursor) are read from storage
    out = await run_in_threadpool(
        lambda: mem.memories(
            entity, types=types, as_of=as_of, limit=limit, valid_at=valid_at, before=before
        )
    )
    return memory_response(out, include)


async def get_memory(request: Request, mem: Namespace) -> Response:
    include = include_param(request)
    out = mem.get(request.path_params["id"], as_of=time_param(request, "as_of"))
    return memory_response(out, include)


async def update_memory(request: Request, mem: Namespace) -> Response:
    include = include_param(request)
    body = pick(await read_body(request), {"changes", "if_version", "agent"})
    check_agents(request, body.get("changes"))
    out = await run_in_threadpool(
        mem.update, request.path_params["id"], body.get("changes", {}),
        if_version=body.get("if_version"), agent=agent_of(request, body),
    )  # fmt: skip
    return memory_response(out, include)


async def delete_memory(request: Request, mem: Namespace) -> Response:
    include = include_param(request)
    out = await run_in_threadpool(
        mem.delete, request.path_params["id"],
        if_version=int_param(request, "if_version"), agent=agent_of(request),
    )  # fmt: skip
    return memory_response(out, include)


async def memory_history(request: Request, mem: Namespace) -> Response:
    include = include_param(request)
    out = mem.history(request.path_params["id"], as_of=time_param(request, "as_of"))
    return memory_response(out, include)


# -- KV facts ---------------------------------------------------------------------------------


async def get_facts(request: Request, mem: Namespace) -> Response:
    entity = required(request, "entity")
    key = request.query_params.get("key")
    as_of = time_param(request, "as_of")
    if key is None:
        return json_response(mem.facts(entity, as_of=as_of))
    return json_response(mem.get(entity, key, as_of=as_of))


async def set_fact(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), {"entity", "key", "value", "if_version", "ttl", "agent"})
    for name in ("entity", "key", "value"):
        if name not in body:
            raise ValidationError(f"{name}: required", field=name)
    out = await run_in_threadpool(
        mem.set, body["entity"], body["key"], body["value"], if_version=body.get("if_version"),
        ttl=body.get("ttl"), agent=agent_of(request, body),
    )  # fmt: skip
    return json_response(out)


async def delete_fact(request: Request, mem: Namespace) -> Response:
    out = await run_in_threadpool(
        mem.delete, required(request, "entity"), required(request, "key"),
        if_version=int_param(request, "if_version"), agent=agent_of(request),
    )  # fmt: skip
    return json_response(out)


async def fact_history(request: Request, mem: Namespace) -> Response:
    out = mem.history(
        required(request, "entity"), required(request, "key"), as_of=time_param(request, "as_of")
    )
    return json_response(out)


# -- streams ----------------------------------------------------------------------------------


async def append_event(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), {"entity", "event", "stream", "searchable", "agent"})
    if "entity" not in body or "event" not in body:
        raise ValidationError("entity, event: required", field="entity" if "entity" not in body
                              else "event")  # fmt: skip
    check_agents(request, body["event"])
    out = await run_in_threadpool(
        mem.append, body["entity"], body["event"], stream=body.get("stream"),
        agent=agent_of(request, body), searchable=body.get("searchable", True),
    )  # fmt: skip
    return json_response(out, 201)


async def read_events(request: Request, mem: Namespace) -> Response:
    q = request.query_params
    out = mem.events(
        required(request, "stream"), start=q.get("start"), end=q.get("end"),
        after=event_cursor_param(request, header=False), since=time_param(request, "since"),
        until=time_param(request, "until"),
        limit=limit_param(request, 100), order=q.get("order", "asc"),  # type: ignore[arg-type]
        as_of=time_param(request, "as_of"),
    )  # fmt: skip
    return json_response(out)
