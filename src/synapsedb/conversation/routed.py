"""Sessions over the session routes: one HTTP round trip per operation.

A remote namespace (``synapsedb.connect(url).namespace(..)``, sync or async) has the session
routes' operations as ``ns.sessions`` (docs/http.md). Over such a namespace
:class:`RoutedPlans` turns every operation (``append``, ``append_many``, ``load`` with a
strategy too, ``clear``, ``configure``, ``info``, ``sessions``, ``purge``, ``purge_expired``,
``search``) into one call of those methods, where the composed plans of
:mod:`.session_plans` take two or more (state fact, then events). The server runs the very
same plans over its embedded namespace, so the answers are the same, and every TTL is judged
by one clock: the server's.

The plans still compose public calls (as over an embedded namespace) when the route cannot
say the same thing:

- the store has its own ``clock`` (a TTL is judged by the server's clock over HTTP);
- the session id contains ``/`` (a URL path segment cannot carry it: servers decode ``%2F``
  before routing);
- a ``summarizer`` object is given to ``load``: the summary is then made here, with it (over
  the route the server's configured model makes it).

A session whose id holds ``/`` is composed whole, so its TTL is judged by this store's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..clock import SystemClock
from ..engine.namespace import Namespace
from ..surface import MAX_APPEND, AsyncNamespaceAPI, NamespaceAPI
from ..times import TimeLike
from ..types import Forgotten
from ..validation import routable
from . import named
from .drivers import Plan, call
from .layout import check_session_id
from .messages import Message, MessageLike
from .session_plans import SessionPlans
from .session_records import SessionInfo, check_count_limit, check_ttl

__all__ = ["MAX_APPEND", "RoutedPlans", "routable"]


def served(ns: Any) -> bool:
    """Whether ``ns`` is a server's namespace (a client's: it derives from the surface's
    protocols, and is not the embedded one), whose ``ns.sessions`` runs each operation in one
    request."""
    mro = type(ns).__mro__
    return (NamespaceAPI in mro or AsyncNamespaceAPI in mro) and not isinstance(ns, Namespace)


class RoutedPlans(SessionPlans):
    """:class:`SessionPlans` that use the session routes when the namespace has them."""

    __slots__ = ()

    def _routed(self, session_id: str | None = None) -> bool:
        return (
            served(self.ns)
            and type(self.clock) is SystemClock
            and (session_id is None or routable(check_session_id(session_id)))
        )

    def _append(
        self,
        session_id: str,
        message: MessageLike,
        searchable: bool | None,
        entity: str | None,
        field: str = "message",
    ) -> Plan[Message]:
        if not self._routed(session_id):
            return (yield from super()._append(session_id, message, searchable, entity, field))
        msg = Message.of(message, field)  # checked here, as embedded: bad input sends nothing
        out = yield call(
            "sessions.append",
            session_id,
            msg,
            searchable=self._searchable(searchable),
            entity=self._entity(entity),
        )
        return out  # type: ignore[no-any-return]

    def _append_many(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        searchable: bool | None,
        entity: str | None,
    ) -> Plan[list[Message]]:
        if not self._routed(session_id):
            return (yield from super()._append_many(session_id, messages, searchable, entity))
        from ..errors import ValidationError

        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise ValidationError("messages: expected a list of messages", field="messages")
        msgs = [Message.of(m, f"messages[{i}]") for i, m in enumerate(messages)]
        out: list[Message] = []
        for start in range(0, len(msgs), MAX_APPEND):  # all checked first: bad input sends nothing
            out += yield call(
                "sessions.append_many",
                session_id,
                msgs[start : start + MAX_APPEND],
                searchable=self._searchable(searchable),
                entity=self._entity(entity),
            )
        return out

    def _searchable(self, searchable: bool | None) -> bool | None:
        return self.searchable if searchable is None else searchable

    def _entity(self, entity: str | None) -> str | None:
        return self.entity if entity is None else entity

    def _options(
        self, strategy: Any, last: Any, as_of: Any, summarizer: Any, **options: Any
    ) -> dict[str, Any]:
        """``load``'s strategy options, checked (:func:`.named.check`)."""
        return named.check(strategy, options, last=last, as_of=as_of, summarizer=summarizer)

    def _local(
        self,
        session_id: str,
        strategy: str | None,
        options: dict[str, Any],
        summarizer: Any,
        *,
        asynchronous: bool = False,
    ) -> Any:
        """The strategy ``load`` runs here over this store, or None: none was asked for, or
        the route makes it (no ``summarizer`` object: the server's model summarises)."""
        check_session_id(session_id)  # first, on every path: the same error embedded or not
        if strategy is None or (summarizer is None and self._routed(session_id)):
            return None
        return named.build(
            self, strategy, options, summarizer=summarizer, asynchronous=asynchronous
        )

    def _load_with(
        self,
        session_id: str,
        last: int | None,
        as_of: TimeLike | None,
        strategy: str | None,
        options: dict[str, Any],
    ) -> Plan[list[Message]]:
        """``load`` over the route (the strategy made by the server), or composed when the
        route cannot say it and no strategy was asked for."""
        if self._routed(session_id):
            out = yield call(
                "sessions.load",
                session_id,
                last=last,
                as_of=as_of,
                strategy=strategy,
                ttl=self.ttl,
                **options,
            )
            return out  # type: ignore[no-any-return]
        return (yield from self._load(session_id, last, as_of))

    def _clear(self, session_id: str) -> Plan[None]:
        if not self._routed(session_id):
            return (yield from super()._clear(session_id))
        yield call("sessions.clear", session_id)
        return None

    def _info(self, session_id: str, as_of: TimeLike | None, count_limit: int) -> Plan[SessionInfo]:
        if not self._routed(session_id):
            return (yield from super()._info(session_id, as_of, count_limit))
        out = yield call(
            "sessions.info",
            session_id,
            as_of=as_of,
            count_limit=check_count_limit(count_limit),
            ttl=self.ttl,
        )
        return out  # type: ignore[no-any-return]

    def _sessions(self, as_of: TimeLike | None) -> Plan[list[str]]:
        if not self._routed():
            return (yield from super()._sessions(as_of))
        out = yield call("sessions.ids", as_of=as_of, ttl=self.ttl)
        return out  # type: ignore[no-any-return]

    def _configure(self, session_id: str, ttl: Any) -> Plan[None]:
        if not self._routed(session_id):
            return (yield from super()._configure(session_id, ttl))
        yield call("sessions.configure", session_id, ttl=check_ttl(ttl))
        return None

    def _purge_expired(self) -> Plan[list[str]]:
        if not self._routed():
            return (yield from super()._purge_expired())
        out = yield call("sessions.purge_expired", ttl=self.ttl)
        return out  # type: ignore[no-any-return]

    def _search(
        self,
        session_id: str,
        text: str,
        k: int,
        as_of: TimeLike | None,
        exclude: Sequence[str] = (),
    ) -> Plan[list[Message]]:
        if not self._routed(session_id):
            return (yield from super()._search(session_id, text, k, as_of, exclude))
        out = yield call(
            "sessions.search", session_id, text, k=k, as_of=as_of, exclude=exclude, ttl=self.ttl
        )
        return out  # type: ignore[no-any-return]

    def _purge(self, session_id: str) -> Plan[Forgotten]:
        if not self._routed(session_id):
            return (yield from super()._purge(session_id))
        out = yield call("sessions.purge", session_id)
        return out  # type: ignore[no-any-return]
