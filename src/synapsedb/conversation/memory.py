"""SynapseKit's conversation memory surface: ``BaseMemory``, its in-process classes
(``InMemoryConversation``, ``WindowMemory``) and ``SummaryMemory``.

``await memory.add(role, content)``, ``await memory.get()`` (``[{"role", "content"}, ...]``,
oldest first), ``await memory.clear()``, ``memory.to_string()`` ("User: ...\\nAssistant: ...")
and ``memory.to_messages()`` (synchronous, from a local cache) are the whole contract, so code
written for SynapseKit's memory classes runs unchanged. The persistent classes live beside this
module: :mod:`synapsedb.conversation.synapse_memory` (``SynapseMemory`` over a SynapseDB
namespace, embedded or remote, also under SynapseKit's name ``SqliteMemory``; ``VectorMemory``)
and :mod:`synapsedb.conversation.backends` (``RedisMemory``, ``PostgresMemory``).

Every class validates the same way before anything is stored, with the rules of
:class:`~synapsedb.conversation.messages.Message` (role one of system, user, assistant, tool;
content a non-blank string of at most 256 KiB) and of the session id (1-200 characters, no
control characters). Errors are :class:`~synapsedb.errors.ValidationError` naming the field.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import weakref
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable
from typing import Any, Literal, Self

from ..errors import ValidationError
from .messages import Message
from .summary import EXTRACTIVE_NOTE, Summarizer, SummaryState
from .summary import PREFIX as SUMMARY_PREFIX

__all__ = [
    "BaseMemory",
    "BlockingMemory",
    "InMemoryConversation",
    "SummaryMemory",
    "WindowMemory",
    "check_max_messages",
    "check_turn",
]

# The largest max_messages/window_size accepted: a bound that catches a unit mistake (bytes for
# messages) before it becomes an unbounded list, far above any real model's context.
MAX_WINDOW = 1_000_000
_LABELS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}

Turn = dict[str, str]


def check_turn(role: Any, content: Any) -> Turn:
    """One validated ``{"role", "content"}`` dict: :class:`Message`'s rules, so every class here
    accepts what a session store accepts (errors name ``message.role``, ``message.content``)."""
    msg = Message(role, content)
    return {"role": msg.role, "content": msg.content}


def check_max_messages(
    value: Any, field: str = "max_messages", *, optional: bool = True
) -> int | None:
    """A positive message count (``None`` = unlimited where ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            f"{field}: expected a positive integer{' or None' if optional else ''}, got {value!r}",
            field=field,
        )
    if not 1 <= value <= MAX_WINDOW:
        raise ValidationError(
            f"{field}: {value} is outside 1..{MAX_WINDOW}", field=field, limit=MAX_WINDOW
        )
    return value


class BaseMemory(ABC):
    """A conversation's messages, oldest first (SynapseKit's interface).

    Subclasses implement ``_add``, ``_get`` and ``_clear`` (async) and ``_get_sync`` (what
    :meth:`to_messages` reads when its cache is cold). The cache holds what this object last
    read plus what it added since, cut to ``max_messages``: another process writing the same
    session is seen at the next :meth:`get`.
    """

    max_messages: int | None

    def __init__(self, max_messages: int | None = None) -> None:
        self.max_messages = check_max_messages(max_messages)
        self._cache: list[Turn] | None = None

    async def add(self, role: str, content: str) -> None:
        """Append one message (role: system, user, assistant or tool)."""
        turn = check_turn(role, content)
        await self._add(turn)
        self._cached(turn)

    async def get(self) -> list[dict[str, str]]:
        """The messages, ``[{"role", "content"}, ...]`` in chronological order."""
        turns = await self._get()
        self._cache = turns
        return [dict(t) for t in turns]

    async def clear(self) -> None:
        """Remove every message of this conversation, from the underlying store too."""
        await self._clear()
        self._cache = []

    def to_messages(self) -> list[dict[str, str]]:
        """The messages without awaiting: the local cache (a cold cache, right after opening a
        persistent memory, is filled by one blocking read)."""
        if self._cache is None:
            self._cache = self._get_sync()
        return [dict(t) for t in self._cache]

    def to_string(self) -> str:
        """``"User: ...\\nAssistant: ..."`` (``System:`` and ``Tool:`` likewise)."""
        return format_turns(self.to_messages())

    def __len__(self) -> int:
        return len(self.to_messages())

    def close(self) -> None:
        """Release what this object opened (connections, a database it opened); its store's
        messages stay. A no-op for the in-process classes."""
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    def _cached(self, turn: Turn) -> None:
        if self._cache is None:
            return
        self._cache.append(turn)
        if self.max_messages is not None and len(self._cache) > self.max_messages:
            del self._cache[: len(self._cache) - self.max_messages]

    @abstractmethod
    async def _add(self, turn: Turn) -> None: ...

    @abstractmethod
    async def _get(self) -> list[Turn]: ...

    @abstractmethod
    async def _clear(self) -> None: ...

    @abstractmethod
    def _get_sync(self) -> list[Turn]: ...


