"""LangChain messages to SynapseDB session messages (OpenAI's shape) and back.

A LangChain message maps onto :class:`synapsedb.conversation.Message`:

| LangChain | role | carried in |
|---|---|---|
| ``SystemMessage`` | ``system`` | content, name |
| ``HumanMessage`` | ``user`` | content, name |
| ``AIMessage`` | ``assistant`` | content, name, ``tool_calls`` (OpenAI's ``function`` shape, ``arguments`` as a JSON string) |
| ``ToolMessage`` | ``tool`` | content, ``tool_call_id`` |
| ``ChatMessage(role=...)`` | that role (``human``/``ai``/``developer`` read as user/assistant/system) | content, name |

What OpenAI's shape has no place for is kept in the message's ``metadata["langchain"]``: the
LangChain message ``id``, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``,
``invalid_tool_calls``, a tool message's ``status`` and ``artifact``, and the content blocks
when the content is a list (the session keeps their text, joined with newlines, as the
message's content). Reading a message back restores them, so a round trip is lossless. Values
that are not JSON (an ``artifact`` object) are refused with a ``ValidationError`` naming the
field, like every other bad input; nothing is stored then.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ..conversation import Message
from ..errors import ValidationError

__all__ = ["from_langchain", "to_langchain"]

EXTRAS_KEY = "langchain"
_CHAT_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "tool": "tool",
}


def from_langchain(message: Any, field: str = "message") -> Message:
    """The session message for a LangChain ``BaseMessage``; errors name ``field``."""
    if not isinstance(message, BaseMessage):
        raise ValidationError(
            f"{field}: expected a LangChain BaseMessage, got {type(message).__name__}",
            field=field,
        )
    extras: dict[str, Any] = {}
    content = _content(message.content, extras, field)
    if message.id is not None:
        extras["id"] = message.id
    if message.additional_kwargs:
        extras["additional_kwargs"] = message.additional_kwargs
    if message.response_metadata:
        extras["response_metadata"] = message.response_metadata
    out: dict[str, Any] = {"role": _role(message, field), "content": content}
    if message.name is not None:
        out["name"] = message.name
    if isinstance(message, AIMessage):
        if message.tool_calls:
            out["tool_calls"] = [
                _openai_call(c, f"{field}.tool_calls[{i}]")
                for i, c in enumerate(message.tool_calls)
            ]
        if message.invalid_tool_calls:
            extras["invalid_tool_calls"] = [dict(c) for c in message.invalid_tool_calls]
        if message.usage_metadata:
            extras["usage_metadata"] = dict(message.usage_metadata)
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
        if message.status != "success":
            extras["status"] = message.status
        if message.artifact is not None:
            extras["artifact"] = message.artifact
    if extras:
        out["metadata"] = {EXTRAS_KEY: extras}
    return Message.of(out, field)


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message for a session message (its ``metadata["langchain"]`` restored).
    A message written by another client, without LangChain extras, gets the session's
    message id as its ``id``."""
    meta = message.metadata or {}
    extras = meta.get(EXTRAS_KEY) if isinstance(meta.get(EXTRAS_KEY), Mapping) else {}
    assert isinstance(extras, Mapping)
    content: Any = extras.get("content", message.content)
    common: dict[str, Any] = {
        "content": content,
        "id": extras.get("id", message.id),
        "additional_kwargs": dict(extras.get("additional_kwargs") or {}),
        "response_metadata": dict(extras.get("response_metadata") or {}),
    }
    if message.name is not None:
        common["name"] = message.name
    if message.role == "system":
        return SystemMessage(**common)
    if message.role == "user":
        return HumanMessage(**common)
    if message.role == "tool":
        return ToolMessage(
            tool_call_id=message.tool_call_id or "",
            status=extras.get("status", "success"),
            artifact=extras.get("artifact"),
            **common,
        )
    calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = list(extras.get("invalid_tool_calls") or [])
    for call in message.tool_calls or []:
        parsed = _langchain_call(call)
        (calls if parsed.get("type") == "tool_call" else invalid).append(parsed)
    usage = extras.get("usage_metadata")
    return AIMessage(
        tool_calls=calls,
        invalid_tool_calls=invalid,
        usage_metadata=dict(usage) if usage else None,
        **common,
    )


def _role(message: BaseMessage, field: str) -> str:
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage) and message.role in _CHAT_ROLES:
        if _CHAT_ROLES[message.role] == "tool":
            raise ValidationError(
                f"{field}.role: a tool result is a ToolMessage (it needs its tool_call_id)",
                field=f"{field}.role",
            )
        return _CHAT_ROLES[message.role]
    what = (
        f"ChatMessage with role {message.role!r}"
        if isinstance(message, ChatMessage)
        else (type(message).__name__)
    )
    raise ValidationError(
        f"{field}: {what} has no place in an OpenAI-shaped session; use SystemMessage, "
        "HumanMessage, AIMessage, ToolMessage or a ChatMessage with role "
        f"{', '.join(sorted(_CHAT_ROLES))}",
        field=f"{field}.role",
    )


def _content(content: Any, extras: dict[str, Any], field: str) -> str:
    """The text of a message's content; a list of content blocks is also kept whole."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                texts.append(text)
    extras["content"] = list(content)
    return "\n".join(texts)


def _openai_call(call: Mapping[str, Any], field: str) -> dict[str, Any]:
    """LangChain's ``{"name", "args", "id"}`` as OpenAI's ``{"id", "type": "function",
    "function": {"name", "arguments"}}``."""
    if not call.get("id"):
        raise ValidationError(
            f"{field}.id: a tool call needs an id (the tool message answers it by id)",
            field=f"{field}.id",
        )
    try:
        arguments = json.dumps(call.get("args") or {}, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{field}.args: not JSON ({exc})", field=f"{field}.args") from exc
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": call.get("name"), "arguments": arguments},
    }


def _langchain_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's call as LangChain's ``tool_call``; arguments that are not a JSON object make
    an ``invalid_tool_call`` (as LangChain's own OpenAI parser does)."""
    function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
    assert isinstance(function, Mapping)
    name, raw, call_id = function.get("name"), function.get("arguments"), call.get("id")
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError as exc:
        return {
            "type": "invalid_tool_call",
            "name": name,
            "args": raw,
            "id": call_id,
            "error": f"arguments are not JSON: {exc}",
        }
    if not isinstance(args, dict):
        return {
            "type": "invalid_tool_call",
            "name": name,
            "args": raw,
            "id": call_id,
            "error": "arguments are not a JSON object",
        }
    return {"type": "tool_call", "name": name, "args": args, "id": call_id}
