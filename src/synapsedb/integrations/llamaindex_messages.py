"""LlamaIndex ``ChatMessage`` to SynapseDB session messages (OpenAI's shape) and back.

| LlamaIndex role | session role |
|---|---|
| ``system``, ``developer`` | ``system`` |
| ``user`` | ``user`` |
| ``assistant``, ``chatbot``, ``model`` | ``assistant`` |
| ``tool``, ``function`` | ``tool`` |

The text blocks, joined with newlines, are the content. An assistant message's
``additional_kwargs["tool_calls"]`` (OpenAI's shape, dicts or the SDK's objects) become its
``tool_calls``, a tool message's ``additional_kwargs["tool_call_id"]`` its ``tool_call_id``.
The rest is kept in ``metadata["llamaindex"]``: the role when it is not the canonical one,
the other ``additional_kwargs``, and the blocks when they are not one text block (images,
tool-call and thinking blocks), so a round trip gives the same ``ChatMessage``. A message
with no text but other blocks is stored with a placeholder naming them (``[image]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock

from ..conversation import Message
from ..errors import ValidationError

__all__ = ["from_llama", "to_llama", "to_openai_text"]

EXTRAS_KEY = "llamaindex"
_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def from_llama(message: Any, field: str = "message") -> Message:
    """The session message for a LlamaIndex ``ChatMessage``; errors name ``field``."""
    if not isinstance(message, ChatMessage):
        raise ValidationError(
            f"{field}: expected a LlamaIndex ChatMessage, got {type(message).__name__}",
            field=field,
        )
    role_value = message.role.value if isinstance(message.role, MessageRole) else message.role
    role = _ROLES.get(str(role_value))
    if role is None:
        raise ValidationError(
            f"{field}.role: {role_value!r} has no session role", field=f"{field}.role"
        )
    extras: dict[str, Any] = {}
    if role_value != role:
        extras["role"] = role_value
    kwargs = {k: _plain(v) for k, v in message.additional_kwargs.items()}
    out: dict[str, Any] = {"role": role}
    if role == "assistant" and kwargs.get("tool_calls"):
        out["tool_calls"] = kwargs.pop("tool_calls")
    if role == "tool" and isinstance(kwargs.get("tool_call_id"), str):
        out["tool_call_id"] = kwargs.pop("tool_call_id")
    if kwargs:
        extras["additional_kwargs"] = kwargs
    texts = [b.text for b in message.blocks if isinstance(b, TextBlock)]
    content = "\n".join(texts)
    if not (len(message.blocks) == 1 and texts):
        extras["blocks"] = [b.model_dump(mode="json") for b in message.blocks]
        if not content.strip() and len(texts) < len(message.blocks):
            kinds = sorted({getattr(b, "block_type", "block") for b in message.blocks})
            content = f"[{', '.join(kinds)}]"
    out["content"] = content
    if extras:
        out["metadata"] = {EXTRAS_KEY: extras}
    return Message.of(out, field)


def to_llama(message: Message) -> ChatMessage:
    """The ``ChatMessage`` for a session message, its ``metadata["llamaindex"]`` restored."""
    meta = message.metadata or {}
    raw = meta.get(EXTRAS_KEY)
    extras: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    kwargs = dict(extras.get("additional_kwargs") or {})
    if message.tool_calls:
        kwargs["tool_calls"] = [dict(c) for c in message.tool_calls]
    if message.tool_call_id is not None:
        kwargs["tool_call_id"] = message.tool_call_id
    role = extras.get("role", message.role)
    if "blocks" in extras:
        return ChatMessage.model_validate(
            {"role": role, "blocks": extras["blocks"], "additional_kwargs": kwargs}
        )
    return ChatMessage(
        role=role, blocks=[TextBlock(text=message.content)], additional_kwargs=kwargs
    )


def to_openai_text(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """The text turns of ``messages`` as OpenAI dicts (``ns.recall``/``ns.remember``'s input):
    system, user and assistant messages with text; tool traffic and empty turns left out."""
    out: list[dict[str, str]] = []
    for m in messages:
        role_value = m.role.value if isinstance(m.role, MessageRole) else str(m.role)
        role = _ROLES.get(role_value)
        text = "\n".join(b.text for b in m.blocks if isinstance(b, TextBlock))
        if role in ("system", "user", "assistant") and text.strip():
            out.append({"role": role, "content": text})
    return out


def _plain(value: Any) -> Any:
    """A pydantic object (the OpenAI SDK's tool call) as its JSON dict; the rest as is (the
    session checks it is JSON)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in cast(Mapping[str, Any], value).items()}
    return value