def format_turns(turns: Iterable[dict[str, Any]]) -> str:
    """``"User: ...\\nAssistant: ..."`` for any ``{"role", "content"}`` dicts."""
    return "\n".join(
        f"{_LABELS.get(t['role'], str(t['role']).title())}: {t['content']}" for t in turns
    )


class BlockingMemory(BaseMemory):
    """A memory whose store has a blocking client (SQLite, a sync HTTP client, redis-py,
    psycopg): the async methods run it in a worker thread, so one object serves any event loop
    (``asyncio.run`` per call included, where a loop-bound async client would break), and a
    cold :meth:`to_messages` can read it directly."""

    @abstractmethod
    def _add_sync(self, turn: Turn) -> None: ...

    @abstractmethod
    def _clear_sync(self) -> None: ...

    async def _add(self, turn: Turn) -> None:
        await asyncio.to_thread(self._add_sync, turn)

    async def _get(self) -> list[Turn]:
        return await asyncio.to_thread(self._get_sync)

    async def _clear(self) -> None:
        await asyncio.to_thread(self._clear_sync)


class InMemoryConversation(BaseMemory):
    """An in-process list, oldest messages dropped past ``max_messages`` (default 100). No
    persistence. Safe to share between threads (one lock) as well as asyncio tasks."""

    def __init__(self, max_messages: int = 100) -> None:
        super().__init__(check_max_messages(max_messages, optional=False))
        self._turns: deque[Turn] = deque(maxlen=self.max_messages)
        self._lock = threading.Lock()

    async def _add(self, turn: Turn) -> None:
        with self._lock:
            self._turns.append(turn)

    async def _get(self) -> list[Turn]:
        return self._get_sync()

    async def _clear(self) -> None:
        with self._lock:
            self._turns.clear()

    def _get_sync(self) -> list[Turn]:
        with self._lock:
            return [dict(t) for t in self._turns]

    def to_messages(self) -> list[dict[str, str]]:
        return self._get_sync()  # the deque is the store: never stale


class WindowMemory(InMemoryConversation):
    """A fixed window: only the last ``window_size`` messages (default 10) are kept and
    returned. No persistence. For a window over a persistent store, give that store's class
    ``max_messages`` (every class here takes it)."""

    def __init__(self, window_size: int = 10) -> None:
        self.window_size = check_max_messages(window_size, "window_size", optional=False)
        super().__init__(max_messages=self.window_size)  # type: ignore[arg-type]


