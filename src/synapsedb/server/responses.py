"""OpenAI's Responses API on the memory proxy (``POST .../responses``), translated to a
chat-completions call upstream: ``input`` (a string or message items), ``instructions``,
``previous_response_id``, ``stream`` (``response.created`` ... ``response.output_text.delta``
... ``response.completed``).

Each response's record (its entity, session, the turns it was given and its answer, and the
response it continued) is stored where a purge of its user or of its session erases it
(:mod:`synapsedb.server.response_records`). A request naming
``previous_response_id`` gets that chain's turns back in front of its own; one without still
gets the entity's long-term memories through recall.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..engine import Namespace
from ..errors import UpstreamError, ValidationError
from ..ids import new_memory_id
from ..llm import Chunk, ChunkStream
from ..llm.forward import check_output_limit
from ..types import Recalled
from ..validation import check_key
from .proxy import Proxy, Turn
from .response_records import stored_record
from .wire import encoder, json_type

__all__ = ["Answer", "ResponsesRequest", "events", "load_chain", "parse"]

MAX_CHAIN = 100  # responses followed back through previous_response_id
ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text", "text")
IGNORED = {
    "metadata",
    "store",
    "truncation",
    "include",
    "safety_identifier",
    "prompt_cache_key",
    "service_tier",
    "parallel_tool_calls",
    "stream_options",
    "top_logprobs",
    "tool_choice",
}
FIELDS = {
    "model",
    "input",
    "instructions",
    "previous_response_id",
    "stream",
    "temperature",
    "top_p",
    "max_output_tokens",
    "user",
    "text",
    "reasoning",
    "tools",
    *IGNORED,
}


@dataclass(slots=True)
class ResponsesRequest:
    """A Responses API request, checked: its new turns as chat messages, the chat options it
    maps to, and what it continues."""

    input: list[dict[str, Any]]
    instructions: str | None
    previous: str | None
    stream: bool
    options: dict[str, Any] = field(default_factory=dict)
    echo: dict[str, Any] = field(default_factory=dict)  # fields a response object repeats


def _fail(name: str, what: str, value: Any) -> ValidationError:
    return ValidationError(f"{name}: expected {what}, got {json_type(value)}", field=name)


def _text_content(content: Any, where: str) -> Any:
    """A message's content in chat form: a string, or parts (text and image_url)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise _fail(f"{where}.content", "a string or a list of content parts", content)
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        if not isinstance(part, Mapping):
            raise _fail(at, "a content part (an object with a type)", part)
        kind = part.get("type")
        if kind in TEXT_PARTS:
            text = part.get("text")
            if not isinstance(text, str):
                raise _fail(f"{at}.text", "a string", text)
            parts.append({"type": "text", "text": text})
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str):
                raise _fail(f"{at}.image_url", "a string", url)
            image = {"url": url}
            if isinstance(part.get("detail"), str):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        else:
            got = repr(kind[:100]) if isinstance(kind, str) else json_type(kind)
            raise ValidationError(
                f"{at}.type: expected input_text, output_text or input_image, got {got}",
                field=f"{at}.type",
            )
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _messages(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        if not value:
            raise ValidationError("input: must not be empty", field="input")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise _fail("input", "a string or a non-empty list of message items", value)
    out = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            raise _fail(where, "a message item", item)
        if item.get("type", "message") != "message":
            raise ValidationError(
                f"{where}.type: only message items are supported (no tools), got "
                f"{item.get('type')!r}",
                field=f"{where}.type",
            )
        role = item.get("role")
        if role not in ROLES:
            raise ValidationError(
                f"{where}.role: expected one of {', '.join(ROLES)}, got {role!r}",
                field=f"{where}.role",
            )
        out.append({"role": role, "content": _text_content(item.get("content"), where)})
    return out


def _number(body: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ValidationError(f"{name}: expected a number from {low:g} to {high:g}", field=name)
    return value


def parse(body: Mapping[str, Any], max_tokens: int | None = None) -> ResponsesRequest:
    """A Responses API body, checked (400 naming the field: unknown fields included, and a
    ``max_output_tokens`` over ``max_tokens``, the server's cap)."""
    for name in body:
        if name not in FIELDS:
            raise ValidationError(
                f"{name}: not supported by the memory proxy; supported: "
                f"{', '.join(sorted(FIELDS))}",
                field=name,
            )
    if "input" not in body:
        raise ValidationError("input: required", field="input")
    opts: dict[str, Any] = {}
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise _fail("model", "a string", model)
    if model:
        opts["model"] = model
    for name, low, high in (("temperature", 0, 2), ("top_p", 0, 1)):
        if (number := _number(body, name, low, high)) is not None:
            opts[name] = number
    most = body.get("max_output_tokens")
    check_output_limit(most, "max_output_tokens", max_tokens)
    if most is not None:
        opts["max_tokens"] = most
    if body.get("user") is not None:
        opts["user"] = body["user"]
    if body.get("tools"):
        raise ValidationError("tools: tools are not supported by the memory proxy", field="tools")
    fmt = _format(body.get("text"))
    if fmt is not None:
        opts["response_format"] = fmt
    reasoning = body.get("reasoning")
    if isinstance(reasoning, Mapping) and isinstance(reasoning.get("effort"), str):
        opts["reasoning_effort"] = reasoning["effort"]
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _fail("instructions", "a string", instructions)
    previous = body.get("previous_response_id")
    if previous is not None:
        previous = check_key(previous, "previous_response_id")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _fail("stream", "true or false", stream)
    echo = {
        k: body.get(k)
        for k in ("instructions", "max_output_tokens", "temperature", "top_p", "user", "metadata")
    }
    echo["metadata"] = echo["metadata"] if isinstance(echo["metadata"], Mapping) else {}
    return ResponsesRequest(
        _messages(body["input"]), instructions or None, previous, stream, opts, echo
    )


def _format(text: Any) -> dict[str, Any] | None:
    """``text.format`` as a chat ``response_format`` (None for plain text)."""
    if text is None:
        return None
    fmt = text.get("format") if isinstance(text, Mapping) else None
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if fmt is None or kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema" and isinstance(fmt, Mapping):
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    raise ValidationError(
        "text.format.type: expected text, json_object or json_schema", field="text.format.type"
    )


# -- the chain of responses -------------------------------------------------------------------


def load_chain(proxy: Proxy, ns: Namespace, previous: str | None) -> list[dict[str, Any]]:
    """The records of the responses ``previous`` continues, oldest first (400 naming
    previous_response_id when it is unknown in this namespace)."""
    chain: list[dict[str, Any]] = []
    ident = previous
    while ident is not None and len(chain) < MAX_CHAIN:
        record = proxy.pending.get((ns.name, ident)) or stored_record(ns, ident)
        if record is None:
            if not chain:
                raise ValidationError(
                    f"previous_response_id: no response {ident!r} in this namespace",
                    field="previous_response_id",
                )
            break  # an older link expired or was erased: the chain starts here
        chain.append(record)
        prior = record.get("previous")
        ident = prior if isinstance(prior, str) else None
    return chain[::-1]


def history(chain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns of a chain of records as chat messages."""
    out: list[dict[str, Any]] = []
    for record in chain:
        turns = record.get("input")
        if isinstance(turns, list):
            out.extend(t for t in turns if isinstance(t, dict) and t.get("role") in ROLES)
        if isinstance(record.get("output"), str):
            out.append({"role": "assistant", "content": record["output"]})
    return out


# -- answers ----------------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    return f"{prefix}_{new_memory_id(time.time_ns() // 1000)}"


def usage(chat: Any) -> dict[str, Any] | None:
    """Chat-completions usage as the Responses API's."""
    if not isinstance(chat, Mapping):
        return None
    n: dict[str, int] = {}
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = chat.get(name)
        n[name] = value if isinstance(value, int) and not isinstance(value, bool) else 0
    total = n["total_tokens"] or n["prompt_tokens"] + n["completion_tokens"]
    return {
        "input_tokens": n["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": n["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total,
    }


@dataclass(slots=True)
class Answer:
    """A response being built: its ids, model, text so far and how it ended."""

    id: str
    message_id: str
    request: ResponsesRequest
    model: str
    created_at: int = field(default_factory=lambda: int(time.time()))
    text: str = ""
    finish: str | None = None
    usage: dict[str, Any] | None = None

    def message(self, status: str) -> dict[str, Any]:
        content = [{"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}]
        return {
            "id": self.message_id,
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": content if status != "in_progress" else [],
        }

    def response(self, status: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
        """The response object in ``status`` (``in_progress``, ``completed``, ``incomplete``,
        ``failed``)."""
        incomplete = None
        if status == "incomplete":
            why = "content_filter" if self.finish == "content_filter" else "max_output_tokens"
            incomplete = {"reason": why}
        output = [self.message("completed")] if status in ("completed", "incomplete") else []
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": error,
            "incomplete_details": incomplete,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": False,
            "previous_response_id": self.request.previous,
            "tool_choice": "none",
            "tools": [],
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "store": True,
            "usage": self.usage if status != "in_progress" else None,
            **self.request.echo,
        }

    @property
    def status(self) -> str:
        return "incomplete" if self.finish in ("length", "content_filter") else "completed"

    def record(self, turn: Turn) -> dict[str, Any]:
        return {
            "entity": turn.entity,
            "session": turn.session,
            "input": self.request.input,
            "output": self.text,
            "previous": self.request.previous,
            "model": self.model,
            "created_at": self.created_at,
        }


def from_completion(answer: Answer, body: Mapping[str, Any]) -> dict[str, Any]:
    """A whole chat completion as the finished response object."""
    try:
        choice = body["choices"][0]
        content = choice["message"].get("content")
        answer.finish = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        content = None
    answer.text = content if isinstance(content, str) else ""
    answer.model = body.get("model") or answer.model
    answer.usage = usage(body.get("usage"))
    return answer.response(answer.status)


def _event(kind: str, seq: int, **fields: Any) -> bytes:
    data = encoder.encode({"type": kind, "sequence_number": seq, **fields})
    return f"event: {kind}\ndata: ".encode() + data + b"\n\n"


async def events(
    proxy: Proxy,
    ns: Namespace,
    turn: Turn,
    recalled: Recalled | None,
    answer: Answer,
    stream: ChunkStream,
    first: Chunk,
    rest: AsyncIterator[Chunk],
    said: list[dict[str, Any]],
) -> AsyncIterator[bytes]:
    """The upstream's chat-completion chunks as the Responses API's events; stored in the
    background once complete. A stream that breaks part-way ends with ``error`` and
    ``response.failed``."""
    seq = 0
    where = {"item_id": answer.message_id, "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    done = False

    def take(chunk: Chunk) -> str:
        value = chunk.value if isinstance(chunk.value, dict) else {}
        if isinstance(value.get("model"), str) and value["model"]:
            answer.model = value["model"]
        for choice in value.get("choices") or ():
            if isinstance(choice, dict) and choice.get("finish_reason"):
                answer.finish = choice["finish_reason"]
        answer.usage = usage(value.get("usage")) or answer.usage
        answer.text += chunk.text
        return chunk.text

    try:
        yield _event("response.created", seq, response=answer.response("in_progress"))
        yield _event(
            "response.in_progress", seq := seq + 1, response=answer.response("in_progress")
        )
        yield _event(
            "response.output_item.added",
            seq := seq + 1,
            output_index=0,
            item=answer.message("in_progress"),
        )
        yield _event("response.content_part.added", seq := seq + 1, **where, part=part)
        chunk: Chunk | None = first
        while chunk is not None:
            if delta := take(chunk):
                yield _event(
                    "response.output_text.delta", seq := seq + 1, **where, delta=delta, logprobs=[]
                )
            chunk = await anext(rest, None)
        done = True
    except UpstreamError as err:
        error = {"code": "upstream_error", "message": err.message}
        yield _event(
            "error", seq := seq + 1, code="upstream_error", message=err.message, param=None
        )
        yield _event("response.failed", seq := seq + 1, response=answer.response("failed", error))
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
    if not done:
        return
    yield _event(
        "response.output_text.done", seq := seq + 1, **where, text=answer.text, logprobs=[]
    )
    yield _event(
        "response.content_part.done", seq := seq + 1, **where, part={**part, "text": answer.text}
    )
    yield _event(
        "response.output_item.done",
        seq := seq + 1,
        output_index=0,
        item=answer.message("completed"),
    )
    await proxy.finish(
        ns, turn, recalled, answer.text, answer.id, said, record=(answer.id, answer.record(turn))
    )
    kind = "response.completed" if answer.status == "completed" else "response.incomplete"
    yield _event(kind, seq + 1, response=answer.response(answer.status))
