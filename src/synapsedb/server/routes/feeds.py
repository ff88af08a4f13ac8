"""Server-Sent Events routes: a stream's events, and every change of a namespace, live.

Both wait on the change feed, which a commit in their namespace wakes (no polling), and wake
at least once a second to ask whether their API key is still live: a revoked key's feeds end
(with an ``error`` event) within about a second. Each key may hold ``max_feeds_per_key`` feeds
open at once (429 over it)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from ...engine import Database, Namespace
from ...engine.inputs import MAX_LIMIT
from ...engine.lineage import WRITE_ACTIONS
from ...errors import UnauthorizedError
from ...times import to_datetime
from ...validation import check_entity
from ..auth import still_authorized
from ..feed import ChangeFeed, Cursor, FeedLimit, change_us, entry_json, matches
from ..keys import ApiKey
from ..wire import (
    encoder,
    idle_timeout_param,
    plain,
    required,
    sse,
    time_param,
)

KEY_CHECK_S = 0.5  # how often a feed asks whether its key is still live
WAKE_S = 1.0  # the longest a feed waits without looking (disconnects, revoked keys)
REVOKED = (
    b"event: error\ndata: "
    + encoder.encode({"error": UnauthorizedError("the API key of this feed was revoked").to_dict()})
    + b"\n\n"
)
KEEP_ALIVE_S = 15.0  # a comment line this often keeps proxies from closing a quiet feed
KEEP_ALIVE = b": keep-alive\n\n"


class FeedStream(StreamingResponse):
    """An event stream that gives its place in the key's feed limit back however it ends."""

    def __init__(self, events: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        super().__init__(
            events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


class KeyCheck:
    """Whether the request's key is still live, asked at most every ``KEY_CHECK_S``."""

    def __init__(self, request: Request) -> None:
        self.state, self.key = request.app.state, request.state.key
        self.checked = time.monotonic()

    def revoked(self) -> bool:
        key: ApiKey | None = self.key
        if key is None or time.monotonic() - self.checked < KEY_CHECK_S:
            return False
        self.checked = time.monotonic()
        return not still_authorized(self.state, key)


class Quiet:
    """A feed's time without sending, counted over its waits on the change feed: past
    ``idle_timeout`` (None: never) the feed ends, and every ``KEEP_ALIVE_S`` it sends a comment."""

    def __init__(
        self, feed: ChangeFeed, ns: str, check: KeyCheck, idle_timeout: float | None
    ) -> None:
        self.feed, self.ns, self.check, self.idle_timeout = feed, ns, check, idle_timeout
        self.quiet = self.keep_alive = 0.0

    def sent(self) -> None:
        self.quiet = self.keep_alive = 0.0

    def idle(self) -> bool:
        """Whether the feed has been quiet for its whole idle timeout (it ends)."""
        return self.idle_timeout is not None and self.quiet >= self.idle_timeout

    async def wait(self, seq: int) -> None:
        """Until the next commit in the namespace after ``seq``, at most ``WAKE_S`` (or what is
        left of the idle timeout)."""
        wait = WAKE_S if self.idle_timeout is None else min(WAKE_S, self.idle_timeout - self.quiet)
        started = time.monotonic()
        await self.feed.wait(self.ns, seq, max(wait, 0.01))  # woken by the next commit here
        waited = time.monotonic() - started
        self.quiet += waited
        self.keep_alive += waited

    def signal(self) -> bytes | None:
        """What to send now: REVOKED if the key was revoked (the feed then ends), a keep-alive
        comment when one is due, else None."""
        if self.check.revoked():
            return REVOKED
        if self.keep_alive >= KEEP_ALIVE_S:
            self.keep_alive = 0.0
            return KEEP_ALIVE
        return None


def open_feed(request: Request, events: Callable[[KeyCheck], AsyncIterator[bytes]]) -> Response:
    """The feed's answer, once it holds a place in its key's limit (429 otherwise)."""
    key: ApiKey | None = request.state.key
    limit: FeedLimit = request.app.state.feed_limit
    release = limit.acquire(None if key is None else key.id)
    return FeedStream(events(KeyCheck(request)), release)


async def follow_events(request: Request, mem: Namespace) -> Response:
    """Server-Sent Events: the stream's events after ``after`` (or the Last-Event-ID header),
    then each new one as it is appended; a comment line every 15 s keeps proxies open."""
    stream = required(request, "stream")
    after = request.headers.get("last-event-id") or request.query_params.get("after")
    mem.events(stream, after=after, limit=1)  # validate the arguments before streaming
    idle_timeout = idle_timeout_param(request)
    feed: ChangeFeed = request.app.state.feed
    ns = mem.name

    async def events(check: KeyCheck) -> AsyncIterator[bytes]:
        last = after
        quiet = Quiet(feed, ns, check, idle_timeout)
        while not await request.is_disconnected():
            if check.revoked():
                yield REVOKED
                return
            seq = feed.seq(ns)  # taken before reading: a later commit moves it past ``seq``
            batch = mem.events(stream, after=last, limit=500)
            for ev in batch:
                last = ev.id
                yield sse(ev.id, "event", plain(ev))
            if batch:
                quiet.sent()
            if len(batch) == 500:
                continue  # more may be waiting already
            while feed.seq(ns) == seq:  # nothing committed in the namespace since the read
                if quiet.idle():
                    return
                await quiet.wait(seq)
                line = quiet.signal()
                if line is not None:
                    yield line
                if line is REVOKED or await request.is_disconnected():
                    return

    return open_feed(request, events)


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
    seq, fence = feed.seq(ns), db.last_commit_us
    replay_from: str | float | int | datetime | None = since
    if raw:
        cursor = Cursor.parse(raw, "after")
        replay_from = to_datetime(cursor.sys_us)
        exact = cursor.boot == feed.boot and cursor.seq <= seq
        if exact and feed.after(ns, cursor.seq)[1]:
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

    async def changes(check: KeyCheck) -> AsyncIterator[bytes]:
        last = seq
        if replay_from is not None:  # resuming from these ids replays from history again
            async for entry in history():
                if check.revoked():
                    yield REVOKED
                    return
                yield sse(f"{change_us(entry)}-r-0", "change", entry_json(entry, public))
        quiet = Quiet(feed, ns, check, idle_timeout)
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
                quiet.sent()
            elif quiet.idle():
                return
            if not items:
                await quiet.wait(last)
            line = quiet.signal()
            if line is not None:
                yield line
            if line is REVOKED:
                return

    return open_feed(request, changes)
