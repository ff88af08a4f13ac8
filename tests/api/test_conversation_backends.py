"""SynapseKit's memory classes against real stores: one behavioural set for every backend
(InMemoryConversation, SynapseMemory embedded and over HTTP, RedisMemory on a real redis-server,
PostgresMemory on a real PostgreSQL), then what is particular to each store.

The servers start once per module (tests/support/backend_servers.py); a missing redis-server or
pgserver skips their cases on a developer's machine and fails them under CI=true.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb.conversation.backends import PostgresMemory, RedisMemory
from synapsedb.conversation.memory import BaseMemory, InMemoryConversation
from synapsedb.conversation.synapse_memory import SynapseMemory
from synapsedb.errors import StorageError, ValidationError
from tests.support.backend_servers import postgres_server, redis_server
from tests.support.live_server import free_port, serve

INJECTION = "x'; DROP TABLE synapsedb_conversations; --"
TURNS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "My name is Alice 🙂"},
    {"role": "assistant", "content": "Hello Alice."},
    {"role": "tool", "content": '{"temperature": 21}'},
]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    with postgres_server() as dsn:
        yield dsn


@pytest.fixture(scope="module")
def synapse_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A SynapseDB server on loopback (uvicorn in a thread), as synapsedb.connect reaches one."""
    from synapsedb.server import create_app

    db = synapsedb.open(tmp_path_factory.mktemp("server") / "d", durability="os", llm=None)
    try:
        with serve(create_app(db)) as url:
            yield url
    finally:
        db.close()


@dataclass
class Backend:
    """Makes memories over one store; ``make`` again with the same session id is a reopen."""

    name: str
    persistent: bool
    factory: Callable[[str, int | None], BaseMemory]
    made: list[BaseMemory] = field(default_factory=list)

    def make(self, session_id: str = "default", max_messages: int | None = None) -> BaseMemory:
        memory = self.factory(session_id, max_messages)
        self.made.append(memory)
        return memory


def _in_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return Backend("in-memory", False, lambda sid, mx: InMemoryConversation(mx or 100))


