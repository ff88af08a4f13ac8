"""A read-only client cannot grow the disk without bound through queries: the text and the
filter have limits, and what the query log keeps per query and per namespace is bounded."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import synapsedb
from synapsedb import Namespace, Settings, ValidationError


def logged_rows(directory: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(directory / "synapse.db")
    try:
        return conn.execute(
            "SELECT ns, length(coalesce(text, '')) + length(request) + length(hits) FROM queries"
        ).fetchall()
    finally:
        conn.close()


def test_query_text_over_the_limit_is_refused_and_not_logged(mem: Namespace) -> None:
    mem.write("u", "something to find")
    limit = Settings().max_query_chars
    assert limit == 8192
    with pytest.raises(ValidationError) as err:
        mem.query("x" * (limit + 1), mode="keyword")
    assert err.value.field == "text" and err.value.details["limit"] == limit
    assert str(limit) in err.value.message
    assert [e for e in mem.audit() if e.action == "query"] == []
    mem.query("y" * limit, mode="keyword")  # at the limit: fine
    assert [e.action for e in mem.audit()].count("query") == 1


def test_the_limit_is_a_setting(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", embedder=None, max_query_chars=10) as db:
        mem = db.namespace("n")
        mem.write("u", "abc")
        with pytest.raises(ValidationError) as err:
            mem.query("abcdefghijk", mode="keyword")
        assert err.value.details == {"field": "text", "limit": 10}


def test_filters_are_bounded_in_size_and_depth(mem: Namespace) -> None:
    mem.write("u", "something")
    with pytest.raises(ValidationError) as err:
        mem.query("something", mode="keyword", filter={"agent": "a" * 40_000})
    assert err.value.field == "filter" and err.value.details["limit"] == 32 * 1024
    deep: dict = {"agent": "x"}
    for _ in range(200):
        deep = {"$not": deep}
    with pytest.raises(ValidationError) as err:
        mem.query("something", mode="keyword", filter=deep)
    assert err.value.field == "filter" and "nested deeper" in err.value.message
    hits = mem.query("something", mode="keyword", filter={"$not": {"agent": "x"}}).hits
    assert len(hits) == 1  # an ordinary filter still works


def test_each_logged_query_keeps_at_most_query_log_max_hits(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", embedder=None, query_log_max_hits=3) as db:
        mem = db.namespace("n")
        mem.write_many([{"entity": "u", "content": f"apple {i}"} for i in range(10)])
        res = mem.query("apple", mode="keyword", k=10)
        assert len(res.hits) == 10  # the caller gets every hit
        lin = mem.record_answer("a1", [res.query_id])
        assert [h.id for h in lin.queries[0].hits] == [h.id for h in res.hits[:3]]


def test_the_query_log_keeps_a_bounded_number_of_rows_per_namespace(tmp_path: Path) -> None:
    d = tmp_path / "d"
    with synapsedb.open(d, embedder=None, query_log_max_rows=20) as db:
        mem = db.namespace("n")
        mem.write("u", "apple pie")
        first = mem.query("apple", mode="keyword")
        mem.record_answer("kept", [first.query_id])  # an answer's queries stay
        for i in range(300):
            mem.query(f"apple {i} " + "z" * 8000, mode="keyword")
            if i % 50 == 0:
                db.namespace("n").audit(limit=1)  # commits the buffered log now and then
        for i in range(30):
            db.namespace("nowhere").query(f"nothing {i}", mode="keyword")  # no such namespace
    rows = logged_rows(d)
    assert {ns for ns, _ in rows} == {"n"}  # queries of a namespace that does not exist: none
    assert len(rows) <= 20 + 2 + 1  # the cap, a tenth of it between prunes, the answer's query
    assert max(size for _, size in rows) < 8192 + 4096  # text, request and hits: bounded too
    with synapsedb.open(d, embedder=None) as db:
        assert db.namespace("n").lineage("kept").queries[0].query_id == first.query_id
