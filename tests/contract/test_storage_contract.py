"""The storage contract: what every backend of storage.base.Storage does, tested through the
protocol only, on SQLite and on PostgreSQL alike (conftest.py). The engine relies on each of
these; a new backend passes this suite before the engine runs on it."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from synapsedb.errors import StorageError
from synapsedb.storage.base import (
    AccessRow,
    AnswerRefs,
    AnswerRow,
    Batch,
    ErasureRow,
    EventRow,
    FactRow,
    MemoryRow,
    NamespaceRow,
    Purge,
    QueryRow,
    TierMark,
    TierRow,
)

from .conftest import Backend
from .rows import (
    EARLY_US,
    LATE_US,
    answer,
    by_namespace,
    event,
    fact,
    loaded,
    memory,
    namespace,
    query,
    vector,
)

INF = 1 << 62


def everything(storage: Any, ns: str | None = None) -> dict[str, Any]:
    """A load, read completely."""
    rows = storage.load(ns)
    return {
        "namespaces": sorted(rows.namespaces),
        "tiers": list(rows.tiers),
        "access": sorted(rows.access),
        "memory_rows": dict(rows.memory_rows),
        "memories": list(rows.memories),
        "facts": list(rows.facts),
        "events": list(rows.events),
        "answers": sorted(rows.answers),
    }


def full_batch(ns: str = "acme") -> Batch:
    """One of every row kind, with versions and tombstones."""
    return Batch(
        namespaces=[namespace(ns)],
        memories=[
            memory(ns, "m1", 1, 1_000),
            memory(ns, "m1", 2, 2_000, content="alice likes black tea", created_us=1_000),
            memory(ns, "m1", 3, 3_000, content="", deleted=1, created_us=1_000),  # tombstone
            memory(
                ns, "m2", 1, 1_500, entity="bob", pinned=1, ttl=3600.0, expires_us=3_601_500_000
            ),
        ],
        facts=[
            fact(ns, "alice", "drink", 1, 1_000),
            fact(ns, "alice", "drink", 2, 2_000, value='"black tea"'),
            fact(ns, "alice", "drink", 3, 3_000, value="null", deleted=1),
            fact(ns, "bob", "city", 1, 1_000, value='"Oslo"', ttl=60.0, expires_us=61_001_000),
        ],
        events=[event(ns, "chat", 1, 0, memory_id="m1"), event(ns, "chat", 1, 1, data=None)],
        queries=[query(ns, "q1", 2_500, hits='[["m1", 2, 0.9]]')],
        answers=[answer(ns, "a1", 2_600, query_ids='["q1"]', memories='[["m1", 2]]')],
        configs=[('{"quota":{"max_memories":100}}', ns)],
        tiers=[(ns, "m2", 2_700, "cold", 0.1, "policy"), (ns, "m2", 2_800, "hot", None, "read")],
        access=[(ns, "m1", 3, 2_900)],
        erasures=[(ns, 2_950, "admin", "hash:x", '{"memories":0}')],
    )


def test_round_trip_of_every_row_kind(storage: Any) -> None:
    batch = full_batch()
    storage.commit(batch)
    got = everything(storage)
    assert got["namespaces"] == [("acme", 1, 4, "caller", '{"quota":{"max_memories":100}}')]
    assert got["memories"] == [loaded(r) for r in batch.memories]
    assert got["facts"] == [loaded(r) for r in batch.facts]
    assert got["events"] == [loaded(r) for r in batch.events]
    assert got["answers"] == [("acme", "a1", '[["m1", 2]]')]
    assert got["tiers"] == [("acme", "m2", "cold"), ("acme", "m2", "hot")]
    assert got["access"] == [("acme", "m1", 3, 2_900)]
    # memory versions that are neither tombstones nor erased
    assert got["memory_rows"] == {"acme": 3}
    assert storage.read_queries("acme", ["q1", "nope"]) == [
        (
            "q1",
            2_500,
            "reader",
            "what does alice drink",
            '{"text":"what does alice drink"}',
            '[["m1", 2, 0.9]]',
        )
    ]
    assert storage.read_answer("acme", "a1") == (
        "a1",
        2_600,
        "writer",
        "Alice drinks tea.",
        '["q1"]',
        "[]",
        '[["m1", 2]]',
        0,
        "[]",
    )
    assert storage.read_answer("acme", "a2") is None
    assert storage.scan_erasures("acme", 0, INF) == [(2_950, "admin", "hash:x", '{"memories":0}')]


def test_rows_come_back_as_the_named_rows_of_the_protocol(storage: Any) -> None:
    """Each backend builds the named rows of storage.base itself: the engine reads them by
    field name, and a SELECT that lists another number of columns would shift every name."""
    storage.commit(full_batch())
    rows = storage.load()
    streams = [
        (rows.namespaces, NamespaceRow),
        (rows.tiers, TierMark),
        (rows.access, AccessRow),
        (rows.memories, MemoryRow),
        (rows.facts, FactRow),
        (rows.events, EventRow),
        (rows.answers, AnswerRefs),
    ]
    reads = [
        (storage.read_queries("acme", ["q1"]), QueryRow),
        (storage.scan_queries("acme", 0, INF), QueryRow),
        ([storage.read_answer("acme", "a1")], AnswerRow),
        (storage.scan_answers("acme", 0, INF), AnswerRow),
        (storage.scan_tiers("acme", 0, INF), TierRow),
        (storage.scan_erasures("acme", 0, INF), ErasureRow),
        (storage.read_memory_chain("acme", "m1"), MemoryRow),
        (storage.read_memory_chains("acme", ["m1", "m2"]), MemoryRow),
    ]
    for got, cls in [(list(stream), cls) for stream, cls in streams] + reads:
        assert got, cls.__name__
        for row in got:
            assert type(row) is cls and len(row) == len(cls._fields), (cls.__name__, row)
    assert storage.read_memory_chain("acme", "m2")[0].entity == "bob"
    assert storage.read_answer("acme", "a1").query_ids == '["q1"]'


def test_values_at_the_edges_come_back_exactly(storage: Any) -> None:
    """as_of reads sys_us/created_us/ts_us/expires_us; vectors, floats and text must not drift."""
    text = "naïve café ☕ 𝄞 'quoted' \"double\" back\\slash %s ?"
    rows = [
        memory(
            "n",
            "early",
            1,
            EARLY_US,
            created_us=EARLY_US,
            ts_us=EARLY_US,
            content=text,
            embedding=vector(7, 384),
            salience=1e-300,
            ttl=1e-6,
            expires_us=LATE_US,
        ),
        memory(
            "n",
            "late",
            1,
            LATE_US,
            created_us=LATE_US,
            ts_us=LATE_US,
            agent=None,
            metadata='{"k":[1,2.5,"☕"],"nested":{"a":null}}',
            embedding=b"",
            salience=0.1 + 0.2,
        ),
    ]
    storage.commit(Batch(namespaces=[namespace("n", dim=384, embedder="minilm")], memories=rows))
    got = everything(storage, "n")
    assert got["memories"] == [loaded(r) for r in rows]
    for stored, written in zip(got["memories"], rows, strict=True):
        assert [type(v) for v in stored[:-1]] == [type(v) for v in written]


def test_load_of_one_namespace_and_commit_order_within_it(storage: Any) -> None:
    for i in range(3):  # interleaved batches: each namespace's rows in their commit order
        storage.commit(
            Batch(
                namespaces=[namespace("a"), namespace("b")] if i == 0 else [],
                memories=[memory("b", "x", i + 1, 10 * i + 1), memory("a", "x", i + 1, 10 * i)],
                facts=[fact("a", "e", "k", i + 1, 10 * i), fact("b", "e", "k", i + 1, 10 * i)],
                events=[event("a", "s", i), event("b", "s", i)],
                tiers=[("a", "x", 10 * i, "cold" if i % 2 else "hot", None, "t")],
            )
        )
    whole = everything(storage)
    only_a = everything(storage, "a")
    for kind in ("memories", "facts", "events", "tiers"):
        assert by_namespace(whole[kind])["a"] == by_namespace(only_a[kind])["a"] == only_a[kind]
    assert [r[2] for r in only_a["memories"]] == [1, 2, 3]
    assert [r[2] for r in by_namespace(whole["memories"])["b"]] == [1, 2, 3]
    assert only_a["namespaces"] == [("a", 1, 4, "caller", None)]
    assert only_a["memory_rows"] == {"a": 3}
    assert everything(storage, "missing")["memories"] == []


def test_namespace_upsert_keeps_created_and_updates_dim(storage: Any) -> None:
    storage.commit(Batch(namespaces=[namespace("n", created_us=5, dim=None, embedder="caller")]))
    storage.commit(Batch(namespaces=[namespace("n", created_us=9, dim=384, embedder="minilm")]))
    assert everything(storage)["namespaces"] == [("n", 5, 384, "minilm", None)]


def test_memory_chains_oldest_first(storage: Any) -> None:
    batch = full_batch()
    storage.commit(batch)
    storage.commit(Batch(memories=[memory("acme", "m2", 2, 4_000, entity="bob")]))
    chain = storage.read_memory_chain("acme", "m1")
    assert chain == [loaded(r) for r in batch.memories[:3]]
    assert storage.read_memory_chain("acme", "nope") == []
    assert storage.read_memory_chain("other", "m1") == []
    chains = storage.read_memory_chains("acme", ["m2", "m1", "nope"])
    assert [(r.id, r.version) for r in chains] == [
        ("m1", 1),
        ("m1", 2),
        ("m1", 3),
        ("m2", 1),
        ("m2", 2),
    ]
    many = [f"id{i}" for i in range(1_200)]  # more ids than one statement takes on SQLite
    storage.commit(Batch(memories=[memory("acme", m, 1, 5_000) for m in many]))
    assert [r.id for r in storage.read_memory_chains("acme", many)] == many


def test_scans_are_half_open_time_ranges(storage: Any) -> None:
    ns = "acme"
    storage.commit(
        Batch(
            namespaces=[namespace(ns)],
            queries=[query(ns, f"q{t}", t) for t in (100, 200, 300)] + [query("z", "q0", 200)],
            answers=[answer(ns, f"a{t}", t) for t in (100, 200, 300)],
            tiers=[(ns, f"m{t}", t, "cold", 0.5, "policy") for t in (100, 200, 300)],
            erasures=[(ns, t, None, f"s{t}", "{}") for t in (100, 200, 300)],
        )
    )
    assert [r.id for r in storage.scan_queries(ns, 100, 300)] == ["q100", "q200"]
    assert [r.id for r in storage.scan_answers(ns, 101, 301)] == ["a200", "a300"]
    assert storage.scan_tiers(ns, 200, 201) == [("m200", 200, "cold", 0.5, "policy")]
    assert [r.subject for r in storage.scan_erasures(ns, 0, INF)] == ["s100", "s200", "s300"]
    assert storage.scan_queries(ns, 300, 300) == []
    assert storage.scan_queries("z", 0, INF)[0].id == "q0"


def test_export_rows_is_read_before_it_returns(storage: Any) -> None:
    storage.commit(full_batch())
    exported = storage.export_rows("acme")
    storage.commit(Batch(memories=[memory("acme", "later", 1, 9_000)]))  # after the export
    got = {
        "namespaces": sorted(exported.namespaces),
        "tiers": list(exported.tiers),
        "access": sorted(exported.access),
        "memory_rows": dict(exported.memory_rows),
        "memories": list(exported.memories),
        "facts": list(exported.facts),
        "events": list(exported.events),
        "answers": sorted(exported.answers),
    }
    now = everything(storage, "acme")
    assert got["memories"] == now["memories"][:-1]
    assert now["memories"][-1][1] == "later"
    assert {k: v for k, v in got.items() if k != "memories"} == {
        k: v for k, v in now.items() if k not in ("memories", "memory_rows")
    } | {"memory_rows": {"acme": 3}}


def test_count_rows(storage: Any) -> None:
    assert storage.count_rows() == {
        "namespaces": 0,
        "memory_versions": 0,
        "fact_versions": 0,
        "events": 0,
    }
    storage.commit(full_batch())
    assert storage.count_rows() == {
        "namespaces": 1,
        "memory_versions": 4,
        "fact_versions": 4,
        "events": 2,
    }


def test_a_failed_batch_writes_nothing(storage: Any) -> None:
    storage.commit(full_batch())
    before = everything(storage)
    bad = Batch(
        namespaces=[namespace("new")],
        memories=[memory("new", "ok", 1, 9_000), memory("acme", "m1", 1, 9_000)],  # a duplicate
        facts=[fact("new", "e", "k")],
    )
    with pytest.raises(StorageError, match="commit failed"):
        storage.commit(bad)
    assert everything(storage) == before
    storage.commit(Batch(memories=[memory("acme", "m9", 1, 9_000)]))  # still writable
    assert everything(storage, "acme")["memories"][-1][1] == "m9"


def test_reopen_loads_the_same_rows(backend: Backend) -> None:
    storage = backend.open()
    storage.commit(full_batch())
    storage.commit(Batch(expired_facts=[("acme", "bob", "city")]))
    before = everything(storage)
    version = storage.schema_version
    storage.close()
    again = backend.open()
    assert everything(again) == before
    assert again.schema_version == version >= 1


def test_a_newer_schema_is_refused(backend: Backend) -> None:
    storage = backend.open()
    storage.close()
    if backend.name == "sqlite":
        backend.sql("PRAGMA user_version = 999")
    else:
        backend.sql("INSERT INTO schema_migrations (version) VALUES (999)")
    with pytest.raises(StorageError, match="schema version 999, newer than"):
        backend.open()


def test_expired_rows_lose_their_content(backend: Backend) -> None:
    storage = backend.open()
    secret_memory, secret_fact = "expiring-memory-text-4711", '"expiring-fact-value-4712"'
    storage.commit(
        Batch(
            namespaces=[namespace("n")],
            memories=[
                memory("n", "m", 1, 10, content=secret_memory, ttl=1.0, expires_us=1_000_010),
                memory("n", "m", 2, 20, content=secret_memory + " v2", ttl=1.0),
            ],
            facts=[fact("n", "e", "k", value=secret_fact, ttl=1.0, expires_us=1_000_010)],
        )
    )
    storage.commit(Batch(expired_memories=[("n", "m")], expired_facts=[("n", "e", "k")]))
    assert storage.finish_erasure(5_000)
    assert not storage.erasure_pending
    got = everything(storage)
    assert [(r[7], r[8], r[9], r[-1]) for r in got["memories"]] == [("", "{}", None, 1)] * 2
    assert [(r[6], r[-1]) for r in got["facts"]] == [("null", 1)]
    assert got["memory_rows"] == {}
    stored = backend.stored_text()
    assert "expiring-memory-text" not in stored and "expiring-fact-value" not in stored


def test_purge_leaves_no_name_behind(backend: Backend) -> None:
    storage = backend.open()
    ns, who, secret = "acme", "zed-the-subject", "zed keeps the key under the mat"
    storage.commit(
        Batch(
            namespaces=[namespace(ns)],
            memories=[
                memory(
                    ns,
                    "z1",
                    1,
                    100,
                    entity=who,
                    content=secret,
                    metadata='{"who":"zed-the-subject"}',
                ),
                memory(ns, "z1", 2, 200, entity=who, content=secret + " (edited)"),
                memory(ns, "twin", 1, 150, entity="chat-log", content="zed: " + secret),
                memory(ns, "keep", 1, 160, entity="alice", content="alice is unrelated"),
            ],
            facts=[
                fact(ns, who, "hiding-place", value='"under the mat"'),
                fact(ns, who, "hiding-place", 2, 2_000, value='"in the shed"'),
                fact(ns, "alice", "drink"),
            ],
            events=[
                event(ns, "chat", 1, entity=who, content=secret, memory_id="twin"),
                event(ns, who, 2, entity="alice", content="a stream named after zed"),
                event(ns, "chat", 3, content="alice only"),
            ],
            queries=[
                query(
                    ns,
                    "q-named",
                    300,
                    text="where is zed-the-subject's key",
                    request='{"entity":"zed-the-subject"}',
                ),
                query(
                    ns, "q-hit", 310, text="mat", request='{"text":"mat"}', hits='[["z1", 2, 0.8]]'
                ),
                query(
                    ns,
                    "q-other",
                    320,
                    text="alice",
                    request='{"text":"alice"}',
                    hits='[["keep", 1, 0.7]]',
                ),
            ],
            answers=[
                answer(ns, "a-cites", 400, text="It is under the mat.", memories='[["z1", 2]]'),
                answer(ns, "a-other", 410, text="Alice is unrelated.", memories='[["keep", 1]]'),
                answer(
                    ns,
                    "a-about",
                    420,
                    text="Your spare key is in the garden shed.",
                    entities='["session:s1", "zed-the-subject"]',
                ),
            ],
        )
    )
    counts = storage.count_rows()
    storage.commit(
        Batch(
            purges=[
                Purge(
                    ns,
                    who,
                    "alias:0001",
                    keys={"hiding-place": "key:0001"},
                    streams={who: "stream:0001"},
                )
            ],
            erasures=[(ns, 500, "admin", "alias:0001", '{"memories":2}')],
        )
    )
    assert storage.finish_erasure(5_000) and not storage.erasure_pending
    stored = backend.stored_text()
    for gone in (
        "zed",
        "under the mat",
        "in the shed",
        "hiding-place",
        "It is under",
        "garden shed",
    ):
        assert gone not in stored, gone
    assert "alias:0001" in stored and "key:0001" in stored and "stream:0001" in stored
    assert "alice is unrelated" in stored and "Alice is unrelated." in stored  # untouched
    assert storage.count_rows() == counts  # skeletons stay: versions, lineage, audit
    got = everything(storage)
    erased = {r[1]: r for r in got["memories"] if r[-1]}
    assert set(erased) == {"z1", "twin"} and all(r[9] is None for r in erased.values())
    assert [(r[1], r[5]) for r in got["memories"] if r[1] == "z1"] == [("z1", "alias:0001")] * 2
    hidden = ("alias:0001", "key:0001", 1)
    assert [(r[1], r[2], r[-1]) for r in got["facts"] if r[-1]] == [hidden] * 2
    assert [r[1] for r in got["events"]] == ["chat", "stream:0001", "chat"]
    assert [r[-1] for r in got["events"]] == [1, 1, 0]
    by_id = {r[0]: r for r in storage.read_queries(ns, ["q-named", "q-hit", "q-other"])}
    assert by_id["q-named"][3] is None and by_id["q-hit"][3] is None
    assert by_id["q-hit"][5] == '[["z1", 2, 0.8]]'  # hits (ids, versions) stay for lineage
    assert by_id["q-other"][3] == "alice"
    cites = storage.read_answer(ns, "a-cites")
    assert cites[3] is None and cites[7] == 1 and cites[6] == '[["z1", 2]]'
    assert storage.read_answer(ns, "a-other")[3:8:4] == ("Alice is unrelated.", 0)
    about = storage.read_answer(ns, "a-about")  # about the entity, citing none of its memories
    assert (about.text, about.erased) == (None, 1)
    assert json.loads(about.entities) == ["session:s1", "alias:0001"]  # the order kept
    assert json.loads(storage.read_answer(ns, "a-other").entities) == []


def test_imported_erased_skeletons(storage: Any) -> None:
    storage.commit(
        Batch(
            namespaces=[namespace("n")],
            events=[event("n", "s", 5, 1, content="imported text")],
            answers=[answer("n", "a", 10, text="imported answer")],
        )
    )
    storage.commit(Batch(erased_events=[("n", "s", 5, 1)], erased_answers=[("n", "a")]))
    got = everything(storage)
    assert [(r[8], r[9], r[-1]) for r in got["events"]] == [("", None, 1)]
    assert storage.read_answer("n", "a")[3::4] == (None, 1)


def test_access_counts_are_upserted(storage: Any) -> None:
    storage.commit(Batch(namespaces=[namespace("n")], access=[("n", "m", 1, 10)]))
    storage.commit(Batch(access=[("n", "m", 5, 50), ("n", "k", 1, 60)]))
    assert everything(storage)["access"] == [("n", "k", 1, 60), ("n", "m", 5, 50)]


def test_query_log_keeps_the_newest_and_what_answers_cite(backend: Backend) -> None:
    storage = backend.open(query_log_max_rows=10)
    storage.commit(
        Batch(namespaces=[namespace("n")], answers=[answer("n", "a", 1, query_ids='["q000"]')])
    )
    for i in range(30):
        storage.commit(Batch(queries=[query("n", f"q{i:03}", 100 + i)]))
    kept = [r[0] for r in storage.scan_queries("n", 0, INF)]
    assert "q000" in kept  # an answer refers to it
    assert kept[-10:] == [f"q{i:03}" for i in range(20, 30)]
    assert len(kept) < 30


def test_the_secret_is_made_once_and_kept(backend: Any) -> None:
    """The key behind erased names' aliases: 32 bytes, the same on every open and for every
    storage opened on the same location (several processes must make the same aliases)."""
    first, second = backend.open(), backend.open()
    key = first.secret()
    assert isinstance(key, bytes) and len(key) == 32
    assert second.secret() == key and first.secret() == key
    first.close()
    assert backend.open().secret() == key


def test_a_repair_command_names_the_storage_and_the_statement(storage: Any) -> None:
    words = shlex.split(storage.repair_command("DELETE FROM events WHERE ns = 'x'"))
    assert words[0] in ("sqlite3", "psql")
    assert words[-1].endswith("DELETE FROM events WHERE ns = 'x'")


# -- what a lazy open reads (engine/lazy.py) -------------------------------------------------------


def test_namespace_names_include_rows_without_a_namespaces_row(backend: Backend) -> None:
    storage = backend.open()
    assert storage.namespace_names() == ([], [])
    storage.commit(
        Batch(namespaces=[namespace("a"), namespace("b")], memories=[memory("a", "x", 1, 10)])
    )
    # an orphan in each version log (as a hand edit could leave), and one named twice
    storage.commit(
        Batch(
            memories=[memory("m", "x", 1, 20)],
            facts=[fact("f", "e", "k", 1, 20)],
            events=[event("e", "s", 1), event("a", "s", 1)],
        )
    )
    named, unnamed = storage.namespace_names()
    assert sorted(named) == ["a", "b"]
    assert sorted(unnamed) == ["e", "f", "m"]


def test_last_sys_us_is_the_latest_stored_time_up_to_a_bound(backend: Backend) -> None:
    storage = backend.open()
    assert storage.last_sys_us(INF) == 0
    storage.commit(
        Batch(
            namespaces=[namespace("a", created_us=5)],
            memories=[memory("a", "x", 1, 100)],
            facts=[fact("a", "e", "k", 1, 300)],
        )
    )
    assert storage.last_sys_us(INF) == 300
    assert storage.last_sys_us(299) == 100  # a later time (say, a day ahead) is left out
    assert storage.last_sys_us(99) == 5
    assert storage.last_sys_us(4) == 0
    storage.commit(Batch(events=[event("a", "s", 1)], access=[("a", "x", 1, 1_500)]))  # 1_000
    assert storage.last_sys_us(INF) == 1_500
    assert storage.last_sys_us(1_499) == 1_000
    assert backend.open().last_sys_us(INF) == 1_500  # stored, not remembered


def test_load_namespaces_reads_what_load_reads_for_each(storage: Any) -> None:
    for i in range(3):  # interleaved batches: each namespace's rows in their commit order
        storage.commit(
            Batch(
                namespaces=[namespace("a"), namespace("b"), namespace("c")] if i == 0 else [],
                memories=[
                    memory("b", "x", i + 1, 10 * i + 1),
                    memory("a", "x", i + 1, 10 * i),
                    memory("c", "y", i + 1, 10 * i),
                ],
                facts=[fact("a", "e", "k", i + 1, 10 * i), fact("b", "e", "k", i + 1, 10 * i)],
                events=[event("a", "s", i), event("b", "s", i)],
                answers=[answer("a", f"a{i}", 10 * i, memories='[["x", 1]]')],
                tiers=[("a", "x", 10 * i, "cold" if i % 2 else "hot", None, "t")],
                access=[("b", "x", i, 10 * i)],
            )
        )
    both = storage.load_namespaces(["a", "b", "missing"])
    got = {
        "namespaces": sorted(both.namespaces),
        "tiers": list(both.tiers),
        "access": sorted(both.access),
        "memory_rows": dict(both.memory_rows),
        "memories": list(both.memories),
        "facts": list(both.facts),
        "events": list(both.events),
        "answers": sorted(both.answers),
    }
    a, b = everything(storage, "a"), everything(storage, "b")
    for kind in ("memories", "facts", "events", "tiers", "access", "answers", "namespaces"):
        # each namespace's rows as load(ns) gives them, in commit order within it
        assert by_namespace(got[kind]) == {
            ns: rows for ns, rows in (("a", a[kind]), ("b", b[kind])) if rows
        }, kind
    assert got["memory_rows"] == {"a": 3, "b": 3}
    assert list(storage.load_namespaces([]).memories) == []


def test_a_load_since_a_mark_reads_the_memory_versions_after_it(storage: Any) -> None:
    """A namespace loaded since a checkpoint's mark gets its memory versions after the mark
    only (everything else whole), and its CheckpointMark read from the same snapshot."""
    for i in range(4):
        storage.commit(
            Batch(
                namespaces=[namespace("a"), namespace("b")] if i == 0 else [],
                memories=[
                    memory("a", "x", i + 1, 100 * (i + 1)),
                    memory("a", f"y{i}", 1, 100 * (i + 1), deleted=int(i == 2)),
                    memory("b", "x", i + 1, 100 * (i + 1)),
                ],
                facts=[fact("a", "e", "k", i + 1, 100 * (i + 1))],
                tiers=[("a", "y0", 100 * (i + 1), "cold", None, "t")] if i == 1 else [],
            )
        )
    rows = storage.load_namespaces(["a", "b"], since={"a": 200})
    memories = list(rows.memories)
    a_rows = [(r.id, r.version) for r in memories if r.ns == "a"]
    assert a_rows == [("x", 3), ("y2", 1), ("x", 4), ("y3", 1)]  # after 200, commit order
    assert len([r for r in memories if r.ns == "b"]) == 4  # no mark: every version
    assert len([r for r in rows.facts if r.ns == "a"]) == 4  # other tables whole
    assert rows.memory_rows["b"] == 4
    assert set(rows.marks) == {"a"}
    mark = rows.marks["a"]
    assert mark == storage.checkpoint_mark("a", 200)
    assert (mark.rows, mark.erased, mark.tiers, mark.erasures) == (4, 0, 1, 0)
    assert (mark.last_id, mark.last_version) in {("x", 2), ("y1", 1)}  # the last commit's
    empty = storage.checkpoint_mark("a", 50)
    assert (empty.rows, empty.last_id) == (0, None)


def test_a_checkpoint_mark_changes_with_what_a_checkpoint_cannot_see(backend: Backend) -> None:
    """Whatever changes the versions at or before a mark changes the mark: a version added
    with an older time, an erasure (rows rewritten in place), an erasure's audit row, a tier
    move. Versions after the mark do not."""
    storage = backend.open()
    storage.commit(
        Batch(
            namespaces=[namespace("a")],
            memories=[memory("a", "x", 1, 100), memory("a", "y", 1, 150)],
        )
    )
    before = storage.checkpoint_mark("a", 200)
    storage.commit(Batch(memories=[memory("a", "x", 2, 300)]))  # after the mark
    assert storage.checkpoint_mark("a", 200) == before
    storage.commit(Batch(memories=[memory("a", "z", 1, 120)]))  # at or before it (an import)
    older = storage.checkpoint_mark("a", 200)
    assert older.rows == before.rows + 1
    storage.commit(Batch(expired_memories=[("a", "y")]))  # an erasure in place
    erased = storage.checkpoint_mark("a", 200)
    assert erased.erased == older.erased + 1 and erased.rows == older.rows
    storage.commit(Batch(erasures=[("a", 400, "admin", "hash:x", "{}")]))
    assert storage.checkpoint_mark("a", 200).erasures == erased.erasures + 1
    storage.commit(Batch(tiers=[("a", "x", 500, "cold", 0.1, "policy")]))
    assert storage.checkpoint_mark("a", 200).tiers == erased.tiers + 1