def _synapse_embedded(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    path = tmp_path / "chat-data"  # a data directory, shared by the memories made on it
    return Backend(
        "synapse-embedded", True, lambda sid, mx: SynapseMemory(path, sid, max_messages=mx)
    )


def _synapse_remote(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    url = request.getfixturevalue("synapse_url")
    ns = f"t-{uuid.uuid4().hex[:12]}"  # a namespace per test on the module's server
    return Backend(
        "synapse-remote",
        True,
        lambda sid, mx: SynapseMemory(url, sid, max_messages=mx, namespace=ns),
    )


def _redis(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    import redis

    url = request.getfixturevalue("redis_url")
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    return Backend("redis", True, lambda sid, mx: RedisMemory(url, sid, max_messages=mx))


def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    import psycopg

    dsn = request.getfixturevalue("postgres_dsn")
    with psycopg.connect(dsn, autocommit=True) as conn:  # each test starts with no table
        conn.execute("DROP TABLE IF EXISTS synapsedb_conversations")
    return Backend("postgres", True, lambda sid, mx: PostgresMemory(dsn, sid, max_messages=mx))


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Backend]] = {
    "in-memory": _in_memory,
    "synapse-embedded": _synapse_embedded,
    "synapse-remote": _synapse_remote,
    "redis": _redis,
    "postgres": _postgres,
}


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = BACKENDS[request.param](request, tmp_path)
    yield b
    for memory in b.made:
        memory.close()


async def _add_all(memory: BaseMemory, turns: list[dict[str, str]]) -> None:
    for t in turns:
        await memory.add(t["role"], t["content"])


# -- the behavioural set: every backend ---------------------------------------------------------


def test_add_then_get_in_order(backend: Backend) -> None:
    memory = backend.make()

    async def run() -> list[dict[str, str]]:
        await _add_all(memory, TURNS)
        return await memory.get()

    got = asyncio.run(run())
    assert got == TURNS
    got[0]["content"] = "changed by the caller"
    assert memory.to_messages() == TURNS  # get and to_messages hand out copies


def test_to_string_and_to_messages(backend: Backend) -> None:
    memory = backend.make()
    asyncio.run(_add_all(memory, TURNS))
    assert memory.to_messages() == TURNS  # from the cache, without awaiting
    assert memory.to_string() == (
        'System: Be brief.\nUser: My name is Alice 🙂\nAssistant: Hello Alice.\nTool: {"temperature": 21}'
    )
    assert len(memory) == 4


def test_clear_empties_the_store(backend: Backend) -> None:
    memory = backend.make("s")

    async def run() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        await _add_all(memory, TURNS)
        await memory.clear()
        after_clear = await memory.get()
        await memory.add("user", "again")
        return after_clear, await memory.get()

    after_clear, after_add = asyncio.run(run())
    assert after_clear == []
    assert after_add == [{"role": "user", "content": "again"}]
    if backend.persistent:  # cleared in the store, not only in this object
        assert backend.make("s").to_messages() == after_add


def test_max_messages_keeps_the_newest(backend: Backend) -> None:
    memory = backend.make("window", max_messages=3)
    turns = [{"role": "user", "content": f"turn {i}"} for i in range(7)]
    asyncio.run(_add_all(memory, turns))
    assert memory.to_messages() == turns[-3:]
    assert asyncio.run(memory.get()) == turns[-3:]
    if backend.persistent:
        assert backend.make("window", max_messages=3).to_messages() == turns[-3:]


def test_sessions_are_isolated(backend: Backend) -> None:
    alice, bob = backend.make("alice"), backend.make("bob")

    async def run() -> None:
        for i in range(3):
            await alice.add("user", f"alice {i}")
            await bob.add("user", f"bob {i}")
        await alice.clear()

    asyncio.run(run())
    assert asyncio.run(alice.get()) == []
    assert [m["content"] for m in asyncio.run(bob.get())] == ["bob 0", "bob 1", "bob 2"]


def test_persists_across_reopen(backend: Backend) -> None:
    if not backend.persistent:
        pytest.skip(f"{backend.name} keeps nothing past its object (by design)")
    first = backend.make("user-123")
    asyncio.run(_add_all(first, TURNS))
    first.close()
    again = backend.make("user-123")
    assert again.to_messages() == TURNS  # a cold cache reads the store once
    assert again.to_string().startswith("System: Be brief.\nUser: My name is Alice")
    assert asyncio.run(again.get()) == TURNS


def test_concurrent_adds_all_land(backend: Backend) -> None:
    memory = backend.make("busy")
    window = backend.make("busy-window", max_messages=5)

    async def run() -> None:
        await asyncio.gather(*(memory.add("user", f"m{i}") for i in range(20)))
        await asyncio.gather(*(window.add("user", f"w{i}") for i in range(20)))

    asyncio.run(run())
    got = asyncio.run(memory.get())
    assert sorted(m["content"] for m in got) == sorted(f"m{i}" for i in range(20))
    assert len(asyncio.run(window.get())) == 5


def test_hostile_input_is_refused_and_nothing_stored(backend: Backend) -> None:
    memory = backend.make("guarded")

    async def attempt(role: Any, content: Any) -> str:
        with pytest.raises(ValidationError) as err:
            await memory.add(role, content)
        return str(err.value.details["field"])

    assert asyncio.run(attempt("bot", "hi")) == "message.role"
    assert asyncio.run(attempt("user", 42)) == "message.content"
    assert asyncio.run(attempt("user", b"bytes")) == "message.content"
    assert asyncio.run(attempt("user", "x" * (256 * 1024 + 1))) == "message.content"
    assert asyncio.run(memory.get()) == []
    if backend.name == "in-memory":
        return
    for bad in ["", "a" * 201, "tab\there", "nul\x00", 7]:
        with pytest.raises(ValidationError) as err:
            backend.make(bad)  # type: ignore[arg-type]
        assert err.value.details["field"] == "session_id"


def test_a_session_id_is_data_never_code(backend: Backend) -> None:
    if backend.name == "in-memory":
        pytest.skip("no session ids in a process-local list")
    hostile, other = backend.make(INJECTION), backend.make("other")

    async def run() -> None:
        await other.add("user", "still here")
        await hostile.add("user", "Robert'); DROP TABLE students;--")
        await hostile.add("assistant", "*")

    asyncio.run(run())
    assert asyncio.run(backend.make(INJECTION).get()) == [
        {"role": "user", "content": "Robert'); DROP TABLE students;--"},
        {"role": "assistant", "content": "*"},
    ]
    assert asyncio.run(backend.make("other").get()) == [{"role": "user", "content": "still here"}]
    assert asyncio.run(backend.make("x").get()) == []  # no prefix match either


def test_summary_memory_over_the_backend(backend: Backend) -> None:
    """SummaryMemory rewrites its backend at each fold (clear, the summary, the kept turns):
    every backend ends with one summary message ahead of the newest turns, and a persistent one
    reopened carries on from its summary."""
    from synapsedb.conversation.memory import SummaryMemory

    story = [
        ("user", "My dog is called Rex."),
        ("assistant", "Nice."),
        ("user", "I live in Lisbon."),
        ("assistant", "Lovely."),
        ("user", "I am a nurse."),
        ("assistant", "Great."),
        ("user", "My sister is Ana."),
    ]
    memory = SummaryMemory(backend.make("sum"), max_messages=4, keep=1)

    async def say(m: SummaryMemory, turns: list[tuple[str, str]]) -> list[dict[str, str]]:
        for role, content in turns:
            await m.add(role, content)
        return await m.get()

    got = asyncio.run(say(memory, story[:5]))  # the fifth add folds the first four
    assert len(got) == 2 and got[1]["content"] == "I am a nurse."
    assert got[0]["role"] == "system" and "Rex" in got[0]["content"]
    if not backend.persistent:
        return
    again = SummaryMemory(backend.make("sum"), max_messages=4, keep=1)
    got = asyncio.run(say(again, [*story[5:], ("assistant", "Noted.")]))  # 5 again: a fold
    summaries = [t for t in got if t["content"].startswith("Summary of the earlier")]
    assert len(summaries) == 1 and got[0] == summaries[0]
    assert "Rex" in got[0]["content"] and "Ana" in got[0]["content"]
    assert [t["content"] for t in got[1:]] == ["Noted."]


# -- Redis --------------------------------------------------------------------------------------


def test_redis_expiry_is_set_and_refreshed_by_each_add(redis_url: str) -> None:
    import redis

    memory = RedisMemory(redis_url, f"ttl-{uuid.uuid4()}", ttl_seconds=600)
    client = redis.Redis.from_url(redis_url)
    try:
        asyncio.run(memory.add("user", "hello"))
        assert 590 <= client.ttl(memory.key) <= 600
        client.expire(memory.key, 5)
        asyncio.run(memory.add("assistant", "hi"))
        assert 590 <= client.ttl(memory.key) <= 600
        assert client.llen(memory.key) == 2
    finally:
        client.close()
        memory.close()


def test_redis_trim_and_expiry_arrive_together(redis_url: str) -> None:
    """A list past max_messages is never visible: RPUSH and LTRIM run in one MULTI/EXEC."""
    import redis

    sid = f"race-{uuid.uuid4()}"
    memories = [RedisMemory(redis_url, sid, max_messages=4, ttl_seconds=60) for _ in range(4)]
    client = redis.Redis.from_url(redis_url)
    key = memories[0].key
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(client.llen(key))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:

        def writer(m: RedisMemory) -> None:
            for i in range(50):
                asyncio.run(m.add("user", str(i)))

        threads = [threading.Thread(target=writer, args=(m,)) for m in memories]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        watcher.join()
    assert seen and max(seen) <= 4
    assert client.llen(key) == 4 and client.ttl(key) > 0
    client.close()
    for m in memories:
        m.close()


def test_redis_refuses_a_malformed_entry_written_by_another_program(redis_url: str) -> None:
    import redis

    memory = RedisMemory(redis_url, f"bad-{uuid.uuid4()}")
    with redis.Redis.from_url(redis_url) as client:
        client.rpush(memory.key, b'{"role": "user", "content": "fine"}', b"not json")
        client.rpush(memory.key + b"-2", b'{"role": "hacker", "content": "x"}')
    with pytest.raises(StorageError, match="item 1"):
        asyncio.run(memory.get())
    other = RedisMemory(redis_url, memory.session_id + "-2")
    with pytest.raises(StorageError, match="not a conversation message"):
        other.to_messages()
    memory.close()
    other.close()


def test_redis_unreachable_is_a_storage_error() -> None:
    memory = RedisMemory(f"redis://127.0.0.1:{free_port()}", "s")
    with pytest.raises(StorageError, match="redis"):
        asyncio.run(memory.add("user", "hello"))
    memory.close()


def test_redis_argument_checks() -> None:
    with pytest.raises(ValidationError, match="url"):
        RedisMemory("http://localhost:6379")
    for ttl in [0, -1, 1.5, True, "60"]:
        with pytest.raises(ValidationError) as err:
            RedisMemory(ttl_seconds=ttl)  # type: ignore[arg-type]
        assert err.value.details["field"] == "ttl_seconds"
    with pytest.raises(ValidationError) as err:
        RedisMemory(max_messages=0)
    assert err.value.details["field"] == "max_messages"


# -- PostgreSQL ---------------------------------------------------------------------------------


def test_postgres_creates_its_table_and_index(postgres_dsn: str) -> None:
    import psycopg

    table = f"conv_{uuid.uuid4().hex[:12]}"
    memory = PostgresMemory(postgres_dsn, "s", table=table)
    asyncio.run(memory.add("user", "hello"))
    with psycopg.connect(postgres_dsn) as conn:
        (index,) = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexname = %s",
            (table, f"{table}_session_idx"),
        ).fetchone() or (None,)
        rows = conn.execute(f'SELECT session_id, role, content FROM "{table}"').fetchall()
    assert index is not None and "(session_id, id)" in index
    assert rows == [("s", "user", "hello")]
    memory.close()


