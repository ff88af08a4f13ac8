"""SynapseKit's memory classes over a SynapseDB namespace: :class:`SynapseMemory` (with SynapseKit's
``SqliteMemory`` name for its users) and :class:`VectorMemory`.

Both keep messages with :class:`~synapsedb.conversation.sessions.Sessions`: one stream event per
message in ``session:<id>``, so the same session is readable by ``Sessions``, the strategies,
the HTTP session routes and ``ns.events``; ``clear`` hides the messages from later reads while
``history`` and ``as_of`` still show them (``Sessions(ns).purge(id)`` erases).

``target`` is where the namespace lives: a data directory (an embedded database, opened here
and shared by every memory of this process on that directory, closed with the last of them),
an ``http(s)://`` URL (``synapsedb.connect``), a database (``synapsedb.open(..)`` or
``synapsedb.connect(..)``) or a namespace of either. The blocking namespace methods run in a
worker thread (:class:`~synapsedb.conversation.memory.BlockingMemory`).
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from .layout import MAX_LAST, check_session_id
from .memory import BlockingMemory, Turn, check_max_messages
from .sessions import Sessions
from .strategies import Vector

__all__ = ["SqliteMemory", "SynapseMemory", "VectorMemory"]

# Embedded databases opened by path, shared by the memories of this process: the engine locks a
# data directory to one open handle, and seed users make one memory per session on one path.
_OPEN: dict[Path, list[Any]] = {}  # resolved path -> [database, number of memories using it]
_OPEN_LOCK = threading.Lock()
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _acquire(path: Path) -> Any:
    import synapsedb

    with _OPEN_LOCK:
        entry = _OPEN.get(path)
        if entry is None:
            entry = _OPEN[path] = [synapsedb.open(path, llm=None), 0]
        entry[1] += 1
        return entry[0]


def _release(path: Path) -> None:
    with _OPEN_LOCK:
        entry = _OPEN.get(path)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _OPEN[path]
            entry[0].close()


class _Target:
    """A namespace resolved from a memory's ``target``, and how to let go of it."""

    def __init__(self, target: Any, namespace: str, api_key: str | None) -> None:
        self._path: Path | None = None
        self._owned: Any = None  # a remote database opened here
        if isinstance(target, str) and target.startswith(("http://", "https://")):
            import synapsedb

            self._owned = synapsedb.connect(target, api_key=api_key)
            self.ns = self._owned.namespace(namespace)
        elif isinstance(target, str | os.PathLike):
            if isinstance(target, str) and not target.strip():
                raise ValidationError("target: empty path", field="target")
            if isinstance(target, str) and _SCHEME.match(target):  # not a directory to create
                raise ValidationError(
                    f"target: {target.split(':', 1)[0]}:// is not a SynapseDB server; give an "
                    "http(s):// URL or a data directory",
                    field="target",
                )
            self._path = Path(target).expanduser().resolve()
            if self._path.is_file():
                raise ValidationError(
                    f"target: {str(target)!r} is a file; SynapseDB keeps a database in a "
                    "directory (SqliteMemory's SQLite files are not read)",
                    field="target",
                )
            self.ns = _acquire(self._path).namespace(namespace)
        elif callable(getattr(target, "namespace", None)):  # a database, embedded or remote
            self.ns = target.namespace(namespace)
        elif callable(getattr(target, "append", None)) and callable(
            getattr(target, "events", None)
        ):
            self.ns = target
        else:
            raise ValidationError(
                "target: expected a data directory, an http(s):// URL, a database or a "
                f"namespace, got {type(target).__name__}",
                field="target",
            )
        if _is_async(self.ns):
            self.close()
            raise ValidationError(
                "target: an async client's namespace cannot serve to_messages(); pass the URL "
                "(the memory runs the blocking client in a worker thread)",
                field="target",
            )

    def close(self) -> None:
        if self._path is not None:
            path, self._path = self._path, None
            _release(path)
        if self._owned is not None:
            owned, self._owned = self._owned, None
            owned.close()


def _is_async(ns: Any) -> bool:
    """A namespace whose methods are coroutines (an
    :class:`~synapsedb.surface.AsyncNamespaceAPI`: ``synapsedb.connect_async``'s)."""
    return inspect.iscoroutinefunction(getattr(ns, "events", None))


