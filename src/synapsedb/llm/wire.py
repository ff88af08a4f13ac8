"""OpenAI's chat-completions wire format: what a request carries and what an answer means,
independent of how it is sent (the sync and async clients share every line of it).

Covers request bodies (plain and for each structured-output mode), reply parsing into
:class:`ChatReply`, upstream error bodies, ``Retry-After``, pulling one JSON object out of a
model's text, the repair prompt, and redacting secrets from anything shown to a person.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import UpstreamError, ValidationError
from .schema import validate

__all__ = ["ChatReply", "Usage"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
FORMAT_WORDS = {  # what a refusal of each structured-output mode mentions
    "json_schema": ("response_format", "json_schema"),
    "json_object": ("response_format", "json_object"),
}
FALLBACK = {"json_schema": "json_object", "json_object": "prompt"}
MAX_SHOWN = 300  # characters of an upstream body quoted in an error
MAX_REPAIR_ECHO = 16_000  # characters of an invalid answer sent back for repair


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the endpoint reported (0 when it reported none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One answer from ``POST /chat/completions``: the first choice's text (``""`` if it had
    none), the model that answered, why it stopped (``stop``, ``length`` ...), the usage, the
    model's refusal text when it declined (structured outputs), and the decoded body."""

    content: str
    model: str
    finish_reason: str | None
    usage: Usage
    raw: dict[str, Any] = field(repr=False)
    refusal: str | None = None


# -- requests ----------------------------------------------------------------------------------


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """The messages as plain dicts, or a ValidationError naming the first bad one."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise ValidationError("messages: expected a non-empty list of messages", field="messages")
    out = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, Mapping):
            raise ValidationError(f"{where}: expected an object with role and content", field=where)
        if msg.get("role") not in ROLES:
            raise ValidationError(
                f"{where}.role: expected one of {', '.join(sorted(ROLES))}, got {msg.get('role')!r}",
                field=f"{where}.role",
            )
        content = msg.get("content")
        if content is not None and not isinstance(content, str | list):
            raise ValidationError(
                f"{where}.content: expected a string or a list of parts", field=f"{where}.content"
            )
        out.append(dict(msg))
    return out


def chat_body(
    model: str,
    messages: list[dict[str, Any]],
    *,
    temperature: float,
    max_tokens: int | None,
    stop: str | Sequence[str] | None,
    response_format: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of a non-streaming chat request (no ``model`` key when ``model`` is empty:
    single-model servers such as llama.cpp's answer with theirs)."""
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise ValidationError("temperature: expected a number", field="temperature")
    if not math.isfinite(temperature) or not 0 <= temperature <= 2:
        raise ValidationError(
            f"temperature: expected 0 to 2, got {temperature!r}", field="temperature", limit=2
        )
    body: dict[str, Any] = {"messages": messages, "temperature": temperature}
    if model:
        body["model"] = model
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValidationError(
                f"max_tokens: expected a positive integer, got {max_tokens!r}", field="max_tokens"
            )
        body["max_tokens"] = max_tokens
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else list(stop)
        if not stops or not all(isinstance(s, str) and s for s in stops):
            raise ValidationError("stop: expected a string or a list of strings", field="stop")
        body["stop"] = stops
    if response_format is not None:
        body["response_format"] = response_format
    return body


def encode(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, allow_nan=False).encode()


def check_schema_name(name: Any) -> str:
    if not isinstance(name, str) or not SCHEMA_NAME.match(name):
        raise ValidationError(
            f"name: expected 1 to 64 letters, digits, '_' or '-', got {name!r}", field="name"
        )
    return name


