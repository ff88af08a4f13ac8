"""LlamaIndex adapters (``pip install 'synapsedb[llamaindex]'``; docs/integrations/llamaindex.md).

- :class:`SynapseChatStore`: a ``BaseChatStore`` (``ChatMemoryBuffer``'s store), sync and
  async methods.
- :class:`SynapseDBChatStore`: an ``AsyncDBChatStore``, the short-term store of LlamaIndex's
  ``Memory`` (``Memory.from_defaults(chat_store=...)``), with active and archived messages.
- :class:`SynapseMemoryBlock`: a ``Memory`` block that recalls what SynapseDB knows about an
  entity for the conversation (``ns.recall``) and hands it the turns ``Memory`` flushes
  (``ns.remember``: stored, searchable, and mined for facts by the configured model).

The stores keep key ``k`` as the SynapseDB session ``k`` (:class:`synapsedb.conversation.Sessions`),
so ``Sessions``, the strategies and the other adapters read the same conversation; a key's
archived messages are the session ``k`` + ``~archived``. Everything goes through the public
namespace API, on an embedded database or a server (``synapsedb.connect``; the API key
decides the tenant).

Sessions are append-only streams: replacing or deleting messages (``set_messages``,
``delete_message``, ``delete_last_message``, ``delete_oldest_messages``, archiving) is a
*rewrite*: read the messages, ``clear`` the session, append the ones that stay. History and
``as_of`` reads still show every version; the kept messages get new ids and times. A store
runs each operation whole under its lock, so operations through one store object (``Memory``'s
concurrent puts included) never interleave; a message that ANOTHER process appends to the same
key during a rewrite may be hidden by it (the session API has no atomic rewrite).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.storage.chat_store.base import BaseChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus

from ..conversation import AsyncSessions, Message, Sessions
from ..conversation.drivers import Plan, call, drive, drive_async
from ..conversation.layout import check_session_id
from ..engine import Namespace
from ..errors import ValidationError
from .llamaindex_messages import from_llama, to_llama, to_openai_text

__all__ = ["ARCHIVE_SUFFIX", "SynapseChatStore", "SynapseDBChatStore", "SynapseMemoryBlock"]

ARCHIVE_SUFFIX = "~archived"
T = TypeVar("T")


class _Plans:
    """Each store operation once, as a plan of calls on a ``Sessions``-like store (driven
    blocking over :class:`Sessions`, awaited over :class:`AsyncSessions`)."""

    @staticmethod
    def key(key: Any) -> str:
        key = check_session_id(key, "key")
        if key.endswith(ARCHIVE_SUFFIX):
            raise ValidationError(
                f"key: must not end with {ARCHIVE_SUFFIX!r} (archived "
                "messages are kept under that name)",
                field="key",
            )
        return str(key)

    @staticmethod
    def convert(messages: Any) -> list[Message]:
        if isinstance(messages, ChatMessage | str) or not isinstance(messages, Sequence):
            raise ValidationError("messages: expected a list of ChatMessage", field="messages")
        return [from_llama(m, f"messages[{i}]") for i, m in enumerate(messages)]

    def load(self, key: str) -> Plan[list[Message]]:
        return (yield call("load", key))  # type: ignore[no-any-return]

    def get(self, key: Any) -> Plan[list[ChatMessage]]:
        return [to_llama(m) for m in (yield from self.load(self.key(key)))]

    def add(self, key: Any, messages: Any) -> Plan[None]:
        msgs = self.convert(messages)
        if msgs:
            yield call("append_many", self.key(key), msgs)

    def rewrite(self, key: str, keep: list[Message]) -> Plan[None]:
        yield call("clear", key)
        if keep:
            yield call("append_many", key, [_fresh(m) for m in keep])

    def set(self, key: Any, messages: Any) -> Plan[None]:
        key, msgs = self.key(key), self.convert(messages)
        yield from self.rewrite(key, msgs)

    def delete_all(self, key: Any) -> Plan[list[ChatMessage] | None]:
        key = self.key(key)
        old = yield from self.load(key)
        if not old:
            return None
        yield call("clear", key)
        return [to_llama(m) for m in old]

    def delete_at(self, key: Any, idx: Any) -> Plan[ChatMessage | None]:
        key = self.key(key)
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise ValidationError("idx: expected an integer", field="idx")
        old = yield from self.load(key)
        if not -len(old) <= idx < len(old):
            return None
        gone = old.pop(idx)
        yield from self.rewrite(key, old)
        return to_llama(gone)

    def take_oldest(self, key: Any, n: Any, archive: bool) -> Plan[list[ChatMessage]]:
        key = self.key(key)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValidationError("n: expected an integer >= 0", field="n")
        old = yield from self.load(key)
        taken = old[:n]
        if taken:
            if archive:
                yield call("append_many", key + ARCHIVE_SUFFIX, [_fresh(m) for m in taken])
            yield from self.rewrite(key, old[n:])
        return [to_llama(m) for m in taken]

    def by_status(self, key: Any, status: MessageStatus | None) -> Plan[list[Message]]:
        key = self.key(key)
        active = [] if status == MessageStatus.ARCHIVED else (yield from self.load(key))
        if status == MessageStatus.ACTIVE:
            return active
        archived = yield from self.load(key + ARCHIVE_SUFFIX)
        return archived + active  # archived ones are the older

    def clear_status(self, key: Any, status: MessageStatus | None) -> Plan[None]:
        key = self.key(key)
        if status != MessageStatus.ARCHIVED:
            yield call("clear", key)
        if status != MessageStatus.ACTIVE:
            yield call("clear", key + ARCHIVE_SUFFIX)

    def keys(self) -> Plan[list[str]]:
        names = yield call("sessions")
        out = {n[: -len(ARCHIVE_SUFFIX)] if n.endswith(ARCHIVE_SUFFIX) else n for n in names}
        return sorted(out)


_PLANS = _Plans()


def _fresh(m: Message) -> Message:
    """A loaded message without the store-given id and time, to be appended again."""
    return Message(
        m.role,
        m.content,
        name=m.name,
        tool_calls=m.tool_calls,
        tool_call_id=m.tool_call_id,
        metadata=m.metadata,
    )


class _Backed:
    """The namespaces behind a store: ``namespace`` (sync; embedded or ``synapsedb.connect``)
    and/or ``async_namespace`` (``synapsedb.connect_async``, or embedded)."""

    _sync: Sessions | None
    _async: AsyncSessions | None
    _lock: threading.Lock
    _loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]

    def _attach(self, namespace: Any, async_namespace: Any, ttl: float | None) -> None:
        if namespace is None and async_namespace is None:
            raise ValidationError(
                "namespace: pass a namespace, an async_namespace or both", field="namespace"
            )
        self._sync = Sessions(namespace, ttl=ttl) if namespace is not None else None
        self._async = (
            AsyncSessions(async_namespace, ttl=ttl) if async_namespace is not None else None
        )
        self._lock = threading.Lock()
        self._loop_locks = weakref.WeakKeyDictionary()

    def _run(self, plan: Plan[T]) -> T:
        """Each operation runs whole under the store's lock: a rewrite (read, clear, append)
        in this process never interleaves with another operation of the same store."""
        if self._sync is None:
            plan.close()
            raise ValidationError(
                "namespace: this store was given only an async_namespace; use its async methods",
                field="namespace",
            )
        with self._lock:
            return drive(self._sync, plan)

    async def _arun(self, plan: Plan[T]) -> T:
        if self._async is None:
            return await asyncio.to_thread(self._run, plan)
        loop = asyncio.get_running_loop()
        lock = self._loop_locks.get(loop)
        if lock is None:  # one per event loop (Memory's sync methods run a fresh loop per call)
            lock = self._loop_locks[loop] = asyncio.Lock()
        async with lock:
            return await drive_async(self._async, plan)


class SynapseChatStore(_Backed, BaseChatStore):
    """LlamaIndex's ``BaseChatStore`` on SynapseDB sessions (``ChatMemoryBuffer.from_defaults(
    chat_store=SynapseChatStore(ns), chat_store_key="user-42")``). ``ttl``: each session's
    sliding time to live in seconds."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _sync: Sessions | None = PrivateAttr(default=None)
    _async: AsyncSessions | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _loop_locks: Any = PrivateAttr(default=None)

    def __init__(
        self, namespace: Any = None, *, async_namespace: Any = None, ttl: float | None = None
    ) -> None:
        super().__init__()
        self._attach(namespace, async_namespace, ttl)

    @classmethod
    def class_name(cls) -> str:
        return "SynapseChatStore"

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        self._run(_PLANS.set(key, messages))

    def get_messages(self, key: str) -> list[ChatMessage]:
        return self._run(_PLANS.get(key))

    def add_message(self, key: str, message: ChatMessage) -> None:
        self._run(_PLANS.add(key, [message]))

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        return self._run(_PLANS.delete_all(key))

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        return self._run(_PLANS.delete_at(key, idx))

    def delete_last_message(self, key: str) -> ChatMessage | None:
        return self._run(_PLANS.delete_at(key, -1))

    def get_keys(self) -> list[str]:
        return self._run(_PLANS.keys())

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        await self._arun(_PLANS.set(key, messages))

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        return await self._arun(_PLANS.get(key))

    async def async_add_message(self, key: str, message: ChatMessage) -> None:
        await self._arun(_PLANS.add(key, [message]))

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        return await self._arun(_PLANS.delete_all(key))

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        return await self._arun(_PLANS.delete_at(key, idx))

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        return await self._arun(_PLANS.delete_at(key, -1))

    async def aget_keys(self) -> list[str]:
        return await self._arun(_PLANS.keys())


