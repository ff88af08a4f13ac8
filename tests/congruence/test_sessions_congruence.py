"""Conversation sessions embedded and over HTTP give the same answers and the same errors.

Three sides run each scenario: ``Sessions`` over an embedded namespace, ``Sessions`` over
``synapsedb.connect(url)`` and ``AsyncSessions`` over ``synapsedb.connect_async(url)``, each
against its own database with a manual clock at the same start, a real server (uvicorn on
loopback) for the two remote ones. The remote stores keep the default clock, so every
operation goes to the session routes (one request each: counted from the server's metrics);
the server runs the same plans with the database's clock. Event ids and times are equal by
construction, so answers are compared whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import synapsedb
from synapsedb import ManualClock, SynapseError
from synapsedb.conversation import AsyncSessions, Message, Sessions
from synapsedb.conversation.summary import Summarizer
from synapsedb.errors import ForbiddenError, UnauthorizedError
from synapsedb.llm import ChatClient, LLMSettings
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore
from tests.congruence.conftest import ServedStorage
from tests.support.live_server import serve
from tests.support.scripted_upstream import Request, ScriptedUpstream

START = 1_761_318_000_000_000  # 2025-10-24T15:00:00Z
SIDES = ("embedded", "sync", "async")
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "track_parcel", "arguments": '{"order": 1458}'},
}
Store = Callable[..., Any]  # makes a store with an awaitable face: await store.load(...)


class Awaitable_:
    """A blocking store (or namespace) behind an awaitable face, so one async scenario
    drives the sync and the async clients alike."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._target, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


@dataclasses.dataclass
class Side:
    store: Store  # Sessions(ns, **settings) with an awaitable face
    ns: Any  # the namespace, awaitable face
    advance: Callable[[float], Any]  # moves the clock the side's TTLs are judged by
    db: synapsedb.Database  # the side's database (the served one for remote sides)
    url: str | None = None


def _open(path: Path, llm: Any = None, storage: str | None = None) -> synapsedb.Database:
    return synapsedb.open(
        path,
        clock=ManualClock(START),
        durability="os",
        embedder=None,
        background_maintenance=False,
        llm=llm,
        storage=storage,
    )


_served: list[ServedStorage] = []  # this module's served_storage (the remote sides' backend)


@pytest.fixture(scope="module", autouse=True)
def _remote_sides_backend(served_storage: ServedStorage) -> Iterator[None]:
    """Every test of this module runs with the remote sides' database on SQLite, then on
    PostgreSQL (the embedded side stays on SQLite)."""
    _served.append(served_storage)
    yield
    _served.remove(served_storage)


@contextlib.asynccontextmanager
async def side(
    kind: str,
    path: Path,
    llm: Any = None,
    agent: str = "concierge",
    keys: KeyStore | None = None,
    api_key: str | None = None,
) -> AsyncIterator[Side]:
    db = _open(path, llm, storage=_served[-1]() if kind != "embedded" and _served else None)
    clock = db.clock
    assert isinstance(clock, ManualClock)
    try:
        if kind == "embedded":
            ns = db.namespace("acme", agent=agent)
            yield Side(
                lambda **kw: Awaitable_(Sessions(ns, clock=clock, **kw)),
                Awaitable_(ns),
                clock.advance,
                db,
            )
            return
        with serve(create_app(db, keys)) as url:
            if kind == "sync":
                remote = synapsedb.connect(url, api_key=api_key)
                rns = remote.namespace("acme", agent=agent)
                try:
                    yield Side(
                        lambda **kw: Awaitable_(Sessions(rns, **kw)),
                        Awaitable_(rns),
                        clock.advance,
                        db,
                        url,
                    )
                finally:
                    remote.close()
            else:
                aremote = synapsedb.connect_async(url, api_key=api_key)
                ans = aremote.namespace("acme", agent=agent)
                try:
                    yield Side(lambda **kw: AsyncSessions(ans, **kw), ans, clock.advance, db, url)
                finally:
                    await aremote.close()
    finally:
        db.close()


