"""Recall: from the last turn of a conversation to a context block of memories.

1. A pre-filter decides whether the turn needs memory at all ("thanks!" does not).
2. The query is rewritten with recent history, so "what's my budget for it?" carries the
   Hawaii trip of the turn before: by the LLM when configured and asked for, else by a
   history-window heuristic (a short or elliptic question borrows the previous user turns).
3. The namespace is queried (hybrid, the entity's current memories: not closed by an UPDATE);
   hits whose calibrated similarity is under the threshold are dropped.
4. What is left is rendered as a context block within the token budget, each memory with its
   id so an answer can cite it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..errors import EmbeddingError, SynapseError, ValidationError
from ..types import Hit, Recalled, Recollection
from ..validation import is_internal_entity
from .extract import Chat
from .render import render, tokens
from .resolve import current
from .settings import LoopSettings

__all__ = ["needs_memory", "recall", "render", "rewrite_heuristic", "similarity", "tokens"]

MAX_QUERY_CHARS = 2000
HELD_CHARS = 2000  # characters of a text compared with what the request holds
_SMALL_TALK = frozenset(
    [
        "thanks",
        "thank",
        "you",
        "thx",
        "ty",
        "ok",
        "okay",
        "k",
        "cool",
        "great",
        "nice",
        "awesome",
        "perfect",
        "sure",
        "yes",
        "yeah",
        "yep",
        "no",
        "nope",
        "bye",
        "goodbye",
        "hi",
        "hello",
        "hey",
        "good",
        "morning",
        "night",
        "evening",
        "got",
        "it",
        "lol",
        "haha",
        "wow",
        "alright",
        "fine",
        "sounds",
        "understood",
        "welcome",
        "cheers",
        "np",
        "so",
        "much",
        "a",
        "lot",
        "very",
        "again",
        "really",
        "all",
        "for",
        "everything",
        "that's",
        "thats",
        "great",
        "help",
    ]
)
_ANAPHORA = frozenset(
    [
        "it",
        "its",
        "that",
        "this",
        "there",
        "they",
        "them",
        "those",
        "these",
        "he",
        "she",
        "him",
        "her",
        "his",
        "hers",
        "one",
        "same",
        "such",
        "then",
    ]
)
_WORD = re.compile(r"[a-z']+")

REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": False,
}
REWRITE_SYSTEM = (
    "Rewrite the user's last message as one standalone search query that names "
    "what it refers to, using the earlier messages. Answer only the query."
)


def similarity(cosine: float, settings: LoopSettings) -> float:
    """The calibrated similarity (0..1) of an embedding cosine (see LoopSettings)."""
    z = settings.calib_a * cosine + settings.calib_b
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def needs_memory(text: str) -> bool:
    """False for turns that only acknowledge, greet or thank: every word is small talk."""
    words = _WORD.findall(text.lower())
    return bool(words) and not all(w in _SMALL_TALK for w in words)


def _content(message: Mapping[str, Any]) -> str:
    c = message.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # OpenAI content parts
        return " ".join(
            p.get("text", "") for p in c if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def as_messages(messages_or_text: Any) -> list[Mapping[str, Any]]:
    if isinstance(messages_or_text, str):
        return [{"role": "user", "content": messages_or_text}]
    if not isinstance(messages_or_text, Sequence) or not messages_or_text:
        raise ValidationError(
            "messages: expected a string or a non-empty list of messages", field="messages"
        )
    for i, m in enumerate(messages_or_text):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise ValidationError(
                f"messages[{i}]: expected an object with a role", field=f"messages[{i}]"
            )
    return list(messages_or_text)


def rewrite_heuristic(messages: Sequence[Mapping[str, Any]], history_turns: int) -> str:
    """The last user turn, preceded by up to ``history_turns`` earlier user turns when it is
    short (under 6 words) or refers back (it, that, there ...)."""
    users = [_content(m) for m in messages if m.get("role") == "user" and _content(m).strip()]
    if not users:
        return ""
    last = users[-1]
    words = _WORD.findall(last.lower())
    if history_turns and len(users) > 1 and (len(words) < 6 or _ANAPHORA & set(words)):
        return " ".join(users[-1 - history_turns :])[-MAX_QUERY_CHARS:]
    return last[-MAX_QUERY_CHARS:]


def _rewrite_llm(llm: Chat, messages: Sequence[Mapping[str, Any]]) -> str:
    window = [
        {"role": str(m.get("role")), "content": _content(m)[-1000:]}
        for m in messages[-6:]
        if m.get("role") in ("user", "assistant")
    ]
    convo = "\n".join(f"{m['role']}: {m['content']}" for m in window)
    answer = llm.chat_json(
        [{"role": "system", "content": REWRITE_SYSTEM}, {"role": "user", "content": convo}],
        REWRITE_SCHEMA,
        name="query",
        max_tokens=200,
    )
    return " ".join(str(answer.get("query", "")).split())[:MAX_QUERY_CHARS]


def _normal(text: str) -> str:
    """A text as compared with what a request holds: case and spacing aside, its start (a
    stored turn may have been cut)."""
    return " ".join(text.casefold().split())[:HELD_CHARS]


def _held(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """What the request already holds: the text of each of its messages (the current turn, a
    response chain's turns, the history a client resends)."""
    return {t for m in messages if (t := _normal(_content(m)))}


def _news(hit: Hit, held: set[str]) -> bool:
    """Whether a hit says something the request does not already hold: not the text of one of
    its messages (the same turn stored earlier, the same question asked before), and not one
    of SynapseDB's own entities."""
    return _normal(hit.content) not in held and not is_internal_entity(hit.entity)


def _turns_of(hit: Hit) -> tuple[tuple[str, str] | None, set[tuple[str, str]]]:
    """A hit's own turn (a turn's searchable memory: its stream and event id) and the turns
    it was extracted from (an extracted memory's ``source_turns`` in its ``session``)."""
    meta = hit.metadata
    stream, event = meta.get("stream"), meta.get("event_id")
    own = (stream, event) if isinstance(stream, str) and isinstance(event, str) else None
    session, turns = meta.get("session"), meta.get("source_turns")
    sources: set[tuple[str, str]] = set()
    if isinstance(session, str) and isinstance(turns, list):
        sources = {(f"session:{session}", t) for t in turns if isinstance(t, str)}
    return own, sources


def recall(
    ns: Any,
    messages_or_text: Any,
    *,
    entity: str | None,
    budget_tokens: int,
    k: int,
    threshold: float,
    settings: LoopSettings,
    llm: Chat | None,
    rewrite: str,
    agent: str | None = None,
) -> Recalled:
    messages = as_messages(messages_or_text)
    last = next((_content(m) for m in reversed(messages) if m.get("role") == "user"), "")
    if not last.strip() or not needs_memory(last):
        return Recalled(False, last, "none")
    how = "heuristic"
    query = ""
    if rewrite == "llm" and llm is not None and len(messages) > 1:
        try:
            query, how = _rewrite_llm(llm, messages), "llm"
        except SynapseError:  # the model is down or confused: the heuristic still works
            query = ""
    if not query:
        query, how = rewrite_heuristic(messages, settings.history_turns), "heuristic"
        if query == last[-MAX_QUERY_CHARS:]:
            how = "none"
    now = datetime.now(UTC).timestamp()
    args: dict[str, Any] = dict(entity=entity, k=k, filter=current(now), explain=True, agent=agent)
    try:
        res = ns.query(query, **args)
        keyword_only = False
    except EmbeddingError:  # embedder down: keyword search still answers
        res = ns.query(query, mode="keyword", **args)
        keyword_only = True
    kept: list[Recollection] = []
    dropped = 0
    held = _held(messages)
    covered: set[tuple[str, str]] = set()  # turns already in the block, as themselves or not
    shown_turns: set[tuple[str, str]] = set()  # turns in the block as themselves
    for h in res.hits:
        ex = h.explanation or {}
        # no query vector (the embedder down, or none configured: cosine is exactly 0 for
        # every hit): a keyword match is kept whatever the threshold
        if keyword_only or "cosine" not in ex or (ex["cosine"] == 0.0 and ex.get("bm25", 0) > 0):
            sim = 1.0 if float(ex.get("bm25", 0.0)) > 0 else 0.0
        else:
            sim = similarity(float(ex["cosine"]), settings)
        if sim < threshold or not _news(h, held):
            dropped += 1
            continue
        own, sources = _turns_of(h)
        # a memory and its own source turn are one item: the first of them in rank order
        if (own is not None and own in covered) or (sources & shown_turns):
            dropped += 1
            continue
        if own is not None:
            covered.add(own)
            shown_turns.add(own)
        covered |= sources
        vf = h.metadata.get("valid_from")
        valid_from = (
            datetime.fromtimestamp(vf, UTC)
            if isinstance(vf, int | float) and not isinstance(vf, bool)
            else None
        )
        kept.append(
            Recollection(
                h.id,
                h.entity,
                h.type,
                h.content,
                round(sim, 4),
                round(h.score, 6),
                h.ts,
                valid_from,
            )
        )
    block, used, shown = render(entity, kept, budget_tokens, settings.max_memories)
    dropped += len(kept) - len(shown)
    return Recalled(True, query, how, tuple(shown), block, used, res.query_id, dropped)
