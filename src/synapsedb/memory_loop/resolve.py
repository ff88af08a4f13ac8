"""Conflict resolution: each candidate against the entity's most similar current memories.

Decided as ADD / UPDATE / DELETE / NOOP by the LLM when one is configured (one call for the
whole batch), else (and for any candidate the LLM's answer leaves undecided) by the
deterministic similarity policy of :func:`policy`. Applied through the public namespace API:

- ADD writes a memory (metadata: confidence, source_turns, session, valid_from, decision);
- UPDATE writes the new content as a new memory that ``supersedes`` the old one, and gives the
  old one a new version that closes its valid interval (``valid_to``, ``superseded_by``):
  history and ``as_of`` keep what was believed before, ``valid_at`` what was true before;
- DELETE tombstones the old memory (history and ``as_of`` keep it);
- NOOP writes nothing.

Every decision, NOOPs included, is appended (not searchable) to the ``memory-decisions``
stream with its reason, so it is in the audit trail of the entity.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import EmbeddingError, NotFoundError, SynapseError, ValidationError
from ..types import Decision, Hit
from .extract import Candidate, Chat, turn_memory_id
from .settings import MEMORY_TYPES, LoopSettings
from .when import to_datetime

__all__ = [
    "ACTIONS",
    "DECISIONS_STREAM",
    "apply",
    "decide",
    "decision_tokens",
    "neighbours",
    "policy",
]

DECISIONS_STREAM = "memory-decisions"
ACTIONS = ("ADD", "UPDATE", "DELETE", "NOOP")
REASON_CHARS = 500  # characters kept of the model's reason for a decision
DECISION_TOKENS = 24  # one decision's JSON besides its reason: keys, numbers, the action
ENVELOPE_TOKENS = 16  # the answer's object and list around the decisions


def current(now: float) -> dict[str, Any]:
    """The filter of current memories: not superseded by an UPDATE, and not past their
    valid time (``now``: epoch seconds)."""
    return {
        "superseded_by": {"$exists": False},
        "$or": [{"valid_to": {"$exists": False}}, {"valid_to": {"$gt": now}}],
    }


_NEGATION = re.compile(
    r"\b(no longer|not any ?more|anymore|stopped|quit|gave up|cancel+ed|doesn't|does not|"
    r"isn't|is not|never|no more)\b",
    re.I,
)
_VALUE = re.compile(
    r"[$€£]?\d[\d,.:/-]*%?|\b(?:"
    + "|".join(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
            "monday",
            "tuesday",
            "wednesday",
            "thursday",
            "friday",
            "saturday",
            "sunday",
        ]
    )
    + r")\b",
    re.I,
)
_WORD = re.compile(r"[a-z]+")
_TOKEN = re.compile(r"[a-z0-9]+")  # a statement's words and numbers: "$3000" is not "$5000"

DECIDE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "candidate": {"type": "integer"},
                    "action": {"type": "string", "enum": list(ACTIONS)},
                    "target": {"type": ["integer", "null"]},
                    "reason": {"type": "string"},
                },
                "required": ["candidate", "action", "target", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["decisions"],
    "additionalProperties": False,
}

DECIDE_SYSTEM = """You maintain a memory store. For each NEW memory, compare it with the \
EXISTING memories listed under it and decide:
ADD: it is new information.
UPDATE: it changes or refines an existing memory (give its number as target).
DELETE: it says an existing memory is no longer true (give its number as target).
NOOP: an existing memory already says the same (give its number as target).
Give a short reason for each."""


@dataclass(frozen=True, slots=True)
class Near:
    """An existing memory close to a candidate, with its cosine to it (None: keyword match)."""

    hit: Hit
    cosine: float | None


@dataclass(frozen=True, slots=True)
class Verdict:
    action: str
    target: Near | None
    reason: str
    by: str


def neighbours(ns: Any, cand: Candidate, settings: LoopSettings, agent: str | None) -> list[Near]:
    """The entity's current memories of the four types most similar to the candidate."""
    args: dict[str, Any] = dict(
        entity=cand.entity,
        k=settings.neighbours,
        types=MEMORY_TYPES,
        filter=current(now_utc().timestamp()),
        dedup=False,
        explain=True,
        agent=agent,
    )
    try:
        res = ns.query(cand.content, mode="vector", **args)
    except (EmbeddingError, ValidationError) as exc:
        if isinstance(exc, ValidationError) and exc.details.get("field") != "embedding":
            raise
        # embedder down, none configured, or caller-provided vectors only: keyword
        # neighbours, compared by their words
        res = ns.query(cand.content, mode="keyword", **args)
        return [Near(h, None) for h in res.hits]
    except NotFoundError:
        return []
    return [Near(h, float((h.explanation or {}).get("cosine", 0.0))) for h in res.hits]


