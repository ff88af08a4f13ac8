"""Memory strategies: what ``load`` gives back of a session (Synaptic's store and SynapseKit's memory classes).

Each strategy wraps a store and is a store: ``append`` and ``clear`` pass through to the
wrapped store (``append``'s keyword options too, e.g. ``searchable=`` of Sessions), ``load``
applies the policy. So they compose: ``Window(TokenBuffer(Sessions(ns)), k=6)``.

- :class:`Buffer`: everything since the last clear.
- :class:`Window`: the last ``k`` messages.
- :class:`TokenBuffer`: the newest messages within ``max_tokens`` (OpenAI's chat format
  overhead included, :mod:`~synapsedb.conversation.tokens`).
- :class:`Summary`: older messages folded into a running summary (:mod:`.summary`), the
  last ``keep`` verbatim.
- :class:`SummaryBuffer`: the newest messages verbatim within ``max_tokens``, the rest
  summarised; summary and messages together stay within ``max_tokens``.
- :class:`Vector`: the ``k`` turns most relevant to the last user message, then that message
  (needs a :class:`~synapsedb.conversation.sessions.Sessions` store whose messages are
  searchable).

Rules every strategy keeps:

- An assistant message with ``tool_calls`` and the tool results after it are one unit: a
  window never starts inside one (OpenAI rejects a ``tool`` message whose call is missing).
  Window moves its boundary back to include the call (it may return up to a unit's length
  more than ``k``: a just-arrived tool result is never dropped); TokenBuffer and SummaryBuffer
  keep their budget and move it forward, dropping the whole unit. Tool results at the very
  start of a session, whose call is not there, are dropped.
- ``keep_system=True`` (default): the system messages the session starts with (the app's
  instructions; over a Summary, its summary too) are kept in front, outside ``k`` (Window)
  but inside the token budget.
- Over a store whose ``load`` takes ``last=`` (Sessions, InMemoryStore), Window and
  TokenBuffer read only the tail (TokenBuffer in growing chunks until its budget is full), so
  a 100,000-message session costs what a short one does. The head system messages are read
  with ``load(first=)`` where the store offers it, from a Sessions store's first events after
  its last clear, else with one full load.

Every strategy has an async twin (``AsyncWindow(AsyncSessions(ns), k=6)``, ...) with the same
arguments whose ``append``/``load``/``clear`` are coroutines, over an
:class:`~synapsedb.conversation.store.AsyncMemoryStore` (an async strategy included) and an
:class:`~synapsedb.llm.AsyncChatClient`. A policy is written once, as a generator of steps
(read the tail, ask the model, call the namespace); the two base classes of
:mod:`.strategy_base` only run the steps, blocking or awaiting, as :mod:`.drivers` does for
Sessions.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from ..errors import NotFoundError, ValidationError, VersionConflictError
from .drivers import NsCall
from .layout import MAX_LAST, SUMMARY_KEY, session_entity
from .messages import Message
from .session_records import message_of_event, state_of
from .strategy_base import (
    AsyncStrategy,
    Costs,
    Policy,
    Read,
    Strategy,
    SyncStrategy,
    base_of,
    check_bool,
    check_int,
    fit,
    grow,
    newer_than,
    order_key,
    reaches,
    units,
    window_start,
    without,
)
from .summary import PREFIX, MemoryStates, Summarizer, SummaryState
from .tokens import encoding_for

__all__ = [
    "AsyncBuffer",
    "AsyncSummary",
    "AsyncSummaryBuffer",
    "AsyncTokenBuffer",
    "AsyncVector",
    "AsyncWindow",
    "Buffer",
    "Summary",
    "SummaryBuffer",
    "TokenBuffer",
    "Vector",
    "Window",
]

FIRST_CHUNK = 32  # messages read first by TokenBuffer and the summaries; then x4 each time
MAX_QUERY_CHARS = 4000  # of the last user message, searched by Vector (the engine takes 8192)
MAX_IN = 1024  # the filter language's longest $in/$nin list


# -- the strategies -------------------------------------------------------------------------------


class _Buffer(Strategy):
    """Everything since the last clear (the wrapped store's load, unchanged)."""


class _Window(Strategy):
    def __init__(self, store: Any, k: int = 10, *, keep_system: bool = True) -> None:
        super().__init__(store)
        self.k = check_int(k, "k", 0)
        self.keep_system = check_bool(keep_system, "keep_system")

    def policy(self, session_id: str) -> Policy:
        n: int | None = self.k + 1
        while True:
            msgs, complete = yield Read(n)
            if complete or n is None or window_start(msgs, self.k)[1]:
                break
            n = grow(n)
        head, body = yield from self._split_head(session_id, msgs, complete)
        window = body[window_start(body, self.k)[0] :]
        if window and window[0].role == "tool":  # an orphan at the session's start
            window = window[units(window)[0][1] :]
        return head + window


class _TokenBuffer(Strategy):
    def __init__(
        self,
        store: Any,
        max_tokens: int = 2000,
        model: str | None = None,
        *,
        keep_system: bool = True,
    ) -> None:
        super().__init__(store)
        self.max_tokens = check_int(max_tokens, "max_tokens", 1)
        self.counter = encoding_for(model)
        self.model = model
        self.keep_system = check_bool(keep_system, "keep_system")

    def policy(self, session_id: str) -> Policy:
        costs = Costs(self.counter)
        n: int | None = FIRST_CHUNK
        head: list[Message] = []
        known = False
        while True:
            msgs, complete = yield Read(n)
            if complete or not known:
                head, body = yield from self._split_head(session_id, msgs, complete)
                known = True
            else:
                body = without(msgs, head)
            budget = self.max_tokens - costs.priming - sum(map(costs.of, head))
            start, why = fit(body, costs, budget)
            if why == "budget" or complete or n is None:
                break
            n = grow(n)
        if start < len(body) and body[start].role == "tool":  # an orphan at the start
            start = len(body)
        return head + body[start:]


# -- summaries -------------------------------------------------------------------------------------


class _Summarising(Strategy):
    """The state handling of Summary and SummaryBuffer: read, fold, write back."""

    def __init__(self, store: Any, summarizer: Summarizer, keep_system: bool) -> None:
        super().__init__(store)
        if not isinstance(summarizer, Summarizer):
            raise ValidationError(
                f"summarizer: expected a Summarizer, got {type(summarizer).__name__}",
                field="summarizer",
            )
        self.summarizer = summarizer
        self.llm = summarizer.llm
        self.keep_system = check_bool(keep_system, "keep_system")
        self._states = MemoryStates()

    def _state(self, session_id: str) -> Policy:
        """``(state, fact version)``; in SynapseDB the ``summary`` fact of the session (reset
        when the session was cleared after the summary's last message), else in memory."""
        if self.ns is None:
            return self._states.get(session_id) or SummaryState(), None
        facts = yield NsCall("facts", (session_entity(session_id),))
        summary = next((f for f in facts if f.key == SUMMARY_KEY), None)
        cleared = state_of(facts).cleared_through
        if summary is None:
            return SummaryState(), 0
        state = SummaryState.from_value(summary.value)
        if state.through is not None and cleared is not None:
            ck, sk = order_key(cleared), order_key(state.through)
            if ck is not None and sk is not None and ck >= sk:  # cleared since: a new start
                state = SummaryState(version=state.version)
        return state, summary.version

    def _save(self, session_id: str, state: SummaryState, version: int | None) -> Policy:
        if self.ns is None:
            self._states.put(session_id, state)
            return state
        try:
            yield NsCall(
                "set",
                (session_entity(session_id), SUMMARY_KEY, state.to_value()),
                {"if_version": version},
            )
        except VersionConflictError:  # another load folded meanwhile: the newer one stays
            newer, _ = yield from self._state(session_id)
            nk, ok = order_key(newer.through), order_key(state.through)
            if nk is None or ok is None or nk < ok:
                raise
            return newer
        return state

    def after_clear(self, session_id: str) -> Policy:
        if self.ns is None:
            self._states.reset(session_id)
            return
        with contextlib.suppress(NotFoundError):
            yield NsCall("delete", (session_entity(session_id), SUMMARY_KEY))

    def _pending(self, session_id: str, through: str | None) -> Policy:
        """``(head, pending)``: the head system messages and the messages not folded yet,
        reading the tail in growing chunks until it reaches ``through``."""
        n: int | None = FIRST_CHUNK if through is not None else None
        while True:
            msgs, complete = yield Read(n)
            if complete or n is None or reaches(msgs, through):
                break
            n = grow(n)
        head, body = yield from self._split_head(session_id, msgs, complete)
        pending = newer_than(body, through)
        return head, body if pending is None else pending

    def _fold(
        self, session_id: str, state: SummaryState, version: int | None, turns: list[Message]
    ) -> Policy:
        if not turns:
            return state
        new = yield from self.summarizer.steps(state, turns)
        return (yield from self._save(session_id, new, version))


class _Summary(_Summarising):
    def __init__(
        self,
        store: Any,
        summarizer: Summarizer,
        *,
        keep: int = 0,
        batch: int | None = None,
        keep_system: bool = True,
    ) -> None:
        super().__init__(store, summarizer, keep_system)
        self.keep = check_int(keep, "keep", 0)
        self.batch = max(1, self.keep) if batch is None else check_int(batch, "batch", 1)

    def policy(self, session_id: str) -> Policy:
        state, version = yield from self._state(session_id)
        head, pending = yield from self._pending(session_id, state.through)
        start = window_start(pending, self.keep)[0]
        if start >= self.batch:
            state = yield from self._fold(session_id, state, version, pending[:start])
            pending = pending[start:]
        return head + ([state.message()] if state.text else []) + pending


class _SummaryBuffer(_Summarising):
    def __init__(
        self,
        store: Any,
        summarizer: Summarizer,
        max_tokens: int = 2000,
        model: str | None = None,
        *,
        keep_system: bool = True,
    ) -> None:
        super().__init__(store, summarizer, keep_system)
        self.max_tokens = check_int(max_tokens, "max_tokens", 1)
        self.model = model
        self.counter = encoding_for(model)
        # what the summary message may cost at most: its prefix, the summary and a margin
        # for tokens merging differently at the joins
        shell = Message.system(f"{PREFIX} (extractive: sentences taken from it, no model): x")
        self.reserve = self.counter.count_message(shell) + summarizer.max_tokens + 2
        if self.reserve >= self.max_tokens:
            raise ValidationError(
                f"max_tokens: {max_tokens} leaves no room for recent messages beside a summary "
                f"of up to {summarizer.max_tokens} tokens; give more than {self.reserve}",
                field="max_tokens",
                limit=self.reserve,
            )

    def policy(self, session_id: str) -> Policy:
        costs = Costs(self.counter)
        state, version = yield from self._state(session_id)
        head, pending = yield from self._pending(session_id, state.through)
        budget = self.max_tokens - costs.priming - sum(map(costs.of, head))
        if state.text or fit(pending, costs, budget)[0] > 0:
            start, _ = fit(pending, costs, budget - self.reserve)
            state = yield from self._fold(session_id, state, version, pending[:start])
            pending = pending[start:]
        return head + ([state.message()] if state.text else []) + pending


# -- relevance ---------------------------------------------------------------------------------------


class _Vector(Strategy):
    def __init__(
        self,
        sessions: Any,
        k: int = 5,
        *,
        include_last: bool = True,
        keep_system: bool = True,
    ) -> None:
        super().__init__(sessions)
        self.k = check_int(k, "k", 1)
        self.include_last = check_bool(include_last, "include_last")
        self.keep_system = check_bool(keep_system, "keep_system")
        if self.ns is None:
            raise ValidationError(
                "sessions: Vector searches the session's messages, so it needs a Sessions "
                f"store (Sessions(ns, searchable=True)), got {type(sessions).__name__}",
                field="sessions",
            )

    def policy(self, session_id: str) -> Policy:
        stream = session_entity(session_id)
        state = state_of((yield NsCall("facts", (stream,))))
        ttl = (
            state.value["ttl"]
            if "ttl" in state.value
            else getattr(base_of(self.store), "ttl", None)
        )
        # with a ttl, a long pause hides what came before it: the whole live session is read
        n: int | None = 8 if ttl is None else None
        while True:
            msgs, complete = yield Read(n)
            at = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "user"), None)
            if at is not None or complete or n is None:
                break
            n = grow(n)
        if at is None:
            return []
        head, _ = yield from self._split_head(session_id, msgs, complete)
        # the oldest message that may be found: the first one loaded when the read reached
        # the start of the session, else the first after the last clear
        lowest = msgs[0].id if complete else state.cleared_through
        found = yield from self._search(stream, msgs[at:], lowest, complete)
        if not found and not (yield from self._searchable(stream)):
            raise ValidationError(
                f"session {session_id!r}: its messages are not searchable, so Vector finds "
                "nothing; append them with Sessions(ns, searchable=True) (or "
                "append(..., searchable=True))",
                field="sessions.searchable",
            )
        turns = [_plain(m) for m in without(found, head)]
        return head + turns + (msgs[at:] if self.include_last else [])

    def _search(
        self, stream: str, current: list[Message], lowest: str | None, inclusive: bool
    ) -> Policy:
        """The ``k`` user and assistant turns before ``current`` (the last user message and
        what followed it) most relevant to that message, oldest first. ``current`` is kept
        out of the search itself: in the index, the query's own message would lend its score
        to its neighbours (the hybrid ranking's timeline context) and rank the latest turns
        above the relevant ones."""
        last = current[0]
        mine = [m.id for m in current if m.id is not None][-MAX_IN:]
        res = yield NsCall(
            "query",
            (last.content[:MAX_QUERY_CHARS],),
            {
                "filter": {"stream": stream, "event_id": {"$nin": mine}},
                "types": ["event"],
                "k": min(4 * self.k + 4, MAX_LAST),
            },
        )
        low, high = order_key(lowest), order_key(last.id)
        ids: list[str] = []
        for hit in res.hits:
            eid = hit.metadata.get("event_id")
            key = order_key(eid) if isinstance(eid, str) else None
            if key is None or eid in ids or (high is not None and key >= high):
                continue
            if low is not None and (key < low or (key == low and not inclusive)):
                continue
            ids.append(eid)  # type: ignore[arg-type]
        found = []
        for eid in ids:
            evs = yield NsCall("events", (stream,), {"start": eid, "end": eid, "limit": 1})
            m = message_of_event(evs[0]) if evs else None
            if m is not None and m.role in ("user", "assistant"):
                found.append(m)
                if len(found) == self.k:
                    break
        return sorted(found, key=lambda m: order_key(m.id) or ())

    def _searchable(self, stream: str) -> Policy:
        """Whether any message of the session was stored searchable."""
        res = yield NsCall("query", (), {"filter": {"stream": stream}, "types": ["event"], "k": 1})
        return bool(res.hits)


