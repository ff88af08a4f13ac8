"""What a slow, hostile or cross-site client can do to a server on loopback: body and header
deadlines, the connection cap, JSON content types, the Host check, nesting and cursor limits,
numeric vectors. The protocol-level checks run a real uvicorn server on 127.0.0.1 (in a
thread, or the CLI in a process); the request-level ones go through the ASGI app."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn
from starlette.testclient import TestClient

import synapsedb
from synapsedb import cli
from synapsedb.client import calls
from synapsedb.client.asyncio import AsyncRemoteDatabase
from synapsedb.client.sync import RemoteDatabase
from synapsedb.errors import (
    HostNotAllowedError,
    MethodNotAllowedError,
    RequestTimeoutError,
    UnsupportedMediaTypeError,
    ValidationError,
)
from synapsedb.server import create_app
from synapsedb.server.limits import MAX_DEPTH, Limits, guarded_protocol
from synapsedb.server.middleware import LOOPBACK_HOSTS

NS = "/v1/namespaces/acme"
WRITE = {"entity": "user:1", "content": "a normal write"}
SERVERS: dict[int, uvicorn.Server] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running(
    tmp_path: Path, limits: Limits, http: str = "auto", keys: Any = None
) -> Iterator[tuple[int, synapsedb.Database]]:
    """A real uvicorn server on 127.0.0.1 in a thread, with ``limits`` (as the CLI sets them);
    ``http="h11"``: uvicorn's other HTTP/1.1 implementation under the same guard."""
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    port = free_port()
    options = limits.uvicorn_options()
    if http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        options["http"] = guarded_protocol(limits, H11Protocol)
    config = uvicorn.Config(
        create_app(db, keys, limits=limits),
        host="127.0.0.1",
        port=port,
        log_config=None,
        log_level="warning",
        **options,
    )
    server = uvicorn.Server(config)
    SERVERS[port] = server
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield port, db
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        SERVERS.pop(port, None)
        db.close()


def db_server_state(port: int) -> Any:
    """The running server's state: its open connections and requests in progress."""
    return SERVERS[port].server_state