def _norm(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


def _frame(text: str) -> set[str]:
    """The words of a statement with its values (numbers, dates, amounts) taken out."""
    return set(_WORD.findall(_VALUE.sub(" ", text.lower())))


def policy(cand: Candidate, near: Sequence[Near], settings: LoopSettings) -> Verdict:
    """The deterministic decision: NOOP for the same statement, DELETE for a negation of a
    close memory, UPDATE for the same statement with other values (a number, an amount, a
    date), NOOP for a very close one, otherwise ADD. Negations and changed values are looked
    for before the NOOP cosine: "is $3000" and "is $5000" embed almost alike."""
    for n in near:
        if _norm(n.hit.content) == _norm(cand.content):
            return Verdict("NOOP", n, "the same statement is already stored", "similarity")
    if not near:
        return Verdict("ADD", None, "no similar memory about this entity", "similarity")
    best = max(near, key=lambda n: -1.0 if n.cosine is None else n.cosine)
    cos = best.cosine
    if cos is None:
        return Verdict(
            "ADD", None, "no vector to compare with (embedder unavailable)", "similarity"
        )
    negated = bool(_NEGATION.search(cand.content)) != bool(_NEGATION.search(best.hit.content))
    if negated and cos >= settings.delete_similarity:
        return Verdict("DELETE", best, f"negates a memory (cosine {cos:.2f})", "similarity")
    if cos >= settings.update_similarity:
        a, b = _frame(cand.content), _frame(best.hit.content)
        overlap = len(a & b) / max(1, len(a | b))
        values_differ = set(_VALUE.findall(cand.content.lower())) != set(
            _VALUE.findall(best.hit.content.lower())
        )
        if overlap >= 0.6 and values_differ:
            return Verdict(
                "UPDATE",
                best,
                f"same statement with other values (cosine {cos:.2f}, word overlap {overlap:.2f})",
                "similarity",
            )
    if cos >= settings.noop_similarity:
        return Verdict("NOOP", best, f"cosine {cos:.2f} to an existing memory", "similarity")
    return Verdict("ADD", None, f"nearest memory differs (cosine {cos:.2f})", "similarity")


def decision_tokens(count: int, settings: LoopSettings) -> int:
    """The ``max_tokens`` of a decision call over ``count`` candidates: what
    :data:`DECIDE_SCHEMA` can need, one decision each with a reason of at most REASON_CHARS
    (4 characters per token), and never more than ``settings.max_tokens``."""
    need = ENVELOPE_TOKENS + count * (DECISION_TOKENS + REASON_CHARS // 4)
    return max(1, min(settings.max_tokens, need))


def decide(
    llm: Chat | None,
    cands: Sequence[Candidate],
    nears: Sequence[Sequence[Near]],
    settings: LoopSettings,
) -> list[Verdict]:
    """One verdict per candidate: the LLM's where it gave a usable one, the policy's else."""
    verdicts = [policy(c, n, settings) for c, n in zip(cands, nears, strict=True)]
    if llm is None or not any(nears):
        return verdicts
    blocks = []
    for i, (c, near) in enumerate(zip(cands, nears, strict=True), 1):
        lines = [f"NEW {i} ({c.type}): {c.content}"]
        lines += [f"  EXISTING {j}: {n.hit.content}" for j, n in enumerate(near, 1)]
        if not near:
            lines.append("  (no existing memory)")
        blocks.append("\n".join(lines))
    messages = [
        {"role": "system", "content": DECIDE_SYSTEM},
        {"role": "user", "content": "\n\n".join(blocks)},
    ]
    try:
        answer = llm.chat_json(
            messages,
            DECIDE_SCHEMA,
            name="decisions",
            max_tokens=decision_tokens(len(cands), settings),
        )
    except SynapseError:
        return verdicts  # the policy decides; extraction already succeeded
    for d in answer.get("decisions", []):
        i = d.get("candidate")
        if not isinstance(i, int) or not 1 <= i <= len(cands):
            continue
        action, near, target = d.get("action"), nears[i - 1], d.get("target")
        reason = " ".join(str(d.get("reason") or "").split())[:REASON_CHARS] or "no reason given"
        if action == "ADD":
            verdicts[i - 1] = Verdict("ADD", None, reason, "llm")
        elif action in ACTIONS and isinstance(target, int) and 1 <= target <= len(near):
            verdicts[i - 1] = Verdict(action, near[target - 1], reason, "llm")
    return verdicts


def _closed(meta: dict[str, Any], closes: float) -> dict[str, Any]:
    """``meta`` of a memory replaced at ``closes`` (epoch seconds): its valid time ends then,
    or, when it only began later (a correction: what it said was never true), a microsecond
    after it began. Either way it is no longer valid now, so a query leaves it out."""
    start = meta.get("valid_from")
    if isinstance(start, int | float) and not isinstance(start, bool) and closes <= start:
        closes = start + 1e-6
    return {**meta, "valid_to": closes}


def _supersede_turns(
    ns: Any,
    old: dict[str, Any],
    cand: Candidate,
    now_session: str,
    memory_id: str | None,
    agent: str | None,
    closes: float,
) -> None:
    """The turns the superseded memory came from say what is no longer true: their searchable
    memories are closed and marked superseded too (a new version; history keeps them), so
    neither recall nor a query puts "budget $3000" next to the fact that it is now $5000."""
    session, turns = old.get("session"), old.get("source_turns")
    if not isinstance(session, str) or not isinstance(turns, list):
        return
    for event_id in turns:
        if not isinstance(event_id, str) or (
            session == now_session and event_id in cand.source_turns
        ):  # a turn the new memory also comes from stays current (ids are per stream)
            continue
        mid = turn_memory_id(f"session:{session}", event_id)
        try:
            turn = ns.get(mid)
        except (NotFoundError, ValidationError):  # not indexed (yet), or forgotten
            continue
        if "superseded_by" not in turn.metadata:
            meta = _closed({**turn.metadata, "superseded_by": memory_id}, closes)
            ns.update(mid, {"metadata": meta}, agent=agent)


def _epoch(dt: datetime | None) -> float | None:
    return None if dt is None else dt.timestamp()


def apply(
    ns: Any,
    cand: Candidate,
    verdict: Verdict,
    *,
    session: str,
    agent: str | None,
) -> Decision:
    """Carry out one verdict through the namespace API and log it in the decisions stream."""
    valid_from = to_datetime(cand.valid_from)
    meta: dict[str, Any] = {
        "confidence": round(cand.confidence, 3),
        "source_turns": list(cand.source_turns),
        "session": session,
        "decision": {"action": verdict.action, "reason": verdict.reason, "by": verdict.by},
    }
    if valid_from is not None:
        meta["valid_from"] = valid_from.timestamp()
    memory_id = target_id = None
    if verdict.target is not None:
        target_id = verdict.target.hit.id
    if verdict.action in ("ADD", "UPDATE"):
        if target_id is not None:
            meta["supersedes"] = target_id
        body = {
            "content": cand.content,
            "type": cand.type,
            "metadata": meta,
            "ts": cand.said_at,
            "salience": 0.5 + cand.confidence / 4,
        }
        memory_id = ns.write(cand.entity, body, agent=agent).id
    if verdict.action == "UPDATE" and verdict.target is not None:
        closes = (valid_from or cand.said_at).timestamp()
        old = _closed(dict(verdict.target.hit.metadata), closes)
        old["superseded_by"] = memory_id
        old["decision"] = meta["decision"]
        ns.update(target_id, {"metadata": old}, agent=agent)
        _supersede_turns(ns, old, cand, session, memory_id, agent, closes)
    elif verdict.action == "DELETE" and target_id is not None:
        ns.forget(target_id, agent=agent)
    data = {
        "action": verdict.action,
        "reason": verdict.reason,
        "by": verdict.by,
        "type": cand.type,
        "candidate": cand.content,
        "memory_id": memory_id,
        "target_id": target_id,
        "source_turns": list(cand.source_turns),
        "session": session,
        "confidence": round(cand.confidence, 3),
        "valid_from": _epoch(valid_from),
    }
    label = f"{verdict.action} {cand.type}: {cand.content}"
    ns.append(
        cand.entity,
        {"content": label[:4000], "data": data},
        stream=DECISIONS_STREAM,
        agent=agent,
        searchable=False,
    )
    return Decision(
        verdict.action,
        cand.type,
        cand.content,
        verdict.reason,
        round(cand.confidence, 3),
        memory_id,
        target_id,
        cand.source_turns,
        valid_from,
        verdict.by,
    )


def now_utc() -> datetime:
    return datetime.now(UTC)
