"""The connection answers the fast lane itself (``GET /facts?entity=&key=`` arriving whole in
one read, on uvicorn's httptools connection): byte for byte what the framework's path answers,
with the same checks (keys, tenants, scopes, rates, Host, the header deadline, keep-alive, the
connection cap), and every request head it does not fully understand left to uvicorn."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httptools
import pytest
import uvicorn
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import synapsedb
from synapsedb.server import create_app
from synapsedb.server.fastlane import FastLane, read_head
from synapsedb.server.keys import KeyStore
from synapsedb.server.limits import Limits, fast_lane_of
from synapsedb.server.middleware import LOOPBACK_HOSTS
from synapsedb.server.observe import Tracing

NS = "/v1/namespaces/shared"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running(
    app: Any, limits: Limits, access_log: bool = False
) -> Iterator[tuple[int, uvicorn.Server]]:
    """``app`` on a real uvicorn server in a thread, with the CLI's options for ``limits``."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_config=None,
        log_level="warning",
        server_header=False,
        access_log=access_log,
        **limits.uvicorn_options(),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield port, server
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each request the fast lane's connection path was offered: whether it answered."""
    seen: list[bool] = []
    real = FastLane.answer_head

    def noted(self: FastLane, *args: Any) -> Any:
        out = real(self, *args)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(FastLane, "answer_head", noted)
    return seen


def ask(port: int, head: bytes, sock: socket.socket | None = None) -> bytes:
    """One whole answer (headers and Content-Length bytes of body) to ``head``."""
    own = sock is None
    s = sock or socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        s.sendall(head)
        raw = b""
        while b"\r\n\r\n" not in raw:
            chunk = s.recv(65536)
            assert chunk, f"closed before an answer: {raw!r}"
            raw += chunk
        top, _, body = raw.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?im)^content-length: *(\d+)", top).group(1))  # type: ignore[union-attr]
        while len(body) < length:
            chunk = s.recv(65536)
            assert chunk, "closed inside the body"
            body += chunk
        assert len(body) == length, "more than one answer"
        return top + b"\r\n\r\n" + body
    finally:
        if own:
            s.close()


def without_date(raw: bytes) -> bytes:
    """The answer with its date header (the second it was written) taken out, checked."""
    lines = raw.split(b"\r\n")
    dates = [line for line in lines if line.lower().startswith(b"date: ")]
    assert len(dates) == 1, raw
    return b"\r\n".join(line for line in lines if line not in dates)


def get(query: str, *headers: str) -> bytes:
    lines = [f"GET {NS}/facts?{query} HTTP/1.1", "Host: 127.0.0.1", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[synapsedb.Database, KeyStore, dict[str, str]]]:
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    keys = KeyStore(tmp_path / "d")
    tokens = {
        name: keys.create(tenant, scopes, None, rate)[1]
        for name, tenant, scopes, rate in [
            ("a", "acme", ["read", "write"], None),
            ("w", "acme", ["write"], None),
            ("b", "globex", ["read"], None),
            ("slow", "acme", ["read"], 1.0),
        ]
    }
    ns = db.namespace("acme..shared")
    ns.set("user:1", "plan", {"tier": 2})
    ns.set("user:é", "k y", "unicode and spaces")
    yield db, keys, tokens
    db.close()


CASES = [
    ("entity=user:1&key=plan", "a"),  # found
    ("entity=user%3A1&key=plan", "a"),  # escaped
    ("entity=user%3A%C3%A9&key=k+y", "a"),  # escaped UTF-8 and a plus
    ("entity=user:1&key=nope", "a"),  # 404
    ("entity=user:1&key=plan", "b"),  # another tenant: 404, not 403
    ("entity=user:1&key=plan", "w"),  # no read scope: 403
    ("entity=user:1&key=plan", None),  # no key: 401
    ("entity=&key=plan", "a"),  # invalid entity: 422
    ("entity=user:1&key=" + "k" * 5000, "a"),  # over a key's length: 422
]