def raw_connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def parse(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def head(method: str, path: str, body_size: int, **headers: str) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {body_size}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


# -- deadlines and the connection cap, on a real server -----------------------------------------


def test_a_stalled_body_gets_408_and_closes_while_writes_go_on(tmp_path: Path) -> None:
    with running(tmp_path, Limits(body_timeout=1.0, header_timeout=30.0)) as (port, db):
        stalled = [raw_connect(port) for _ in range(20)]
        for sock in stalled:  # headers and part of a body, then nothing
            sock.sendall(head("POST", f"{NS}/memories", 200) + b'{"entity": "u",')
        r = httpx.post(f"http://127.0.0.1:{port}{NS}/memories", json=WRITE, timeout=20)
        assert r.status_code == 201  # meanwhile, a normal write is served
        for sock in stalled:
            status, body = parse(read_all(sock))  # the answer, then the server closes
            sock.close()
            assert status == 408 and body["error"]["code"] == "request_timeout"
            assert body["error"]["details"] == {"field": "body", "limit": 1.0}
        assert db.namespace("acme").stats().memory_versions == 1  # nothing of the stalled


@pytest.mark.parametrize("http", ["auto", "h11"])
def test_stalled_or_oversized_headers_and_idle_connections_are_closed(
    tmp_path: Path, http: str
) -> None:
    limits = Limits(header_timeout=1.0, max_header_bytes=4096)
    with running(tmp_path, limits, http) as (port, _db):
        with contextlib.ExitStack() as stack:
            idle, slow, big = (stack.enter_context(raw_connect(port)) for _ in range(3))
            check_headers_guard(idle, slow, big)
        # a keep-alive connection gets the deadline again for its next request's headers
        with raw_connect(port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = sock.recv(65536)
            assert first.startswith(b"HTTP/1.1 200")
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            assert parse(read_all(sock))[0] == 408


@pytest.mark.parametrize("http", ["auto", "h11"])
def test_headers_and_a_large_body_in_one_write_are_served(tmp_path: Path, http: str) -> None:
    """Only the bytes up to the end of the headers count against the header cap: a client that
    sends headers and a large body in one write (httpx does) is served, also when the end of
    its headers arrives split across reads (second hostile pass, F2)."""
    limits = Limits(header_timeout=5.0, max_header_bytes=4096)
    items = [{"entity": "u", "content": f"note {i} " + "x" * 200} for i in range(400)]
    body = json.dumps({"items": items}).encode()
    assert len(body) > 20 * limits.max_header_bytes
    with running(tmp_path, limits, http) as (port, db):
        with raw_connect(port) as sock:
            sock.sendall(head("POST", f"{NS}/memories:batch", len(body), Connection="close") + body)
            assert parse(read_all(sock))[0] == 201
        request = head("POST", f"{NS}/memories:batch", len(body), Connection="close") + body
        split = request.index(b"\r\n\r\n") + 2  # the header end split across two reads
        with raw_connect(port) as sock:
            sock.sendall(request[:split])
            time.sleep(0.05)
            sock.sendall(request[split:])
            assert parse(read_all(sock))[0] == 201
        assert db.namespace("acme").stats().memory_versions == 800
        with raw_connect(port) as sock:  # headers alone over the cap are still refused
            sock.sendall(head("POST", f"{NS}/memories:batch", 10, X_Pad="a" * 5000) + b"{}")
            assert parse(read_all(sock))[0] == 413


def check_headers_guard(idle: socket.socket, slow: socket.socket, big: socket.socket) -> None:
    slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends its headers
    big.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Pad: " + b"a" * 5000)
    assert read_all(idle) == b""  # a connection that says nothing is closed quietly
    status, body = parse(read_all(slow))
    assert status == 408 and body["error"]["details"]["field"] == "headers"
    status, body = parse(read_all(big))
    assert status == 413 and body["error"]["details"] == {"field": "headers", "limit": 4096}


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.mark.parametrize("http", ["auto", "h11"])
def test_at_the_limit_waiting_connections_make_room_and_busy_ones_are_kept(
    tmp_path: Path, http: str
) -> None:
    limits = Limits(max_connections=4, header_timeout=30.0, body_timeout=30.0)
    with running(tmp_path, limits, http) as (port, db), contextlib.ExitStack() as stack:
        base = f"http://127.0.0.1:{port}"
        state = db_server_state(port)
        waiting = [stack.enter_context(raw_connect(port)) for _ in range(4)]  # the limit
        waiting[1].sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers, slowly
        wait_for(lambda: len(state.connections) == 4, "the server did not accept them")
        # one more, a real request, still gets through: the longest-waiting connection
        # makes room (the issue: 1,100 slow connections made valid writes time out)
        assert httpx.post(f"{base}{NS}/memories", json=WRITE, timeout=20).status_code == 201
        assert read_all(waiting[0]) == b""  # closed quietly: nothing was asked on it
        assert len(state.connections) <= 4
        for sock in waiting:
            sock.close()
        wait_for(lambda: not state.connections, "connections did not close")
        # connections with a request in progress (a body on its way) are never closed for room
        busy = [stack.enter_context(raw_connect(port)) for _ in range(4)]
        for sock in busy:
            sock.sendall(head("POST", f"{NS}/memories", 100) + b'{"entity": ')
        wait_for(lambda: len(state.tasks) == 4, "the requests did not start")
        with raw_connect(port) as fifth:  # over a busy limit: 503, and closed
            fifth.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert read_all(fifth).startswith(b"HTTP/1.1 503")
        assert len(state.tasks) == 4  # the busy ones go on
        for sock in busy:
            sock.close()
        wait_for(lambda: not state.tasks, "the requests did not end")
        assert httpx.get(f"{base}/healthz", timeout=20).status_code == 200
        assert db.namespace("acme").stats().memory_versions == 1


def test_the_cli_passes_the_limits_to_uvicorn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def run(app: Any, **kwargs: Any) -> None:
        seen.update(kwargs, app=app)

    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.setattr(cli, "configure_logging", lambda *a: None, raising=False)
    monkeypatch.setattr("synapsedb.server.observe.configure_logging", lambda *a: None)
    code = cli.main(
        [
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--max-connections",
            "77",
            "--body-timeout",
            "3",
            "--header-timeout",
            "4",
            "--keep-alive-timeout",
            "2",
            "--allowed-hosts",
            "memory.internal,Box:8080",
        ]
    )
    assert code == 0
    assert seen["limit_concurrency"] == 78 and seen["timeout_keep_alive"] == 2.0
    assert seen["backlog"] == 2048 and seen["h11_max_incomplete_event_size"] == 64 * 1024
    assert seen["timeout_graceful_shutdown"] == 10.0
    assert seen["http"].__name__.startswith("Guarded")
    app = seen["app"]
    assert app.state.limits == Limits(
        body_timeout=3.0, header_timeout=4.0, keep_alive=2.0, max_connections=77
    )
    assert app.guard.hosts == LOOPBACK_HOSTS | {"memory.internal", "box"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "synapsedb",
            "serve",
            "--data",
            str(tmp_path / "e"),
            "--body-timeout",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "body_timeout: expected a positive number" in out.stderr
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "synapsedb",
            "serve",
            "--data",
            str(tmp_path / "e"),
            "--allowed-hosts",
            "ok.example,bad:port",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "'bad:port' is not a host name" in out.stderr


@contextlib.contextmanager
def cli_server(
    tmp_path: Path, *args: str, open_files: int | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``synapsedb serve`` in a process on 127.0.0.1 (``open_files``: its RLIMIT_NOFILE)."""
    import resource

    def limit() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    port = free_port()
    env = {**os.environ, "SYNAPSEDB_EMBEDDER": "none"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "synapsedb",
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--port",
            str(port),
            *args,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=limit,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "server did not start"
            time.sleep(0.1)
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_stop_closes_open_feeds_within_the_shutdown_timeout(tmp_path: Path) -> None:
    """SIGTERM while a client follows a stream: the server ends the feed after
    Limits.shutdown_timeout and exits (it used to wait for the feed forever)."""
    with cli_server(tmp_path) as (base, proc):
        httpx.post(
            f"{base}/v1/namespaces/ns/events", json={"entity": "user:1", "event": "hello"}
        ).raise_for_status()
        with httpx.stream(
            "GET",
            f"{base}/v1/namespaces/ns/events/follow",
            params={"stream": "user:1", "idle_timeout": "600"},
            timeout=httpx.Timeout(5, read=120),
        ) as feed:
            lines = feed.iter_lines()
            assert any(line.startswith("data:") for line in itertools.islice(lines, 20))
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
            took = time.monotonic() - t0
            with contextlib.suppress(httpx.HTTPError):
                list(lines)  # the feed ended with the server
    assert took < 60, took  # bounded, not a timing target (the limit is 10 s)


def test_the_cli_server_answers_408_and_checks_host(tmp_path: Path) -> None:
    args = ("--body-timeout", "1", "--allowed-hosts", "memory.internal")
    with cli_server(tmp_path, *args) as (base, _proc):
        port = int(base.rsplit(":", 1)[1])
        with raw_connect(port) as sock:
            sock.sendall(head("PUT", f"{NS}/facts", 100) + b'{"entity": ')
            r = httpx.put(f"{base}{NS}/facts", json={"entity": "u", "key": "k", "value": 1})
            assert r.status_code == 200
            status, body = parse(read_all(sock))
            assert status == 408 and body["error"]["code"] == "request_timeout"
        rebound = httpx.get(f"{base}/v1/namespaces", headers={"Host": "attacker.example"})
        assert rebound.status_code == 421
        assert rebound.json()["error"]["code"] == "host_not_allowed"
        for host in ("localhost:7379", "memory.internal", "[::1]:1"):
            assert httpx.get(f"{base}/v1/namespaces", headers={"Host": host}).status_code == 200


def test_the_issues_1100_slow_connections_no_longer_stop_writes(tmp_path: Path) -> None:
    """The hostile pass: 1,100 connections trickling their headers at a server with 1,024
    open files made valid writes time out (accept() failed, and logged each failure). Now
    the server fits its connections to its open files, and each write's connection makes
    room by closing the longest-waiting one."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 2048:  # this side holds 1,100 sockets
        if hard != resource.RLIM_INFINITY and hard < 2048:
            pytest.skip("needs 2,048 open files for the client side")
        resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    with (
        cli_server(tmp_path, "--header-timeout", "60", open_files=1024) as (base, proc),
        contextlib.ExitStack() as stack,
    ):
        port = int(base.rsplit(":", 1)[1])
        for _ in range(1100):
            sock = stack.enter_context(raw_connect(port))
            sock.sendall(f"POST {NS}/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
        with httpx.Client(base_url=base, timeout=10) as writer:
            for i in range(20):
                r = writer.post(f"{NS}/memories", json={"entity": "u", "content": f"write {i}"})
                assert r.status_code == 201
            assert writer.get(f"{NS}/stats").json()["memory_versions"] == 20
        stack.close()
        proc.terminate()
        assert proc.stdout is not None
        output = proc.stdout.read().decode()
        assert "serving at most 768 connections" in output  # 1,024 files less 256 spare
        assert len(output.splitlines()) < 50  # no flood of accept() failures


# -- request-level limits, through the app ---------------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    with TestClient(
        create_app(db, allowed_hosts=LOOPBACK_HOSTS), base_url="http://127.0.0.1:7379"
    ) as c:
        yield c
    db.close()


@pytest.mark.parametrize(
    "kind",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_bodies_that_are_not_json_are_refused(client: TestClient, kind: str | None) -> None:
    headers = {} if kind is None else {"content-type": kind}
    body = json.dumps(WRITE).encode()
    r = client.post(f"{NS}/memories", content=body, headers=headers)
    assert r.status_code == 415
    err = r.json()["error"]
    assert err["code"] == "unsupported_media_type" and err["details"]["field"] == "content-type"
    assert "expected application/json" in err["message"]
    assert client.post(f"{NS}/maintain", headers=headers).status_code == 415  # even empty
    r = client.post(f"{NS}/import", content=b'{"kind": "memory"}\n', headers=headers)
    assert r.status_code == 415 and "application/x-ndjson" in r.json()["error"]["message"]
    assert client.get(f"{NS}/stats").json()["memory_versions"] == 0
    ok = client.post(
        f"{NS}/memories", content=body, headers={"content-type": "Application/JSON; charset=utf-8"}
    )
    assert ok.status_code == 201


def test_the_clients_send_json_content_types(client: TestClient) -> None:
    db = RemoteDatabase("http://127.0.0.1:7379", client=client)
    mem = db.namespace("acme")
    mem.write("user:1", "over the wire")
    mem.set("user:1", "plan", "pro")
    mem.configure(max_hot=1000)
    mem.maintain(dry_run=True)
    mem.forget(entity="nobody")
    records = list(mem.export())
    assert db.namespace("copy").import_records(records) > 0

    async def remote() -> None:
        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7379") as h:
            amem = AsyncRemoteDatabase("http://127.0.0.1:7379", client=h).namespace("acme")
            await amem.write("user:2", "async over the wire")
            await amem.set("user:2", "plan", "free")
            await amem.maintain(dry_run=True)

    asyncio.run(remote())
    assert client.get(f"{NS}/stats").json()["memory_versions"] == 2


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example",
        "attacker.example:7379",
        "127.0.0.1.nip.io",
        "localhost.evil",
        "",
        "[::1",
        "localhost:x",
    ],
)
def test_other_hosts_are_refused_on_every_path(client: TestClient, host: str) -> None:
    for method, path in [
        ("GET", f"{NS}/facts?entity=u&key=k"),
        ("GET", f"{NS}/memories"),
        ("POST", f"{NS}/memories"),
        ("GET", "/healthz"),
        ("GET", "/nowhere"),
    ]:
        r = client.request(method, path, json=WRITE, headers={"Host": host})
        assert r.status_code == 421, (method, path, host)
        err = r.json()["error"]
        assert err["code"] == "host_not_allowed" and err["details"] == {"field": "host"}
    assert client.get(f"{NS}/stats").json()["memory_versions"] == 0


def test_loopback_names_with_any_port_are_served(client: TestClient) -> None:
    for host in ("127.0.0.1", "127.0.0.1:7379", "LOCALHOST:1", "[::1]", "[::1]:7379"):
        assert client.get("/healthz", headers={"Host": host}).status_code == 200, host
        assert client.get(f"{NS}/facts?entity=u&key=k", headers={"Host": host}).status_code == 404


def test_deep_nesting_is_refused_before_anything_recurses(client: TestClient) -> None:
    def nested(levels: int) -> bytes:
        return b'{"a":' * (levels - 1) + b"[]" + b"}" * (levels - 1)

    for raw in (nested(MAX_DEPTH + 1), b"[" * 200_000 + b"]" * 200_000):
        r = client.post(f"{NS}/query", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["details"] == {"field": "body", "limit": MAX_DEPTH}
        assert f"deeper than {MAX_DEPTH} levels" in r.json()["error"]["message"]
    r = client.post(
        f"{NS}/query", content=nested(MAX_DEPTH), headers={"content-type": "application/json"}
    )
    assert r.json()["error"]["details"]["field"] == "a"  # not too deep: an unknown field
    deep_meta: Any = "x"
    for _ in range(40):
        deep_meta = {"k": deep_meta}
    r = client.post(f"{NS}/memories", json={**WRITE, "metadata": deep_meta})
    assert r.status_code == 422 and r.json()["error"]["details"]["limit"] == 32
    r = client.put(f"{NS}/facts", json={"entity": "u", "key": "k", "value": deep_meta})
    assert r.status_code == 422 and r.json()["error"]["details"]["limit"] == 32
    deep_filter: Any = {"type": "fact"}
    for _ in range(40):
        deep_filter = {"$not": deep_filter}
    r = client.post(f"{NS}/query", json={"text": "x", "filter": deep_filter})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "filter"
    r = client.post(
        f"{NS}/import",
        content=nested(MAX_DEPTH + 1) + b"\n",
        headers={"content-type": "application/x-ndjson"},
    )
    assert r.status_code == 422
    assert r.json()["error"]["details"] == {"field": "records[0]", "limit": MAX_DEPTH, "line": 1}
    assert client.get(f"{NS}/stats").json()["memory_versions"] == 0


def test_deep_values_are_refused_embedded(tmp_path: Path) -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = {"k": [deep]}
    with synapsedb.open(tmp_path / "e", durability="os", embedder=None) as db:
        mem = db.namespace("acme")
        for call, field in [
            (lambda: mem.write("u", {"content": "x", "metadata": deep}), "metadata"),
            (lambda: mem.set("u", "k", deep), "value"),
            (lambda: mem.append("u", {"data": deep}), "data"),
            (lambda: mem.query("x", filter=deep), "filter"),
        ]:
            with pytest.raises(ValidationError) as err:
                call()
            assert err.value.field is not None and err.value.field.startswith(field)
            assert err.value.details["limit"] == 32
        assert mem.stats().memory_versions == 0


@pytest.mark.parametrize("cursor", ["9" * 129, "1" * 5000 + "-ab12cd34-1"])
def test_oversized_event_cursors_are_refused(client: TestClient, cursor: str) -> None:
    for path in (f"{NS}/changes", f"{NS}/events/follow?stream=s"):
        r = client.get(path, headers={"Last-Event-ID": cursor})
        assert r.status_code == 422, path
        assert r.json()["error"]["details"] == {"field": "Last-Event-ID", "limit": 128}
    for path in (f"{NS}/events", f"{NS}/events/follow", f"{NS}/changes"):
        r = client.get(path, params={"stream": "s", "after": cursor})
        assert r.status_code == 422, path
        assert r.json()["error"]["details"] == {"field": "after", "limit": 128}


@pytest.mark.parametrize(
    ("embedding", "field"),
    [
        ([True, False, True], "embedding[0]"),
        ([0.5, True], "embedding[1]"),
        (["1", 2.0], "embedding[0]"),
        ([1.0, None], "embedding[1]"),
        ([[1.0], [2.0]], "embedding[0]"),
        ([1.0, {"x": 1}], "embedding[1]"),
    ],
)
def test_vectors_hold_numbers_only(client: TestClient, embedding: list[Any], field: str) -> None:
    r = client.post(f"{NS}/memories", json={**WRITE, "embedding": embedding})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == field
    assert "expected a number" in r.json()["error"]["message"]
    r = client.post(f"{NS}/memories:batch", json={"items": [{**WRITE, "embedding": embedding}]})
    assert r.json()["error"]["details"]["field"] == f"items[0].{field}"
    r = client.post(f"{NS}/query", json={"embedding": embedding})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == field
    assert client.get(f"{NS}/stats").json()["memory_versions"] == 0


def test_vectors_hold_numbers_only_embedded(tmp_path: Path) -> None:
    import numpy as np

    with synapsedb.open(tmp_path / "e", durability="os", embedder=None) as db:
        mem = db.namespace("acme")
        for bad, field in [
            ([True, False], "embedding[0]"),
            ([1.0, "2"], "embedding[1]"),
            (np.array([True, False]), "embedding"),
            (np.array(["1", "2"]), "embedding"),
        ]:
            with pytest.raises(ValidationError) as err:
                mem.write("u", {"content": "x", "embedding": bad})
            assert err.value.field == field
            with pytest.raises(ValidationError) as err:
                mem.query(embedding=bad)
            assert err.value.field == field
        mem.write("u", {"content": "x", "embedding": [1, 2.5, np.float32(3)]})  # numbers are fine
        mem.write("u", {"content": "y", "embedding": np.array([1, 2, 3], dtype=np.int64)})
        assert mem.stats().memory_versions == 2


def test_the_remote_client_rebuilds_the_new_errors(client: TestClient) -> None:
    answers = {
        UnsupportedMediaTypeError: client.post(f"{NS}/memories", content=b"{}"),
        MethodNotAllowedError: client.delete(f"{NS}/stats"),
        HostNotAllowedError: client.get("/healthz", headers={"Host": "evil.example"}),
    }
    for cls, resp in answers.items():
        err = calls.error_of(resp.status_code, resp.content)
        assert type(err) is cls and err.http_status == resp.status_code
        assert err.details == resp.json()["error"]["details"]
    err = calls.error_of(
        408,
        json.dumps(
            {
                "error": RequestTimeoutError(
                    "body: not received within 1 s", field="body", limit=1
                ).to_dict()
            }
        ).encode(),
    )
    assert type(err) is RequestTimeoutError and err.details["limit"] == 1


@pytest.mark.parametrize(
    "cursor",
    [
        "99999999999999999999-x-1",
        "253402300800000000-x-1",
        "1-x-" + "9" * 100,
        "1-" + "b" * 40 + "-1",
        "-x-1",
        "1-x-",
        "1--1-2",
    ],
)
def test_malformed_change_cursors_are_refused(client: TestClient, cursor: str) -> None:
    """Within the length cap, a change id whose parts overflow a time or a counter is a 422
    naming the field, never a 500 (OverflowError in the replay from history)."""
    r = client.get(f"{NS}/changes", headers={"Last-Event-ID": cursor})
    assert r.status_code == 422, cursor
    assert r.json()["error"]["details"]["field"] == "after"
    r = client.get(f"{NS}/changes", params={"after": cursor, "idle_timeout": 0})
    assert r.status_code == 422, cursor


def test_import_errors_name_the_line_and_the_body_is_capped(tmp_path: Path) -> None:
    """An import's bad record is named by its line in the body (blank lines count), and a body
    over --max-import-bytes is a 413 before it is held in memory: one tenant's admin cannot
    take the server's memory."""
    with synapsedb.open(tmp_path / "src", durability="os", embedder=None) as src:
        src.namespace("acme").write("u", "a memory to move")
        lines = [msgspec.json.encode(r) for r in src.namespace("acme").export()]
    lines.insert(1, b"")
    lines.insert(2, b"   ")
    lines.append(b'{"kind": "fact", "entity": "u"}')
    body = b"\n".join(lines) + b"\n"
    db = synapsedb.open(tmp_path / "d", durability="os", embedder=None)
    ndjson = {"content-type": "application/x-ndjson"}
    with TestClient(create_app(db, limits=Limits(max_import_bytes=len(body)))) as c:
        r = c.post(f"{NS}/import", content=body, headers=ndjson)
        assert r.status_code == 422
        err = r.json()["error"]
        assert err["details"]["line"] == len(lines) and err["message"].startswith(
            f"line {len(lines)}: records[{len(lines) - 3}]."
        )
        assert c.get(f"{NS}/stats").json()["memory_versions"] == 0  # nothing written
        r = c.post(f"{NS}/import", content=body + b"\n", headers=ndjson)
        assert r.status_code == 413
        assert r.json()["error"]["details"] == {"field": "body", "limit": len(body)}
        good = b"\n".join(lines[:-1]) + b"\n"
        assert c.post(f"{NS}/import", content=good, headers=ndjson).json() == {"imported": 1}
    db.close()


def test_an_import_fails_at_its_first_line_that_is_not_an_object(tmp_path: Path) -> None:
    """A body of JSON values that are not records fails at the first, without decoding (and
    holding) the rest first (second hostile pass, F1: 48 MiB of `[]` lines held the event
    loop for 25 s and took 4 GB)."""
    decoded: list[int] = []
    real = msgspec.json.decode

    def counting(raw: Any, *args: Any, **kwargs: Any) -> Any:
        decoded.append(1)
        return real(raw, *args, **kwargs)

    body = b"[]\n" * 100_000
    with (
        synapsedb.open(tmp_path / "d", durability="os", embedder=None) as db,
        TestClient(create_app(db)) as c,
        pytest.MonkeyPatch.context() as mp,
    ):
        mp.setattr(msgspec.json, "decode", counting)
        r = c.post(f"{NS}/import", content=body, headers={"content-type": "application/x-ndjson"})
        assert r.status_code == 422
        assert r.json()["error"]["details"] == {"field": "records[0]", "line": 1}
        assert len(decoded) < 10


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"after": "²²-a-1"}, "after"),
        ({"after": "1-a-²"}, "after"),
        ({"since": "-62135596801"}, "since"),
    ],
)
def test_unicode_digits_and_times_before_year_1_are_refused(
    client: TestClient, params: dict[str, str], field: str
) -> None:
    """Second hostile pass, F7: these answered 500."""
    r = client.get(f"{NS}/changes", params={**params, "idle_timeout": 0})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == field
    r = client.post(f"{NS}/query", json={"text": "x", "as_of": -62135596801})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "as_of"
    r = client.get(f"{NS}/snapshot", params={"entity": "u", "as_of": "-62135596800.5"})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "as_of"


