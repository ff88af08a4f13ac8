"""Routes of the memory proxy (server/proxy.py): OpenAI's chat-completions and Responses APIs
in front of the configured upstream model, with memory."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ...engine import Namespace
from ...errors import UpstreamError
from ...llm import Completion
from ...llm.forward import request_body
from .. import responses as api
from ..proxy import (
    ANSWER_HEADER,
    MEMORIES_HEADER,
    Proxy,
    answer_id,
    first_chunk,
    inject,
    new_turns,
    relay,
)
from ..wire import encoder, read_body


def _headers(ident: str, recalled: Any) -> dict[str, str]:
    count = len(recalled.memories) if recalled is not None else 0
    return {ANSWER_HEADER: ident, MEMORIES_HEADER: str(count), "Cache-Control": "no-cache"}


def _refused(answer: Completion) -> Response:
    """A 4xx of the upstream: the caller's request was at fault (an unknown model, a bad
    parameter), passed on with its status (its body without the server's API key or the
    upstream's address: llm.forward); a refused API key is the server's problem (502)."""
    if answer.status in (401, 403):
        raise UpstreamError(
            f"LLM upstream refused the server's credentials ({answer.status}): check "
            "SYNAPSEDB_LLM_API_KEY",
            status=answer.status,
        )
    return Response(answer.raw, status_code=answer.status, media_type=answer.content_type)


async def chat_completions(request: Request, ns: Namespace) -> Response:
    proxy: Proxy = request.app.state.proxy
    body = await read_body(request)
    settings = proxy.client.settings
    # a chat-completions request within the server's limits, or 400 naming the field
    request_body(body, "", settings.models, settings.proxy_max_tokens)
    turn = proxy.turn(request, body)
    proxy.require_upstream()
    slot = proxy.enter(request)  # the tenant's breaker and place, or 429: before any work
    try:
        messages = body["messages"]
        recalled = await proxy.recall(ns, messages, turn)
        said = new_turns(messages)
        answer = await proxy.client.forward(
            {**body, "messages": inject(messages, recalled)},
            breaker=slot.breaker,
            on_close=slot.release,
        )
    except BaseException:
        slot.release()
        raise
    ident = answer_id("chatcmpl")
    if isinstance(answer, Completion):
        if answer.status >= 300:
            return _refused(answer)
        await proxy.finish(ns, turn, recalled, answer.text, ident, said)
        return Response(
            answer.raw, media_type=answer.content_type, headers=_headers(ident, recalled)
        )
    first, rest = await first_chunk(answer)
    return StreamingResponse(
        relay(proxy, ns, turn, recalled, answer, first, rest, ident, said),
        media_type="text/event-stream",
        headers=_headers(ident, recalled),
    )


async def responses(request: Request, ns: Namespace) -> Response:
    proxy: Proxy = request.app.state.proxy
    req = api.parse(await read_body(request), proxy.client.settings.proxy_max_tokens)
    chain = api.load_chain(proxy, ns, req.previous)
    last = chain[-1] if chain else {}
    answer = api.Answer(
        api.new_id("resp"),
        api.new_id("msg"),
        req,
        req.options.get("model") or proxy.client.settings.model,
    )
    session = last.get("session") if isinstance(last.get("session"), str) else answer.id
    entity = last.get("entity") if isinstance(last.get("entity"), str) else None
    turn = proxy.turn(request, {"user": req.options.get("user")}, session=session, entity=entity)
    proxy.require_upstream()
    request_body({**req.options, "messages": req.input}, "", proxy.client.settings.models)
    slot = proxy.enter(request)
    try:
        before = api.history(chain)
        recalled = await proxy.recall(ns, [*before, *req.input], turn)
        system = [{"role": "system", "content": req.instructions}] if req.instructions else []
        messages = inject([*system, *before, *req.input], recalled)
        said = [m for m in req.input if m["role"] == "user"]
        chat = {**req.options, "messages": messages, "stream": req.stream}
        upstream = await proxy.client.forward(chat, breaker=slot.breaker, on_close=slot.release)
    except BaseException:
        slot.release()
        raise
    if isinstance(upstream, Completion):
        if upstream.status >= 300:
            return _refused(upstream)
        out = api.from_completion(answer, upstream.body or {})
        await proxy.finish(
            ns,
            turn,
            recalled,
            answer.text,
            answer.id,
            said,
            record=(answer.id, answer.record(turn)),
        )
        return Response(
            encoder.encode(out),
            media_type="application/json",
            headers=_headers(answer.id, recalled),
        )
    first, rest = await first_chunk(upstream)
    return StreamingResponse(
        api.events(proxy, ns, turn, recalled, answer, upstream, first, rest, said),
        media_type="text/event-stream",
        headers=_headers(answer.id, recalled),
    )