def test_the_connection_answers_byte_for_byte_as_the_framework_path(
    keyed: tuple[synapsedb.Database, KeyStore, dict[str, str]], answered: list[bool]
) -> None:
    """Each case three ways: answered by the connection; the same request with a header that
    leaves it to uvicorn (``Connection: keep-alive``: the fast lane in the ASGI app); and the
    routed handler (a server with tracing on has no fast lane). The first two are equal byte
    for byte but the date; the routed handler gives the same status, body and headers."""
    db, keys, tokens = keyed
    limits = Limits()
    fast_app = create_app(db, keys, limits=limits, allowed_hosts=LOOPBACK_HOSTS)
    routed_app = create_app(
        db, keys, Tracing(InMemorySpanExporter()), limits=limits, allowed_hosts=LOOPBACK_HOSTS
    )
    assert routed_app.fast is None
    statuses: list[bytes] = []  # of every answer from fast_app
    with running(fast_app, limits) as (port, _), running(routed_app, limits) as (rport, _):
        for i, (query, who) in enumerate(CASES):
            auth = [f"Authorization: Bearer {tokens[who]}"] if who else []
            rid = f"X-Request-ID: case-{i}"
            answered.clear()
            here = ask(port, get(query, *auth, rid))
            assert answered == [True], query  # the connection answered it
            framework = ask(port, get(query, *auth, rid, "Connection: keep-alive"))
            assert answered == [True, False], query  # declined by the connection
            assert without_date(here) == without_date(framework), query
            routed_head, _, routed_body = without_date(
                ask(rport, get(query, *auth, rid))
            ).partition(b"\r\n\r\n")
            head, _, body = without_date(here).partition(b"\r\n\r\n")
            assert body == routed_body, query
            assert sorted(head.lower().split(b"\r\n")) == sorted(
                routed_head.lower().split(b"\r\n")
            ), query
            statuses += [here.split(b" ")[1], framework.split(b" ")[1]]
        first = ask(port, get(CASES[0][0], f"Authorization: Bearer {tokens['a']}"))
        assert first.startswith(b"HTTP/1.1 200 OK\r\n") and b'"value":{"tier":2}' in first
        # the key's rate holds on the connection path too
        slow = [
            ask(port, get(CASES[0][0], f"Authorization: Bearer {tokens['slow']}")) for _ in range(3)
        ]
        limited = [r for r in slow if r.startswith(b"HTTP/1.1 429")]
        assert limited and re.search(rb"(?m)^retry-after: [1-9]", limited[0])
        statuses += [r.split(b" ")[1] for r in (first, *slow)]
    assert set(statuses) == {b"200", b"401", b"403", b"404", b"422", b"429"}
    # every answer counted in the request metrics under the route, as the framework counts
    text = fast_app.state.metrics.render().decode()
    for status in set(statuses):
        line = re.search(
            rf'synapsedb_http_request_seconds_count{{[^}}]*route="/v1/namespaces/'
            rf'{{ns}}/facts",status="{status.decode()}"[^}}]*}} (\S+)',
            text,
        )
        assert line is not None and float(line.group(1)) == statuses.count(status), status


def test_revoking_a_key_takes_effect_on_its_next_request(
    keyed: tuple[synapsedb.Database, KeyStore, dict[str, str]], answered: list[bool]
) -> None:
    db, keys, tokens = keyed
    limits = Limits()
    app = create_app(db, keys, limits=limits, allowed_hosts=LOOPBACK_HOSTS)
    head = get(CASES[0][0], f"Authorization: Bearer {tokens['a']}")
    with running(app, limits) as (port, _), socket.create_connection(("127.0.0.1", port)) as s:
        assert ask(port, head, s).startswith(b"HTTP/1.1 200")
        key_id = tokens["a"].split("_")[1]  # sdb_<id>_<secret>
        keys.revoke(key_id)
        assert ask(port, head, s).startswith(b"HTTP/1.1 401")
    assert answered == [True, True]


