"""The machinery under the memory strategies (:mod:`.strategies`): the steps a policy yields,
message units, the two runners, and the reading helpers the policies share.

A policy is a generator: it yields :class:`Read` (the newest messages of the wrapped store),
:class:`Head` (the system messages the session starts with), ``NsCall`` (a public namespace
method) and ``ChatStep`` (a request for the summary model), and gets each answer back (an
exception is thrown in). :class:`SyncStrategy` answers them blocking, :class:`AsyncStrategy`
awaiting, so each strategy's policy is written once.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..engine.namespace import Namespace
from ..errors import ValidationError
from .drivers import NsCall
from .layout import MAX_LAST, check_session_id, session_entity
from .messages import Message, MessageLike
from .session_records import message_of_event, state_of
from .summary import ChatStep, achat, chat
from .tokens import TokenCounter

__all__ = [
    "AsyncStrategy",
    "Costs",
    "Head",
    "Policy",
    "Read",
    "Step",
    "Strategy",
    "SyncStrategy",
    "base_of",
    "check_bool",
    "check_int",
    "fit",
    "grow",
    "newer_than",
    "order_key",
    "reaches",
    "units",
    "window_start",
    "without",
]

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


def is_orphan(msgs: list[Message], unit: tuple[int, int]) -> bool:
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


def newer_than(msgs: list[Message], through: str | None) -> list[Message] | None:
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


def reaches(msgs: list[Message], through: str | None) -> bool:
    """Whether ``msgs`` (oldest first) reach back to ``through``, so that every message newer
    than it is among them."""
    if through is None or not msgs:
        return False
    key = order_key(through)
    if key is None:
        return any(m.id == through for m in msgs)
    first = order_key(msgs[0].id)
    return first is not None and first <= key


def check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValidationError(
            f"{name}: expected an integer >= {low}, got {value!r}", field=name, limit=low
        )
    return value


def check_bool(value: Any, name: str) -> bool:
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
    while isinstance(store, Strategy) and seen < 64:
        store, seen = store.store, seen + 1
    ns = getattr(store, "ns", None)
    return ns if all(hasattr(ns, m) for m in ("facts", "set", "delete", "query")) else None


def base_of(store: Any) -> Any:
    seen = 0
    while isinstance(store, Strategy) and seen < 64:
        store, seen = store.store, seen + 1
    return store


class Strategy:
    """What every strategy has: the wrapped store, the policy, the namespace (if any)."""

    store: Any
    llm: Any = None  # the Summarizer's model, for ChatSteps

    def __init__(self, store: Any) -> None:
        for name in ("append", "load", "clear"):
            if not callable(getattr(store, name, None)):
                raise ValidationError(
                    f"store: expected a MemoryStore (append, load, clear), got "
                    f"{type(store).__name__} without {name}()",
                    field="store",
                )
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
        return head, without(msgs, head)

    def _head(self, session_id: str) -> Policy:
        """The system messages the session starts with. A Sessions store without
        ``load(first=)``: its first events after the last clear, read directly, unless the
        session has a ttl (a long pause then hides the messages before it: the store's own
        load decides)."""
        store = self.store
        if self.ns is None or isinstance(store, Strategy) or _takes(store, "load", "first"):
            return (yield Head())
        stream = session_entity(session_id)
        state = state_of((yield NsCall("facts", (stream,))))
        ttl = state.value["ttl"] if "ttl" in state.value else getattr(store, "ttl", None)
        if ttl is not None:
            return (yield Head())
        evs = yield NsCall(
            "events", (stream,), {"after": state.cleared_through, "limit": HEAD_READ}
        )
        msgs = [m for m in map(message_of_event, evs) if m is not None]
        head = _leading_system(msgs)
        if len(head) == len(msgs) == HEAD_READ:  # more may follow: the store decides
            return (yield Head())
        return head


def _leading_system(msgs: list[Message]) -> list[Message]:
    n = next((i for i, m in enumerate(msgs) if m.role != "system"), len(msgs))
    return msgs[:n]


def without(msgs: list[Message], head: list[Message]) -> list[Message]:
    """``msgs`` less the head messages among them (by id: these are a store's messages)."""
    ids = {m.id for m in head if m.id is not None}
    return [m for m in msgs if m.id is None or m.id not in ids] if ids else msgs


class SyncStrategy(Strategy):
    """Runs policies against a blocking store: a MemoryStore."""

    def __init__(self, store: Any) -> None:
        if inspect.iscoroutinefunction(getattr(store, "load", None)):
            raise ValidationError(
                f"store: {type(store).__name__} is an AsyncMemoryStore; use "
                f"Async{type(self).__name__} over it",
                field="store",
            )
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
            msgs = (
                store.load(sid, first=HEAD_READ)
                if _takes(store, "load", "first")
                else store.load(sid)
            )
            return _leading_system(msgs)
        if isinstance(step, ChatStep):
            return chat(self.llm, step)
        return getattr(self.ns, step.method)(*step.args, **step.kwargs)


class AsyncStrategy(Strategy):
    """Runs policies against an AsyncMemoryStore, awaiting each step. A namespace call on an
    embedded Namespace runs in a worker thread (it blocks on disk)."""

    def __init__(self, store: Any) -> None:
        load = getattr(store, "load", None)
        if callable(load) and not inspect.iscoroutinefunction(load):
            raise ValidationError(
                f"store: {type(store).__name__} is a blocking MemoryStore; use "
                f"{type(self).__name__.removeprefix('Async')} over it, or AsyncSessions",
                field="store",
            )
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
            msgs = await (
                store.load(sid, first=HEAD_READ)
                if _takes(store, "load", "first")
                else store.load(sid)
            )
            return _leading_system(msgs)
        if isinstance(step, ChatStep):
            return await achat(self.llm, step)
        method = getattr(self.ns, step.method)
        if isinstance(self.ns, Namespace):
            return await asyncio.to_thread(method, *step.args, **step.kwargs)
        value = method(*step.args, **step.kwargs)
        return await value if inspect.isawaitable(value) else value


# -- reading helpers shared by the policies --------------------------------------------------------


def grow(n: int) -> int | None:
    """The next chunk after ``n`` messages; None: read everything."""
    return None if n >= MAX_LAST else min(n * 4, MAX_LAST)


class Costs:
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


def fit(body: list[Message], costs: Costs, budget: int) -> tuple[int, Fit]:
    """``(start, why)``: ``body[start:]`` are the newest whole units within ``budget``. Why it
    stops there: ``all`` (every unit fits), ``budget`` (the next older one does not) or
    ``orphan`` (tool results at ``body``'s start whose call lies before it)."""
    used, start = 0, len(body)
    for unit in reversed(units(body)):
        if is_orphan(body, unit):
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
        if count >= k and not is_orphan(msgs, unit):
            return unit[0], unit[0] > 0
    return 0, False
