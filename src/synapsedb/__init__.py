"""SynapseDB: Redis for LLM memory.

import synapsedb
db = synapsedb.open("./synapse-data")
mem = db.namespace("acme-support", agent="intake")
mem.write("user:4321", {"content": "Refund requested for order #1458", "salience": 0.9})
mem.append("user:4321", "Refund confirmed delivered on 10/28.")
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .clock import Clock, ManualClock, SystemClock
from .config import LLMSettings, Settings
from .embed.base import Embedder
from .engine import Database, Namespace
from .errors import (
    ClosedError,
    EmbeddingError,
    NotFoundError,
    NotOwnerError,
    QuotaExceededError,
    StorageError,
    SynapseError,
    ValidationError,
    VersionConflictError,
)
from .memory_loop import LoopSettings, MemoryLoop
from .types import BUILTIN_TYPES, Event, Fact, Memory, Stats

if TYPE_CHECKING:  # the client (httpx) is imported only when connect() is called
    from .client import AsyncRemoteDatabase, RemoteDatabase

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_TYPES",
    "Clock",
    "ClosedError",
    "Database",
    "Embedder",
    "EmbeddingError",
    "Event",
    "Fact",
    "ManualClock",
    "Memory",
    "Namespace",
    "NotFoundError",
    "NotOwnerError",
    "QuotaExceededError",
    "Settings",
    "Stats",
    "StorageError",
    "SynapseError",
    "SystemClock",
    "ValidationError",
    "VersionConflictError",
    "__version__",
    "connect",
    "connect_async",
    "open",
]


def open(
    path: str | os.PathLike[str],
    *,
    storage: Any = None,
    settings: Settings | None = None,
    clock: Clock | None = None,
    embedder: Embedder | str | None = "settings",
    llm: Any = "env",
    loop_settings: Any = None,
    **overrides: Any,
) -> Database:
    """Open (creating if needed) the data directory ``path`` as an embedded database.

    ``storage`` is where the rows live: ``None`` is SQLite inside ``path``;
    ``"postgresql://user@host:5432/db?schema=name"`` is a PostgreSQL database (docs/deploy.md;
    ``path`` then holds only the lock and the saved indexes); a
    :class:`~synapsedb.storage.base.Storage` object is used as it is (and closed with the
    database).
    ``overrides`` set individual :class:`Settings` fields, e.g. ``durability="os"``.
    ``embedder`` is ``"minilm"`` (the local default, from settings), ``None``/``"none"`` (only
    caller-provided vectors) or any object with ``name``, ``dim`` and ``embed(texts)``.

    ``llm`` is the chat model of the memory loop (``ns.remember``/``ns.recall``,
    docs/memory-loop.md): ``"env"`` (``SYNAPSEDB_LLM_*``; none when unset), ``None`` (no LLM:
    turns are stored, extraction waits), an :class:`~synapsedb.config.LLMSettings` or a
    :class:`~synapsedb.llm.ChatClient`. ``loop_settings`` is a
    :class:`~synapsedb.memory_loop.LoopSettings` (default: ``SYNAPSEDB_LOOP_*``). A
    background thread makes remembered turns searchable and, with an LLM, runs queued extractions,
    until ``close()``.
    """
    if llm == "env":
        llm = LLMSettings.from_env()
    owns = isinstance(llm, LLMSettings)
    if isinstance(llm, LLMSettings):
        if llm.configured:
            from .llm import ChatClient  # httpx: imported only when a model is configured

            llm = ChatClient(llm)
        else:
            llm = None
    loop = MemoryLoop(llm, loop_settings or LoopSettings.from_env(), owns_llm=owns)
    db = Database(
        path, storage=storage, settings=settings, clock=clock, embedder=embedder, **overrides
    )
    db.memory_loop = loop
    loop.start(db)  # indexes remembered turns; extracts while an LLM is available
    return db


def connect(
    url: str,
    *,
    api_key: str | None = None,
    timeout: float = 30.0,
    verify: str | bool = True,
    cert: str | tuple[str, str] | None = None,
    include: str | Sequence[str] | None = None,
) -> RemoteDatabase:
    """Connect to a SynapseDB server: the same methods, arguments, return types and exception
    classes as :func:`open` (returns a ``synapsedb.client.RemoteDatabase``). ``verify`` is a
    CA bundle path (or a bool) for HTTPS; ``cert`` a client certificate for mutual TLS.
    Memories come back without their vectors unless ``include="embedding"`` (docs/http.md,
    "Lean answers")."""
    from .client import RemoteDatabase

    return RemoteDatabase(
        url, api_key=api_key, timeout=timeout, verify=verify, cert=cert, include=include
    )


def connect_async(
    url: str,
    *,
    api_key: str | None = None,
    timeout: float = 30.0,
    verify: str | bool = True,
    cert: str | tuple[str, str] | None = None,
    include: str | Sequence[str] | None = None,
) -> AsyncRemoteDatabase:
    """Like :func:`connect`, with every namespace method returning an awaitable."""
    from .client import AsyncRemoteDatabase

    return AsyncRemoteDatabase(
        url, api_key=api_key, timeout=timeout, verify=verify, cert=cert, include=include
    )
