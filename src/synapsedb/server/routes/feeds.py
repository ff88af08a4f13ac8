"""Server-Sent Events routes: a stream's events, and every change of a namespace, live."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...engine import Database, Namespace
from ...engine.lineage import WRITE_ACTIONS
from ...engine.namespace import MAX_LIMIT
from ...times import to_datetime
from ...validation import check_entity
from ..feed import ChangeFeed, Cursor, change_us, entry_json, matches
from ..wire import (
    event_stream,
    idle_timeout_param,
    plain,
    required,
    sse,
    time_param,
)


async def follow_events(request: Request, mem: Namespace) -> Response:
    """Server-Sent Events: the stream's events after ``after`` (or the Last-Event-ID header),
    then each new one as it is appended; a comment line every 15 s keeps proxies open."""
    stream = required(request, "stream")
    after = request.headers.get("last-event-id") or request.query_params.get("after")
    mem.events(stream, after=after, limit=1)  # validate the arguments before streaming
    poll = 0.1
    idle_timeout = idle_timeout_param(request)

    async def feed() -> Any:
        last = after
        idle = quiet = 0.0
        while not await request.is_disconnected():
            batch = mem.events(stream, after=last, limit=500)
            for ev in batch:
                last = ev.id
                yield sse(ev.id, "event", plain(ev))
            if batch:
                idle = quiet = 0.0
                continue
            if idle_timeout is not None and quiet >= idle_timeout:
                return
            await asyncio.sleep(poll)
            idle += poll
            quiet += poll
            if idle >= 15:
                idle = 0.0
                yield b": keep-alive\n\n"

    return event_stream(feed())


async def follow_changes(request: Request, mem: Namespace) -> Response:
    """Server-Sent Events: every change committed in the namespace (memory writes, updates and
    deletes, fact sets and unsets, stream appends), optionally about one ``entity``; from now,
    from ``since`` (a time: history first), or after ``after`` / Last-Event-ID."""
    feed: ChangeFeed = request.app.state.feed
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    since = time_param(request, "since")
    entity = request.query_params.get("entity")
    if entity is not None:
        entity = check_entity(entity)
    idle_timeout = idle_timeout_param(request)
    public, ns = request.state.ns, mem.name
    db: Database = request.app.state.db
    # Taken before any replay: changes numbered after ``seq`` may also be in the replay, but
    # only those committed at or after ``fence`` (system time only moves forward).
    seq, fence = feed.seq, db.last_commit_us
    replay_from: str | float | int | datetime | None = since
    if raw:
        cursor = Cursor.parse(raw, "after")
        replay_from = to_datetime(cursor.sys_us)
        if cursor.boot == feed.boot and feed.after(ns, cursor.seq)[1]:
            seq, replay_from = cursor.seq, None  # exact: every later change is in the ring
    if replay_from is not None:
        mem.audit(entity, since=replay_from, limit=1)  # bad arguments: 422 before streaming
    seen: set[tuple[str, str, int | None]] = set()

    async def history() -> Any:
        """The durable history from ``replay_from``, a page of the audit trail at a time."""
        t, boundary = replay_from, set()
        while True:
            page = await run_in_threadpool(mem.audit, entity, since=t, limit=MAX_LIMIT)
            for entry in page:
                key = (entry.action, entry.target, entry.version)
                if entry.action in WRITE_ACTIONS and key not in boundary:
                    if change_us(entry) >= fence:
                        seen.add(key)
                    yield entry
            if len(page) < MAX_LIMIT:
                return
            t = page[-1].at  # the next page starts at the last instant, minus what was sent
            boundary = {(e.action, e.target, e.version) for e in page if e.at == t}
            if page[0].at == t:  # a whole page in one microsecond: step past it
                t, boundary = to_datetime(change_us(page[-1]) + 1), set()

    async def changes() -> Any:
        last = seq
        if replay_from is not None:  # resuming from these ids replays from history again
            async for entry in history():
                yield sse(f"{change_us(entry)}-r-0", "change", entry_json(entry, public))
        quiet = keep_alive = 0.0
        while not await request.is_disconnected():
            items, complete, newest = feed.after(ns, last)
            if not complete:
                return  # fell behind the ring: the client resumes from its last id (history)
            sent = False
            for n, entry in items:
                if (entry.action, entry.target, entry.version) in seen:
                    continue
                if matches(entry, entity):
                    sent = True
                    yield sse(feed.cursor(n, entry), "change", entry_json(entry, public))
            last = newest
            if sent:
                quiet = keep_alive = 0.0
                continue
            if idle_timeout is not None and quiet >= idle_timeout:
                return
            wait = 1.0 if idle_timeout is None else min(1.0, max(idle_timeout - quiet, 0.01))
            started = time.monotonic()
            await feed.wait(last, wait)  # woken by the next commit; 1 s to notice a disconnect
            waited = time.monotonic() - started
            quiet += waited
            keep_alive += waited
            if keep_alive >= 15:
                keep_alive = 0.0
                yield b": keep-alive\n\n"

    return event_stream(changes())