def test_postgres_trim_holds_under_concurrent_writers(postgres_dsn: str) -> None:
    import psycopg

    sid = f"race-{uuid.uuid4()}"
    memories = [PostgresMemory(postgres_dsn, sid, max_messages=5) for _ in range(4)]

    def writer(n: int, m: PostgresMemory) -> None:
        for i in range(15):
            asyncio.run(m.add("user", f"{n}:{i}"))

    threads = [threading.Thread(target=writer, args=(n, m)) for n, m in enumerate(memories)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with psycopg.connect(postgres_dsn) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM synapsedb_conversations WHERE session_id = %s", (sid,)
        ).fetchone() or (0,)
    assert count == 5  # the advisory lock serialises append+trim per session
    got = asyncio.run(memories[0].get())
    # ids follow commit order within a session: each writer's own turns stay in its order
    for n in range(4):
        mine = [int(m["content"].split(":")[1]) for m in got if m["content"].startswith(f"{n}:")]
        assert mine == sorted(mine)
    for m in memories:
        m.close()


def test_postgres_refuses_nul_and_bad_table_names(postgres_dsn: str) -> None:
    memory = PostgresMemory(postgres_dsn, f"nul-{uuid.uuid4()}")
    with pytest.raises(ValidationError, match="NUL"):
        asyncio.run(memory.add("user", "a\x00b"))
    assert asyncio.run(memory.get()) == []
    memory.close()
    for table in ["x; DROP TABLE y", "Conversations", "a" * 49, "", "1abc", 'q"uote']:
        with pytest.raises(ValidationError) as err:
            PostgresMemory(postgres_dsn, table=table)
        assert err.value.details["field"] == "table"


