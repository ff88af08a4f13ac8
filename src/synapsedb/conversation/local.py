"""``ns.sessions`` of an embedded namespace: :class:`LocalSessions`, the
:class:`~synapsedb.surface.SessionsAPI` run in this process.

Each operation runs :class:`~.sessions.Sessions` over the namespace with the ttl it is given
and the database's clock, exactly as the server's session routes do for a remote
``ns.sessions`` (they call this very class), so both answer alike. A summarising strategy's
model is the memory loop's LLM (extractive without one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..surface import MAX_APPEND, SessionsAPI
from ..times import TimeLike
from ..types import Forgotten, Message, MessageLike, SessionInfo
from . import named
from .sessions import Sessions
from .summary import PREFIX, Summarizer

if TYPE_CHECKING:
    from ..clock import Clock
    from ..engine.namespace import Namespace

__all__ = ["LocalSessions", "summary_of"]


class LocalSessions(SessionsAPI):
    """The sessions of an embedded namespace, TTLs judged by ``clock`` (the database's);
    ``llm``: the model summarising strategies use (None: extractive)."""

    __slots__ = ("_clock", "_llm", "_ns")

    def __init__(self, ns: Namespace, clock: Clock, llm: Any = None) -> None:
        self._ns, self._clock, self._llm = ns, clock, llm

    def _store(self, ttl: float | None = None) -> Sessions:
        return Sessions(self._ns, ttl=ttl, clock=self._clock)

    def append(
        self,
        session_id: str,
        message: MessageLike,
        *,
        searchable: bool | None = None,
        entity: str | None = None,
    ) -> Message:
        return self._store().append(session_id, message, searchable=searchable, entity=entity)

    def append_many(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        *,
        searchable: bool | None = None,
        entity: str | None = None,
    ) -> list[Message]:
        if isinstance(messages, Sequence) and len(messages) > MAX_APPEND:
            raise ValidationError(
                f"messages: {len(messages)} messages, over the limit of {MAX_APPEND} per call",
                field="messages",
                limit=MAX_APPEND,
            )
        return self._store().append_many(session_id, messages, searchable=searchable, entity=entity)

    def load(
        self,
        session_id: str,
        *,
        last: int | None = None,
        as_of: TimeLike | None = None,
        ttl: float | None = None,
        strategy: str | None = None,
        k: int | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
        keep: int | None = None,
        summary_tokens: int | None = None,
    ) -> list[Message]:
        options = named.check(
            strategy,
            {
                "k": k,
                "max_tokens": max_tokens,
                "model": model,
                "keep": keep,
                "summary_tokens": summary_tokens,
            },
            last=last,
            as_of=as_of,
        )
        summarizer = None
        if strategy in named.SUMMARISING:
            summarizer = Summarizer(
                self._llm, max_tokens=options.pop("summary_tokens", 300), model=options.get("model")
            )
        return self._store(ttl).load(
            session_id, last=last, as_of=as_of, strategy=strategy, summarizer=summarizer, **options
        )

    def clear(self, session_id: str) -> None:
        self._store().clear(session_id)

    def purge(self, session_id: str) -> Forgotten:
        return self._store().purge(session_id)

    def configure(self, session_id: str, *, ttl: float | None) -> None:
        self._store().configure(session_id, ttl=ttl)

    def info(
        self,
        session_id: str,
        *,
        as_of: TimeLike | None = None,
        count_limit: int = 1000,
        ttl: float | None = None,
    ) -> SessionInfo:
        return self._store(ttl).info(session_id, as_of=as_of, count_limit=count_limit)

    def ids(self, *, as_of: TimeLike | None = None, ttl: float | None = None) -> list[str]:
        return self._store(ttl).sessions(as_of=as_of)

    def purge_expired(self, *, ttl: float | None = None) -> list[str]:
        return self._store(ttl).purge_expired()

    def search(
        self,
        session_id: str,
        text: str,
        *,
        k: int = 5,
        as_of: TimeLike | None = None,
        exclude: Sequence[str] = (),
        ttl: float | None = None,
    ) -> list[Message]:
        return self._store(ttl).search(session_id, text, k=k, as_of=as_of, exclude=exclude)


def summary_of(messages: list[Message]) -> dict[str, Any] | None:
    """The summary a summarising strategy's load put first (its ``method``, ``version`` and
    ``through``), or None."""
    for m in messages:
        if (
            m.role == "system"
            and m.metadata
            and isinstance(m.metadata.get("summary"), dict)
            and m.content.startswith(PREFIX)
        ):
            return m.metadata["summary"]  # type: ignore[no-any-return]
    return None
