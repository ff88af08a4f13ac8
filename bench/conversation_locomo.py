"""LoCoMo dev through the conversation layer, for bench/bench_conversation.py (``--locomo``):
the prompt tokens of the whole history, SummaryBuffer, SmartContextManager with recall and
TokenBuffer at the conversation's end, and which evidence turns each context contains.

Each conversation is a searchable session played turn by turn (speaker A as the user, B as the
assistant), with a SummaryBuffer load and a manager build after every turn, as a chat
application would. How a turn counts as contained is in :func:`contained`. No LLM: summaries
are extractive. No setting is tuned on these questions.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo

import synapsedb
from synapsedb.conversation import Message, Sessions
from synapsedb.conversation.context import SmartContextManager
from synapsedb.conversation.strategies import SummaryBuffer, TokenBuffer
from synapsedb.conversation.summary import Summarizer
from synapsedb.conversation.tokens import count_message_tokens

MODEL = "gpt-4o"  # o200k_base: exact counts (bpe-openai, the tokens extra)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")  # the extractive summarizer's sentence split
CONTEXTS = ("whole", "summarybuffer", "manager", "tokenbuffer")


def norm(text: str) -> str:
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    return [s for s in (norm(p) for p in _SENTENCE_END.split(text)) if s]


def contained(turn: str, context: str) -> tuple[bool, bool]:
    """(the turn is in the context: verbatim, or every one of its sentences verbatim; at least
    one of its sentences of >= 4 words is). ``context`` is whitespace-normalised."""
    parts = sentences(turn)
    whole = norm(turn) in context or all(s in context for s in parts)
    return whole, whole or any(s in context for s in parts if len(s.split()) >= 4)


def text_of(messages: Sequence[Any]) -> str:
    return norm("\n".join(m["content"] if isinstance(m, dict) else m.content for m in messages))


@dataclass
class Scores:
    """Per question: tokens and evidence shares of each context."""

    conv: list[str] = field(default_factory=list)
    category: list[int] = field(default_factory=list)
    tokens: dict[str, list[int]] = field(default_factory=lambda: {c: [] for c in CONTEXTS})
    full: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CONTEXTS})
    part: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CONTEXTS})
    in_memories: list[float] = field(default_factory=list)  # of the manager's, in its memories
    tiers: list[dict[str, int]] = field(default_factory=list)

    def add(self, ctx: str, tokens: int, evidence: Sequence[str], text: str) -> None:
        hits = [contained(e, text) for e in evidence]
        self.tokens[ctx].append(tokens)
        self.full[ctx].append(sum(h[0] for h in hits) / len(hits))
        self.part[ctx].append(sum(h[1] for h in hits) / len(hits))

    def mean(self, values: Sequence[float], mask: np.ndarray | None = None) -> float:
        arr = np.asarray(values, dtype=float)
        return float(arr[mask].mean() if mask is not None else arr.mean())


def play(db: Any, conv: locomo.Conversation, scores: Scores, stride: int) -> dict[str, float]:
    """One conversation played turn by turn, then its questions scored at the end."""
    ns = db.namespace(f"locomo-{conv.name}")
    sid = f"locomo-{conv.name}"
    entity = f"session:{sid}"
    sessions = Sessions(ns, searchable=True)
    summary_buffer = SummaryBuffer(sessions, Summarizer(model=MODEL), max_tokens=2000, model=MODEL)
    ctx = SmartContextManager(
        max_recent_tokens=2000, max_search_tokens=2000, max_total_tokens=4000, model=MODEL
    )
    user = conv.turns[0].speaker
    spent = {"append": 0.0, "summarybuffer": 0.0, "build": 0.0, "recall": 0.0}
    for t in conv.turns:
        role = "user" if t.speaker == user else "assistant"
        clock = time.perf_counter()
        sessions.append(sid, (role, t.content))
        spent["append"] += time.perf_counter() - clock
        clock = time.perf_counter()
        summary_buffer.load(sid)
        spent["summarybuffer"] += time.perf_counter() - clock
        clock = time.perf_counter()
        ctx.add(role, t.content)
        ctx.build()
        spent["build"] += time.perf_counter() - clock
    history = sessions.load(sid)
    if [m.content for m in history] != [t.content for t in conv.turns]:
        raise SystemExit(f"{conv.name}: the session does not read back as played")
    fixed = {
        "whole": history,
        "summarybuffer": summary_buffer.load(sid),
        "tokenbuffer": TokenBuffer(sessions, max_tokens=4000, model=MODEL).load(sid),
    }
    assert isinstance(fixed["summarybuffer"][0], Message) and fixed["summarybuffer"][0].metadata
    fixed_text = {k: text_of(v) for k, v in fixed.items()}
    fixed_tokens = {k: count_message_tokens(v, MODEL) for k, v in fixed.items()}
    for q in conv.questions[::stride]:
        evidence = [conv.turns[r].content for r in q.evidence]
        scores.conv.append(conv.name)
        scores.category.append(q.category)
        for k in fixed:
            scores.add(k, fixed_tokens[k], evidence, fixed_text[k])
        clock = time.perf_counter()
        recalled = ns.recall(q.text, entity=entity, budget_tokens=2000)
        spent["recall"] += time.perf_counter() - clock
        ctx.set_memories(recalled)
        built = ctx.build()
        stats = ctx.last_build
        assert stats is not None and stats.folded == 0 and stats.exact
        tokens = count_message_tokens(built, MODEL)
        assert tokens == stats.tokens["total"] <= 4000, (tokens, stats.tokens)
        scores.add("manager", tokens, evidence, text_of(built))
        scores.tiers.append(dict(stats.tokens))
        memories = norm("\n".join(m.content for m in recalled.memories[: stats.kept]))
        scores.in_memories.append(sum(contained(e, memories)[0] for e in evidence) / len(evidence))
    return spent


def part_locomo(root: Path, convs: Sequence[locomo.Conversation], stride: int) -> list[str]:
    db = synapsedb.open(root / "locomo", llm=None, durability="os")
    scores = Scores()
    spent: dict[str, float] = {}
    t0 = time.perf_counter()
    for conv in convs:
        for k, v in play(db, conv, scores, stride).items():
            spent[k] = spent.get(k, 0.0) + v
        print(f"  played {conv.name}: {len(conv.turns)} turns", flush=True)
    db.close()
    elapsed = time.perf_counter() - t0
    if min(scores.full["whole"]) < 1.0:
        raise SystemExit("an evidence turn is missing from the whole history")
    n_turns = sum(len(c.turns) for c in convs)
    names = [c.name for c in convs]
    conv_arr = np.asarray(scores.conv)

    def cell(ctx: str, mask: np.ndarray | None, summary: bool = False) -> str:
        tok = scores.mean(scores.tokens[ctx], mask)
        full = scores.mean(scores.full[ctx], mask)
        if summary:
            return f"{tok:,.0f} | {full:.3f} ({scores.mean(scores.part[ctx], mask):.3f})"
        return f"{tok:,.0f} | {full:.3f}"

    lines = [
        f"{len(convs)} conversations, {n_turns:,} turns, {len(scores.conv)} questions "
        f"(categories 1-4{'' if stride == 1 else f', every {stride}th'}; "
        f"{sum(c.skipped for c in convs)} skipped: no evidence id maps to a turn). Each "
        "conversation is a searchable session (MiniLM, durability os) played turn by turn "
        "(speaker A user, B assistant; content `Speaker: text [image: caption]`, as in "
        "bench_quality; the sessions' dates are in none of the contexts), with a "
        "SummaryBuffer load and a manager build after every turn. Contexts at the "
        'conversation\'s end, tokens as `count_message_tokens(.., "gpt-4o")` (o200k_base, '
        "exact, per-message overhead and reply priming included; the question not included):",
        "",
        "- **whole**: every turn;",
        '- **SummaryBuffer 2,000**: `SummaryBuffer(sessions, Summarizer(model="gpt-4o"), '
        "max_tokens=2000)`, extractive summary (300 tokens at most, the default) + newest turns;",
        "- **manager 4,000**: `SmartContextManager(max_recent_tokens=2000, max_search_tokens=2000, "
        "max_total_tokens=4000)` fed every turn, summary tier at its default 1,000, "
        "`set_memories(ns.recall(question, entity=session, budget_tokens=2000))` (recall's "
        "defaults: k 10, threshold 0.6);",
        "- **TokenBuffer 4,000** (reference: recent turns only, no memory).",
        "",
        "Evidence recall: the share of a question's evidence turns the context contains, mean "
        "over questions; a turn is contained when its text is in the context verbatim, or when "
        "each of its sentences is (how the extractive summary holds a turn). In parentheses for "
        "the summary: turns with at least one sentence of >= 4 words in it.",
        "",
        "| conversation | turns | questions | whole: tokens | recall | SummaryBuffer 2,000: "
        "tokens | recall (any sentence) | manager 4,000: tokens | recall | TokenBuffer 4,000: "
        "tokens | recall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for conv, name in zip(convs, names, strict=True):
        mask = conv_arr == name
        lines.append(
            f"| {name} | {len(conv.turns)} | {int(mask.sum())} | {cell('whole', mask)} | "
            f"{cell('summarybuffer', mask, True)} | {cell('manager', mask)} | "
            f"{cell('tokenbuffer', mask)} |"
        )
    lines.append(
        f"| **all** | {n_turns:,} | {len(scores.conv)} | {cell('whole', None)} | "
        f"{cell('summarybuffer', None, True)} | {cell('manager', None)} | "
        f"{cell('tokenbuffer', None)} |"
    )
    cats = np.asarray(scores.category)
    lines += [
        "",
        "| category | questions | SummaryBuffer 2,000 recall | manager 4,000 recall | of which "
        "in its memories | TokenBuffer 4,000 recall |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c, label in locomo.CATEGORIES.items():
        mask = cats == c
        if not mask.any():
            continue
        lines.append(
            f"| {c} {label} | {int(mask.sum())} | {scores.mean(scores.full['summarybuffer'], mask):.3f} "
            f"| {scores.mean(scores.full['manager'], mask):.3f} "
            f"| {scores.mean(scores.in_memories, mask):.3f} "
            f"| {scores.mean(scores.full['tokenbuffer'], mask):.3f} |"
        )
    tiers = {k: float(np.mean([t[k] for t in scores.tiers])) for k in scores.tiers[0]}
    whole = scores.mean(scores.tokens["whole"])
    lines += [
        "",
        "The manager's prompts, mean tokens per tier: "
        + ", ".join(f"{k} {v:,.0f}" for k, v in tiers.items())
        + f". Against the whole history ({whole:,.0f} tokens on average), the SummaryBuffer "
        f"prompt is {scores.mean(scores.tokens['summarybuffer']) / whole:.1%} of it and the "
        f"manager's {scores.mean(scores.tokens['manager']) / whole:.1%}.",
        "",
        f"Time ({elapsed:.0f} s in all): appends (embedding included) "
        f"{spent['append']:.1f} s, a SummaryBuffer load after every turn {spent['summarybuffer']:.1f} s, "
        f"a manager build after every turn {spent['build']:.1f} s, recall {spent['recall']:.1f} s.",
    ]
    return lines
