"""Running summaries of a conversation: incremental, versioned, by an LLM or extractive.

A :class:`Summarizer` folds turns into a :class:`SummaryState` (the summary text, the id of the
last message folded into it, a version and how it was made). Only the turns newer than the
state's ``through`` are ever sent: the previous summary stands for everything older, so the
cost of keeping a summary grows with the new turns, not with the whole history.

With an LLM (:class:`synapsedb.llm.ChatClient`, or :class:`~synapsedb.llm.AsyncChatClient` for
:meth:`Summarizer.afold`) the model writes the new summary from the previous one and the new
turns. Without one, or when the model fails (:class:`~synapsedb.errors.UpstreamError` ...: a
warning is logged), the summary is *extractive*: the sentences of the previous summary and of
the new turns that bring the most content words not already covered, within ``max_tokens``,
in their original order. It is deterministic and says what it is (``method="extractive"`` in
the state and in the summary message). Turns are never lost because a model failed.

Where the state lives is the strategies' business (:mod:`synapsedb.conversation.strategies`):
a KV fact next to the session in SynapseDB (every version kept by the fact's history), or a
dict in memory for other stores.
"""

from __future__ import annotations

import heapq
import logging
import re
import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..errors import ClosedError, UpstreamError, ValidationError
from .messages import Message
from .tokens import count_tokens

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "SUMMARY_ENTITY",
    "Chat",
    "Summarizer",
    "SummaryState",
    "extractive_summary",
    "summary_key",
]

log = logging.getLogger("synapsedb.conversation")

SUMMARY_ENTITY = "synapsedb:sessions"  # the KV entity Sessions keeps its per-session facts in
PREFIX = "Summary of the earlier conversation"
EXTRACTIVE_NOTE = " (extractive: sentences taken from it, no model)"
MAX_SENTENCE_CHARS = 400  # one extracted sentence, cut at a word boundary past this
MAX_LINE_CHARS = 4000  # one turn as shown to the model
LLM_ERRORS = (UpstreamError, ClosedError)

