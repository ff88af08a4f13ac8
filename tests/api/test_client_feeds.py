"""The Python clients follow the live feeds (``follow``, ``changes``) through a real server and
resume after a dropped connection: a proxy in front of the server cuts it, or the server is
restarted on the same data directory behind it. Nothing is missed, nothing comes twice."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb.client import AsyncRemoteDatabase, RemoteDatabase
from synapsedb.client.feeds import Change, EventParser, Feed
from synapsedb.server import create_app
from tests.support.cut_proxy import CutProxy
from tests.support.live_server import serve

WAIT_S = 30  # a generous bound on any one item's arrival (never a timing assertion)
FAST = {"retry_delay": 0.05, "retry_max_delay": 0.2}


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[str, CutProxy]]:
    """A real server (its URL) and a cuttable proxy in front of it."""
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    try:
        with serve(create_app(db)) as url, CutProxy(port_of(url)) as proxy:
            yield url, proxy
            proxy.cut()  # the server's shutdown does not wait for open feeds
    finally:
        db.close()


class Reader:
    """Iterates a sync feed in a thread; ``take(n)`` waits for the next n items."""

    def __init__(self, feed: Feed[Any]) -> None:
        self.feed = feed
        self.items: queue.Queue[Any] = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for item in self.feed:
                self.items.put(item)
        except BaseException as exc:  # handed to the test
            self.error = exc
        self.items.put(StopIteration)

    def take(self, n: int) -> list[Any]:
        out = []
        for _ in range(n):
            item = self.items.get(timeout=WAIT_S)
            assert item is not StopIteration, f"the feed ended early: {self.error!r}"
            out.append(item)
        return out

    def ended(self) -> bool:
        self.thread.join(timeout=WAIT_S)
        return not self.thread.is_alive()


def test_follow_resumes_after_the_connection_is_cut(live: tuple[str, CutProxy]) -> None:
    url, proxy = live
    with RemoteDatabase(url) as direct, RemoteDatabase(proxy.url) as remote:
        writer = direct.namespace("live")
        first = writer.append("user:1", "one", searchable=False)
        feed = remote.namespace("live").follow("user:1", **FAST)
        reader = Reader(feed)
        assert [e.content for e in reader.take(1)] == ["one"]
        writer.append("user:1", "two", searchable=False)
        assert [e.content for e in reader.take(1)] == ["two"]
        assert proxy.cut() >= 1
        for text in ("three", "four"):  # written while the feed is down or reconnecting
            writer.append("user:1", text, searchable=False)
        assert [e.content for e in reader.take(2)] == ["three", "four"]
        assert proxy.accepted >= 2  # it did reconnect
        assert feed.last_event_id is not None and feed.last_event_id > first.id
        feed.close()
        writer.append("user:1", "five", searchable=False)  # wakes a read still in flight
        assert reader.ended() and reader.error is None
        assert reader.items.get(timeout=WAIT_S) is StopIteration  # nothing after close
        # another process resumes where this one stopped
        again = remote.namespace("live").follow(
            "user:1", after=feed.last_event_id, idle_timeout=0.5
        )
        assert [e.content for e in again] == ["five"]


def test_changes_resume_across_a_server_restart(tmp_path: Path) -> None:
    """The server stops, a change is written while none runs, and another server process
    serves the directory: the feed resumes from durable history after its last change, which
    does not come again."""
    data = tmp_path / "d"
    options: dict[str, Any] = {
        "durability": "os",
        "embedder": None,
        "background_maintenance": False,
    }
    with CutProxy(1) as proxy, RemoteDatabase(proxy.url) as remote:
        db = synapsedb.open(data, **options)
        try:
            with serve(create_app(db)) as url:
                proxy.retarget(port_of(url))
                feed = remote.namespace("shared").changes(since="0", retries=1000, **FAST)
                reader = Reader(feed)
                mem = db.namespace("shared")
                m = mem.write("user:1", {"content": "refund asked", "embedding": [0.1, 0.2]})
                mem.set("user:1", "order", 1458)
                got = reader.take(2)
                proxy.retarget(1)  # nothing listens there: reconnections fail meanwhile
                proxy.cut()
        finally:
            db.close()
        assert [(c.action, c.target) for c in got] == [("write", m.id), ("set", "order")]
        assert all(isinstance(c, Change) and c.namespace == "shared" for c in got)
        db = synapsedb.open(data, **options)
        try:
            mem = db.namespace("shared")
            mem.update(m.id, {"salience": 0.9})  # while no server runs
            with serve(create_app(db)) as url:
                proxy.retarget(port_of(url))
                mem.delete("user:1", "order")
                rest = reader.take(2)
                feed.close()
                proxy.cut()
                assert reader.ended()
        finally:
            db.close()
    assert [(c.action, c.target, c.version) for c in rest] == [
        ("update", m.id, 2),
        ("unset", "order", 2),
    ]
    assert reader.items.get(timeout=WAIT_S) is StopIteration  # "set" did not come again
    assert rest[0].id.endswith("-r-0")  # replayed from history


def test_idle_timeout_ends_the_iteration_and_errors_are_raised(
    live: tuple[str, CutProxy],
) -> None:
    url, _ = live
    with RemoteDatabase(url) as remote:
        mem = remote.namespace("quiet")
        assert list(mem.changes(idle_timeout=0.3)) == []
        with pytest.raises(synapsedb.ValidationError) as err:
            list(mem.changes(after="not-an-id"))
        assert err.value.field == "after"
        with pytest.raises(synapsedb.ValidationError) as err:
            mem.follow("s", idle_timeout=-1)
        assert err.value.field == "idle_timeout"
        feed = mem.follow("s", idle_timeout=0.2)
        assert list(feed) == []
        with pytest.raises(synapsedb.ClosedError):
            iter(feed)  # a feed is iterated once


def test_a_lost_server_raises_after_the_retries(live: tuple[str, CutProxy]) -> None:
    _, proxy = live
    with RemoteDatabase(proxy.url) as remote:
        proxy.retarget(1)  # every connection through the proxy now fails
        feed = remote.namespace("gone").follow("s", retries=2, retry_delay=0.01)
        with pytest.raises(synapsedb.StorageError, match="2 reconnections"):
            list(feed)


def test_async_follow_resumes_after_a_cut(live: tuple[str, CutProxy]) -> None:
    url, proxy = live

    async def run() -> list[str]:
        direct_db = RemoteDatabase(url)
        direct = direct_db.namespace("alive")
        direct.append("user:1", "one", searchable=False)
        db = AsyncRemoteDatabase(proxy.url)
        got: list[str] = []
        try:
            feed = db.namespace("alive").follow("user:1", **FAST)
            async for ev in feed:
                got.append(ev.content)
                if len(got) == 1:
                    proxy.cut()
                    await asyncio.to_thread(direct.append, "user:1", "two", searchable=False)
                if len(got) == 2:
                    break  # a clean close: the connection ends with the loop
            changes = db.namespace("alive").changes(since="0", idle_timeout=0.5)
            got += [c.action async for c in changes]
        finally:
            await db.close()
            direct_db.close()
        return got

    assert asyncio.run(run()) == ["one", "two", "append", "append"]
    assert proxy.accepted >= 2


def test_the_event_parser_follows_the_whatwg_rules() -> None:
    parser = EventParser()
    lines = [
        "id: 1",
        "event: change",
        "data: a",
        "data: b",
        "",
        ": comment",
        "data:c",
        "",
        "id: 2\0x",
        "event: e",
        "data",
        "",
    ]
    events = [ev for line in lines if (ev := parser.line(line)) is not None]
    assert [(e.id, e.event, e.data) for e in events] == [
        ("1", "change", "a\nb"),
        ("1", "message", "c"),
        ("1", "e", ""),
    ]


def test_the_documented_example_runs(
    live: tuple[str, CutProxy], capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/http.md's feed example, against a live server (its URL swapped in)."""
    import re

    url, _ = live
    with RemoteDatabase(url) as db:
        m = db.namespace("acme-support").write("user:4321", "Refund requested")
    text = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
    section = text.split("The Python clients follow both feeds", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    code = block[1].replace("http://127.0.0.1:7379", url)
    capsys.readouterr()
    exec(compile(code, "docs/http.md", "exec"), {"__name__": "docs"})
    assert capsys.readouterr().out == ""  # "from now": the earlier write is not a change
    code = code.replace("changes(", 'changes(since="0", ')
    exec(compile(code, "docs/http.md", "exec"), {"__name__": "docs"})
    assert capsys.readouterr().out.split() == ["write", "user:4321", m.id]
