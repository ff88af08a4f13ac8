"""One chat message, as every conversation store, strategy and context manager passes it.

A :class:`Message` is OpenAI's chat message (``role``, ``content``, optional ``name``,
``tool_calls``, ``tool_call_id``) plus ``metadata`` of the caller's, and two read-only fields a
store fills in: ``id`` (the stream event's id) and ``ts`` (when it was stored). Every Message is
valid: the checks run in ``__post_init__``, so a bad one cannot be built and so never reaches a
store half-written. Errors name the field (``message.role``, ``messages[3].content``) and the
limit.

:meth:`Message.of` takes what callers have at hand: a Message, an OpenAI-style dict (the shape
:meth:`Message.to_dict` gives back), or a ``(role, content)`` tuple.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, TypeAlias

from ..errors import ValidationError
from ..times import to_datetime, to_us

__all__ = [
    "MAX_CONTENT_BYTES",
    "MAX_NAME_CHARS",
    "ROLES",
    "Message",
    "MessageLike",
    "Role",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
MAX_CONTENT_BYTES = 256 * 1024  # a message's text; a store may hold less (the engine: 32 KiB)
MAX_NAME_CHARS = 64  # OpenAI's participant name rule
MAX_ID_CHARS = 256  # a tool call id
MAX_TOOL_CALLS = 128
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# keys of OpenAI's response messages that carry nothing here: accepted when empty
_IGNORED_WHEN_EMPTY = frozenset({"refusal", "annotations", "audio", "function_call"})
_DICT_KEYS = frozenset(
    {"role", "content", "name", "tool_calls", "tool_call_id", "metadata", "id", "ts"}
)


@dataclass(frozen=True, slots=True)
class Message:
    """A chat message. ``content`` may be ``""`` only for an assistant message that makes
    tool calls or for a tool result; ``tool_calls`` only on assistant messages,
    ``tool_call_id`` only on tool messages. ``id`` and ``ts`` are filled by the store."""

    role: Role
    content: str
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    metadata: dict[str, Any] | None = None
    id: str | None = None
    ts: datetime | None = None

    def __post_init__(self) -> None:
        _check(self, "message")

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def system(
        cls, content: str, *, name: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Message:
        return cls("system", content, name=name, metadata=metadata)

    @classmethod
    def user(
        cls, content: str, *, name: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Message:
        return cls("user", content, name=name, metadata=metadata)

    @classmethod
    def assistant(
        cls,
        content: str = "",
        *,
        name: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        return cls("assistant", content, name=name, tool_calls=tool_calls, metadata=metadata)

    @classmethod
    def human(
        cls, content: str, *, name: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Message:
        """A user message, under the name the conversation-store design uses."""
        return cls.user(content, name=name, metadata=metadata)

    @classmethod
    def ai(
        cls,
        content: str = "",
        *,
        name: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """An assistant message, under the name the conversation-store design uses."""
        return cls.assistant(content, name=name, tool_calls=tool_calls, metadata=metadata)

    @classmethod
    def tool(
        cls,
        content: str,
        tool_call_id: str | None = None,
        *,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        return cls("tool", content, name=name, tool_call_id=tool_call_id, metadata=metadata)

    @classmethod
    def of(cls, value: MessageLike, field: str = "message") -> Message:
        """A Message from a Message (returned as is), a dict (``to_dict``'s shape; OpenAI's
        ``content`` as a list of text parts is joined with newlines) or a ``(role, content)``
        tuple. ``field`` names the value in errors (``messages[2]``)."""
        if isinstance(value, Message):
            return value
        if isinstance(value, Mapping):
            return _from_dict(value, field)
        if isinstance(value, tuple) and len(value) == 2:
            role, content = value
            return _build(field, role=role, content=content)
        raise ValidationError(
            f"{field}: expected a Message, a dict with role and content or a (role, content) "
            f"tuple, got {type(value).__name__}",
            field=field,
        )

    def stored(self, id: str, ts: datetime) -> Message:
        """This message as a store returns it: with its event ``id`` and stored time ``ts``."""
        return replace(self, id=id, ts=ts)

    # -- output ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """OpenAI's chat message shape (``role``, ``content``, and ``name``, ``tool_calls``,
        ``tool_call_id`` when set), plus ``id``, ``ts`` (ISO-8601) and ``metadata`` when set.
        :meth:`Message.of` reads it back."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls is not None:
            out["tool_calls"] = [dict(c) for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.id is not None:
            out["id"] = self.id
        if self.ts is not None:
            out["ts"] = self.ts.isoformat()
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        return out

    def to_openai(self) -> dict[str, Any]:
        """Only what OpenAI's chat API accepts: no ``id``, ``ts`` or ``metadata``."""
        out = self.to_dict()
        for k in ("id", "ts", "metadata"):
            out.pop(k, None)
        return out


MessageLike: TypeAlias = Message | Mapping[str, Any] | tuple[str, str]


# -- validation -------------------------------------------------------------------------------


def _from_dict(value: Mapping[str, Any], field: str) -> Message:
    for k, v in value.items():
        if k in _DICT_KEYS or (k in _IGNORED_WHEN_EMPTY and not v):
            continue
        raise ValidationError(
            f"{field}.{k}: unknown message field; allowed: {', '.join(sorted(_DICT_KEYS))}",
            field=f"{field}.{k}",
        )
    if "role" not in value:
        raise ValidationError(f"{field}.role: required", field=f"{field}.role")
    content = value.get("content")
    if content is None and value.get("tool_calls"):  # OpenAI: null content beside tool calls
        content = ""
    if isinstance(content, list):
        content = _join_parts(content, f"{field}.content")
    ts = value.get("ts")
    if ts is not None and not isinstance(ts, datetime):
        ts = to_datetime(to_us(ts, f"{field}.ts"))
    return _build(
        field,
        role=value["role"],
        content=content,
        name=value.get("name"),
        tool_calls=value.get("tool_calls"),
        tool_call_id=value.get("tool_call_id"),
        metadata=value.get("metadata"),
        id=value.get("id"),
        ts=ts,
    )


def _build(field: str, **kwargs: Any) -> Message:
    """Build a Message whose errors name ``field`` (``messages[2].role``) instead of
    ``message``: the checks run once, here, and the dataclass's own run is skipped."""
    msg = object.__new__(Message)
    for k in Message.__dataclass_fields__:
        object.__setattr__(msg, k, kwargs.get(k))
    _check(msg, field)
    return msg


def _join_parts(parts: list[Any], field: str) -> str:
    texts = []
    for i, part in enumerate(parts):
        if not isinstance(part, Mapping) or part.get("type") != "text":
            raise ValidationError(
                f"{field}[{i}]: only text parts ({{'type': 'text', 'text': ...}}) are kept",
                field=f"{field}[{i}]",
            )
        text = part.get("text")
        if not isinstance(text, str):
            raise ValidationError(f"{field}[{i}].text: expected a string", field=f"{field}[{i}]")
        texts.append(text)
    return "\n".join(texts)


def _check(m: Message, field: str) -> None:
    if m.role not in ROLES:
        raise ValidationError(
            f"{field}.role: expected one of {', '.join(ROLES)}, got {m.role!r}",
            field=f"{field}.role",
        )
    _check_content(m, field)
    if m.name is not None and (not isinstance(m.name, str) or not NAME_RE.match(m.name)):
        raise ValidationError(
            f"{field}.name: {m.name!r} must be 1-{MAX_NAME_CHARS} characters of [A-Za-z0-9_-]",
            field=f"{field}.name",
            limit=MAX_NAME_CHARS,
        )
    if m.tool_calls is not None:
        _check_tool_calls(m, f"{field}.tool_calls")
    if m.tool_call_id is not None:
        if m.role != "tool":
            raise ValidationError(
                f"{field}.tool_call_id: only tool messages answer a tool call",
                field=f"{field}.tool_call_id",
            )
        _check_str(m.tool_call_id, f"{field}.tool_call_id", MAX_ID_CHARS)
    if m.metadata is not None:
        if not isinstance(m.metadata, dict):
            raise ValidationError(
                f"{field}.metadata: expected an object, got {type(m.metadata).__name__}",
                field=f"{field}.metadata",
            )
        _check_json(m.metadata, f"{field}.metadata", 0)
    if m.id is not None:
        _check_str(m.id, f"{field}.id", MAX_ID_CHARS)
    if m.ts is not None and not isinstance(m.ts, datetime):
        raise ValidationError(f"{field}.ts: expected a datetime", field=f"{field}.ts")


def _check_content(m: Message, field: str) -> None:
    f = f"{field}.content"
    if not isinstance(m.content, str):
        raise ValidationError(f"{f}: expected a string, got {type(m.content).__name__}", field=f)
    if len(m.content) * 4 > MAX_CONTENT_BYTES:
        size = len(m.content.encode("utf-8", "surrogatepass"))
        if size > MAX_CONTENT_BYTES:
            raise ValidationError(
                f"{f}: {size} bytes, over the limit of {MAX_CONTENT_BYTES}",
                field=f,
                limit=MAX_CONTENT_BYTES,
            )
    if not m.content.strip() and not (m.role == "tool" or (m.role == "assistant" and m.tool_calls)):
        raise ValidationError(
            f"{f}: must not be empty (only an assistant message with tool_calls or a tool "
            "result may have empty content)",
            field=f,
        )


def _check_tool_calls(m: Message, f: str) -> None:
    if m.role != "assistant":
        raise ValidationError(f"{f}: only assistant messages make tool calls", field=f)
    if not isinstance(m.tool_calls, list):
        raise ValidationError(
            f"{f}: expected a list of objects, got {type(m.tool_calls).__name__}", field=f
        )
    if len(m.tool_calls) > MAX_TOOL_CALLS:
        raise ValidationError(
            f"{f}: {len(m.tool_calls)} calls, over the limit of {MAX_TOOL_CALLS}",
            field=f,
            limit=MAX_TOOL_CALLS,
        )
    for i, call in enumerate(m.tool_calls):
        if not isinstance(call, dict):
            raise ValidationError(f"{f}[{i}]: expected an object", field=f"{f}[{i}]")
        _check_json(call, f"{f}[{i}]", 0)


def _check_str(value: Any, f: str, limit: int) -> None:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{f}: expected a non-empty string", field=f)
    if len(value) > limit:
        raise ValidationError(
            f"{f}: {len(value)} characters, over the limit of {limit}", field=f, limit=limit
        )


_MAX_DEPTH = 32


def _check_json(value: Any, f: str, depth: int) -> None:
    """What JSON carries faithfully (the stores keep messages as JSON): no NaN, no non-string
    keys, no other types, at most 32 levels deep."""
    if depth > _MAX_DEPTH:
        raise ValidationError(
            f"{f}: nested deeper than {_MAX_DEPTH} levels", field=f, limit=_MAX_DEPTH
        )
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{f}: {value} is not valid JSON", field=f)
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValidationError(f"{f}: object keys must be strings", field=f)
            _check_json(v, f"{f}.{k}", depth + 1)
        return
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for i, v in enumerate(value):
            _check_json(v, f"{f}[{i}]", depth + 1)
        return
    raise ValidationError(f"{f}: {type(value).__name__} is not a JSON value", field=f)
