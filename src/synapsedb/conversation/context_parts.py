"""The pieces :class:`~synapsedb.conversation.context.SmartContextManager` assembles: retrieved
items ranked by relevance, text cut to a token budget, and the Anthropic rendering.

Kept apart from the manager so each stays readable: nothing here holds state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from ..errors import ValidationError

__all__ = [
    "CACHE_CONTROL",
    "CONTINUATION",
    "Item",
    "cut_to",
    "items_of",
    "render_retrieved",
    "to_anthropic",
]

CACHE_CONTROL = {"type": "ephemeral"}  # Anthropic prompt caching: cache up to this block
# Anthropic's messages must begin with a user turn; when the kept turns begin with the
# assistant's, this stands in front of them (and is counted in the recent tier's budget)
CONTINUATION = "(The conversation continues from the summary above.)"
MAX_ITEM_CHARS = 32_768  # one retrieved item; a whole search block may be longer


@dataclass(frozen=True, slots=True)
class Item:
    """One retrieved memory or search result. ``rank`` is its place by relevance within its
    source (0 = most relevant); ``score`` the source's own score, when it gave one."""

    source: str  # "memories" or "search"
    rank: int
    text: str
    score: float | None = None
    ts: datetime | None = None
    id: str | None = None
    block: bool = False  # a whole block of text (set_search_results("...")), shown as given

    def line(self) -> str:
        """How the item reads in the prompt: one bullet, or a block as given."""
        if self.block:
            return self.text
        date = f"[{self.ts.date().isoformat()}] " if self.ts is not None else ""
        return f"- {date}{self.text}"


def _text_and_score(value: Any, field: str) -> tuple[str, float | None, datetime | None, Any]:
    """(text, score, ts, id) of a string, a ``(text, score)`` pair, a dict with ``content``
    or ``text`` (and ``score``/``similarity``), or an object with ``content`` (a Hit, a
    Recollection: its ``similarity`` when it has one, else its ``score``)."""
    if isinstance(value, str):
        return value, None, None, None
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return value[0], _score(value[1], f"{field}[1]"), None, None
    if isinstance(value, Mapping):
        text = value.get("content", value.get("text"))
        score = value.get("similarity", value.get("score"))
        ts = value.get("ts")
        ident = value.get("id")
    elif hasattr(value, "content"):
        text = value.content
        score = getattr(value, "similarity", getattr(value, "score", None))
        ts = getattr(value, "ts", None)
        ident = getattr(value, "id", None)
    else:
        raise ValidationError(
            f"{field}: expected a string, a (text, score) pair, a dict with content or a hit, "
            f"got {type(value).__name__}",
            field=field,
        )
    if not isinstance(text, str):
        raise ValidationError(f"{field}.content: expected a string", field=f"{field}.content")
    return (
        text,
        None if score is None else _score(score, f"{field}.score"),
        ts if isinstance(ts, datetime) else None,
        ident,
    )


