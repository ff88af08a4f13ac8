"""Memory strategies: what ``load`` gives back of a session (seeds 003 and 004).

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
(read the tail, ask the model, call the namespace); the two base classes only run the steps,
blocking or awaiting, as :mod:`.session_plans` does for Sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from ..engine.namespace import Namespace
from ..errors import NotFoundError, ValidationError, VersionConflictError
from .drivers import NsCall
from .layout import MAX_LAST, SUMMARY_KEY, check_session_id, session_entity
from .messages import Message, MessageLike
from .session_records import message_of_event, state_of
from .summary import PREFIX, ChatStep, MemoryStates, Summarizer, SummaryState, achat, chat
from .tokens import TokenCounter, encoding_for

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
HEAD_READ = 8  # messages read from the start of a session for its head system messages


# -- steps a policy yields ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Read:
    """The newest ``last`` messages of the wrapped store (None: all). Answered with
    ``(messages, complete)``: complete when they are the whole session."""

    last: int | None


@dataclass(frozen=True, slots=True)
class Head:
    """The system messages the session starts with (a list, maybe empty)."""


Step: TypeAlias = Read | Head | NsCall | ChatStep
Policy = Generator[Step, Any, Any]


# -- message units --------------------------------------------------------------------------------


def units(msgs: list[Message]) -> list[tuple[int, int]]:
    """``(start, end)`` of each unit: a message, with the tool results that follow it (an
    assistant message with tool_calls and its results stay together). A unit that starts
    with a tool message is an orphan: its call lies before ``msgs``."""
    out: list[tuple[int, int]] = []
    for i, m in enumerate(msgs):
        if m.role == "tool" and out:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def _orphan(msgs: list[Message], unit: tuple[int, int]) -> bool:
    return msgs[unit[0]].role == "tool"


_EVENT_ID = re.compile(r"^(\d+)-(\d+)$")
_COUNTED_ID = re.compile(r"#(\d+)$")


def order_key(message_id: str | None) -> tuple[int, ...] | None:
    """A sortable key of a stored message's id: ``<ms>-<seq>`` (Sessions) or ``<session>#<n>``
    (InMemoryStore); None for ids of another shape (found by equality instead)."""
    if message_id is None:
        return None
    if m := _EVENT_ID.match(message_id):
        return int(m[1]), int(m[2])
    if m := _COUNTED_ID.search(message_id):
        return (int(m[1]),)
    return None


def _after(msgs: list[Message], through: str | None) -> list[Message] | None:
    """The messages newer than ``through``; None when that cannot be told from ``msgs`` (an id
    of unknown shape that is not among them)."""
    if through is None:
        return list(msgs)
    key = order_key(through)
    if key is None:
        for i, m in enumerate(msgs):
            if m.id == through:
                return msgs[i + 1 :]
        return None
    return [m for m in msgs if (k := order_key(m.id)) is None or k > key]


def _reaches(msgs: list[Message], through: str | None) -> bool:
    """Whether ``msgs`` (oldest first) reach back to ``through``, so that every message newer
    than it is among them."""
    if through is None or not msgs:
        return False
    key = order_key(through)
    if key is None:
        return any(m.id == through for m in msgs)
    first = order_key(msgs[0].id)
    return first is not None and first <= key


def _check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValidationError(f"{name}: expected an integer >= {low}, got {value!r}",
                              field=name, limit=low)  # fmt: skip
    return value


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{name}: expected true or false", field=name)
    return value


# -- the two ways of running a policy --------------------------------------------------------------


_TAKES: dict[tuple[type, str, str], bool] = {}


def _takes(store: Any, method: str, param: str) -> bool:
    """Whether ``store.<method>`` accepts the keyword ``param`` (remembered per class)."""
    key = (type(store), method, param)
    found = _TAKES.get(key)
    if found is None:
        try:
            params = inspect.signature(getattr(store, method)).parameters
            found = param in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError, AttributeError):
            found = False
        _TAKES[key] = found
    return found


def _namespace_of(store: Any) -> Any:
    """The SynapseDB namespace under ``store`` (through any strategies), or None."""
    seen = 0
    while isinstance(store, _Strategy) and seen < 64:
        store, seen = store.store, seen + 1
    ns = getattr(store, "ns", None)
    return ns if all(hasattr(ns, m) for m in ("facts", "set", "delete", "query")) else None


def _base_of(store: Any) -> Any:
    seen = 0
    while isinstance(store, _Strategy) and seen < 64:
        store, seen = store.store, seen + 1
    return store


class _Strategy:
    """What every strategy has: the wrapped store, the policy, the namespace (if any)."""

    store: Any
    llm: Any = None  # the Summarizer's model, for ChatSteps

    def __init__(self, store: Any) -> None:
        for name in ("append", "load", "clear"):
            if not callable(getattr(store, name, None)):
                raise ValidationError(
                    f"store: expected a MemoryStore (append, load, clear), got "
                    f"{type(store).__name__} without {name}()", field="store")  # fmt: skip
        self.store = store
        self.ns = _namespace_of(store)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} over {self.store!r}>"

    def policy(self, session_id: str) -> Policy:
        """What ``load`` returns, as steps."""
        msgs, _ = yield Read(None)
        return msgs

    def after_clear(self, session_id: str) -> Policy:
        """What a clear does besides clearing the store (a summary resets)."""
        return None
        yield  # a generator

    keep_system = False

    def _split_head(self, session_id: str, msgs: list[Message], complete: bool) -> Policy:
        """``(head, body)``: the system messages at the head of the session (none if there
        are none or they are not kept) and the other messages of ``msgs``."""
        if not self.keep_system or not msgs:
            return [], msgs
        if complete:
            n = next((i for i, m in enumerate(msgs) if m.role != "system"), len(msgs))
            return msgs[:n], msgs[n:]
        head = yield from self._head(session_id)
        return head, _without(msgs, head)

    def _head(self, session_id: str) -> Policy:
        """The system messages the session starts with. A Sessions store without
        ``load(first=)``: its first events after the last clear, read directly, unless the
        session has a ttl (a long pause then hides the messages before it: the store's own
        load decides)."""
        store = self.store
        if (self.ns is None or isinstance(store, _Strategy)
                or _takes(store, "load", "first")):  # fmt: skip
            return (yield Head())
        stream = session_entity(session_id)
        state = state_of((yield NsCall("facts", (stream,))))
        ttl = state.value["ttl"] if "ttl" in state.value else getattr(store, "ttl", None)
        if ttl is not None:
            return (yield Head())
        evs = yield NsCall("events", (stream,), {"after": state.cleared_through,
                                                 "limit": HEAD_READ})  # fmt: skip
        msgs = [m for m in map(message_of_event, evs) if m is not None]
        head = _leading_system(msgs)
        if len(head) == len(msgs) == HEAD_READ:  # more may follow: the store decides
            return (yield Head())
        return head


def _leading_system(msgs: list[Message]) -> list[Message]:
    n = next((i for i, m in enumerate(msgs) if m.role != "system"), len(msgs))
    return msgs[:n]


def _without(msgs: list[Message], head: list[Message]) -> list[Message]:
    """``msgs`` less the head messages among them (by id: these are a store's messages)."""
    ids = {m.id for m in head if m.id is not None}
    return [m for m in msgs if m.id is None or m.id not in ids] if ids else msgs


class _SyncStrategy(_Strategy):
    """Runs policies against a blocking store: a MemoryStore."""

    def __init__(self, store: Any) -> None:
        if inspect.iscoroutinefunction(getattr(store, "load", None)):
            raise ValidationError(
                f"store: {type(store).__name__} is an AsyncMemoryStore; use "
                f"Async{type(self).__name__} over it", field="store")  # fmt: skip
        super().__init__(store)

    def append(self, session_id: str, message: MessageLike, **options: Any) -> Message:
        """Append to the wrapped store (keyword options go with it)."""
        return self.store.append(session_id, message, **options)  # type: ignore[no-any-return]

    def load(self, session_id: str) -> list[Message]:
        """The session as this strategy gives it, oldest first."""
        return self._run(check_session_id(session_id), self.policy(session_id))  # type: ignore[no-any-return]

    def clear(self, session_id: str) -> None:
        """Clear the wrapped store's session (and this strategy's state of it)."""
        self.store.clear(session_id)
        self._run(check_session_id(session_id), self.after_clear(session_id))

    def _run(self, session_id: str, policy: Policy) -> Any:
        send: Callable[[Any], Step] = policy.send
        value: Any = None
        while True:
            try:
                step = send(value)
            except StopIteration as stop:
                return stop.value
            try:
                value, send = self._do(session_id, step), policy.send
            except Exception as exc:
                value, send = exc, policy.throw

    def _do(self, sid: str, step: Step) -> Any:
        store = self.store
        if isinstance(step, Read):
            if step.last is not None and step.last <= MAX_LAST and _takes(store, "load", "last"):
                msgs = store.load(sid, last=step.last)
                return msgs, len(msgs) < step.last
            return store.load(sid), True
        if isinstance(step, Head):
            msgs = (store.load(sid, first=HEAD_READ) if _takes(store, "load", "first")
                    else store.load(sid))  # fmt: skip
            return _leading_system(msgs)
        if isinstance(step, ChatStep):
            return chat(self.llm, step)
        return getattr(self.ns, step.method)(*step.args, **step.kwargs)


class _AsyncStrategy(_Strategy):
    """Runs policies against an AsyncMemoryStore, awaiting each step. A namespace call on an
    embedded Namespace runs in a worker thread (it blocks on disk)."""

    def __init__(self, store: Any) -> None:
        load = getattr(store, "load", None)
        if callable(load) and not inspect.iscoroutinefunction(load):
            raise ValidationError(
                f"store: {type(store).__name__} is a blocking MemoryStore; use "
                f"{type(self).__name__.removeprefix('Async')} over it, or AsyncSessions",
                field="store")  # fmt: skip
        super().__init__(store)

    async def append(self, session_id: str, message: MessageLike, **options: Any) -> Message:
        return await self.store.append(session_id, message, **options)  # type: ignore[no-any-return]

    async def load(self, session_id: str) -> list[Message]:
        return await self._run(check_session_id(session_id), self.policy(session_id))  # type: ignore[no-any-return]

    async def clear(self, session_id: str) -> None:
        await self.store.clear(session_id)
        await self._run(check_session_id(session_id), self.after_clear(session_id))

    async def _run(self, session_id: str, policy: Policy) -> Any:
        send: Callable[[Any], Step] = policy.send
        value: Any = None
        while True:
            try:
                step = send(value)
            except StopIteration as stop:
                return stop.value
            try:
                value, send = await self._do(session_id, step), policy.send
            except Exception as exc:
                value, send = exc, policy.throw

    async def _do(self, sid: str, step: Step) -> Any:
        store = self.store
        if isinstance(step, Read):
            if step.last is not None and step.last <= MAX_LAST and _takes(store, "load", "last"):
                msgs = await store.load(sid, last=step.last)
                return msgs, len(msgs) < step.last
            return await store.load(sid), True
        if isinstance(step, Head):
            msgs = await (store.load(sid, first=HEAD_READ) if _takes(store, "load", "first")
                          else store.load(sid))  # fmt: skip
            return _leading_system(msgs)
        if isinstance(step, ChatStep):
            return await achat(self.llm, step)
        method = getattr(self.ns, step.method)
        if isinstance(self.ns, Namespace):
            return await asyncio.to_thread(method, *step.args, **step.kwargs)
        value = method(*step.args, **step.kwargs)
        return await value if inspect.isawaitable(value) else value


# -- reading helpers shared by the policies --------------------------------------------------------


def _grow(n: int) -> int | None:
    """The next chunk after ``n`` messages; None: read everything."""
    return None if n >= MAX_LAST else min(n * 4, MAX_LAST)


class _Costs:
    """Token costs of messages under one counter, remembered across a policy's reads."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.priming = counter.count_messages([])
        self._by_id: dict[str, int] = {}

    def of(self, m: Message) -> int:
        if m.id is None:
            return self.counter.count_message(m)
        cost = self._by_id.get(m.id)
        if cost is None:
            cost = self._by_id[m.id] = self.counter.count_message(m)
        return cost


Fit = Literal["all", "budget", "orphan"]


def _fit(body: list[Message], costs: _Costs, budget: int) -> tuple[int, Fit]:
    """``(start, why)``: ``body[start:]`` are the newest whole units within ``budget``. Why it
    stops there: ``all`` (every unit fits), ``budget`` (the next older one does not) or
    ``orphan`` (tool results at ``body``'s start whose call lies before it)."""
    used, start = 0, len(body)
    for unit in reversed(units(body)):
        if _orphan(body, unit):
            return start, "orphan"
        cost = sum(costs.of(m) for m in body[unit[0] : unit[1]])
        if used + cost > budget:
            return start, "budget"
        used, start = used + cost, unit[0]
    return start, "all"


def window_start(msgs: list[Message], k: int) -> tuple[int, bool]:
    """Where the last ``k`` messages of ``msgs`` start, moved back to the start of the unit
    it falls in, and whether that is certain (the unit is whole: it does not start
    ``msgs``, whose older neighbours are unknown)."""
    if k == 0:
        return len(msgs), True
    count = 0
    for unit in reversed(units(msgs)):
        count += unit[1] - unit[0]
        if count >= k and not _orphan(msgs, unit):
            return unit[0], unit[0] > 0
    return 0, False


# -- the strategies -------------------------------------------------------------------------------


class _Buffer(_Strategy):
    """Everything since the last clear (the wrapped store's load, unchanged)."""


class _Window(_Strategy):
    def __init__(self, store: Any, k: int = 10, *, keep_system: bool = True) -> None:
        super().__init__(store)
        self.k = _check_int(k, "k", 0)
        self.keep_system = _check_bool(keep_system, "keep_system")

    def policy(self, session_id: str) -> Policy:
        n: int | None = self.k + 1
        while True:
            msgs, complete = yield Read(n)
            if complete or n is None or window_start(msgs, self.k)[1]:
                break
            n = _grow(n)
        head, body = yield from self._split_head(session_id, msgs, complete)
        window = body[window_start(body, self.k)[0] :]
        if window and window[0].role == "tool":  # an orphan at the session's start
            window = window[units(window)[0][1] :]
        return head + window


class _TokenBuffer(_Strategy):
    def __init__(
        self, store: Any, max_tokens: int = 2000, model: str | None = None, *,
        keep_system: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(store)
        self.max_tokens = _check_int(max_tokens, "max_tokens", 1)
        self.counter = encoding_for(model)
        self.model = model
        self.keep_system = _check_bool(keep_system, "keep_system")

    def policy(self, session_id: str) -> Policy:
        costs = _Costs(self.counter)
        n: int | None = FIRST_CHUNK
        head: list[Message] = []
        known = False
        while True:
            msgs, complete = yield Read(n)
            if complete or not known:
                head, body = yield from self._split_head(session_id, msgs, complete)
                known = True
            else:
                body = _without(msgs, head)
            budget = self.max_tokens - costs.priming - sum(map(costs.of, head))
            start, why = _fit(body, costs, budget)
            if why == "budget" or complete or n is None:
                break
            n = _grow(n)
        if start < len(body) and body[start].role == "tool":  # an orphan at the start
            start = len(body)
        return head + body[start:]


# -- summaries -------------------------------------------------------------------------------------


class _Summarising(_Strategy):
    """The state handling of Summary and SummaryBuffer: read, fold, write back."""

    def __init__(self, store: Any, summarizer: Summarizer, keep_system: bool) -> None:
        super().__init__(store)
        if not isinstance(summarizer, Summarizer):
            raise ValidationError(
                f"summarizer: expected a Summarizer, got {type(summarizer).__name__}",
                field="summarizer")  # fmt: skip
        self.summarizer = summarizer
        self.llm = summarizer.llm
        self.keep_system = _check_bool(keep_system, "keep_system")
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
            yield NsCall("set", (session_entity(session_id), SUMMARY_KEY, state.to_value()),
                         {"if_version": version})  # fmt: skip
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
            if complete or n is None or _reaches(msgs, through):
                break
            n = _grow(n)
        head, body = yield from self._split_head(session_id, msgs, complete)
        pending = _after(body, through)
        return head, body if pending is None else pending

    def _fold(self, session_id: str, state: SummaryState, version: int | None,
              turns: list[Message]) -> Policy:  # fmt: skip
        if not turns:
            return state
        new = yield from self.summarizer.steps(state, turns)
        return (yield from self._save(session_id, new, version))


class _Summary(_Summarising):
    def __init__(
        self, store: Any, summarizer: Summarizer, *, keep: int = 0, batch: int | None = None,
        keep_system: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(store, summarizer, keep_system)
        self.keep = _check_int(keep, "keep", 0)
        self.batch = max(1, self.keep) if batch is None else _check_int(batch, "batch", 1)

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
        self, store: Any, summarizer: Summarizer, max_tokens: int = 2000,
        model: str | None = None, *, keep_system: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(store, summarizer, keep_system)
        self.max_tokens = _check_int(max_tokens, "max_tokens", 1)
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
                field="max_tokens", limit=self.reserve)  # fmt: skip

    def policy(self, session_id: str) -> Policy:
        costs = _Costs(self.counter)
        state, version = yield from self._state(session_id)
        head, pending = yield from self._pending(session_id, state.through)
        budget = self.max_tokens - costs.priming - sum(map(costs.of, head))
        if state.text or _fit(pending, costs, budget)[0] > 0:
            start, _ = _fit(pending, costs, budget - self.reserve)
            state = yield from self._fold(session_id, state, version, pending[:start])
            pending = pending[start:]
        return head + ([state.message()] if state.text else []) + pending


# -- relevance ---------------------------------------------------------------------------------------


class _Vector(_Strategy):
    def __init__(
        self, sessions: Any, k: int = 5, *, include_last: bool = True, keep_system: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(sessions)
        self.k = _check_int(k, "k", 1)
        self.include_last = _check_bool(include_last, "include_last")
        self.keep_system = _check_bool(keep_system, "keep_system")
        if self.ns is None:
            raise ValidationError(
                "sessions: Vector searches the session's messages, so it needs a Sessions "
                f"store (Sessions(ns, searchable=True)), got {type(sessions).__name__}",
                field="sessions")  # fmt: skip

    def policy(self, session_id: str) -> Policy:
        stream = session_entity(session_id)
        state = state_of((yield NsCall("facts", (stream,))))
        ttl = (
            state.value["ttl"]
            if "ttl" in state.value
            else getattr(_base_of(self.store), "ttl", None)
        )
        # with a ttl, a long pause hides what came before it: the whole live session is read
        n: int | None = 8 if ttl is None else None
        while True:
            msgs, complete = yield Read(n)
            at = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "user"), None)
            if at is not None or complete or n is None:
                break
            n = _grow(n)
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
                "append(..., searchable=True))", field="sessions.searchable")  # fmt: skip
        turns = [_plain(m) for m in _without(found, head)]
        return head + turns + (msgs[at:] if self.include_last else [])

    def _search(self, stream: str, current: list[Message], lowest: str | None,
                inclusive: bool) -> Policy:  # fmt: skip
        """The ``k`` user and assistant turns before ``current`` (the last user message and
        what followed it) most relevant to that message, oldest first. ``current`` is kept
        out of the search itself: in the index, the query's own message would lend its score
        to its neighbours (the hybrid ranking's timeline context) and rank the latest turns
        above the relevant ones."""
        last = current[0]
        mine = [m.id for m in current if m.id is not None][-MAX_IN:]
        res = yield NsCall("query", (last.content[:MAX_QUERY_CHARS],), {
            "filter": {"stream": stream, "event_id": {"$nin": mine}}, "types": ["event"],
            "k": min(4 * self.k + 4, MAX_LAST)})  # fmt: skip
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


class Buffer(_Buffer, _SyncStrategy):
    """Every message since the last clear: the wrapped store's ``load`` as it is."""


class Window(_Window, _SyncStrategy):
    """The last ``k`` messages (plus the system messages the session starts with,
    ``keep_system``). A tool call's results are never separated from it: the window then
    starts at the call."""


class TokenBuffer(_TokenBuffer, _SyncStrategy):
    """The newest messages whose tokens (with OpenAI's chat overhead, for ``model``'s
    encoding or the 4-characters estimate) fit ``max_tokens``; the head system messages count
    in the budget and are kept even when they alone are over it."""


class Summary(_Summary, _SyncStrategy):
    """A running summary (a system message) in place of the older messages, and the last
    ``keep`` verbatim. Folding happens once at least ``batch`` (default ``max(1, keep)``)
    messages are older than those ``keep``: until then they are shown verbatim."""


class SummaryBuffer(_SummaryBuffer, _SyncStrategy):
    """The newest messages verbatim and a summary of all older ones, within ``max_tokens``
    together. No summary while the whole session fits."""


class Vector(_Vector, _SyncStrategy):
    """The ``k`` user and assistant turns before the last user message most relevant to it
    (``ns.query`` over the session's searchable messages since its last clear), oldest
    first; then, with ``include_last``, that message and whatever followed it (a tool call in
    progress stays whole). Needs :class:`~synapsedb.conversation.sessions.Sessions` with
    searchable messages (a ValidationError says so otherwise); found turns come without
    their tool calls, tool results are not searched."""


class AsyncBuffer(_Buffer, _AsyncStrategy):
    """:class:`Buffer` over an AsyncMemoryStore."""


class AsyncWindow(_Window, _AsyncStrategy):
    """:class:`Window` over an AsyncMemoryStore."""


class AsyncTokenBuffer(_TokenBuffer, _AsyncStrategy):
    """:class:`TokenBuffer` over an AsyncMemoryStore."""


class AsyncSummary(_Summary, _AsyncStrategy):
    """:class:`Summary` over an AsyncMemoryStore (the Summarizer's llm: AsyncChatClient)."""


class AsyncSummaryBuffer(_SummaryBuffer, _AsyncStrategy):
    """:class:`SummaryBuffer` over an AsyncMemoryStore."""


class AsyncVector(_Vector, _AsyncStrategy):
    """:class:`Vector` over :class:`~synapsedb.conversation.sessions.AsyncSessions`."""