def test_postgres_reconnects_after_its_connection_is_killed(postgres_dsn: str) -> None:
    import psycopg

    memory = PostgresMemory(postgres_dsn, f"kill-{uuid.uuid4()}")
    asyncio.run(memory.add("user", "before"))
    assert memory._conn is not None
    pid = memory._conn.info.backend_pid
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StorageError, match="postgres"):
        asyncio.run(memory.add("user", "lost with the connection"))
    asyncio.run(memory.add("user", "after"))  # a new connection
    assert [m["content"] for m in asyncio.run(memory.get())] == ["before", "after"]
    memory.close()


def test_postgres_unreachable_is_a_storage_error(tmp_path: Path) -> None:
    memory = PostgresMemory(f"postgresql://postgres@/postgres?host={tmp_path}", "s")
    with pytest.raises(StorageError, match="postgres"):
        memory.to_messages()
    memory.close()


# -- docs/conversation.md's Redis and PostgreSQL examples, against the real servers -------------


@pytest.mark.parametrize(
    ("store", "placeholder"),
    [
        ("RedisMemory(", "redis://localhost:6379"),
        ("PostgresMemory(", "postgresql://app@localhost/chat"),
    ],
)
def test_the_docs_examples_run_against_real_servers(
    store: str, placeholder: str, request: pytest.FixtureRequest
) -> None:
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "conversation.md").read_text()
    section = text.split("## SynapseKit's memory classes", 1)[1].split("\n## ", 1)[0]
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if store in b]
    url = request.getfixturevalue("redis_url" if store == "RedisMemory(" else "postgres_dsn")
    assert placeholder in code
    exec(
        compile(code.replace(placeholder, url), "docs/conversation.md", "exec"),
        {"__name__": "docs"},
    )
