"""Routes of the memory loop (synapsedb.memory_loop): remember and recall. Parse, call the
Namespace, encode; the loop itself runs in the engine's process through its seam."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...engine import Namespace
from ...errors import ValidationError
from ..wire import agent_of, json_response, pick, read_body

REMEMBER_FIELDS = {"messages", "entity", "session", "agent", "memories", "wait"}
RECALL_FIELDS = {"messages", "text", "entity", "budget_tokens", "k", "threshold", "rewrite",
                 "agent"}  # fmt: skip


async def remember(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), REMEMBER_FIELDS)
    for name in ("messages", "entity"):
        if name not in body:
            raise ValidationError(f"{name}: required", field=name)
    agent = agent_of(request, body)
    out = await run_in_threadpool(
        lambda: mem.remember(body["messages"], entity=body["entity"],
                             session=body.get("session"), agent=agent,
                             memories=body.get("memories"), wait=body.get("wait", False))
    )  # fmt: skip
    return json_response(out)


async def recall(request: Request, mem: Namespace) -> Response:
    body = pick(await read_body(request), RECALL_FIELDS)
    if ("messages" in body) == ("text" in body):
        raise ValidationError("messages: give messages or text, not both", field="messages")
    what = body.pop("messages", None) if "messages" in body else body.pop("text")
    body["agent"] = agent_of(request, body)
    out = await run_in_threadpool(lambda: mem.recall(what, **body))
    return json_response(out)