class SynapseDBChatStore(_Backed, AsyncDBChatStore):
    """LlamaIndex's ``AsyncDBChatStore`` on SynapseDB sessions: the FIFO queue of ``Memory``
    (``Memory.from_defaults(session_id=.., chat_store=SynapseDBChatStore(ns))``). Active
    messages are the session ``key``, archived ones (what ``Memory`` flushed) the session
    ``key~archived``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _sync: Sessions | None = PrivateAttr(default=None)
    _async: AsyncSessions | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _loop_locks: Any = PrivateAttr(default=None)

    def __init__(
        self, namespace: Any = None, *, async_namespace: Any = None, ttl: float | None = None
    ) -> None:
        super().__init__()
        self._attach(namespace, async_namespace, ttl)

    @classmethod
    def class_name(cls) -> str:
        return "SynapseDBChatStore"

    async def get_messages(
        self,
        key: str,
        status: MessageStatus | None = MessageStatus.ACTIVE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        for name, value in (("limit", limit), ("offset", offset)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValidationError(f"{name}: expected an integer >= 0", field=name)
        msgs = await self._arun(_PLANS.by_status(key, status))
        msgs = msgs[offset or 0 :]
        return [to_llama(m) for m in (msgs if limit is None else msgs[:limit])]

    async def count_messages(
        self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE
    ) -> int:
        return len(await self._arun(_PLANS.by_status(key, status)))

    async def add_message(
        self, key: str, message: ChatMessage, status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        await self.add_messages(key, [message], status)

    async def add_messages(
        self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        key = _PLANS.key(key)
        await self._arun(_PLANS.add(_status_key(key, status), messages))

    async def set_messages(
        self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        key = _PLANS.key(key)
        await self._arun(_PLANS.set(_status_key(key, status), messages))

    async def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        return await self._arun(_PLANS.delete_at(key, idx))

    async def delete_messages(self, key: str, status: MessageStatus | None = None) -> None:
        await self._arun(_PLANS.clear_status(key, status))

    async def delete_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        return await self._arun(_PLANS.take_oldest(key, n, archive=False))

    async def archive_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        return await self._arun(_PLANS.take_oldest(key, n, archive=True))

    async def get_keys(self) -> list[str]:
        return await self._arun(_PLANS.keys())


def _status_key(key: str, status: Any) -> str:
    if status == MessageStatus.ACTIVE:
        return key
    if status == MessageStatus.ARCHIVED:
        return key + ARCHIVE_SUFFIX
    raise ValidationError(f"status: expected active or archived, got {status!r}", field="status")


class SynapseMemoryBlock(BaseMemoryBlock[str]):
    """A ``Memory`` block of what SynapseDB knows about ``entity``.

    ``aget`` recalls (``ns.recall``) the memories the conversation's last user turn needs,
    over the namespace's similarity threshold, as SynapseDB's context block within
    ``budget_tokens`` ("" when nothing relevant is known, or the turn is small talk).
    ``aput`` gives the turns ``Memory`` flushes to ``ns.remember``: stored in the stream of the
    session ``session`` (default: ``<Memory's session id>:remembered``, apart from the chat
    store's own session), made searchable, and mined for facts by the model the database or
    server is configured with (queued; ``wait=True`` extracts inline). Give ``namespace``
    (sync) and/or ``async_namespace`` (``synapsedb.connect_async``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(default="synapse_memories", description="The block's name.")
    namespace: Any = Field(default=None, description="A SynapseDB namespace (sync).")
    async_namespace: Any = Field(default=None, description="A connect_async namespace.")
    entity: str = Field(description="Whom the memories are about, e.g. 'user:42'.")
    session: str | None = Field(default=None, description="The remember session.")
    budget_tokens: int = Field(default=1000, description="The context block's token budget.")
    k: int = Field(default=10, description="Memories considered per recall.")
    threshold: float | None = Field(default=None, description="Calibrated similarity floor.")
    wait: bool = Field(default=False, description="Extract facts inline in aput.")

    def __init__(self, **data: Any) -> None:
        if data.get("namespace") is None and data.get("async_namespace") is None:
            raise ValidationError(
                "namespace: pass a namespace, an async_namespace or both", field="namespace"
            )
        super().__init__(**data)

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """An async namespace's call awaited; a sync one's (embedded, given either way, or
        ``synapsedb.connect``) in a worker thread."""
        ns = self.async_namespace
        if ns is not None and not isinstance(ns, Namespace):
            return await getattr(ns, method)(*args, **kwargs)
        target = ns if ns is not None else self.namespace
        return await asyncio.to_thread(getattr(target, method), *args, **kwargs)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        turns = to_openai_text(list(messages or []))
        if not any(t["role"] == "user" for t in turns):
            return ""
        found = await self._call(
            "recall",
            turns,
            entity=self.entity,
            budget_tokens=self.budget_tokens,
            k=self.k,
            threshold=self.threshold,
        )
        return str(found.context) if found.needed and found.memories else ""

    async def _aput(self, messages: list[ChatMessage]) -> None:
        session = self.session
        for m in messages:
            sid = m.additional_kwargs.pop("session_id", None)
            if session is None and isinstance(sid, str):
                session = f"{sid}:remembered"
        turns = to_openai_text(messages)
        if turns:
            await self._call("remember", turns, entity=self.entity, session=session, wait=self.wait)