def _score(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValidationError(f"{field}: expected a number, got {value!r}", field=field)
    return float(value)


def items_of(value: Any, source: str, field: str) -> list[Item]:
    """``value`` as items of ``source``, most relevant first.

    A :class:`~synapsedb.types.Recalled` gives its memories (ranked by ``similarity``); a
    :class:`~synapsedb.types.QueryResult` its hits; a string one block. A list is ranked by
    its items' scores when every item has one (ties keep the given order), else taken as
    given: most relevant first, as every query returns them.
    """
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        return [Item(source, 0, text, block=True)] if text else []
    if hasattr(value, "memories") and hasattr(value, "needed"):  # Recalled
        value = list(value.memories)
    elif hasattr(value, "hits") and hasattr(value, "query_id"):  # QueryResult
        value = list(value.hits)
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise ValidationError(
            f"{field}: expected a string, a list of strings or hits, or a Recalled, "
            f"got {type(value).__name__}",
            field=field,
        )
    parsed = []
    for i, v in enumerate(value):
        text, score, ts, ident = _text_and_score(v, f"{field}[{i}]")
        text = " ".join(text.split())
        if len(text) > MAX_ITEM_CHARS:
            raise ValidationError(
                f"{field}[{i}]: {len(text)} characters, over the limit of {MAX_ITEM_CHARS}",
                field=f"{field}[{i}]",
                limit=MAX_ITEM_CHARS,
            )
        if text:
            parsed.append((text, score, ts, ident))
    if parsed and all(p[1] is not None for p in parsed):
        order = sorted(range(len(parsed)), key=lambda i: -(parsed[i][1] or 0.0))
        parsed = [parsed[i] for i in order]
    return [
        Item(source, rank, text, score, ts, None if ident is None else str(ident))
        for rank, (text, score, ts, ident) in enumerate(parsed)
    ]


HEADERS = {"memories": "Relevant memories (most relevant first):", "search": "Search results:"}


def render_retrieved(items: Sequence[Item]) -> str:
    """The retrieved tier's text: memories, then search results, each in relevance order."""
    parts = []
    for source, header in HEADERS.items():
        lines = [it.line() for it in sorted(items, key=lambda it: it.rank) if it.source == source]
        if lines:
            parts.append(header + "\n" + "\n".join(lines))
    return "\n\n".join(parts)


def cut_to(text: str, budget: int, cost: Any) -> str:
    """The longest word prefix of ``text`` (plus `` ...``) for which ``cost(prefix)`` is at
    most ``budget``; ``""`` when not even one word fits."""
    if cost(text) <= budget:
        return text
    words = text.split(" ")
    lo, hi = 0, len(words) - 1
    while lo < hi:  # the most words that fit
        mid = (lo + hi + 1) // 2
        if cost(" ".join(words[:mid]) + " ...") <= budget:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + " ..." if lo else ""


# -- Anthropic ----------------------------------------------------------------------------------


def _tool_use(call: Mapping[str, Any]) -> dict[str, Any]:
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        fn = {}
    args = fn.get("arguments", "{}")
    try:
        data = orjson.loads(args) if isinstance(args, str) else args
    except orjson.JSONDecodeError:
        data = {"arguments": args}  # not JSON: Anthropic's input must be an object
    if not isinstance(data, dict):
        data = {"value": data}
    return {
        "type": "tool_use",
        "id": str(call.get("id", "")),
        "name": str(fn.get("name", "")),
        "input": data,
    }


def _blocks(message: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """(Anthropic role, content blocks) of one OpenAI-shaped message."""
    role, content = message["role"], message.get("content") or ""
    if role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": str(message.get("tool_call_id") or ""),
        }
        if content:
            block["content"] = content
        return "user", [block]
    blocks = [{"type": "text", "text": content}] if content else []
    if role == "assistant":
        blocks += [_tool_use(c) for c in message.get("tool_calls") or ()]
    return role, blocks


def to_anthropic(
    system: str | None,
    summary: str | None,
    retrieved: str | None,
    messages: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """``{"system": [...], "messages": [...]}`` for Anthropic's Messages API.

    The system prompt and the summary are text blocks with ``cache_control`` ephemeral (they
    change rarely: a cached prefix); the retrieved tier follows them without it (it changes
    every turn). Messages alternate user/assistant: consecutive turns of one role (a user's two
    messages, tool results, which Anthropic takes in a user turn) are merged into one turn of
    content blocks. A message's ``name`` has no Anthropic field and is left out.
    """
    blocks: list[dict[str, Any]] = []
    for text, cached in ((system, True), (summary, True), (retrieved, False)):
        if text:
            block: dict[str, Any] = {"type": "text", "text": text}
            if cached:
                block["cache_control"] = dict(CACHE_CONTROL)
            blocks.append(block)
    turns: list[dict[str, Any]] = []
    for message in messages:
        role, content = _blocks(message)
        if not content:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(content)
        else:
            turns.append({"role": role, "content": content})
    for turn in turns:  # a lone text block reads as a plain string
        if len(turn["content"]) == 1 and turn["content"][0]["type"] == "text":
            turn["content"] = turn["content"][0]["text"]
    return {"system": blocks, "messages": turns}
