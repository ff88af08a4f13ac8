"""The export and import routes: JSON lines, which the operations table's plain handlers (JSON
bodies and answers) do not speak."""

from __future__ import annotations

import io
import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ...engine import Namespace
from ...errors import ValidationError
from ..limits import Limits
from ..wire import (
    decode_json,
    encoder,
    json_response,
    read_raw,
    require_media_type,
)

NDJSON, BYTES = "application/x-ndjson", "application/octet-stream"


async def export_ns(request: Request, mem: Namespace) -> Response:
    """JSON lines (``application/x-ndjson``; labelled ``application/octet-stream`` for a
    client that accepts only that, as generated clients do)."""
    records = await run_in_threadpool(lambda: list(mem.export()))

    def lines() -> Any:
        for rec in records:
            yield encoder.encode(rec) + b"\n"

    accept = request.headers.get("accept", "")
    media = BYTES if BYTES in accept and NDJSON not in accept else NDJSON
    return StreamingResponse(lines(), media_type=media)


async def import_ns(request: Request, mem: Namespace) -> Response:
    """JSON lines (``Content-Type: application/x-ndjson``, or ``application/octet-stream`` from
    a client that knows no other name for them), read within the body deadline, at
    most ``--max-import-bytes``; admin only. One import runs at a time in a server (each holds
    its records in memory while they are checked), and its lines are decoded and checked in a
    worker thread, a line that is not a JSON object failing at once: the event loop, hence
    every other tenant, never waits on an import."""
    raw_type = request.headers.get("content-type") or ""
    if raw_type.split(";", 1)[0].strip().lower() != BYTES:
        require_media_type(request, NDJSON)
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
                raise ValidationError(
                    f"records[{len(records)}]: expected an object with a 'kind'",
                    field=f"records[{len(records)}]",
                )
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
    return ValidationError(
        f"line {line}: {err.message}",
        field=err.field,
        limit=err.details.get("limit"),
        line=line,
        **details,
    )