# -- what the connection leaves to uvicorn --------------------------------------------------------

PLAIN = b"GET /v1/namespaces/kv/facts?entity=user:1&key=plan HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
LEFT = {
    "a body's length": PLAIN[:-2] + b"Content-Length: 0\r\n\r\n",
    "chunked": PLAIN[:-2] + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "connection close": PLAIN[:-2] + b"Connection: close\r\n\r\n",
    "expect": PLAIN[:-2] + b"Expect: 100-continue\r\n\r\n",
    "upgrade": PLAIN[:-2] + b"Upgrade: websocket\r\n\r\n",
    "two requests in one read": PLAIN + PLAIN,
    "bytes after the head": PLAIN + b"x",
    "part of a head": PLAIN[:-2],
    "HTTP/1.0": PLAIN.replace(b"HTTP/1.1", b"HTTP/1.0"),
    "lowercase method": PLAIN.replace(b"GET", b"get"),
    "HEAD": PLAIN.replace(b"GET", b"HEAD"),
    "escaped path": PLAIN.replace(b"/kv/", b"/k%76/"),
    "fragment": PLAIN.replace(b"plan ", b"plan#x "),
    "absolute form": PLAIN.replace(b"GET /", b"GET http://127.0.0.1/"),
    "two spaces": PLAIN.replace(b"GET ", b"GET  "),
    "folded header": PLAIN[:-2] + b"X-A: 1\r\n  2\r\n\r\n",
    "tab inside a value": PLAIN[:-2] + b"X-A: 1\t2\r\n\r\n",
    "space after a value": PLAIN[:-2] + b"X-A: 1 \r\n\r\n",
    "space before the colon": PLAIN[:-2] + b"X-A : 1\r\n\r\n",
    "control byte": PLAIN[:-2] + b"X-A: 1\x012\r\n\r\n",
    "non-ASCII value": PLAIN[:-2] + "X-A: é\r\n\r\n".encode(),
    "bare LF": PLAIN.replace(b"\r\nHost", b"\nHost"),
    "other route": PLAIN.replace(b"/facts?", b"/facts/history?"),
    "slash in the namespace": PLAIN.replace(b"/kv/", b"/k/v/"),
    "no query": PLAIN.replace(b"?entity=user:1&key=plan", b""),
}


@pytest.mark.parametrize("name", sorted(LEFT))
def test_heads_it_does_not_fully_understand_are_left_to_uvicorn(name: str) -> None:
    assert read_head(LEFT[name]) is None
    assert read_head(LEFT[name]) is None  # its header lines remembered: the same verdict


def test_the_header_lines_remembered_are_bounded() -> None:
    from synapsedb.server import fastlane

    for i in range(3 * fastlane.MAX_REMEMBERED_HEADS):
        head = PLAIN[:-2] + f"X-Request-ID: r{i}\r\n\r\n".encode()
        assert read_head(head) == (
            b"/v1/namespaces/kv/facts",
            b"entity=user:1&key=plan",
            ((b"host", b"127.0.0.1"), (b"x-request-id", b"r%d" % i)),
        )
        assert len(fastlane._seen_heads) <= fastlane.MAX_REMEMBERED_HEADS
    huge = PLAIN[:-2] + b"X-Pad: " + b"a" * fastlane.MAX_REMEMBERED_HEAD + b"\r\n\r\n"
    assert read_head(huge) is not None
    assert all(len(block) <= fastlane.MAX_REMEMBERED_HEAD for block in fastlane._seen_heads)


def test_a_plain_head_is_read_as_uvicorns_parser_reads_it() -> None:
    assert read_head(PLAIN) == (
        b"/v1/namespaces/kv/facts",
        b"entity=user:1&key=plan",
        ((b"host", b"127.0.0.1"),),
    )


class Parsed:
    """What uvicorn takes from httptools' parse of a request head."""

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.complete = 0

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_message_complete(self) -> None:
        self.complete += 1