def _plain(m: Message) -> Message:
    """A found turn without its tool calls: their results are not part of what was found,
    and a call without its results is refused by chat APIs."""
    return replace(m, tool_calls=None) if m.tool_calls and m.content.strip() else m


# -- the public classes: one policy, two runners ----------------------------------------------------


class Buffer(_Buffer, SyncStrategy):
    """Every message since the last clear: the wrapped store's ``load`` as it is."""


class Window(_Window, SyncStrategy):
    """The last ``k`` messages (plus the system messages the session starts with,
    ``keep_system``). A tool call's results are never separated from it: the window then
    starts at the call."""


class TokenBuffer(_TokenBuffer, SyncStrategy):
    """The newest messages whose tokens (with OpenAI's chat overhead, for ``model``'s
    encoding or the 4-characters estimate) fit ``max_tokens``; the head system messages count
    in the budget and are kept even when they alone are over it."""


class Summary(_Summary, SyncStrategy):
    """A running summary (a system message) in place of the older messages, and the last
    ``keep`` verbatim. Folding happens once at least ``batch`` (default ``max(1, keep)``)
    messages are older than those ``keep``: until then they are shown verbatim."""


class SummaryBuffer(_SummaryBuffer, SyncStrategy):
    """The newest messages verbatim and a summary of all older ones, within ``max_tokens``
    together. No summary while the whole session fits."""