def test_one_tenant_cannot_hold_every_slot_with_stalled_bodies(tmp_path: Path) -> None:
    """A tenant's keys may be sending at most max_body_reads_per_tenant bodies at once; more
    answer 429 at once and are closed, so its stalled bodies cannot fill the connection slots
    and turn another tenant's requests into 503s (second hostile pass, F5)."""
    from synapsedb.server.keys import KeyStore

    keys = KeyStore(tmp_path / "d")
    _, slow = keys.create("slowpoke", ["read"])
    _, other = keys.create("other", ["read", "write"])
    limits = Limits(
        body_timeout=10.0, header_timeout=30.0, max_body_reads_per_tenant=3, max_connections=8
    )
    with running(tmp_path, limits, keys=keys) as (port, db):
        stalled = [raw_connect(port) for _ in range(6)]
        for sock in stalled:  # headers and part of a body, then nothing
            sock.sendall(
                head("POST", f"{NS}/query", 200, Authorization=f"Bearer {slow}") + b'{"text": '
            )
        refused = []
        for sock in stalled[3:]:  # over the tenant's 3 bodies: 429 and closed, at once
            status, body = parse(read_all(sock))
            refused.append((status, body["error"]["details"]["limit"]))
        assert refused == [(429, 3)] * 3
        for _ in range(5):  # the other tenant is served meanwhile
            r = httpx.post(
                f"http://127.0.0.1:{port}{NS}/memories",
                json=WRITE,
                timeout=20,
                headers={"Authorization": f"Bearer {other}"},
            )
            assert r.status_code == 201
        for sock in stalled:
            sock.close()
        assert db.namespace("other..acme").stats().memory_versions == 5