def httptools_reads(data: bytes) -> tuple[bytes, bytes, tuple[tuple[bytes, bytes], ...]] | None:
    parsed = Parsed()
    parser = httptools.HttpRequestParser(parsed)
    try:
        parser.feed_data(data)
    except httptools.HttpParserError:
        return None
    assert parsed.complete == 1
    assert parser.get_method() == b"GET" and parser.get_http_version() == "1.1"
    assert parser.should_keep_alive()
    url = httptools.parse_url(parsed.url)
    assert url.fragment is None and url.schema is None
    return url.path, url.query or b"", tuple(parsed.headers)


_printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)
_token = st.from_regex(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}", fullmatch=True)


@settings(max_examples=400, deadline=None)
@given(
    ns=st.from_regex(r"[A-Za-z0-9._~!$&'()*+,;=:@%-]{1,10}", fullmatch=True),
    query=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=30),
    headers=st.lists(
        st.tuples(_token, st.sampled_from(["", " ", "  ", "\t"]), _printable), max_size=5
    ),
)
def test_any_head_it_reads_means_the_same_to_httptools(
    ns: str, query: str, headers: list[tuple[str, str, str]]
) -> None:
    lines = [f"GET /v1/namespaces/{ns}/facts?{query} HTTP/1.1"]
    lines += [f"{name}:{space}{value}" for name, space, value in headers]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode()
    mine = read_head(data)
    if mine is not None:
        assert httptools_reads(data) == mine, data


# -- the server's other protections hold on the connection path ---------------------------------


@pytest.fixture
def open_db(tmp_path: Path) -> Iterator[synapsedb.Database]:
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    db.namespace("kv").set("user:1", "plan", "pro")
    yield db
    db.close()


def test_keep_alive_counts_from_the_last_answer_and_the_header_deadline_holds(
    open_db: synapsedb.Database, answered: list[bool]
) -> None:
    limits = Limits(keep_alive=1.0, header_timeout=1.0)
    app = create_app(open_db, limits=limits, allowed_hosts=LOOPBACK_HOSTS)
    with running(app, limits) as (port, _):
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            start = time.monotonic()
            while time.monotonic() - start < 2.5:  # longer than keep_alive, never idle for it
                assert ask(port, PLAIN, s).startswith(b"HTTP/1.1 200")
                time.sleep(0.2)
            assert all(answered) and len(answered) > 5
            s.settimeout(20)
            assert s.recv(100) == b""  # then idle: closed by the keep-alive timeout
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            assert ask(port, PLAIN, s).startswith(b"HTTP/1.1 200")
            s.sendall(PLAIN[:30])  # the next request's headers never end
            raw = b""
            while chunk := s.recv(65536):
                raw += chunk
            assert raw.startswith(b"HTTP/1.1 408") and b'"field":"headers"' in raw


def test_other_hosts_and_the_busy_connection_limit_answer_as_on_the_framework_path(
    open_db: synapsedb.Database, answered: list[bool]
) -> None:
    limits = Limits(max_connections=2)
    app = create_app(open_db, limits=limits, allowed_hosts=LOOPBACK_HOSTS)
    with running(app, limits) as (port, server):
        evil = PLAIN.replace(b"Host: 127.0.0.1", b"Host: attacker.example")
        refused = ask(port, evil)
        assert refused.startswith(b"HTTP/1.1 421") and answered == [False]
        assert without_date(refused) == without_date(
            ask(port, evil[:-2] + b"Connection: keep-alive\r\n\r\n")
        )
        no_host = PLAIN.replace(b"Host: 127.0.0.1\r\n", b"")
        assert ask(port, no_host).startswith(b"HTTP/1.1 421")
        with contextlib.ExitStack() as stack:  # every connection busy: 503
            busy = [
                stack.enter_context(socket.create_connection(("127.0.0.1", port))) for _ in range(2)
            ]
            for s in busy:
                s.sendall(
                    b"POST /v1/namespaces/kv/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{"
                )
            deadline = time.monotonic() + 20
            while len(server.server_state.tasks) < 2:
                assert time.monotonic() < deadline, "the requests did not start"
                time.sleep(0.01)
            answered.clear()
            assert ask(port, PLAIN).startswith(b"HTTP/1.1 503")
            assert answered == []  # never offered: uvicorn's 503
        assert ask(port, PLAIN).startswith(b"HTTP/1.1 200")


