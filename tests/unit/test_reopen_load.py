"""Reopening loads lean and answers as before (issue 18: the reopen hot path).

A loaded namespace builds its keyword index on first need, in bulk; memory rows of the
everyday form take a quick check; a saved graph is read without an empty one made first. None
of that may change an answer: these tests compare the deferred index with the one built row by
row, and queries before a close with the same queries after the reopen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import synapsedb
from synapsedb import ManualClock
from synapsedb.engine.records import MemRec
from synapsedb.index.catalog import Catalog
from synapsedb.index.hnsw import HnswIndex
from synapsedb.index.keyword import KeywordIndex, analyze

TEXTS = [
    "Ava: the parcel to Hamburg is late again",
    "Ben asked about the refund for the blue kettle",
    "parcel parcel parcel arrived damaged",
    "",
    "the and of",  # stopwords only: a row with no terms
    "Chloe: refund issued, parcel returned",
    "Hamburg weather is rainy; the parcel waits",
    "a kettle, a tent and a camera",
]


def _rec(i: int, content: str, vec: np.ndarray | None = None) -> MemRec:
    return MemRec(
        f"m{i}",
        1,
        10 + i,
        10 + i,
        "u",
        "fact",
        content,
        "{}",
        vec,
        0.5,
        1000 - i,
        None,
        False,
        None,
        None,
        False,
    )


def _postings(index: KeywordIndex) -> dict[str, tuple[list[int], list[int]]]:
    return {t: (list(r), list(f)) for t, (r, f) in index.postings.items()}


def test_a_deferred_keyword_index_builds_what_adding_row_by_row_builds() -> None:
    eager = KeywordIndex()
    for row, text in enumerate(TEXTS):
        eager.add(row, analyze(text))
    lazy = KeywordIndex()
    lazy.defer(lambda start, stop: TEXTS[start:stop])
    for row, text in enumerate(TEXTS):
        lazy.add_text(row, text)  # left to the source
    assert lazy.lazy and lazy.indexed == 0
    assert lazy.catch_up(3) == 3 and not lazy.lazy  # in use from here on
    lazy.add_texts(len(TEXTS), ["late parcel to Hamburg"])  # rows 3..7 first, then this one
    eager.add(len(TEXTS), analyze("late parcel to Hamburg"))
    assert _postings(lazy) == _postings(eager)
    assert list(lazy.doclen) == list(eager.doclen)


def test_a_deferred_index_catches_up_in_steps_and_ranks_as_the_eager_one() -> None:
    texts = [f"note {i} about topic {i % 7} and parcel {i % 3}" for i in range(10_000)]
    eager = KeywordIndex()
    eager.add_texts(0, texts)
    lazy = KeywordIndex()
    lazy.defer(lambda start, stop: texts[start:stop])
    assert lazy.catch_up(len(texts), chunk=5000) == 5000 and lazy.lazy  # half: still deferred
    allowed = np.ones(len(texts), bool)
    allowed[::5] = False
    terms = analyze("parcel 2 topic 4")
    got = lazy.search(terms, allowed, 20, full=True)  # the search indexes the rest first
    want = eager.search(terms, allowed, 20, full=True)
    assert not lazy.lazy and lazy.indexed == len(texts)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert _postings(lazy) == _postings(eager)


def test_a_deferred_catalog_indexes_rows_written_before_its_first_search() -> None:
    cat = Catalog()
    cat.defer_keywords()
    cat.add_many([(_rec(i, t), None) for i, t in enumerate(TEXTS[:4])])
    cat.add(_rec(4, TEXTS[4]), None)
    assert cat.keywords.indexed == 0
    rows, _scores = cat.keywords.search(analyze("parcel"), np.ones(cat.n, bool), 10)
    assert sorted(rows.tolist()) == [0, 2]
    cat.add_many([(_rec(i, t), None) for i, t in enumerate(TEXTS[5:], start=5)])
    assert cat.keywords.indexed == len(TEXTS)  # in use: indexed as rows arrive
    rows, _scores = cat.keywords.search(analyze("parcel"), np.ones(cat.n, bool), 10)
    assert sorted(rows.tolist()) == [0, 2, 5, 6]
    assert cat.labels.names == ["Ava", "Chloe"]
    assert cat.timelines.ordered(0).tolist() == list(range(len(TEXTS)))[::-1]


def _open(path: Path, clock: ManualClock, hnsw_threshold: int = 20_000) -> synapsedb.Database:
    return synapsedb.open(
        path,
        clock=clock,
        durability="os",
        background_maintenance=False,
        embedder=None,
        hnsw_threshold=hnsw_threshold,
    )


def _answers(db: synapsedb.Database) -> list[object]:
    out: list[object] = []
    for ns in ("a", "b"):
        mem = db.namespace(ns)
        for text in ("parcel Hamburg", "refund kettle", "Ava late", "camera tent"):
            for flt in (None, {"tag": "x"}, {"n": {"$gte": 3}}):
                res = mem.query(text, embedding=[1.0, 0.5, 0.0], filter=flt, k=5)
                out.append([(h.id, round(h.score, 4), h.content) for h in res])
                res = mem.query(text, filter=flt, k=5, mode="keyword")
                out.append([(h.id, round(h.score, 4)) for h in res])
        out.append(
            sorted(
                (
                    m.id,
                    m.content,
                    m.agent,
                    m.pinned,
                    m.salience,
                    repr(m.metadata),
                    m.ttl,
                    m.expires_at,
                )
                for m in mem.memories(limit=100)
            )
        )
    out.append(db.namespaces())
    return out


def test_queries_after_a_reopen_answer_as_before_it(tmp_path: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path / "d", clock) as db:
        for ns in ("a", "b"):
            mem = db.namespace(ns)
            ids = []
            for i, text in enumerate(TEXTS * 3):
                vec = [1.0, float(i % 5), float(i % 3)]
                spec: dict[str, object] = {"content": f"{text} {ns}{i}", "embedding": vec}
                if i % 4 == 0:
                    spec["metadata"] = {"tag": "x", "n": i % 6, "tags": ["p", i]}
                if i % 5 == 1:
                    spec["agent"] = "agent-7"
                if i % 6 == 2:
                    spec["pinned"] = True
                if i % 7 == 3:
                    spec["ttl"] = 86_400.0 * 30
                if i % 3 == 0:
                    spec["salience"] = 1  # an integer salience: stored as given
                ids.append(mem.write(f"user-{i % 3}", spec).id)
                clock.advance(1)
            mem.update(ids[2], {"content": "parcel moved to Bremen"})
            mem.delete(ids[5])
            clock.advance(1)
        before = _answers(db)
    with _open(tmp_path / "d", clock) as db:
        state = db._state("a")
        assert state is not None and state.catalog.keywords.lazy  # not built at open
        assert _answers(db) == before
        assert not state.catalog.keywords.lazy  # built by the first text query
        assert state.live == 23 and state.hot_bytes > 0
        live, hot = state.live, state.hot_bytes
        db.namespace("a").write("user-1", {"content": "parcel late", "embedding": [1, 0, 0]})
        assert state.live == live + 1 and state.hot_bytes > hot


def test_the_indexer_builds_a_large_namespace_keyword_index_after_a_reopen(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    rows = [
        {"entity": "u", "content": f"memo {i} topic {i % 9}", "embedding": [1.0, i, 2.0]}
        for i in range(600)
    ]
    with _open(tmp_path / "d", clock, hnsw_threshold=500) as db:
        db.namespace("big").write_many(rows)
        db.namespace("small").write_many(rows[:10])
        assert db.wait_for_indexes(timeout=120)
        before = [h.id for h in db.namespace("big").query("topic 4", k=5, mode="keyword")]
    with _open(tmp_path / "d", clock, hnsw_threshold=500) as db:
        assert db.wait_for_indexes(timeout=120)
        big, small = db._state("big"), db._state("small")
        assert big is not None and small is not None
        assert not big.catalog.keywords.lazy and big.catalog.keywords.indexed == 600
        assert small.catalog.keywords.lazy  # small: on its first search
        hits = db.namespace("big").query("topic 4", k=5, mode="keyword")
        assert [h.id for h in hits] == before and all("topic 4" in h.content for h in hits)


def test_a_saved_graph_is_read_without_an_empty_one_made_first(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    vecs = np.random.default_rng(0).standard_normal((300, 8)).astype(np.float32)
    cat = Catalog()
    recs = [_rec(i, f"m{i}", vec=v) for i, v in enumerate(vecs)]
    cat.add_many([(rec, None) for rec in recs])
    idx = HnswIndex(8, m=8, ef_construction=50)
    while idx.extend(cat, cat.n):
        pass
    idx.save(tmp_path / "g.hnsw", cat)
    capfd.readouterr()
    loaded = HnswIndex.load(tmp_path / "g.hnsw", cat)
    assert loaded is not None and loaded.count == 300
    assert "already inited" not in "".join(capfd.readouterr())
    q = vecs[7] / np.linalg.norm(vecs[7])
    labels, _sims = loaded.search(q, 1, 50)
    assert labels.tolist() == [7]
    loaded.extend(cat, cat.n)  # nothing new: the loaded graph already covers the rows
    assert loaded.count == 300


def _row_order(d: synapsedb.Database, ns: str) -> list[tuple[str, int]]:
    return [(rec.id, rec.version) for rec in d.core.state(ns).catalog.recs]


def test_a_reopen_replays_interleaved_namespaces_in_commit_order(tmp_path: Path) -> None:
    """The load reads the logs unsorted and orders them itself (lazy_reads._in_commit_order):
    updates make the logs' index order (ns, id, version) differ from commit order, writes
    alternate between namespaces, and the catalog rows, the fact versions and the streams come
    back in the order they were written."""
    path = tmp_path / "d"
    with synapsedb.open(path, embedder=None, durability="os") as d:
        a, b = d.namespace("a"), d.namespace("b")
        ids: dict[str, list[str]] = {"a": [], "b": []}
        for i in range(12):
            for name, mem in (("a", a), ("b", b)):
                vec = np.full(4, i + 1, np.float32)
                ids[name].append(mem.write("u", {"content": f"{name} {i}", "embedding": vec}).id)
                if i % 3 == 2:  # a new version of an early memory, after later ones
                    mem.update(ids[name][i // 3], {"content": f"{name} {i // 3} again"})
                mem.set("u", f"k{i % 2}", {"i": i})
                mem.append("u", {"content": f"event {i}", "data": {"i": i, "ns": name}})
        before = {name: _row_order(d, name) for name in ("a", "b")}
        assert before["a"][12:] != sorted(before["a"][12:])  # index order is not commit order
        facts = {name: [f.value for f in d.namespace(name).history("u", "k0")] for name in "ab"}
        events = {name: [e.data for e in d.namespace(name).events("u")] for name in "ab"}
    with synapsedb.open(path, embedder=None, durability="os") as d:
        for name in ("a", "b"):
            assert _row_order(d, name) == before[name]
            assert [f.value for f in d.namespace(name).history("u", "k0")] == facts[name]
            assert [e.data for e in d.namespace(name).events("u")] == events[name]
            got = d.namespace(name).get(ids[name][0])
            assert got is not None and got.content == f"{name} 0 again"


def test_loads_of_most_and_of_a_few_namespaces_read_the_same_rows_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load whose namespaces hold most of a log scans it in rowid order (regrouped by
    namespace); a load of a few among many reads through the index. Both give every row of
    their namespaces in (ns, rowid) order."""
    import sqlite3

    from synapsedb.storage.sqlite import SQLiteStorage

    path = tmp_path / "d"
    with synapsedb.open(path, embedder=None, durability="os") as d:
        mems = {name: d.namespace(name) for name in ("a", "b", "big")}
        first: dict[str, str] = {}
        for i in range(30):
            for name in ("a", "b") if i < 10 else ("big",):
                m = mems[name]
                got = m.write("u", {"content": f"{name} {i}"})
                first.setdefault(name, got.id)
                if i % 4 == 3:
                    m.update(first[name], {"content": f"{name} again {i}"})
                m.set("u", "k", {"i": i})
                m.append("u", {"content": f"event {i}"})
    from synapsedb.storage.base import EventRow, FactRow, MemoryRow

    logs = {
        "memories": ("memory_versions", MemoryRow),
        "facts": ("fact_versions", FactRow),
        "events": ("events", EventRow),
    }
    conn = sqlite3.connect(path / SQLiteStorage.FILENAME)
    want = {
        kind: conn.execute(
            f"SELECT {', '.join(cls._fields)} FROM {table} ORDER BY ns, rowid"
        ).fetchall()
        for kind, (table, cls) in logs.items()
    }
    conn.close()
    from synapsedb.storage import lazy_reads

    scans: list[bool] = []
    most_of = lazy_reads._most_of
    monkeypatch.setattr(lazy_reads, "_most_of", lambda *a: scans.append(most_of(*a)) or scans[-1])
    storage = SQLiteStorage(path, durability="os")
    try:
        for names in (["a", "b", "big"], ["big"], ["a", "b"], ["b"], ["big", "a"]):
            loaded = storage.load_namespaces(names)
            for kind in logs:
                got = [tuple(row) for row in getattr(loaded, kind)]
                runs = [ns for i, (ns, *_) in enumerate(got) if i == 0 or got[i - 1][0] != ns]
                assert len(runs) == len(set(runs))  # one run per namespace
                got.sort(key=lambda row: row[0])  # namespaces in any order, each one in its own
                assert got == [row for row in want[kind] if row[0] in names], (names, kind)
                assert got  # every namespace has rows of every log
    finally:
        storage.close()
    assert True in scans and False in scans  # both ways were taken
