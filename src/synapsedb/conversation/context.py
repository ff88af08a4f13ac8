"""A prompt assembled within a token budget: SynapseKit's ``SmartContextManager``.

Four tiers, in priority order: the system prompt, the running summary of older turns, the
retrieved memories and search results, and the recent messages verbatim. Each tier has a budget
(``max_system_tokens``, ``max_summary_tokens``, ``max_search_tokens``, ``max_recent_tokens``)
and all of them together one more (``max_total_tokens``, with the reply priming). A budget
counts a tier's messages as OpenAI bills them (:mod:`~synapsedb.conversation.tokens`: exact for
``model``'s OpenAI encoding, else the ``chars_per_token`` estimate), so the tiers' counts add
up to ``count_message_tokens`` of what :meth:`SmartContextManager.build` returns.

Overflow rules, applied at each build:

1. Recent messages over ``max_recent_tokens``: the oldest are folded into the summary (by
   ``cheap_llm``, or extractively without one or when it fails: the summary then says so)
   until the rest fit ``fold_to`` of the budget, so a summary call happens once per half a
   buffer of new turns rather than at every turn. A tool call and its results are folded
   together, and the kept turns start at a user message where they can.
2. Retrieved items over ``max_search_tokens``: the least relevant are dropped first (memories
   and search results are interleaved by rank: their scores are not comparable); a single
   item that does not fit alone is cut at a word boundary.
3. Everything over ``max_total_tokens``: retrieved items are dropped, least relevant first;
   then recent messages are folded into the summary; then the summary is cut. The system
   prompt and the newest message are never cut: if they alone do not fit, the build fails
   with a ValidationError naming the budget.

Output formats: ``"openai"`` (a list of chat messages: the tiers as system messages, then the
turns) and ``"anthropic"`` (``{"system": [blocks], "messages": [...]}``, the system prompt and
summary blocks marked ``cache_control: {"type": "ephemeral"}``, turns alternating user and
assistant). :attr:`SmartContextManager.last_build` tells what each build counted, dropped,
cut and folded.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ValidationError
from .context_parts import CONTINUATION, Item, cut_to, items_of, render_retrieved, to_anthropic
from .messages import Message, MessageLike
from .summary import EXTRACTIVE_NOTE, PREFIX, Summarizer, SummaryState
from .tokens import encoding_for

__all__ = ["ContextStats", "SmartContextManager"]

Format = Literal["openai", "anthropic"]
FORMATS = ("openai", "anthropic")
TIERS = ("system", "summary", "retrieved", "recent")


@dataclass(frozen=True, slots=True)
class ContextStats:
    """What one build did. ``tokens`` per tier (and ``priming``, ``total``) counted as the
    budgets count them; ``exact`` False when those counts are the chars-per-token estimate."""

    format: str
    tokens: dict[str, int]
    budgets: dict[str, int | None]
    kept: int  # retrieved items in the context
    dropped: int  # retrieved items left out (least relevant first)
    folded: int  # messages folded into the summary by this build
    cut: tuple[str, ...]  # tiers whose text was cut to fit ("summary", "retrieved")
    summary_method: str | None  # "llm" or "extractive"; None without a summary
    encoding: str
    exact: bool


def _check_budget(value: Any, name: str, low: int, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValidationError(
            f"{name}: expected an integer >= {low}, got {value!r}", field=name, limit=low
        )
    return value


def _units(roles: Sequence[str]) -> list[int]:
    """Where the turns may start: not at a tool result (its call must come with it)."""
    return [i for i, role in enumerate(roles) if role != "tool"]


class SmartContextManager:
    """Assembles a prompt from the four tiers within their budgets (see the module docstring).

    ``cheap_llm``: a :class:`~synapsedb.llm.ChatClient` (for :meth:`build`) or
    :class:`~synapsedb.llm.AsyncChatClient` (for :meth:`get_messages`) that writes the
    summary; None: extractive summaries. ``model`` picks the tokenizer (exact counts for
    OpenAI's encodings); ``summary_prompt`` replaces the summarizer's instruction. ``format``
    is the default output format. Adding messages is thread-safe; run one build at a time.
    """

    def __init__(
        self,
        cheap_llm: Any = None,
        max_recent_tokens: int = 4000,
        max_search_tokens: int = 2000,
        chars_per_token: float = 4,
        *,
        max_total_tokens: int | None = None,
        max_summary_tokens: int = 1000,
        max_system_tokens: int | None = None,
        model: str | None = None,
        summary_prompt: str | None = None,
        fold_to: float = 0.5,
        format: Format = "openai",
    ) -> None:
        self.counter = encoding_for(model, chars_per_token=chars_per_token)
        self.model = model
        shell = self._cost_of("system", f"{PREFIX}{EXTRACTIVE_NOTE}: ")
        self.max_recent_tokens = _check_budget(max_recent_tokens, "max_recent_tokens", 1)
        self.max_search_tokens = _check_budget(max_search_tokens, "max_search_tokens", 0)
        self.max_summary_tokens = _check_budget(
            max_summary_tokens, "max_summary_tokens", shell + 16
        )
        self.max_system_tokens = _check_budget(
            max_system_tokens, "max_system_tokens", 1, optional=True
        )
        self.max_total_tokens = _check_budget(
            max_total_tokens, "max_total_tokens", 1, optional=True
        )
        if (
            isinstance(fold_to, bool)
            or not isinstance(fold_to, int | float)
            or not 0 < fold_to <= 1
        ):
            raise ValidationError(
                f"fold_to: expected a number in (0, 1], got {fold_to!r}", field="fold_to"
            )
        self.fold_to = float(fold_to)
        self.format: Format = self._check_format(format)
        self.summarizer = Summarizer(
            cheap_llm,
            summary_prompt=summary_prompt,
            max_tokens=self.max_summary_tokens - shell,
            model=model,
        )
        self.cheap_llm = cheap_llm
        self._lock = threading.Lock()
        self._system: str | None = None
        self._memories: list[Item] = []
        self._search: list[Item] = []
        self._recent: list[tuple[Message, int]] = []  # (message, its tokens)
        self._state = SummaryState()
        self.last_build: ContextStats | None = None

    def __repr__(self) -> str:
        return (
            f"<SmartContextManager {len(self)} recent, summary v{self._state.version}, "
            f"{self.counter.name}>"
        )

    # -- SynapseKit's surface ------------------------------------------------------------------

    def set_system(self, content: str) -> None:
        """Set (``""``: remove) the system prompt, the first and most stable tier."""
        if not isinstance(content, str):
            raise ValidationError("system: expected a string", field="system")
        cost = self._cost_of("system", content) if content else 0
        if self.max_system_tokens is not None and cost > self.max_system_tokens:
            raise ValidationError(
                f"system: {cost} tokens, over max_system_tokens {self.max_system_tokens} "
                "(a system prompt is never cut)",
                field="system",
                limit=self.max_system_tokens,
            )
        self._system = content or None

    def set_search_results(self, content: Any) -> None:
        """Replace the search results: a block of text, or a list of results (strings,
        ``(text, score)`` pairs, hits) most relevant first or scored."""
        self._search = items_of(content, "search", "search_results")

    def clear_search_results(self) -> None:
        self._search = []

    def set_memories(self, memories: Any) -> None:
        """Replace the retrieved memories: a :class:`~synapsedb.types.Recalled` (from
        ``ns.recall``), a query result, or a list of strings or hits with scores."""
        self._memories = items_of(memories, "memories", "memories")

    def clear_memories(self) -> None:
        self._memories = []

    def add(
        self,
        role: str | MessageLike,
        content: str | None = None,
        *,
        name: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
    ) -> Message:
        """Append a turn to the recent messages: ``add("user", "hi")``, or a Message, an
        OpenAI message dict or a ``(role, content)`` pair. System messages go to
        :meth:`set_system` instead."""
        if content is None and not isinstance(role, str):
            message = Message.of(role)
        else:
            message = Message(
                role,  # type: ignore[arg-type]
                content if content is not None else "",
                name=name,
                tool_calls=tool_calls,
                tool_call_id=tool_call_id,
            )
        if message.role == "system":
            raise ValidationError(
                "message.role: system messages go to set_system()", field="message.role"
            )
        cost = self.counter.count_message(message.to_openai())
        with self._lock:
            self._recent.append((message, cost))
        return message

    def extend(self, messages: Iterable[MessageLike]) -> list[Message]:
        """:meth:`add` each of ``messages``, oldest first."""
        return [self.add(m) for m in messages]

    async def get_messages(self, format: Format | None = None) -> Any:
        """The assembled context (folding into the summary as needed, with an
        AsyncChatClient or a blocking ChatClient). ``format``: ``"openai"`` (a list of
        messages) or ``"anthropic"`` (``{"system": ..., "messages": ...}``)."""
        plan = self._plan(self._check_format(format or self.format))
        state: Any = None
        try:
            while True:
                turns = plan.send(state)
                state = await self.summarizer.afold(self._state, turns)
        except StopIteration as done:
            return done.value

    def build(self, format: Format | None = None) -> Any:
        """:meth:`get_messages`, blocking (``cheap_llm`` must then be a ChatClient)."""
        plan = self._plan(self._check_format(format or self.format))
        state: Any = None
        try:
            while True:
                turns = plan.send(state)
                state = self.summarizer.fold(self._state, turns)
        except StopIteration as done:
            return done.value

    get_messages_sync = build

    def clear(self) -> None:
        """Reset everything: messages, summary, system prompt, memories and search results."""
        with self._lock:
            self._recent.clear()
            self._state = SummaryState()
        self._system = None
        self._memories, self._search = [], []
        self.last_build = None

    @property
    def summary(self) -> str:
        """The running summary of the folded turns (``""`` before the first fold)."""
        return self._state.text

    @property
    def summary_state(self) -> SummaryState:
        """The summary with its version, method (``llm``/``extractive``) and fold count."""
        return self._state

    @property
    def messages(self) -> list[Message]:
        """The recent messages (not folded yet), oldest first."""
        with self._lock:
            return [m for m, _ in self._recent]

    def __len__(self) -> int:
        return len(self._recent)

    # -- assembly ------------------------------------------------------------------------------

    def _check_format(self, format: Any) -> Format:
        if format not in FORMATS:
            raise ValidationError(
                f"format: expected one of {', '.join(FORMATS)}, got {format!r}", field="format"
            )
        return format  # type: ignore[no-any-return]

    def _cost_of(self, role: str, content: str) -> int:
        return self.counter.count_message({"role": role, "content": content})

    def _summary_text(self, budget: int) -> tuple[str | None, bool]:
        """The summary message's content within ``budget`` tokens, and whether it was cut."""
        if not self._state.text:
            return None, False
        full = self._state.message().content
        text = cut_to(full, budget, lambda t: self._cost_of("system", t))
        return (text or None), text != full

    def _recent_cost(self, entries: Sequence[tuple[Message, int]], start: int, lead: int) -> int:
        cost = sum(c for _, c in entries[start:])
        if start < len(entries) and entries[start][0].role != "user":
            cost += lead
        return cost

    def _fold_start(
        self, entries: Sequence[tuple[Message, int]], target: int, hard: int, lead: int
    ) -> int:
        """Where the kept turns start so that they cost at most ``target`` (else at most
        ``hard``), moved on to a user message when one follows; never past the last unit."""
        starts = _units([m.role for m, _ in entries]) or [0]
        fits = [i for i in starts if self._recent_cost(entries, i, lead) <= target] or [
            i for i in starts if self._recent_cost(entries, i, lead) <= hard
        ]
        if not fits:
            # the budget that left too little: the recent tier's own, or what the total left
            name = "max_recent_tokens" if hard >= self.max_recent_tokens else "max_total_tokens"
            raise ValidationError(
                f"{name}: the newest turn alone costs "
                f"{self._recent_cost(entries, starts[-1], lead)} tokens, over the {hard} left "
                "for recent messages (the newest turn is never cut)",
                field=name,
                limit=hard,
            )
        start = fits[0]
        users = [i for i in starts if i >= start and entries[i][0].role == "user"]
        return users[0] if users else start

    def _fold(
        self, entries: list[tuple[Message, int]], start: int
    ) -> Generator[list[Message], SummaryState, list[tuple[Message, int]]]:
        """Fold ``entries[:start]`` into the summary; the entries left."""
        if start <= 0:
            return entries
        folded = entries[:start]
        state = yield [m for m, _ in folded]
        with self._lock:  # unless a clear (or another build) changed the buffer meanwhile
            if len(self._recent) >= start and all(
                a is b for a, b in zip(self._recent, folded, strict=False)
            ):
                del self._recent[:start]
                self._state = state
        return entries[start:]

    def _select(self, budget: int) -> tuple[list[Item], bool]:
        """The most relevant retrieved items whose rendering fits ``budget``, and whether
        the one kept item had to be cut."""
        order = sorted(
            [*self._memories, *self._search], key=lambda it: (it.rank, it.source != "memories")
        )

        def cost(items: Sequence[Item]) -> int:
            return self._cost_of("system", render_retrieved(items)) if items else 0

        if not order or budget <= 0:
            return [], False
        if cost(order) <= budget:
            return order, False
        lo, hi = 0, len(order) - 1  # the longest prefix that fits (cost grows with it)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if cost(order[:mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        if lo:
            return order[:lo], False
        first = order[0]
        text = cut_to(first.text, budget, lambda t: cost([_with_text(first, t)]))
        return ([_with_text(first, text)], True) if text else ([], False)

    def _plan(self, fmt: Format) -> Generator[list[Message], SummaryState, Any]:
        """The build as steps: yields the turns to fold, is sent the new summary state."""
        with self._lock:
            entries = list(self._recent)
        lead = self._cost_of("user", CONTINUATION) if fmt == "anthropic" else 0
        priming = self.counter.count_messages([])
        system_cost = self._cost_of("system", self._system) if self._system else 0
        total = self.max_total_tokens
        if total is not None and system_cost + priming > total:
            raise ValidationError(
                f"max_total_tokens: the system prompt alone costs {system_cost + priming} "
                f"tokens with the reply priming, over {total}",
                field="max_total_tokens",
                limit=total,
            )
        avail = None if total is None else total - priming - system_cost
        hard = self.max_recent_tokens if avail is None else min(self.max_recent_tokens, avail)
        before = len(entries)
        # 1. recent messages over their budget: fold the oldest into the summary
        if entries and self._recent_cost(entries, 0, lead) > hard:
            target = max(1, int(self.max_recent_tokens * self.fold_to))
            entries = yield from self._fold(
                entries, self._fold_start(entries, min(target, hard), hard, lead)
            )
        recent = self._recent_cost(entries, 0, lead) if entries else 0
        summary, summary_cut = self._summary_text(self.max_summary_tokens)
        summary_cost = self._cost_of("system", summary) if summary else 0
        # 2. retrieved items within their budget and what the total leaves them
        room = self.max_search_tokens
        if avail is not None:
            room = min(room, avail - summary_cost - recent)
        items, item_cut = self._select(room)
        # 3. over the total with no retrieved item left: fold more, then cut the summary
        if avail is not None and summary_cost + recent > avail:
            keep = avail - min(self.max_summary_tokens, avail // 2)
            entries = yield from self._fold(
                entries, self._fold_start(entries, max(keep, 0), avail, lead)
            )
            recent = self._recent_cost(entries, 0, lead) if entries else 0
            summary, cut = self._summary_text(min(self.max_summary_tokens, avail - recent))
            summary_cut = summary_cut or cut
            summary_cost = self._cost_of("system", summary) if summary else 0
        retrieved = render_retrieved(items) if items else None
        turns = [m.to_openai() for m, _ in entries]
        if lead and turns and turns[0]["role"] != "user":
            turns.insert(0, {"role": "user", "content": CONTINUATION})
        tokens = {
            "system": system_cost,
            "summary": summary_cost,
            "retrieved": self._cost_of("system", retrieved) if retrieved else 0,
            "recent": recent,
            "priming": priming,
        }
        tokens["total"] = sum(tokens.values())
        n_items = len(self._memories) + len(self._search)
        self.last_build = ContextStats(
            format=fmt,
            tokens=tokens,
            budgets={
                "system": self.max_system_tokens,
                "summary": self.max_summary_tokens,
                "retrieved": self.max_search_tokens,
                "recent": self.max_recent_tokens,
                "total": total,
            },
            kept=len(items),
            dropped=n_items - len(items),
            folded=before - len(entries),
            cut=tuple(t for t, c in (("summary", summary_cut), ("retrieved", item_cut)) if c),
            summary_method=self._state.method if summary else None,
            encoding=self.counter.name,
            exact=self.counter.exact,
        )
        if fmt == "anthropic":
            return to_anthropic(self._system, summary, retrieved, turns)
        out = [
            {"role": "system", "content": text}
            for text in (self._system, summary, retrieved)
            if text
        ]
        return out + turns


def _with_text(item: Item, text: str) -> Item:
    return Item(item.source, item.rank, text, item.score, item.ts, item.id, item.block)
