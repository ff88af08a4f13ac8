"""The session operations as plans (:mod:`.drivers`): what each does with the namespace.

:class:`SessionPlans` holds a store's settings and builds, for each operation, the plan that
:class:`~synapsedb.conversation.sessions.Sessions` runs synchronously and
:class:`~synapsedb.conversation.sessions.AsyncSessions` awaits. Semantics are documented there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..clock import Clock, SystemClock
from ..errors import ValidationError, VersionConflictError
from ..times import TimeLike, to_us
from ..types import Event, Forgotten
from ..validation import check_entity
from .drivers import Plan, call
from .layout import (
    MAX_LAST,
    STATE_KEY,
    check_last,
    check_session_id,
    records_stream,
    session_entity,
    session_of,
)
from .messages import Message, MessageLike
from .session_records import (
    SessionInfo,
    State,
    check_count_limit,
    check_ttl,
    event_body,
    event_key,
    expiry,
    live,
    message_of_event,
    state_of,
)

__all__ = ["SessionPlans"]

MAX_EXCLUDE = 1024  # the filter language's longest $nin list
_CAS_TRIES = 8  # a clear or configure racing another one re-reads the state and tries again


class SessionPlans:
    """The operations, as plans; the two public classes only choose how to run them."""

    __slots__ = ("clock", "entity", "ns", "searchable", "ttl")

    def __init__(
        self,
        ns: Any,
        *,
        searchable: bool = False,
        ttl: float | None = None,
        entity: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(searchable, bool):
            raise ValidationError("searchable: expected true or false", field="searchable")
        self.ns = ns
        self.searchable = searchable
        self.ttl = check_ttl(ttl)
        self.entity = None if entity is None else check_entity(entity)
        self.clock: Clock = clock if clock is not None else SystemClock()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} over {self.ns!r}>"

    # -- helpers ----------------------------------------------------------------------------------

    def _now_us(self, as_of: TimeLike | None) -> int:
        return self.clock.now_us() if as_of is None else to_us(as_of, "as_of")

    def _state(self, stream: str, as_of: TimeLike | None = None) -> Plan[State]:
        facts = yield call("facts", stream, as_of=as_of)
        return state_of(facts)

    def _ttl_of(self, state: State) -> float | None:
        if "ttl" not in state.value:
            return self.ttl
        try:
            return check_ttl(state.value["ttl"])
        except ValidationError:  # not written by configure: the store's
            return self.ttl

    def _expired(self, state: State, last: Event | None, now_us: int) -> bool:
        at = expiry(self._ttl_of(state), last)
        return at is not None and now_us > to_us(at, "expires_at")

    def _all_events(
        self, stream: str, after: str | None, as_of: TimeLike | None
    ) -> Plan[list[Event]]:
        out: list[Event] = []
        while True:
            page = yield call("events", stream, after=after, limit=MAX_LAST, as_of=as_of)
            out += page
            if len(page) < MAX_LAST:
                return out
            after = page[-1].id

    def _set_state(self, stream: str, change: dict[str, Any]) -> Plan[None]:
        """Merge ``change`` into the state fact, compare-and-set on its version."""
        for _ in range(_CAS_TRIES):
            state = yield from self._state(stream)
            value = {**state.value, **change}
            if value == state.value and state.version:
                return
            try:
                yield call("set", stream, STATE_KEY, value, if_version=state.version)
                return
            except VersionConflictError:
                continue
        raise VersionConflictError(
            f"session state {stream!r}: changed by others {_CAS_TRIES} times in a row",
            entity=stream,
            key=STATE_KEY,
        )

    # -- plans --------------------------------------------------------------------------------

    def _append(
        self,
        session_id: str,
        message: MessageLike,
        searchable: bool | None,
        entity: str | None,
        field: str = "message",
    ) -> Plan[Message]:
        stream = session_entity(session_id)
        msg = Message.of(message, field)
        if searchable is None:
            searchable = self.searchable
        elif not isinstance(searchable, bool):
            raise ValidationError("searchable: expected true or false", field="searchable")
        about = check_entity(entity) if entity is not None else self.entity or stream
        body, searchable = event_body(session_id, msg, searchable)
        try:
            ev = yield call("append", about, body, stream=stream, searchable=searchable)
        except ValidationError as exc:  # the engine's limits, said of the message
            raise _of_message(exc, field) from None
        return msg.stored(ev.id, ev.ts)

    def _append_many(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        searchable: bool | None,
        entity: str | None,
    ) -> Plan[list[Message]]:
        check_session_id(session_id)
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise ValidationError("messages: expected a list of messages", field="messages")
        msgs = [Message.of(m, f"messages[{i}]") for i, m in enumerate(messages)]
        out = []
        for i, m in enumerate(msgs):
            out.append(
                (yield from self._append(session_id, m, searchable, entity, f"messages[{i}]"))
            )
        return out

    def _load(
        self, session_id: str, last: int | None, as_of: TimeLike | None
    ) -> Plan[list[Message]]:
        stream = session_entity(session_id)
        last = check_last(last)
        now = self._now_us(as_of)
        state = yield from self._state(stream, as_of)
        if last == 0:
            return []
        after = state.cleared_through
        if last is None:
            evs = yield from self._all_events(stream, after, as_of)
        else:
            evs = yield call("events", stream, order="desc", limit=last, after=after, as_of=as_of)
            evs.reverse()
        evs = live(evs, self._ttl_of(state), now)
        return [m for m in map(message_of_event, evs) if m is not None]

    def _clear(self, session_id: str) -> Plan[None]:
        stream = session_entity(session_id)
        tail = yield call("events", stream, order="desc", limit=1)
        if tail:
            yield from self._set_state(stream, {"cleared_through": tail[0].id})

    def _configure(self, session_id: str, ttl: Any) -> Plan[None]:
        stream = session_entity(session_id)
        yield from self._set_state(stream, {"ttl": check_ttl(ttl)})

    def _info(self, session_id: str, as_of: TimeLike | None, count_limit: int) -> Plan[SessionInfo]:
        stream = session_entity(session_id)
        count_limit = check_count_limit(count_limit)
        now = self._now_us(as_of)
        state = yield from self._state(stream, as_of)
        after, ttl = state.cleared_through, self._ttl_of(state)
        page = yield call(
            "events", stream, order="desc", limit=count_limit, after=after, as_of=as_of
        )
        page.reverse()  # the newest count_limit messages since the clear, oldest first
        alive = live(page, ttl, now)
        exact = len(page) < count_limit or len(alive) < len(page)  # all, or a pause in them
        # past count_limit the first message is not known: finding it reads the stream from
        # the clear on (the engine's ascending reads are not bounded by their limit)
        first = alive[0] if alive and exact else None
        activity = page[-1] if page else None
        if activity is None and after is not None:  # nothing since the clear: the cleared one
            tail = yield call("events", stream, start=after, end=after, limit=1, as_of=as_of)
            activity = tail[0] if tail else None
        return SessionInfo(
            session_id,
            stream,
            len(alive),
            exact,
            first.ts if first else None,
            alive[-1].ts if alive else None,
            state.recorded_at if after is not None else None,
            after,
            ttl,
            expiry(ttl, activity),
            self._expired(state, activity, now),
            state.summary_version,
        )

    def _sessions(self, as_of: TimeLike | None) -> Plan[list[str]]:
        now = self._now_us(as_of)
        streams = yield call("streams", as_of=as_of)
        out = []
        for stream in streams:
            sid = session_of(stream)
            if sid is None:
                continue
            state = yield from self._state(stream, as_of)
            tail = yield call(
                "events", stream, order="desc", limit=1, after=state.cleared_through, as_of=as_of
            )
            if tail and not self._expired(state, tail[0], now):
                out.append(sid)
        return out

    def _purge(self, session_id: str) -> Plan[Forgotten]:
        stream = session_entity(session_id)
        forgotten = yield call("forget", entity=stream, purge=True)
        yield from self._purge_records(session_id)
        return forgotten  # type: ignore[no-any-return]

    def _purge_records(self, session_id: str) -> Plan[None]:
        """Erase the session's companion stream (layout.records_stream), when it has one."""
        records = records_stream(session_id)
        if (yield call("events", records, limit=1)):
            yield call("forget", entity=records, purge=True)
        return None

    def _purge_expired(self) -> Plan[list[str]]:
        now = self._now_us(None)
        streams = yield call("streams")
        out = []
        for stream in streams:
            sid = session_of(stream)
            if sid is None:
                continue
            state = yield from self._state(stream)
            if self._ttl_of(state) is None:
                continue
            tail = yield call("events", stream, order="desc", limit=1)
            if tail and self._expired(state, tail[0], now):
                yield call("forget", entity=stream, purge=True)
                yield from self._purge_records(sid)
                out.append(sid)
        return out

    def _search(
        self,
        session_id: str,
        text: str,
        k: int,
        as_of: TimeLike | None,
        exclude: Sequence[str] = (),
    ) -> Plan[list[Message]]:
        stream = session_entity(session_id)
        now = self._now_us(as_of)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_LAST:
            raise ValidationError(
                f"k: expected an integer from 1 to {MAX_LAST}, got {k!r}", field="k", limit=MAX_LAST
            )
        where: dict[str, Any] = {"stream": stream}
        if exclude:
            where["event_id"] = {"$nin": _ids(exclude)}
        state = yield from self._state(stream, as_of)
        after, ttl = state.cleared_through, self._ttl_of(state)
        if ttl is None:
            tail = yield call("events", stream, order="desc", limit=1, after=after, as_of=as_of)
            if not tail:
                return []
            start = after
        else:  # a pause longer than the ttl hides what came before it: find the last one
            alive = live((yield from self._all_events(stream, after, as_of)), ttl, now)
            if not alive:
                return []
            start = alive[0].id
        # over-fetch: hits from before the clear or the pause are dropped
        res = yield call(
            "query", text, filter=where, types=["event"], k=min(4 * k, MAX_LAST), as_of=as_of
        )
        lo = None if start is None else event_key(start)
        ids: list[str] = []
        for h in res.hits:
            eid = h.metadata.get("event_id")
            if not isinstance(eid, str) or eid in ids:
                continue
            key = event_key(eid)
            if lo is None or key > lo or (ttl is not None and key == lo):
                ids.append(eid)
            if len(ids) == k:
                break
        out = []
        for eid in sorted(ids, key=event_key):
            evs = yield call("events", stream, start=eid, end=eid, limit=1, as_of=as_of)
            msg = message_of_event(evs[0]) if evs else None
            if msg is not None:
                out.append(msg)
        return out


def _ids(value: Any) -> list[str]:
    """``exclude``: message ids (``"<ms>-<seq>"``), at most 1,024."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValidationError("exclude: expected a list of message ids", field="exclude")
    if len(value) > MAX_EXCLUDE:
        raise ValidationError(
            f"exclude: {len(value)} ids, over the limit of {MAX_EXCLUDE}",
            field="exclude",
            limit=MAX_EXCLUDE,
        )
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise ValidationError(
                f"exclude[{i}]: expected a message id (a string)", field=f"exclude[{i}]"
            )
    return list(value)


def _of_message(exc: ValidationError, field: str) -> ValidationError:
    """An engine error about the event (``content``, ``data``) said of the message."""
    f = exc.details.get("field")
    if f == "content":
        return ValidationError(
            f"{field}.{exc.message}", field=f"{field}.content", limit=exc.details.get("limit")
        )
    if f == "data":
        return ValidationError(
            f"{field}: its name, tool_calls, tool_call_id and metadata are kept as the event's "
            f"data, and {exc.message}",
            field=field,
            limit=exc.details.get("limit"),
        )
    return exc