def plain(value: Any) -> Any:
    """Messages as their dicts, value objects as dicts, errors as (class, field, limit)."""
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, SynapseError):
        return type(value).__name__, value.details.get("field"), value.details.get("limit")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


async def outcome(aw: Awaitable[Any]) -> Any:
    try:
        return plain(await aw)
    except SynapseError as exc:
        return plain(exc)


def requests_by_route(url: str) -> dict[str, float]:
    """``synapsedb_http_request_seconds_count`` per (method, route) from the server."""
    text = httpx.get(f"{url}/metrics").text
    out: dict[str, float] = {}
    for m in re.finditer(
        r'synapsedb_http_request_seconds_count\{method="(\w+)",'
        r'route="([^"]+)",status="\d+"\} ([\d.]+)',
        text,
    ):
        key = f"{m[1]} {m[2]}"
        out[key] = out.get(key, 0) + float(m[3])
    return out


def run_sides(
    tmp_path: Path, scenario: Callable[[Side], Awaitable[Any]], **kw: Any
) -> dict[str, Any]:
    async def one(kind: str) -> Any:
        async with side(kind, tmp_path / kind, **kw) as s:
            return await scenario(s)

    return {kind: asyncio.run(one(kind)) for kind in SIDES}


def assert_same(got: dict[str, Any]) -> Any:
    assert got["sync"] == got["embedded"]
    assert got["async"] == got["embedded"]
    return got["embedded"]


# -- every operation ---------------------------------------------------------------------------


async def every_operation(s: Side) -> dict[str, Any]:
    out: dict[str, Any] = {}
    store = s.store(searchable=True, ttl=3600)
    sent = [
        Message.system("Be brief."),
        Message.user("My parcel went to Hamburg", name="ana"),
        Message.assistant(tool_calls=[CALL], metadata={"model": "m1"}),
        Message.tool('{"city": "Hamburg"}', "call_1"),
        Message.assistant("It is in Hamburg, at the depot."),
    ]
    out["append"] = [await outcome(store.append("s1", m)) for m in sent]
    s.advance(1)
    out["append_many"] = await outcome(
        store.append_many("s2", [("user", "hi"), {"role": "assistant", "content": "hello"}])
    )
    out["append about"] = await outcome(
        store.append("s3", ("user", "plain"), searchable=False, entity="user:42")
    )
    plain_store = s.store()  # no ttl: an id with '/' is composed, its TTL judged by the client
    for sid in ("a/b", ".", "..", "x y%2F?#", "é🙂"):
        out[f"append {sid}"] = await outcome(plain_store.append(sid, ("user", f"in {sid}")))
        out[f"load {sid}"] = await outcome(plain_store.load(sid))
        out[f"info {sid}"] = await outcome(plain_store.info(sid))
    out["load"] = await outcome(store.load("s1"))
    for last in (2, 0, 10_000):
        out[f"load last={last}"] = await outcome(store.load("s1", last=last))
    out["load never"] = await outcome(store.load("never"))
    await store.append("long", Message.system("You track parcels."))
    for i in range(16):
        await store.append(
            "long",
            (
                "user",
                f"Parcel {1000 + i} left Hamburg on Monday; it should reach city {i} by Friday.",
            ),
        )
        await store.append("long", ("assistant", f"Noted: parcel {1000 + i} goes to city {i}."))
    await store.append("long", ("user", "Which city does parcel 1003 go to?"))
    for strategy, options in [
        ("buffer", {}),
        ("window", {"k": 2}),
        ("window", {"k": 0}),
        ("token_buffer", {"max_tokens": 40}),
        ("token_buffer", {"max_tokens": 60, "model": "gpt-4o"}),
        ("summary", {"keep": 2, "summary_tokens": 40}),
        ("summary_buffer", {"max_tokens": 400, "summary_tokens": 60}),
        ("vector", {"k": 1}),
    ]:
        key = f"{strategy} {options}"
        out[key] = await outcome(store.load("s1", strategy=strategy, **options))
        out[f"long {key}"] = await outcome(store.load("long", strategy=strategy, **options))
    out["search"] = await outcome(store.search("s1", "parcel Hamburg", k=1))
    out["search exclude"] = await outcome(
        store.search("s1", "parcel Hamburg", k=2, exclude=[out["append"][1]["id"]])
    )
    out["info"] = await outcome(store.info("s1"))
    out["info count_limit=2"] = await outcome(store.info("s1", count_limit=2))
    out["info never"] = await outcome(store.info("never"))
    out["sessions"] = await outcome(store.sessions())
    before = s.db.clock.now_us() / 1e6
    s.advance(1)
    out["clear"] = await outcome(store.clear("s1"))
    out["clear never"] = await outcome(store.clear("never"))
    out["load cleared"] = await outcome(store.load("s1"))
    out["load as_of"] = await outcome(store.load("s1", as_of=before))
    out["window cleared"] = await outcome(store.load("s1", strategy="window", k=2))
    out["info cleared"] = await outcome(store.info("s1"))
    out["info as_of"] = await outcome(store.info("s1", as_of=before))
    out["sessions as_of"] = await outcome(store.sessions(as_of=before))
    await store.configure("s2", ttl=10)
    s.advance(20)
    out["load expired"] = await outcome(store.load("s2"))
    out["info expired"] = await outcome(store.info("s2"))
    out["sessions expired"] = await outcome(store.sessions())
    out["sessions, no store ttl"] = await outcome(s.store().sessions())
    out["purge_expired"] = await outcome(store.purge_expired())
    out["purge"] = await outcome(store.purge("s1"))
    out["load purged as_of"] = await outcome(store.load("s1", as_of=before))
    out["append purged"] = await outcome(store.append("s1", ("user", "starting over")))
    out["load purged"] = await outcome(store.load("s1"))
    out["events about"] = await outcome(s.ns.events("session:s3"))
    return out