DEFAULT_SUMMARY_PROMPT = (
    "You keep a running summary of a conversation between a user and an assistant. Extend "
    "the current summary with the new lines of conversation and answer with the new summary "
    "only, as plain prose, in at most {max_words} words. Keep names, numbers, dates, "
    "decisions, preferences, commitments and open questions; drop greetings and small talk. "
    "Do not invent anything."
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORD_TEXT = """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just let me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves user assistant tool ok okay yes yeah thanks thank please hi hello hey sure also
    really like just get got one would could help great good nice noted anything else"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def summary_key(session_id: str) -> str:
    """The KV key of a session's summary state, under entity ``synapsedb:sessions``."""
    return f"{session_id}:summary"


@dataclass(frozen=True, slots=True)
class SummaryState:
    """A session's running summary. ``through`` is the id of the last message folded into it
    (None when the store gives messages no id: ``folded`` counts them instead); ``version``
    goes up by one at each fold; ``method`` says how the latest fold was made."""

    text: str = ""
    through: str | None = None
    version: int = 0
    method: Literal["llm", "extractive"] = "extractive"
    folded: int = 0

    def to_value(self) -> dict[str, Any]:
        """The JSON value kept in the KV fact."""
        return {
            "text": self.text,
            "through": self.through,
            "version": self.version,
            "method": self.method,
            "folded": self.folded,
        }

    @classmethod
    def from_value(cls, value: Any) -> SummaryState:
        """A state from a KV fact's value; a value that is not one (written by hand, or by a
        newer version) reads as no summary rather than failing every load."""
        if not isinstance(value, dict) or not isinstance(value.get("text"), str):
            return cls()
        through = value.get("through")
        method = value.get("method")
        version, folded = value.get("version"), value.get("folded")
        return cls(
            text=value["text"],
            through=through if isinstance(through, str) else None,
            version=version if isinstance(version, int) and version >= 0 else 0,
            method="llm" if method == "llm" else "extractive",
            folded=folded if isinstance(folded, int) and folded >= 0 else 0,
        )

    def message(self) -> Message:
        """The system message that stands for the folded turns, saying how it was made."""
        note = EXTRACTIVE_NOTE if self.method == "extractive" else ""
        meta = {"method": self.method, "version": self.version, "through": self.through}
        return Message.system(f"{PREFIX}{note}: {self.text}", metadata={"summary": meta})


class Chat(Protocol):
    """What a summarizer needs of a blocking LLM client (:class:`synapsedb.llm.ChatClient`)."""

    def chat(self, messages: Sequence[dict[str, Any]], *, max_tokens: int | None = ...) -> Any: ...


@dataclass(frozen=True, slots=True)
class ChatStep:
    """A request for the LLM, yielded by :meth:`Summarizer.steps`; answered with its reply
    text, or with the exception the call raised."""

    messages: list[dict[str, Any]]
    max_tokens: int


class Summarizer:
    """Folds conversation turns into a running summary (see the module docstring).

    ``llm``: a :class:`~synapsedb.llm.ChatClient` (sync strategies, :meth:`fold`) or an
    :class:`~synapsedb.llm.AsyncChatClient` (async strategies, :meth:`afold`); None or one
    that is not configured: extractive. ``summary_prompt`` replaces the default instruction
    (``{max_words}`` in it is filled in); a prompt containing ``{summary}`` and
    ``{conversation}`` is sent as the whole request instead, with those filled in.
    ``max_tokens`` bounds the summary (the model is asked for fewer words and its answer is
    cut to fit); ``max_input_tokens`` bounds the turns sent in one request: more are folded
    in several requests, oldest first. ``model`` picks the tokenizer (helper
    :func:`~synapsedb.conversation.tokens.count_tokens`).
    """

    def __init__(
        self,
        llm: Any = None,
        *,
        summary_prompt: str | None = None,
        max_tokens: int = 300,
        max_input_tokens: int = 3000,
        model: str | None = None,
    ) -> None:
        if summary_prompt is not None and (
            not isinstance(summary_prompt, str) or not summary_prompt.strip()
        ):
            raise ValidationError(
                "summary_prompt: expected a non-empty string", field="summary_prompt"
            )
        for name, value, low in (
            ("max_tokens", max_tokens, 16),
            ("max_input_tokens", max_input_tokens, 64),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValidationError(
                    f"{name}: expected an integer >= {low}, got {value!r}", field=name, limit=low
                )
        if llm is not None and not callable(getattr(llm, "chat", None)):
            raise ValidationError(
                "llm: expected a ChatClient or AsyncChatClient (an object with chat(messages))",
                field="llm",
            )
        self.llm = llm
        self.summary_prompt = summary_prompt
        self.max_tokens = max_tokens
        self.max_input_tokens = max_input_tokens
        self.model = model

    def __repr__(self) -> str:
        how = "extractive" if not self.uses_llm else repr(self.llm)
        return f"<Summarizer {how} max_tokens={self.max_tokens}>"

    @property
    def uses_llm(self) -> bool:
        """True when folds ask the model (an llm is given and configured)."""
        return self.llm is not None and getattr(self.llm, "configured", True) is not False

    # -- folding ----------------------------------------------------------------------------------

    def fold(self, state: SummaryState | None, messages: Sequence[Message]) -> SummaryState:
        """``state`` with ``messages`` (the turns after its ``through``, oldest first) folded
        in, as one new version. Blocking: the llm must be a ChatClient."""
        steps = self.steps(state, messages)
        answer: Any = None
        try:
            while True:
                answer = chat(self.llm, steps.send(answer))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def afold(self, state: SummaryState | None, messages: Sequence[Message]) -> SummaryState:
        """:meth:`fold` for an :class:`~synapsedb.llm.AsyncChatClient` (a blocking client is
        called as it is)."""
        steps = self.steps(state, messages)
        answer: Any = None
        try:
            while True:
                step = steps.send(answer)
                answer = await achat(self.llm, step)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def steps(
        self, state: SummaryState | None, messages: Sequence[Message]
    ) -> Generator[ChatStep, Any, SummaryState]:
        """The fold as steps: yields a :class:`ChatStep` per LLM request and is sent back the
        reply's text or the exception; returns the new state. Sync and async callers drive
        the same steps, so the folding logic exists once."""
        state = state or SummaryState()
        if not messages:
            return state
        turns = [m for m in messages if _foldable(m)]
        text, method = state.text, state.method
        for chunk in self._chunks(turns):
            made: str | None = None
            if self.uses_llm:
                answer = yield ChatStep(self._request(text, chunk), self.max_tokens)
                if isinstance(answer, BaseException):
                    log.warning(
                        "summary: the LLM failed (%s: %s); folding %d turns extractively instead",
                        type(answer).__name__,
                        answer,
                        len(chunk),
                    )
                else:
                    made = _clean(str(answer))
                    if not made:
                        log.warning(
                            "summary: the LLM answered no text; folding %d turns "
                            "extractively instead",
                            len(chunk),
                        )
            if made:
                text, method = self._cut(made), "llm"
            else:
                text, method = (
                    extractive_summary(text, chunk, self.max_tokens, self.model),
                    "extractive",
                )
        last = messages[-1]
        return SummaryState(
            text=text,
            through=last.id,
            version=state.version + 1,
            method=method,
            folded=state.folded + len(messages),
        )

    # -- helpers ----------------------------------------------------------------------------------

    def _chunks(self, turns: Sequence[Message]) -> list[list[Message]]:
        """The turns in requests of at most ``max_input_tokens`` (one turn always fits: its
        line is cut to MAX_LINE_CHARS)."""
        if not turns:
            return []
        out: list[list[Message]] = [[]]
        used = 0
        for m in turns:
            cost = count_tokens(render(m), self.model) + 1
            if out[-1] and used + cost > self.max_input_tokens:
                out.append([])
                used = 0
            out[-1].append(m)
            used += cost
        return out

    def _request(self, summary: str, turns: Sequence[Message]) -> list[dict[str, Any]]:
        conversation = "\n".join(render(m) for m in turns)
        words = max(10, self.max_tokens * 3 // 4)
        prompt = self.summary_prompt or DEFAULT_SUMMARY_PROMPT
        if "{summary}" in prompt and "{conversation}" in prompt:
            whole = (
                prompt.replace("{max_words}", str(words))
                .replace("{summary}", summary or "(none yet)")
                .replace("{conversation}", conversation)
            )
            return [{"role": "user", "content": whole}]
        return [
            {"role": "system", "content": prompt.replace("{max_words}", str(words))},
            {
                "role": "user",
                "content": f"Current summary:\n{summary or '(none yet)'}\n\n"
                f"New lines of conversation:\n{conversation}\n\n"
                "New summary:",
            },
        ]

    def _cut(self, text: str) -> str:
        """The model's answer within ``max_tokens`` (it may ignore the word limit)."""
        if count_tokens(text, self.model) <= self.max_tokens:
            return text
        return _cut_to(text, self.max_tokens, self.model)


def chat(llm: Any, step: ChatStep) -> Any:
    """One :class:`ChatStep` against a blocking client: the reply text or the error."""
    try:
        reply = llm.chat(step.messages, max_tokens=step.max_tokens)
    except LLM_ERRORS as exc:
        return exc
    if _is_awaitable(reply):
        reply.close()
        raise ValidationError(
            "llm: an AsyncChatClient needs afold() or the Async strategies", field="llm"
        )
    return reply.content


async def achat(llm: Any, step: ChatStep) -> Any:
    """One :class:`ChatStep` against a sync or async client: the reply text or the error."""
    try:
        reply = llm.chat(step.messages, max_tokens=step.max_tokens)
        if _is_awaitable(reply):
            reply = await reply
        return reply.content
    except LLM_ERRORS as exc:
        return exc


def _is_awaitable(value: Any) -> bool:
    return hasattr(value, "__await__")


def _foldable(m: Message) -> bool:
    """Turns a summary is about: not system messages (instructions, earlier summaries)."""
    return m.role != "system"


def render(m: Message) -> str:
    """One turn as a line of the transcript shown to the model."""
    who = {"user": "User", "assistant": "Assistant", "tool": "Tool result"}.get(m.role, m.role)
    if m.name:
        who = f"{who} ({m.name})"
    text = " ".join(m.content.split())
    if m.tool_calls:
        calls = ", ".join(_call_name(c) for c in m.tool_calls)
        text = f"{text} [called {calls}]".strip()
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS].rsplit(" ", 1)[0] + " ..."
    return f"{who}: {text}"


def _call_name(call: dict[str, Any]) -> str:
    fn = call.get("function")
    name = fn.get("name") if isinstance(fn, dict) else None
    return str(name or call.get("type") or "a tool")


def _clean(text: str) -> str:
    text = " ".join(text.split())
    for lead in ("New summary:", "Summary:"):
        if text.startswith(lead):
            text = text[len(lead) :].strip()
    return text


# -- extractive -----------------------------------------------------------------------------------


def _sentences(text: str) -> list[str]:
    out = []
    for part in _SENTENCE_END.split(text):
        part = " ".join(part.split())
        if len(part) > MAX_SENTENCE_CHARS:
            part = part[:MAX_SENTENCE_CHARS].rsplit(" ", 1)[0] + " ..."
        if part:
            out.append(part)
    return out


def _content_words(sentence: str) -> frozenset[str]:
    return frozenset(
        w
        for w in (t.lower() for t in _WORD.findall(sentence))
        if w not in _STOPWORDS and (len(w) > 2 or w.isdigit())
    )


def extractive_summary(
    previous: str, messages: Sequence[Message], max_tokens: int, model: str | None = None
) -> str:
    """``previous`` (a summary) with the sentences of ``messages`` folded in, without a model.

    Candidates are the previous summary's sentences, then each turn's sentences prefixed with
    who said them (``User: ...``). Greedily, the candidate with the most content words (not
    stopwords, not yet covered by the picked ones) is picked, ties to the earlier one, while
    the result stays within ``max_tokens``; a candidate that adds nothing new is never picked.
    The picks are returned in their original order: the same input gives the same summary.
    """
    candidates = _sentences(previous)
    for m in messages:
        if not _foldable(m) or not m.content.strip():
            continue
        who = render(m).split(":", 1)[0]
        candidates.extend(f"{who}: {s}" for s in _sentences(m.content))
    words = [_content_words(c) for c in candidates]
    covered: set[str] = set()
    picked: list[int] = []
    # Lazy greedy: a candidate's gain (new content words) only shrinks as words get covered, so
    # a heap of stale gains is an upper bound; a popped candidate whose fresh (gain, index) still
    # beats the top's stale one is the exact greedy's pick, ties to the earlier index (the
    # same summary as rescanning every candidate each round, in n log n instead of n^2).
    heap = [(-len(w), i) for i, w in enumerate(words) if w]
    heapq.heapify(heap)
    while heap:
        _, best = heapq.heappop(heap)
        gain = len(words[best] - covered)
        if gain == 0:
            continue
        if heap and (-gain, best) > heap[0]:
            heapq.heappush(heap, (-gain, best))
            continue
        trial = " ".join(candidates[i] for i in sorted([*picked, best]))
        if count_tokens(trial, model) <= max_tokens:
            picked.append(best)
            covered |= words[best]
    text = " ".join(candidates[i] for i in sorted(picked))
    if not text and candidates:  # not even one sentence fits: the most informative one, cut
        best = max(range(len(candidates)), key=lambda i: len(words[i]))
        text = _cut_to(candidates[best], max_tokens, model)
    return text


def _cut_to(text: str, max_tokens: int, model: str | None) -> str:
    """``text`` cut at a word boundary so that it (with `` ...``) counts at most
    ``max_tokens`` tokens."""
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:  # the most words that fit
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid]) + " ...", model) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + " ..." if lo else ""


# -- where states live --------------------------------------------------------------------------


class MemoryStates:
    """Summary states in a dict (stores other than Sessions): per strategy, not persisted."""

    def __init__(self) -> None:
        self._states: dict[str, SummaryState] = {}
        self._lock = threading.Lock()

    def get(self, session_id: str) -> SummaryState | None:
        with self._lock:
            return self._states.get(session_id)

    def put(self, session_id: str, state: SummaryState) -> None:
        with self._lock:
            self._states[session_id] = state

    def reset(self, session_id: str) -> None:
        with self._lock:
            self._states.pop(session_id, None)