class Vector(_Vector, SyncStrategy):
    """The ``k`` user and assistant turns before the last user message most relevant to it
    (``ns.query`` over the session's searchable messages since its last clear), oldest
    first; then, with ``include_last``, that message and whatever followed it (a tool call in
    progress stays whole). Needs :class:`~synapsedb.conversation.sessions.Sessions` with
    searchable messages (a ValidationError says so otherwise); found turns come without
    their tool calls, tool results are not searched."""


class AsyncBuffer(_Buffer, AsyncStrategy):
    """:class:`Buffer` over an AsyncMemoryStore."""


class AsyncWindow(_Window, AsyncStrategy):
    """:class:`Window` over an AsyncMemoryStore."""


class AsyncTokenBuffer(_TokenBuffer, AsyncStrategy):
    """:class:`TokenBuffer` over an AsyncMemoryStore."""


class AsyncSummary(_Summary, AsyncStrategy):
    """:class:`Summary` over an AsyncMemoryStore (the Summarizer's llm: AsyncChatClient)."""


class AsyncSummaryBuffer(_SummaryBuffer, AsyncStrategy):
    """:class:`SummaryBuffer` over an AsyncMemoryStore."""


class AsyncVector(_Vector, AsyncStrategy):
    """:class:`Vector` over :class:`~synapsedb.conversation.sessions.AsyncSessions`."""