class SummaryMemory(BaseMemory):
    """Wraps another memory; when it holds more than ``max_messages`` (default 20), the oldest
    are replaced by one summary message (a system message, first).

    ``llm``: a :class:`~synapsedb.llm.ChatClient` (called in a worker thread) or an
    :class:`~synapsedb.llm.AsyncChatClient` writes the summary (``summary_prompt`` replaces the
    default instruction); None, or a model that fails, gives an extractive summary that says so
    (:mod:`.summary`). The fold is
    incremental: the previous summary and the newly folded turns make the new one, so its cost
    follows the new turns, never the whole history. ``keep`` (default ``max_messages // 2``)
    newest messages stay verbatim after a fold, so one fold is made every ``max_messages - keep``
    adds rather than at every add. Other system messages (instructions) are never folded: they
    stay, ahead of the summary.

    The summary lives in the backend as a message (after pinned system messages), so a persistent backend reopened
    later carries on from it. A fold rewrites the backend (``clear``, then the summary and the
    kept messages): the model is asked first, so the backend is rewritten in one short burst,
    but a crash inside that burst leaves it without the kept turns (a SynapseMemory backend
    still has them in its history).
    """

    def __init__(
        self,
        backend: BaseMemory,
        llm: Any = None,
        max_messages: int = 20,
        summary_prompt: str | None = None,
        *,
        keep: int | None = None,
        max_summary_tokens: int = 300,
    ) -> None:
        if not isinstance(backend, BaseMemory):
            raise ValidationError(
                f"backend: expected a BaseMemory, got {type(backend).__name__}", field="backend"
            )
        limit = check_max_messages(max_messages, optional=False)
        assert limit is not None
        if limit < 2:
            raise ValidationError(
                "max_messages: a summary needs at least 2", field="max_messages", limit=2
            )
        keep = limit // 2 if keep is None else keep
        if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep < limit:
            raise ValidationError(f"keep: expected 0..{limit - 1}, got {keep!r}", field="keep")
        if backend.max_messages is not None and backend.max_messages <= limit:
            raise ValidationError(
                f"backend: it keeps only {backend.max_messages} messages and would drop the "
                f"oldest before they are summarised; give it max_messages > {limit} (or None)",
                field="backend",
            )
        super().__init__(limit)
        self.backend = backend
        self.keep = keep
        self.summarizer = Summarizer(
            llm, summary_prompt=summary_prompt, max_tokens=max_summary_tokens
        )
        self._state: SummaryState | None = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def summary(self) -> str:
        """The running summary's text ("" before the first fold)."""
        found = _find_summary(self.backend.to_messages())
        return found[1].text if found else ""

    async def _add(self, turn: Turn) -> None:
        async with self._lock():
            await self.backend.add(turn["role"], turn["content"])
            turns = await self.backend.get()
            if len(turns) > self.max_messages:  # type: ignore[operator]
                await self._fold(turns)

    async def _fold(self, turns: list[Turn]) -> None:
        found = _find_summary(turns)
        state: SummaryState | None = None
        if found is not None:
            at, state = found
            state = self._state or state  # ours has the version and the method
            turns = turns[:at] + turns[at + 1 :]
        cut = len(turns) - self.keep
        head, tail = turns[:cut], turns[cut:]
        pinned = [t for t in head if t["role"] == "system"]
        folded = [Message.of((t["role"], t["content"])) for t in head if t["role"] != "system"]
        if inspect.iscoroutinefunction(getattr(self.summarizer.llm, "chat", None)):
            state = await self.summarizer.afold(state, folded)
        else:  # a blocking client, or the extractive summary: off the event loop
            state = await asyncio.to_thread(self.summarizer.fold, state, folded)
        await self.backend.clear()
        for t in [*pinned, {"role": "system", "content": state.message().content}, *tail]:
            await self.backend.add(t["role"], t["content"])
        self._state = state

    async def _get(self) -> list[Turn]:
        return await self.backend.get()

    async def _clear(self) -> None:
        async with self._lock():
            await self.backend.clear()
            self._state = None

    def _get_sync(self) -> list[Turn]:
        return self.backend.to_messages()

    def to_messages(self) -> list[dict[str, str]]:
        return self.backend.to_messages()  # the backend's cache is the only one

    def _cached(self, turn: Turn) -> None:
        return None

    def close(self) -> None:
        self.backend.close()

    def _lock(self) -> asyncio.Lock:
        """One fold at a time per event loop (an asyncio.Lock belongs to one loop)."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock


def _find_summary(turns: list[Turn]) -> tuple[int, SummaryState] | None:
    """Where the running summary is among a backend's messages (the first system message in
    the summary's form, after any pinned system messages), read back from its text: so a
    reopened backend carries on from it."""
    for at, t in enumerate(turns):
        if t["role"] != "system":
            return None
        rest = t["content"]
        if not rest.startswith(SUMMARY_PREFIX):
            continue
        rest = rest[len(SUMMARY_PREFIX) :]
        extractive = rest.startswith(EXTRACTIVE_NOTE)
        if extractive:
            rest = rest[len(EXTRACTIVE_NOTE) :]
        if rest.startswith(": "):
            method: Literal["llm", "extractive"] = "extractive" if extractive else "llm"
            return at, SummaryState(text=rest[2:], method=method, version=1)
    return None