def structured(
    messages: list[dict[str, Any]], schema: Mapping[str, Any], name: str, mode: str
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The messages and ``response_format`` that ask for JSON matching ``schema`` in ``mode``:

    - ``json_schema``: the endpoint constrains the answer (``strict``); messages unchanged.
    - ``json_object``: the endpoint guarantees some JSON object; the schema goes in the
      system prompt, and in ``response_format.schema`` too, which servers built on llama.cpp
      (llama-cpp-python, llama.cpp's server) turn into a grammar (others ignore it).
    - ``prompt``: no ``response_format`` at all; the system prompt asks for the bare object.
    """
    if mode == "json_schema":
        fmt = {"name": name, "schema": dict(schema), "strict": True}
        return messages, {"type": "json_schema", "json_schema": fmt}
    text = (
        f"Answer with one JSON object that matches this JSON schema (named {name}):\n"
        f"{json.dumps(schema, ensure_ascii=False)}"
    )
    if mode == "prompt":
        text += "\nReply with the JSON object only: no text before or after it, no code fences."
    if mode == "json_object":
        return _with_system(messages, text), {"type": "json_object", "schema": dict(schema)}
    return _with_system(messages, text), None


def _with_system(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """``text`` appended to the leading system message (or a new one in front)."""
    first = messages[0]
    if first["role"] in ("system", "developer") and isinstance(first.get("content"), str):
        return [{**first, "content": f"{first['content']}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def repair(messages: list[dict[str, Any]], answer: str, problem: str) -> list[dict[str, Any]]:
    """The conversation for the one repair try: the invalid answer and what is wrong with it."""
    return [
        *messages,
        {"role": "assistant", "content": answer[:MAX_REPAIR_ECHO]},
        {
            "role": "user",
            "content": f"That answer is not valid: {problem}\n"
            "Answer again with only the corrected JSON object.",
        },
    ]


# -- answers -----------------------------------------------------------------------------------


def parse_reply(raw: bytes) -> ChatReply:
    """A 2xx body as a :class:`ChatReply`; ValueError (with a short reason) if it is not one."""
    try:
        body = json.loads(raw)
        choice = body["choices"][0]
        message = choice.get("message") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise ValueError(f"not a chat completion: {_shown(raw)}") from None
    if not isinstance(message, dict):
        raise ValueError(f"not a chat completion: {_shown(raw)}")
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    refusal = message.get("refusal")
    return ChatReply(
        content=content if isinstance(content, str) else "",
        model=str(body.get("model") or ""),
        finish_reason=choice.get("finish_reason"),
        usage=Usage(**{k: _count(usage.get(k)) for k in Usage.__dataclass_fields__}),
        raw=body,
        refusal=refusal if isinstance(refusal, str) and refusal else None,
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def error_text(raw: bytes) -> str:
    """The message of an error body (OpenAI's ``{"error": {"message"}}`` or the raw text)."""
    try:
        err = json.loads(raw)["error"]
        msg = err["message"] if isinstance(err, dict) else err
        if isinstance(msg, str) and msg:
            return msg[:MAX_SHOWN]
    except (ValueError, KeyError, TypeError):
        pass
    return _shown(raw)


def _shown(raw: bytes) -> str:
    text = raw[:MAX_SHOWN].decode("utf-8", "replace").strip()
    return text or "(empty body)"


def refuses_format(status: int, raw: bytes, mode: str) -> bool:
    """Whether an answer refuses the ``response_format`` of ``mode``, as an older server does
    (a 400 or 422 naming it), rather than refusing our schema (``Invalid schema ...``: the
    caller's to fix) or anything else about the request."""
    if status not in (400, 422) or mode not in FORMAT_WORDS:
        return False
    text = raw.decode("utf-8", "replace").lower()
    if "invalid schema" in text:
        return False
    return any(word in text for word in FORMAT_WORDS[mode])


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the upstream asks us to wait: ``retry-after-ms``, or ``Retry-After`` as seconds
    or an HTTP date (``now`` is the wall clock, Unix seconds). None if absent or malformed."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000
            return value if math.isfinite(value) and value >= 0 else None
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_json(text: str, schema: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object in a model's answer and None, or None and what is wrong with it.
    Tolerates code fences and text around the object (small models add them)."""
    candidates = [text.strip()]
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        candidates.append(fenced.group(1).strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    value: Any = None
    problem = "the answer is empty" if not text.strip() else ""
    for candidate in candidates:
        if not candidate:
            continue
        try:
            value = json.loads(candidate, parse_constant=_reject_constant)
            break
        except ValueError as exc:
            problem = problem or f"not JSON ({exc})"
    else:
        return None, problem
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {type(value).__name__}"
    errors = validate(value, schema)
    return (value, None) if not errors else (None, "; ".join(errors))


# -- secrets -----------------------------------------------------------------------------------


class Redactor:
    """Removes secrets from text: the API key and any password in the base URL (``redact(text)``:
    what the operator's logs show, naming the upstream by :attr:`url`), and also every form of
    the operator's upstream address (``hide``: what a tenant may see, in error messages and in
    the upstream's error bodies passed on). ``[redacted]`` stands for a secret, ``[upstream]``
    for the address."""

    def __init__(self, api_key: str, base_url: str) -> None:
        parts = urlsplit(base_url)
        self._secrets = [s for s in (api_key, parts.password) if s]
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        self.url = urlunsplit((parts.scheme, netloc, parts.path, "", "")) if base_url else ""
        origin = f"{parts.scheme}://{netloc}" if host else ""
        names = {n for n in (base_url, self.url, origin, netloc, parts.netloc) if n}
        names |= {n.rstrip("/") for n in names}
        names |= {n.replace("/", "\\/") for n in names}  # as JSON may write it
        longest = sorted(names, key=len, reverse=True)
        address = "|".join(re.escape(n) for n in longest)
        if host:  # the bare host name, as a whole name (not inside a longer one)
            address += ("|" if address else "") + rf"(?<![\w.-]){re.escape(host)}(?![\w-])"
        self._address = re.compile(address, re.I) if address else None
        self._address_bytes = re.compile(address.encode(), re.I) if address else None

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def hide(self, text: str) -> str:
        """``text`` with the upstream's address and the secrets taken out."""
        if self._address is not None:
            text = self._address.sub("[upstream]", text)
        return self(text)

    def hide_bytes(self, raw: bytes) -> bytes:
        """:meth:`hide` for a body passed on as bytes (UTF-8 or not: only ASCII is replaced)."""
        if self._address_bytes is not None:
            raw = self._address_bytes.sub(b"[upstream]", raw)
        for secret in self._secrets:
            raw = raw.replace(secret.encode(), b"[redacted]")
        return raw


def upstream_error(message: str, redact: Redactor, **details: Any) -> UpstreamError:
    """An UpstreamError whose message a tenant may read: no secret, no upstream address."""
    return UpstreamError(redact.hide(message), **details)