def test_every_operation_answers_the_same(tmp_path: Path) -> None:
    routes: dict[str, dict[str, float]] = {}

    async def scenario(s: Side) -> dict[str, Any]:
        out = await every_operation(s)
        if s.url is not None:
            routes[s.url] = requests_by_route(s.url)
        return out

    got = assert_same(run_sides(tmp_path, scenario))
    assert [m["role"] for m in got["append"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert got["load last=0"] == [] and len(got["load last=2"]) == 2
    assert got["load cleared"] == [] and len(got["load as_of"]) == 5
    assert got["load expired"] == [] and got["purge_expired"] == ["s2"]
    assert got["load purged as_of"] == [] and got["info"]["count"] == 5
    assert got["summary_buffer {'max_tokens': 400, 'summary_tokens': 60}"] == got["load"]
    for name in (
        "summary {'keep': 2, 'summary_tokens': 40}",
        "summary_buffer {'max_tokens': 400, 'summary_tokens': 60}",
    ):
        summary = got[f"long {name}"][1]
        assert summary["metadata"]["summary"]["method"] == "extractive", name
        assert summary["content"].startswith("Summary of the earlier conversation"), name
    head, found, question = [m["content"] for m in got["long vector {'k': 1}"]]
    assert (head, question) == ("You track parcels.", "Which city does parcel 1003 go to?")
    assert "parcel 1003" in found.lower()
    assert [m["content"] for m in got["search"]] == ["My parcel went to Hamburg"]
    # the remote stores went through the session routes
    for counts in routes.values():
        assert counts.get("GET /v1/namespaces/{ns}/sessions/{sid}/messages", 0) >= 20
        assert counts.get("POST /v1/namespaces/{ns}/sessions/{sid}/messages", 0) >= 9
        assert counts.get("DELETE /v1/namespaces/{ns}/sessions/{sid}", 0) == 3
        assert counts.get("GET /v1/namespaces/{ns}/sessions", 0) == 4
        assert counts.get("PUT /v1/namespaces/{ns}/sessions/{sid}", 0) == 1
        assert counts.get("POST /v1/namespaces/{ns}/sessions/{sid}/search", 0) == 2
        assert counts.get("POST /v1/namespaces/{ns}/sessions:purge_expired", 0) == 1


def test_one_request_per_operation(tmp_path: Path) -> None:
    async def scenario(s: Side) -> list[Any]:
        assert s.url is not None
        store = s.store(ttl=60)
        await store.append_many("s", [("user", f"turn {i}") for i in range(30)])
        out = []
        for op in (
            lambda: store.append("s", ("user", "one more")),
            lambda: store.load("s"),
            lambda: store.load("s", last=3),
            lambda: store.info("s"),
            lambda: store.load("s", strategy="token_buffer", max_tokens=50),
            lambda: store.search("s", "turn 3"),
            lambda: store.sessions(),
            lambda: store.configure("s", ttl=30),
            lambda: store.clear("s"),
            lambda: store.purge_expired(),
            lambda: store.purge("s"),
        ):
            before = sum(requests_by_route(s.url).values())
            await op()
            out.append(sum(requests_by_route(s.url).values()) - before - 1)  # minus /metrics
        return out

    for kind in ("sync", "async"):

        async def one(kind: str = kind) -> Any:
            async with side(kind, tmp_path / kind) as s:
                return await scenario(s)

        assert asyncio.run(one()) == [1] * 11, kind


# -- errors ------------------------------------------------------------------------------------

HOSTILE: list[tuple[str, Callable[[Any], Awaitable[Any]]]] = [
    ("bad role", lambda s: s.append("s", ("bot", "hi"))),
    ("unknown field", lambda s: s.append("s", {"role": "user", "content": "x", "colour": 1})),
    ("empty content", lambda s: s.append("s", ("user", "  "))),
    (
        "tool_calls on user",
        lambda s: s.append("s", {"role": "user", "content": "x", "tool_calls": [CALL]}),
    ),
    ("bad name", lambda s: s.append("s", {"role": "user", "content": "x", "name": "a b"})),
    ("over a message's bytes", lambda s: s.append("s", ("user", "é" * 140_000))),
    ("over a message's content", lambda s: s.append("s", ("user", "x" * 300_000))),
    (
        "NaN metadata",
        lambda s: s.append("s", {"role": "user", "content": "x", "metadata": {"v": float("nan")}}),
    ),
    ("a bad one in a list", lambda s: s.append_many("s", [("user", "ok"), ("robot", "no")])),
    ("not a list", lambda s: s.append_many("s", "hello")),
    ("searchable", lambda s: s.append("s", ("user", "x"), searchable="yes")),
    ("entity", lambda s: s.append("s", ("user", "x"), entity="")),
    ("empty id", lambda s: s.load("")),
    ("blank id", lambda s: s.load("   ")),
    ("long id", lambda s: s.append("x" * 201, ("user", "x"))),
    ("control char id", lambda s: s.load("a\x00b")),
    ("newline id", lambda s: s.clear("a\nb")),
    ("int id", lambda s: s.info(42)),
    ("last -1", lambda s: s.load("s", last=-1)),
    ("last huge", lambda s: s.load("s", last=10_001)),
    ("last bool", lambda s: s.load("s", last=True)),
    ("as_of", lambda s: s.load("s", as_of="not a time")),
    ("unknown strategy", lambda s: s.load("s", strategy="nope")),
    ("strategy and last", lambda s: s.load("s", strategy="window", last=3)),
    ("strategy and as_of", lambda s: s.load("s", strategy="buffer", as_of=START / 1e6)),
    ("option of another", lambda s: s.load("s", strategy="window", max_tokens=10)),
    ("option without strategy", lambda s: s.load("s", k=3)),
    ("window k -1", lambda s: s.load("s", strategy="window", k=-1)),
    ("token budget 0", lambda s: s.load("s", strategy="token_buffer", max_tokens=0)),
    ("summary too small", lambda s: s.load("s", strategy="summary_buffer", max_tokens=100)),
    ("summary_tokens", lambda s: s.load("s", strategy="summary", summary_tokens=3)),
    ("vector k 0", lambda s: s.load("s", strategy="vector", k=0)),
    ("vector unsearchable", lambda s: s.load("s", strategy="vector")),
    ("count_limit", lambda s: s.info("s", count_limit=0)),
    ("count_limit huge", lambda s: s.info("s", count_limit=10_001)),
    ("purge bad id", lambda s: s.purge("")),
]


@pytest.mark.parametrize("case", [name for name, _ in HOSTILE])
def test_hostile_input_is_refused_alike_and_writes_nothing(tmp_path: Path, case: str) -> None:
    op = dict(HOSTILE)[case]

    async def scenario(s: Side) -> list[Any]:
        store = s.store()
        await store.append("s", ("user", "hello there"))
        err = await outcome(op(store))
        return [err, await outcome(store.load("s")), await outcome(store.sessions())]

    err, msgs, sessions = assert_same(run_sides(tmp_path, scenario))
    assert isinstance(err, tuple) and err[0] == "ValidationError", err
    assert [m["content"] for m in msgs] == ["hello there"] and sessions == ["s"]


def test_route_level_errors(tmp_path: Path) -> None:
    """What only raw HTTP can send: the route's own checks, named by field."""
    db = _open(tmp_path / "d")
    try:
        with serve(create_app(db)) as url:
            base = f"{url}/v1/namespaces/acme/sessions"
            cases = [
                ("GET", f"{base}/s/messages", {"params": {"max_token": "5"}}, 422, "max_token"),
                ("GET", f"{base}/s/messages", {"params": {"last": "x"}}, 422, "last"),
                ("GET", f"{base}/s/messages", {"params": {"ttl": "soon"}}, 422, "ttl"),
                ("GET", f"{base}/s/messages", {"params": {"ttl": "-1"}}, 422, "ttl"),
                ("GET", f"{base}/s", {"params": {"count_limit": "many"}}, 422, "count_limit"),
                ("DELETE", f"{base}/s", {"params": {"purge": "yes"}}, 422, "purge"),
                ("POST", f"{base}/s/messages", {"json": {}}, 422, "message"),
                (
                    "POST",
                    f"{base}/s/messages",
                    {"json": {"message": {"role": "user", "content": "a"}, "messages": []}},
                    422,
                    "message",
                ),
                (
                    "POST",
                    f"{base}/s/messages",
                    {"json": {"messages": [["user", "hi"]]}},
                    422,
                    "messages[0]",
                ),
                (
                    "POST",
                    f"{base}/s/messages",
                    {"json": {"messages": [{"role": "user", "content": "x"}] * 1001}},
                    422,
                    "messages",
                ),
                ("POST", f"{base}/s/messages", {"json": {"msg": 1}}, 422, "msg"),
                ("POST", f"{base}/s/messages", {"content": b"x"}, 415, "content-type"),
            ]
            with httpx.Client() as http:
                for method, u, kw, status, field in cases:
                    r = http.request(method, u, **kw)
                    assert r.status_code == status, (u, kw, r.text)
                    assert r.json()["error"]["details"]["field"] == field, r.text
                assert http.get(f"{base}/s/messages").json() == {
                    "messages": [],
                    "strategy": None,
                    "summary": None,
                }
    finally:
        db.close()


# -- summaries by the server's model -------------------------------------------------------------


def summarise(request: Request) -> str:
    said = request.messages[-1]["content"]
    return "The user asked about parcels: " + ", ".join(re.findall(r"\b1\d{3}\b", said))


def test_summaries_are_made_by_the_servers_model(tmp_path: Path) -> None:
    """The served database's memory-loop LLM summarises a GET with summary_buffer; embedded,
    the same model given as a Summarizer gives the same summary, versions included."""
    with ScriptedUpstream(responder=summarise) as up:
        llm = ChatClient(LLMSettings(base_url=up.base_url, model="scripted", max_retries=0))

        async def scenario(s: Side) -> list[Any]:
            store = s.store()
            for i in range(30):
                await store.append("s", ("user", f"Where is parcel {1000 + i}? It left Hamburg."))
                await store.append("s", ("assistant", f"Parcel {1000 + i} is in Munich."))
            opts: dict[str, Any] = {"strategy": "summary_buffer", "max_tokens": 420}
            if s.url is None:  # embedded: the model is given; remote: the server's own
                opts["summarizer"] = Summarizer(llm)
            first = await outcome(store.load("s", **opts))
            await store.append("s", ("user", "And parcel 1999?"))
            second = await outcome(store.load("s", **opts))
            history = [f.value["version"] for f in await s.ns.history("session:s", "summary")]
            return [first, second, history]

        try:
            first, second, history = assert_same(run_sides(tmp_path, scenario, llm=llm))
        finally:
            llm.close()
    summary = first[0]
    assert summary["role"] == "system" and summary["metadata"]["summary"]["method"] == "llm"
    assert "1000" in summary["content"] and history == [1, 2]
    assert second[0]["metadata"]["summary"]["version"] == 2


# -- keys, scopes and tenants ----------------------------------------------------------------------


def test_a_tenants_key_cannot_reach_another_tenants_sessions(tmp_path: Path) -> None:
    db = _open(tmp_path / "d")
    keys = KeyStore(tmp_path / "d")
    tok = {
        name: keys.create(tenant, scopes, ns, None)[1]
        for name, tenant, scopes, ns in [
            ("a", "tenant-a", ["read", "write", "admin"], None),
            ("a_read", "tenant-a", ["read"], None),
            ("a_write", "tenant-a", ["read", "write"], None),
            ("a_other", "tenant-a", ["read", "write", "admin"], ["other"]),
            ("b", "tenant-b", ["read", "write", "admin"], None),
        ]
    }
    try:
        with serve(create_app(db, keys)) as url, contextlib.ExitStack() as clients:

            def store(who: str | None) -> Sessions:
                remote = synapsedb.connect(url, api_key=tok[who] if who else None)
                clients.callback(remote.close)
                return Sessions(remote.namespace("shared"))

            a, b = store("a"), store("b")
            a.append_many("s", [("user", "A's secret plan"), ("assistant", "noted")])
            a.load("s", strategy="summary", keep=1)  # folds the first turn: a summary fact
            # tenant B: the same names reach B's own, empty session
            assert b.load("s") == [] and b.sessions() == [] and b.info("s").count == 0
            assert b.load("s", strategy="window", k=5) == []
            b.clear("s")
            assert b.purge("s").events == 0
            b.append("s", ("user", "B's own turn"))
            assert [m.content for m in b.load("s")] == ["B's own turn"]
            assert [m.content for m in a.load("s")] == ["A's secret plan", "noted"]
            assert a.sessions() == ["s"] and a.info("s").summary_version == 1
            assert b.info("s").summary_version is None
            # A's own keys, by scope
            reader, writer = store("a_read"), store("a_write")
            assert [m.content for m in reader.load("s", strategy="window", k=1)] == ["noted"]
            for denied in (
                lambda: reader.append("s", ("user", "x")),
                lambda: reader.clear("s"),
                lambda: reader.load("s", strategy="summary_buffer", max_tokens=400),
                lambda: reader.load("s", strategy="summary", keep=1),
                lambda: writer.purge("s"),
                lambda: store("a_other").load("s"),
            ):
                with pytest.raises(ForbiddenError):
                    denied()
            writer.load("s", strategy="summary", keep=1)  # the write scope may fold
            writer.clear("s")
            assert a.load("s") == [] and a.sessions() == []
            assert a.purge("s").purged
            with pytest.raises(UnauthorizedError):
                store(None).load("s")
    finally:
        db.close()
