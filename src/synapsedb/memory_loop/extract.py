"""Extraction: from a window of conversation turns to typed candidate memories, with an LLM.

The model sees the turns numbered and dated, and answers one JSON object matching
:data:`SCHEMA` (structured output: even a small model yields a valid shape). Everything it
says is then checked again here: a type outside the four, an empty text, a turn number that
does not exist, a confidence out of range, a date that does not parse. What cannot be repaired
is dropped, never stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Protocol

from .settings import MEMORY_TYPES, LoopSettings
from .when import resolve

__all__ = ["SCHEMA", "Candidate", "Turn", "answer_tokens", "candidates", "prompt"]

MAX_CONTENT = 2000  # characters kept of one extracted memory
ITEM_TOKENS = 48  # one extracted memory's JSON besides its content: keys, type, dates, turns
ENVELOPE_TOKENS = 16  # the answer's object and list around the memories

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "memories": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": list(MEMORY_TYPES)},
                    "content": {"type": "string"},
                    "entity": {"type": ["string", "null"]},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "valid_from": {"type": ["string", "null"]},
                    "source_turns": {"type": "array", "items": {"type": "integer"}},
                },
                "required": [
                    "type",
                    "content",
                    "entity",
                    "confidence",
                    "valid_from",
                    "source_turns",
                ],
                "additionalProperties": False,
            },
        }
    },
    "required": ["memories"],
    "additionalProperties": False,
}

SYSTEM = """You extract long-term memories about {entity} from a conversation.
Types:
- fact: something true about them or their world (names, numbers, plans, possessions, budgets).
- preference: what they like, dislike or want.
- procedure: how they want things done, steps or rules to follow.
- episode: something that happened to them, with when.
Write each memory as one short self-contained sentence that names its subject (e.g. "The user's \
budget for the Hawaii trip is $3000"). valid_from is the date it became true as YYYY-MM-DD, \
resolved against the date of the turn it comes from ("last week" said on 2025-10-24 is \
2025-10-17), or null if the conversation does not say. source_turns are the numbers of the \
turns it comes from. confidence is 0 to 1. Greetings, thanks and small talk give no memory. \
Answer {{"memories": []}} when there is nothing worth remembering.
Example conversation:
[1] 2025-10-24 user: I moved to Berlin last week and I love jazz.
Example answer:
{{"memories": [{{"type": "fact", "content": "The user lives in Berlin", "entity": null, "confidence": 0.9, "valid_from": "2025-10-17", "source_turns": [1]}}, {{"type": "preference", "content": "The user loves jazz", "entity": null, "confidence": 0.9, "valid_from": null, "source_turns": [1]}}]}}"""


class Chat(Protocol):
    def chat_json(
        self,
        messages: Sequence[dict[str, Any]],
        schema: dict[str, Any],
        *,
        name: str,
        max_tokens: int | None = ...,
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Turn:
    """One stored turn: its stream event id, role, text and when it was said."""

    id: str
    role: str
    content: str
    ts: datetime


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory proposed by extraction (or given by the caller), before conflict resolution."""

    type: str
    content: str
    entity: str
    confidence: float
    source_turns: tuple[str, ...]
    valid_from: date | None
    said_at: datetime


def turn_memory_id(stream: str, event_id: str) -> str:
    """The id of a turn's searchable memory: fixed by its stream and event id, so indexing a
    job twice (a worker died in between) writes nothing new."""
    digest = hashlib.blake2s(stream.encode(), digest_size=6).hexdigest()
    return f"turn-{digest}-{event_id}"


def prompt(turns: Sequence[Turn], entity: str) -> list[dict[str, Any]]:
    lines = [
        f"[{i}] {t.ts.date().isoformat()} {t.role}: {t.content}" for i, t in enumerate(turns, 1)
    ]
    return [
        {"role": "system", "content": SYSTEM.format(entity=entity)},
        {"role": "user", "content": "Conversation:\n" + "\n".join(lines)},
    ]


def candidates(
    answer: dict[str, Any], turns: Sequence[Turn], entity: str, settings: LoopSettings
) -> list[Candidate]:
    """The usable memories of an extraction answer (already schema-checked by the client)."""
    out: list[Candidate] = []
    for item in answer.get("memories", [])[: settings.max_candidates]:
        if not isinstance(item, dict) or item.get("type") not in MEMORY_TYPES:
            continue
        content = " ".join(str(item.get("content") or "").split())[:MAX_CONTENT]
        confidence = item.get("confidence")
        if not content or not isinstance(confidence, int | float):
            continue
        confidence = min(1.0, max(0.0, float(confidence)))
        if confidence < settings.min_confidence:
            continue
        nums = [n for n in item.get("source_turns") or [] if isinstance(n, int)]
        used = [turns[n - 1] for n in nums if 1 <= n <= len(turns)]
        if not used:  # no usable pointer: the user's turns of the window are the source
            used = [t for t in turns if t.role == "user"] or list(turns)
        said_at = used[0].ts
        when = resolve(item.get("valid_from"), said_at) or resolve(content, said_at)
        # always the conversation's entity: the model's "entity" is never trusted to name
        # another one (a conversation must not write into another user's memory)
        out.append(
            Candidate(
                item["type"],
                content,
                entity,
                confidence,
                tuple(dict.fromkeys(t.id for t in used)),
                when,
                said_at,
            )
        )
    return out


def answer_tokens(settings: LoopSettings) -> int:
    """The ``max_tokens`` of an extraction call: what :data:`SCHEMA` can need, ``max_candidates``
    memories of at most MAX_CONTENT characters (4 per token) with their fields, and never more
    than ``settings.max_tokens`` (a small model under grammar-constrained decoding can loop
    inside a string until it is stopped: 4,056 tokens from SmolLM2 when nothing was set)."""
    need = ENVELOPE_TOKENS + settings.max_candidates * (ITEM_TOKENS + MAX_CONTENT // 4)
    return max(1, min(settings.max_tokens, need))


def extract(
    llm: Chat, turns: Sequence[Turn], entity: str, settings: LoopSettings
) -> list[Candidate]:
    """Ask the model, then keep what survives the checks. Raises UpstreamError when the model
    cannot be reached or never answers the schema (the job is retried later)."""
    answer = llm.chat_json(
        prompt(turns, entity), SCHEMA, name="memories", max_tokens=answer_tokens(settings)
    )
    return candidates(answer, turns, entity, settings)
