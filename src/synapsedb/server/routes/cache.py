"""Routes of the semantic cache (synapsedb.cache, docs/cache.md): lookup, store, invalidate,
stats. Parse, call the cache over the request's namespace, encode; a lookup runs whole in
the server (atomic, and counted in ``/metrics``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...cache.local import DEFAULT_THRESHOLD, DEFAULT_TTL_S, LocalCache
from ...engine import Namespace
from ...errors import ValidationError
from ..wire import agent_of, json_response, json_type, pick, read_body

LOOKUP_FIELDS = {"key", "scope", "params", "threshold", "match_literals", "agent"}
STORE_FIELDS = {"key", "value", "scope", "params", "ttl", "tags", "match_literals", "agent"}
INVALIDATE_FIELDS = {"key", "scope", "params", "tag", "prefix", "all", "match_literals", "agent"}


def _key(body: dict[str, Any]) -> str:
    key = body.get("key")
    if not isinstance(key, str):  # the cache checks the rest (422 naming the field and limit)
        raise ValidationError(f"key: expected a string, got {json_type(key)}", field="key")
    return key


def _cache(request: Request, mem: Namespace) -> LocalCache:
    return LocalCache(request.app.state.db, mem.name)


async def lookup(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), LOOKUP_FIELDS)
    agent = agent_of(request, body)
    cache = _cache(request, mem)
    out = await run_in_threadpool(
        lambda: cache.lookup(
            _key(body), scope=body.get("scope", "default"), params=body.get("params"),
            threshold=body.get("threshold", DEFAULT_THRESHOLD),
            match_literals=body.get("match_literals", True), agent=agent,
        )
    )  # fmt: skip
    return json_response(out)


async def store(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), STORE_FIELDS)
    if "value" not in body:
        raise ValidationError("value: required", field="value")
    agent = agent_of(request, body)
    cache = _cache(request, mem)
    out = await run_in_threadpool(
        lambda: cache.store(
            _key(body), body["value"], scope=body.get("scope", "default"),
            params=body.get("params"), ttl=body.get("ttl", DEFAULT_TTL_S),
            tags=body.get("tags"), match_literals=body.get("match_literals", True), agent=agent,
        )
    )  # fmt: skip
    return json_response(out, 201)


async def invalidate(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), INVALIDATE_FIELDS)
    agent = agent_of(request, body)
    everything = body.pop("all", False)
    if not isinstance(everything, bool):
        raise ValidationError("all: expected true or false", field="all")
    cache = _cache(request, mem)
    if everything:
        others = sorted(set(body) - {"agent", "match_literals"})
        if others:
            raise ValidationError(f"{others[0]}: not with all", field=others[0])
        n = await run_in_threadpool(lambda: cache.clear(agent=agent))
    else:
        n = await run_in_threadpool(
            lambda: cache.invalidate(
                body.get("key"), scope=body.get("scope"), params=body.get("params"),
                tag=body.get("tag"), prefix=body.get("prefix"),
                match_literals=body.get("match_literals", True), agent=agent,
            )
        )  # fmt: skip
    return json_response({"invalidated": n})


async def stats(request: Request, mem: Namespace) -> Response:
    out = await run_in_threadpool(_cache(request, mem).stats)
    return json_response(dataclasses.replace(out, namespace=request.state.ns))
