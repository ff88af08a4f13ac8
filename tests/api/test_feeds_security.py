"""Live feeds (Server-Sent Events) against a real server on loopback: a revoked key's feeds
end, each key holds a limited number open, feeds wait on commits instead of polling, and
change ids are numbered per namespace (no trace of another tenant's writes)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

import synapsedb
from synapsedb.engine import Namespace
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore
from tests.api.test_http import free_port


class Server:
    def __init__(self, url: str, keys: KeyStore, tokens: dict[str, str], ids: dict[str, str]):
        self.url, self.keys, self.tokens, self.ids = url, keys, tokens, ids

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def ns(self, name: str = "live") -> str:
        return f"{self.url}/v1/namespaces/{name}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    keys = KeyStore(tmp_path / "d")
    tokens, ids = {}, {}
    for who, tenant in [("a", "acme"), ("a2", "acme"), ("b", "globex")]:
        key, tokens[who] = keys.create(tenant, ["read", "write"])
        ids[who] = key.id
    port = free_port()
    config = uvicorn.Config(
        create_app(db, keys, max_feeds_per_key=2),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        log_config=None,
    )
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield Server(f"http://127.0.0.1:{port}", keys, tokens, ids)
    finally:
        uv.should_exit = True
        thread.join(timeout=30)
        db.close()


def frames(resp: httpx.Response) -> Iterator[dict[str, Any]]:
    """The Server-Sent Events of an answer, one dict per event."""
    frame: dict[str, Any] = {}
    for line in resp.iter_lines():
        if not line:
            if frame:
                yield frame
            frame = {}
        elif line.startswith(("id: ", "event: ")):
            name, _, value = line.partition(": ")
            frame[name] = value
        elif line.startswith("data: "):
            frame["data"] = json.loads(line[6:])


@pytest.mark.parametrize("path", ["/events/follow", "/changes"])
def test_a_revoked_keys_open_feed_ends(server: Server, path: str) -> None:
    base = server.ns()
    httpx.post(
        f"{base}/events", json={"entity": "user:1", "event": "before"}, headers=server.auth("a")
    )
    params = {"stream": "user:1"} if path == "/events/follow" else {"since": "0"}
    with httpx.stream(
        "GET", base + path, params=params, headers=server.auth("a"), timeout=15
    ) as resp:
        assert resp.status_code == 200
        events = frames(resp)
        first = next(events)  # the feed is open and delivering
        assert first["data"]["entity"] == "user:1"
        server.keys.revoke(server.ids["a"])
        rest = list(events)  # ends by itself (a read timeout here fails the test)
    assert rest[-1]["event"] == "error"
    assert rest[-1]["data"]["error"]["code"] == "unauthorized"
    assert "revoked" in rest[-1]["data"]["error"]["message"]
    again = httpx.get(base + path, params=params, headers=server.auth("a"), timeout=15)
    assert again.status_code == 401


def test_each_key_holds_a_limited_number_of_feeds(server: Server) -> None:
    url = f"{server.ns()}/changes"
    with (
        httpx.Client(timeout=15) as one,
        httpx.Client(timeout=15) as two,
        one.stream("GET", url, headers=server.auth("a")) as first,
        two.stream("GET", url, headers=server.auth("a")) as second,
    ):
        assert first.status_code == second.status_code == 200
        over = httpx.get(url, headers=server.auth("a"), timeout=15)
        assert over.status_code == 429
        err = over.json()["error"]
        assert err["code"] == "quota_exceeded" and err["details"]["limit"] == 2
        assert "max_feeds_per_key" in err["message"] and server.ids["a"] in err["message"]
        # per key, not per tenant or server: the tenant's other key and another tenant follow
        for who in ("a2", "b"):
            ok = httpx.get(url, params={"idle_timeout": "0"}, headers=server.auth(who), timeout=15)
            assert ok.status_code == 200
    # closed feeds give their places back (once the server notices the disconnects)
    deadline = time.monotonic() + 10
    while (
        r := httpx.get(url, params={"idle_timeout": "0"}, headers=server.auth("a"), timeout=15)
    ).status_code == 429:
        assert time.monotonic() < deadline, "the places of closed feeds were not given back"
        time.sleep(0.1)
    assert r.status_code == 200


def test_follow_events_waits_on_commits_instead_of_polling(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = Namespace.events

    def counted(self: Namespace, stream: str, **kw: Any) -> Any:
        calls.append(stream)
        return real(self, stream, **kw)

    monkeypatch.setattr(Namespace, "events", counted)
    base = server.ns()
    # a quiet feed: read once (after the argument check), then only waits; the old loop read
    # the stream every 100 ms, about 15 times in these 1.5 s
    quiet = httpx.get(
        f"{base}/events/follow",
        params={"stream": "user:1", "idle_timeout": "1.5"},
        headers=server.auth("a"),
        timeout=15,
    )
    assert quiet.status_code == 200 and quiet.text == ""
    assert calls == ["user:1", "user:1"]
    # and a live one still gets each event as it is appended (woken by the commit)
    calls.clear()
    got = []
    with httpx.stream(
        "GET",
        f"{base}/events/follow",
        params={"stream": "user:1"},
        headers=server.auth("a"),
        timeout=15,
    ) as resp:
        httpx.post(
            f"{base}/events", json={"entity": "user:1", "event": "one"}, headers=server.auth("a")
        )
        for frame in frames(resp):
            got.append(frame["data"]["content"])
            if len(got) == 1:
                httpx.post(
                    f"{base}/events",
                    json={"entity": "user:1", "event": "two"},
                    headers=server.auth("a"),
                )
            if len(got) == 2:
                break
    assert got == ["one", "two"]
    assert len(calls) <= 5  # validation, the first read, and about one read per commit


def test_change_ids_are_numbered_per_namespace(server: Server) -> None:
    a, b = server.ns("shared"), server.ns("shared")  # the same name, two tenants
    got: list[str] = []
    with httpx.stream("GET", f"{a}/changes", headers=server.auth("a"), timeout=15) as resp:
        httpx.put(
            f"{a}/facts", json={"entity": "u", "key": "k", "value": 0}, headers=server.auth("a")
        )
        for frame in frames(resp):
            got.append(frame["id"])
            if len(got) == 1:  # another tenant writes a lot in between
                for i in range(5):
                    httpx.put(
                        f"{b}/facts",
                        json={"entity": "u", "key": "k", "value": i},
                        headers=server.auth("b"),
                    )
                httpx.put(
                    f"{a}/facts",
                    json={"entity": "u", "key": "k", "value": 1},
                    headers=server.auth("a"),
                )
            if len(got) == 2:
                break
    seqs = [int(i.rsplit("-", 1)[1]) for i in got]
    assert seqs == [1, 2]  # no gap for globex's five writes


def test_the_ring_holds_the_newest_changes_of_all_namespaces_together(tmp_path: Path) -> None:
    from synapsedb.server.feed import ChangeFeed

    with synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    ) as db:
        feed = ChangeFeed(db, size=3)
        a, b = db.namespace("a"), db.namespace("b")
        a.set("u", "k", 1)
        a.set("u", "k", 2)
        b.set("u", "k", 1)
        assert [n for n, _ in feed.after("a", 0)[0]] == [1, 2] and feed.after("a", 0)[1]
        b.set("u", "k", 2)  # over the size: a's first change is dropped
        items, complete, newest = feed.after("a", 0)
        assert not complete and newest == 2  # a feed that far behind resumes from history
        items, complete, newest = feed.after("a", 1)
        assert complete and [n for n, _ in items] == [2]
        assert [n for n, _ in feed.after("b", 0)[0]] == [1, 2] and feed.after("b", 0)[1]
        b.set("u", "k", 3)
        b.set("u", "k", 4)  # every change of a dropped: a's sequence goes on all the same
        assert feed.after("a", 1) == ([], False, 2) and feed.after("a", 2) == ([], True, 2)
        a.set("u", "k", 3)
        assert [n for n, _ in feed.after("a", 2)[0]] == [3]
        feed.detach()


def test_a_purge_leaves_nothing_of_the_entity_in_the_change_ring(server: Server) -> None:
    """Resuming /changes from an id older than a purge gives no trace of the purged entity
    (its name, its fact keys), and still every other change (hostile pass 2, F4)."""
    base, victim, key = server.ns(), "zed-ring-victim", "ringsecretkey"
    _admin, token = server.keys.create("acme", ["read", "write", "admin"])
    admin = {"Authorization": f"Bearer {token}"}
    with httpx.stream("GET", f"{base}/changes", headers=server.auth("a"), timeout=15) as resp:
        httpx.put(
            f"{base}/facts",
            json={"entity": "user:keep", "key": "plan", "value": "tin"},
            headers=server.auth("a"),
        )
        cursor = next(frames(resp))["id"]  # an id of the ring, from before the purge
    writes = [
        ("PUT", "/facts", {"entity": victim, "key": key, "value": 1}),
        ("POST", "/memories", {"entity": victim, "content": "lives at the old mill"}),
        ("POST", "/events", {"entity": victim, "event": "called"}),
        ("PUT", "/facts", {"entity": "user:keep", "key": "plan", "value": "gold"}),
    ]
    for method, path, body in writes:
        r = httpx.request(method, base + path, json=body, headers=server.auth("a"))
        assert r.status_code in (200, 201), r.text
    params = {"after": cursor, "idle_timeout": "0"}
    before = httpx.get(f"{base}/changes", params=params, headers=server.auth("a"), timeout=15)
    assert victim in before.text and key in before.text  # the ring holds them
    out = httpx.post(f"{base}/forget", json={"entity": victim, "purge": True}, headers=admin)
    assert out.status_code == 200 and out.json()["purged"], out.text
    for query, headers in (
        (params, server.auth("a")),
        ({"idle_timeout": "0"}, {**server.auth("a"), "Last-Event-ID": cursor}),
    ):
        after = httpx.get(f"{base}/changes", params=query, headers=headers, timeout=15)
        assert after.status_code == 200
        assert victim not in after.text and key not in after.text
        got = [
            json.loads(line[6:]) for line in after.text.splitlines() if line.startswith("data: ")
        ]
        kept = [(c["entity"], c["target"], c["version"]) for c in got]
        assert ("user:keep", "plan", 2) in kept  # the other entity's later change still comes