class SynapseMemory(BlockingMemory):
    """A conversation kept in a SynapseDB namespace (embedded or remote).

    ``max_messages`` (at most 10,000) bounds what :meth:`get` returns to the newest that many,
    read from the end of the stream (as fast on a long session as on a short one); the
    namespace keeps every message, as history. ``ttl_seconds``: the session reads as empty that
    long after its last message (``Sessions(ns).purge_expired()`` erases such sessions).
    ``searchable``: also store each message as a searchable memory, so ``ns.query`` and
    ``ns.recall`` reach old turns. ``api_key`` is for an ``http(s)://`` target.
    """

    def __init__(
        self,
        target: Any,
        session_id: str = "default",
        max_messages: int | None = None,
        namespace: str = "default",
        *,
        api_key: str | None = None,
        ttl_seconds: float | None = None,
        searchable: bool = False,
    ) -> None:
        if max_messages is not None and check_max_messages(max_messages) > MAX_LAST:  # type: ignore[operator]
            raise ValidationError(
                f"max_messages: {max_messages} is over the limit of {MAX_LAST}",
                field="max_messages",
                limit=MAX_LAST,
            )
        super().__init__(max_messages)
        self.session_id = check_session_id(session_id)
        self._target = _Target(target, namespace, api_key)
        try:
            self.sessions = Sessions(self._target.ns, searchable=searchable, ttl=ttl_seconds)
        except BaseException:
            self._target.close()
            raise

    @property
    def ns(self) -> Any:
        """The namespace the messages are kept in."""
        return self._target.ns

    def _add_sync(self, turn: Turn) -> None:
        self.sessions.append(self.session_id, (turn["role"], turn["content"]))

    def _get_sync(self) -> list[Turn]:
        return [
            {"role": m.role, "content": m.content}
            for m in self.sessions.load(self.session_id, last=self.max_messages)
        ]

    def _clear_sync(self) -> None:
        self.sessions.clear(self.session_id)

    def close(self) -> None:
        """Let go of the database if this memory opened it (the last memory on a directory
        closes it); one that was passed in stays open."""
        self._target.close()


class SqliteMemory(SynapseMemory):
    """SynapseKit's ``SqliteMemory``: a :class:`SynapseMemory` over the embedded database in the
    directory ``db_path`` (created if missing; SynapseDB stores in SQLite inside it). An
    existing SQLite file from SynapseKit is not read: ValidationError names ``target``."""

    def __init__(
        self,
        db_path: str | os.PathLike[str] = "memory.db",
        session_id: str = "default",
        max_messages: int | None = None,
    ) -> None:
        super().__init__(db_path, session_id=session_id, max_messages=max_messages)


class VectorMemory(BlockingMemory):
    """Messages stored searchable; :meth:`get` gives the ``max_results`` (default 5) earlier
    turns most relevant to the latest user message, oldest first, then that message and what
    followed it, after the session's first message when it is a system message (the
    :class:`~synapsedb.conversation.strategies.Vector` strategy). Before any user message: the
    latest ``max_results`` messages.

    ``vector_store``: where they are kept, as :class:`SynapseMemory`'s ``target`` (a namespace,
    a database, a data directory or an ``http(s)://`` URL); the search is the namespace's
    hybrid query (the embedder's vectors with BM25, or BM25 alone on a database without an
    embedder). None: a private embedded database in a temporary directory, with the default
    local embedder, deleted by :meth:`close` (or when the object is collected, or at exit):
    nothing persists.
    """

    def __init__(
        self,
        vector_store: Any = None,
        max_results: int = 5,
        *,
        session_id: str = "default",
        namespace: str = "default",
        api_key: str | None = None,
    ) -> None:
        limit = check_max_messages(max_results, "max_results", optional=False)
        assert limit is not None
        if limit > MAX_LAST:
            raise ValidationError(
                f"max_results: {limit} is over the limit of {MAX_LAST}",
                field="max_results",
                limit=MAX_LAST,
            )
        super().__init__(None)
        self.max_results = limit
        self.session_id = check_session_id(session_id)
        self._private: weakref.finalize[Any, Any] | None = None
        if vector_store is None:
            import synapsedb

            tmp = tempfile.mkdtemp(prefix="synapsedb-vector-memory-")
            try:
                vector_store = synapsedb.open(tmp, llm=None, durability="os")
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            # closed and deleted by close(), or when this object is collected or at exit
            self._private = weakref.finalize(self, _discard, vector_store, tmp)
        self._target = _Target(vector_store, namespace, api_key)
        self.sessions = Sessions(self._target.ns, searchable=True)
        self._vector = Vector(self.sessions, k=limit)

    @property
    def ns(self) -> Any:
        return self._target.ns

    def _add_sync(self, turn: Turn) -> None:
        self.sessions.append(self.session_id, (turn["role"], turn["content"]))

    def _get_sync(self) -> list[Turn]:
        found = self._vector.load(self.session_id)
        if not found:  # no user message yet (or none at all)
            found = self.sessions.load(self.session_id, last=self.max_results)
        return [{"role": m.role, "content": m.content} for m in found]

    def _clear_sync(self) -> None:
        self.sessions.clear(self.session_id)

    def _cached(self, turn: Turn) -> None:
        self._cache = None  # a new message may change what is relevant: read again

    def close(self) -> None:
        """Let go of the store; a private temporary database is deleted."""
        self._target.close()
        if self._private is not None:
            self._private()


def _discard(db: Any, path: str) -> None:
    db.close()
    shutil.rmtree(path, ignore_errors=True)