def test_only_the_app_as_created_with_its_fast_lane_is_answered_by_the_connection(
    open_db: synapsedb.Database,
) -> None:
    limits = Limits()
    app = create_app(open_db, limits=limits)

    def config(served: Any, **kw: Any) -> uvicorn.Config:
        c = uvicorn.Config(served, log_config=None, **limits.uvicorn_options(), **kw)
        c.load()
        return c

    assert fast_lane_of(config(app)) == (app.fast, app.guard)
    assert fast_lane_of(config(app, root_path="/api")) is None
    assert (
        fast_lane_of(config(create_app(open_db, tracing=Tracing(InMemorySpanExporter())))) is None
    )

    async def wrapper(scope: Any, receive: Any, send: Any) -> None:
        await app(scope, receive, send)

    assert fast_lane_of(config(wrapper)) is None


def test_a_body_shaped_like_a_request_is_never_answered_as_one(
    keyed: tuple[synapsedb.Database, KeyStore, dict[str, str]], answered: list[bool]
) -> None:
    """A POST answered (401: no key) before its body is read: the body that follows, however
    much it looks like a fast-lane request head, is the rest of that message, not a request."""
    db, keys, _tokens = keyed
    limits = Limits()
    app = create_app(db, keys, limits=limits, allowed_hosts=LOOPBACK_HOSTS)
    inner = get("entity=user:1&key=plan")
    post = (
        f"POST {NS}/memories HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
        f"\r\nContent-Length: {len(inner)}\r\n\r\n"
    ).encode()
    with running(app, limits) as (port, _), socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(20)
        first = ask(port, post, s)
        assert first.startswith(b"HTTP/1.1 401")
        s.sendall(inner)  # the POST's body
        time.sleep(0.3)
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            late = s.recv(65536)
            assert late == b"", late  # no answer to the body (or the connection closed)
        assert True not in answered


def test_a_head_completing_one_the_parser_holds_is_left_to_it(
    open_db: synapsedb.Database, answered: list[bool]
) -> None:
    """A read that ends inside a second request leaves the parser holding its start: the next
    read, shaped like a whole fast-lane head, is the rest of that request (here a header
    line and the end of its headers), and uvicorn answers what it parses: GET /nothing."""
    limits = Limits()
    app = create_app(open_db, limits=limits, allowed_hosts=LOOPBACK_HOSTS)
    with running(app, limits) as (port, _), socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(20)
        healthz = ask(
            port,
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            b"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ",
            s,
        )
        assert healthz.startswith(b"HTTP/1.1 200")
        time.sleep(0.2)  # the healthz answer is complete: between requests
        second = ask(port, PLAIN, s)
        assert second.startswith(b"HTTP/1.1 404") and b"no route GET /nothing" in second
        assert True not in answered
        assert ask(port, PLAIN, s).startswith(b"HTTP/1.1 200")  # then the connection's own
        assert answered[-1] is True


def test_with_uvicorns_access_log_on_every_request_takes_uvicorns_path(
    open_db: synapsedb.Database, answered: list[bool], caplog: pytest.LogCaptureFixture
) -> None:
    limits = Limits()
    app = create_app(open_db, limits=limits, allowed_hosts=LOOPBACK_HOSTS)
    with running(app, limits, access_log=True) as (port, _):
        caplog.set_level("INFO", logger="uvicorn.access")  # after uvicorn set its own level
        assert ask(port, PLAIN).startswith(b"HTTP/1.1 200")
    assert answered == []
    logged = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    assert any("GET /v1/namespaces/kv/facts?entity=user:1&key=plan" in m for m in logged), logged
