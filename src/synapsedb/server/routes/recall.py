"""Routes for queries, answers and their lineage, audit and snapshots."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...engine import Namespace
from ...errors import (
    ValidationError,
)
from ..wire import (
    agent_of,
    include_param,
    json_response,
    limit_param,
    memory_response,
    pick,
    read_body,
    required,
    time_param,
)

# -- query, lineage, lifecycle ----------------------------------------------------------------

QUERY_FIELDS = {"text", "embedding", "entity", "filter", "k", "mode", "as_of", "valid_at",
                "min_score", "types", "since", "until", "dedup", "explain", "agent",
                "tiers", "include_ended"}  # fmt: skip


async def query(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), QUERY_FIELDS)
    body["agent"] = agent_of(request, body)
    text = body.pop("text", None)
    if text is None and body.get("embedding") is not None:
        # Nothing to embed: a sub-millisecond in-memory search, cheaper on the event loop than
        # the hop to a worker thread and back (the query log is written by the next commit).
        return json_response(mem.query(None, **body))
    out = await run_in_threadpool(lambda: mem.query(text, **body))
    return json_response(out)


async def record_answer(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request),
                {"answer_id", "query_ids", "agent", "text", "cited", "entities"})  # fmt: skip
    if "answer_id" not in body or "query_ids" not in body:
        raise ValidationError("answer_id, query_ids: required", field="answer_id")
    out = await run_in_threadpool(
        mem.record_answer, body["answer_id"], body["query_ids"], agent=agent_of(request, body),
        text=body.get("text"), cited=body.get("cited"), entities=body.get("entities"),
    )  # fmt: skip
    return json_response(out, 201)


async def lineage(request: Request, mem: Namespace) -> Response:
    return json_response(await run_in_threadpool(mem.lineage, request.path_params["answer_id"]))


async def audit(request: Request, mem: Namespace) -> Response:
    q = request.query_params
    out = await run_in_threadpool(
        mem.audit, q.get("entity"), agent=q.get("agent"), since=time_param(request, "since"),
        until=time_param(request, "until"), limit=limit_param(request, 1000),
    )  # fmt: skip
    return json_response(out)


async def snapshot(request: Request, mem: Namespace) -> Response:
    include = include_param(request)
    out = mem.snapshot(required(request, "entity"), as_of=time_param(request, "as_of"))
    return memory_response(out, include)
