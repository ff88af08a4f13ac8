"""Lifecycle and administration routes: forget, maintain, export/import, config, stats."""

from __future__ import annotations

import io
import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ...engine import Namespace
from ...errors import ValidationError
from ..auth import public_view, require_scope
from ..limits import Limits
from ..wire import (
    agent_of,
    decode_json,
    encoder,
    int_param,
    json_response,
    pick,
    read_body,
    read_raw,
    require_media_type,
    time_param,
)


async def forget(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), {"id", "entity", "purge", "agent"})
    if body.get("purge"):
        require_scope(request, "admin")
    out = await run_in_threadpool(
        mem.forget, body.get("id"), entity=body.get("entity"), purge=body.get("purge", False),
        agent=agent_of(request, body),
    )  # fmt: skip
    return json_response(out)


async def maintain(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), {"dry_run"})
    out = await run_in_threadpool(mem.maintain, dry_run=body.get("dry_run", False))
    return json_response(public_view(request, out))


async def export_ns(request: Request, mem: Namespace) -> Response:
    records = await run_in_threadpool(lambda: list(mem.export()))

    def lines() -> Any:
        for rec in records:
            yield encoder.encode(rec) + b"\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def import_ns(request: Request, mem: Namespace) -> Response:
    """JSON lines (``Content-Type: application/x-ndjson``), read within the body deadline, at
    most ``--max-import-bytes``; admin only. One import runs at a time in a server (each holds
    its records in memory while they are checked), and its lines are decoded and checked in a
    worker thread, a line that is not a JSON object failing at once: the event loop, hence
    every other tenant, never waits on an import."""
    require_media_type(request, "application/x-ndjson")
    limits: Limits = request.app.state.limits
    async with request.app.state.import_slot:
        raw = await read_raw(request, limits.max_import_bytes)
        n = await run_in_threadpool(_import, mem, raw)
    return json_response({"imported": n}, 201)


def _import(mem: Namespace, raw: bytes) -> int:
    lines: list[int] = []  # records[i] came from line lines[i]
    records: list[Any] = []
    try:
        for number, line in enumerate(io.BytesIO(raw), 1):
            if not line.strip():
                continue
            lines.append(number)
            record = decode_json(line, f"records[{len(records)}]")
            if not isinstance(record, dict):
                raise ValidationError(f"records[{len(records)}]: expected an object with a "
                                      "'kind'", field=f"records[{len(records)}]")  # fmt: skip
            records.append(record)
        return mem.import_records(records)
    except ValidationError as err:  # records[i] is the i-th record: say which line that is
        raise _at_line(err, lines) from None


def _at_line(err: ValidationError, lines: list[int]) -> ValidationError:
    match = re.match(r"records\[(\d+)\]", err.field or "")
    if match is None or int(match.group(1)) >= len(lines):
        return err
    line = lines[int(match.group(1))]
    details = {k: v for k, v in err.details.items() if k not in ("field", "limit")}
    return ValidationError(f"line {line}: {err.message}", field=err.field,
                           limit=err.details.get("limit"), line=line, **details)  # fmt: skip


async def get_config(request: Request, mem: Namespace) -> Response:
    return json_response(mem.config)


async def set_config(request: Request, mem: Namespace) -> Response:
    body = await read_body(request)
    return json_response(await run_in_threadpool(lambda: mem.configure(**body)))


async def entities(request: Request, mem: Namespace) -> Response:
    """A JSON list of names, sorted; a page with ``limit`` (and ``prefix``, ``after``), else
    all of them (a large namespace should page: docs/http.md). In a worker thread: an entity
    whose memories are all cold is looked up in storage."""
    out = await run_in_threadpool(
        mem.entities, as_of=time_param(request, "as_of"),
        prefix=request.query_params.get("prefix"), after=request.query_params.get("after"),
        limit=int_param(request, "limit"),
    )  # fmt: skip
    return json_response(out)


async def streams(request: Request, mem: Namespace) -> Response:
    """A JSON list of stream names, sorted; a page with ``limit`` (and ``prefix``, ``after``),
    else all of them, as ``entities``. Streams are in memory: no worker thread."""
    out = mem.streams(
        as_of=time_param(request, "as_of"), prefix=request.query_params.get("prefix"),
        after=request.query_params.get("after"), limit=int_param(request, "limit"),
    )  # fmt: skip
    return json_response(out)


async def stats(request: Request, mem: Namespace) -> Response:
    return json_response(public_view(request, mem.stats()))
