"""A selective filter asked again is searched exactly in a block of its rows' vectors
(index/dense.py): the answers are the exact ones, through writes, deletes and expiry after the
block was built; queries into the past and filters asked once use the graph; the budget holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import synapsedb
from synapsedb.index import dense
from synapsedb.index.dense import DenseViews
from synapsedb.query import executor


def spread(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


N = 6000


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    # 10% of 6,000 rows is 600: over this test's exact-gather cuts, under the block's limit
    monkeypatch.setattr(executor, "EXACT_GATHER", 256)
    monkeypatch.setattr(executor, "EXACT_ROWS_PER_EF", 0)
    vecs = spread(N, seed=1)
    with synapsedb.open(tmp_path / "d", durability="os", hnsw_threshold=500) as d:
        mem = d.namespace("n")
        written = mem.write_many(
            [
                {
                    "entity": "u",
                    "content": f"row {i}",
                    "embedding": vecs[i],
                    "metadata": {"b": i % 10},
                }
                for i in range(N)
            ]
        )
        assert d.wait_for_indexes(timeout=120)
        yield d, mem, vecs, [m.id for m in written]


def exact_top(vecs: np.ndarray, rows: list[int], q: np.ndarray, k: int = 10) -> list[str]:
    sims = vecs[rows] @ q
    return [f"row {rows[i]}" for i in np.argsort(-sims, kind="stable")[:k]]


def ask(mem: synapsedb.Namespace, q: np.ndarray, **kw: Any) -> list[str]:
    res = mem.query(embedding=q, filter={"b": 3}, k=10, mode="vector", dedup=False, **kw)
    return [h.content for h in res.hits]


def test_a_filter_asked_again_is_answered_exactly_from_one_block(db) -> None:  # type: ignore[no-untyped-def]
    d, mem, vecs, _ids = db
    state = d.core.state("n")
    cat, graph = state.catalog, state.hnsw
    allowed = [i for i in range(N) if i % 10 == 3]
    qs = spread(40, seed=2)
    before = graph.searches
    first = ask(mem, qs[0])  # first time: the graph (approximate on these random vectors)
    assert len(set(first) & set(exact_top(vecs, allowed, qs[0]))) >= 8
    assert graph.searches > before and cat.dense.built == 0
    searches = graph.searches
    for q in qs[1:]:
        assert ask(mem, q) == exact_top(vecs, allowed, q)
    assert cat.dense.built == 1  # built once, at the second query
    assert graph.searches == searches  # no graph search since
    assert 0 < cat.dense.nbytes <= cat.dense.max_bytes
    # another filter does not use this block
    before = graph.searches
    other = mem.query(embedding=qs[1], filter={"b": 4}, k=10, mode="vector", dedup=False)
    want = exact_top(vecs, [i for i in range(N) if i % 10 == 4], qs[1])
    assert len({h.content for h in other.hits} & set(want)) >= 8  # the graph's answer
    assert graph.searches == before + 1 and cat.dense.built == 1


def test_writes_deletes_and_expiry_after_the_block_are_seen(db) -> None:  # type: ignore[no-untyped-def]
    d, mem, vecs, ids = db
    cat = d.core.state("n").catalog
    q = spread(1, seed=3)[0]
    allowed = [i for i in range(N) if i % 10 == 3]
    # a memory right on the query that expires soon, written before the block is built
    mem.write("u", {"content": "short-lived", "embedding": q, "metadata": {"b": 3}, "ttl": 0.5})
    ask(mem, q)
    first = ask(mem, q)  # builds the block
    assert cat.dense.built == 1
    assert first[0] == "short-lived"
    import time

    time.sleep(0.6)
    first = ask(mem, q)  # the block's row expired: the rest is the exact answer
    assert first == exact_top(vecs, allowed, q)
    assert cat.dense.built == 1
    # a new memory right on the query passes the filter: written after the block
    new = mem.write("u", {"content": "new best", "embedding": q, "metadata": {"b": 3}})
    got = ask(mem, q)
    assert got[0] == "new best" and got[1:] == first[:9]
    # the best old row is deleted, the second one expires
    best = int(first[0].split()[1])
    mem.delete(ids[best])
    second = int(first[1].split()[1])
    mem.update(ids[second], {"ttl": 0.001})
    time.sleep(0.01)
    got = ask(mem, q)
    rest = [i for i in allowed if i not in (best, second)]
    assert got == ["new best", *exact_top(vecs, rest, q, 9)]
    # the update made a new row for the second memory (expired): no block rebuild needed
    assert cat.dense.built == 1
    mem.delete(new.id)
    assert ask(mem, q) == exact_top(vecs, rest, q)


def test_a_query_into_the_past_does_not_use_a_newer_block(db) -> None:  # type: ignore[no-untyped-def]
    d, mem, vecs, ids = db
    state = d.core.state("n")
    q = spread(1, seed=4)[0]
    allowed = [i for i in range(N) if i % 10 == 3]
    then = d.core.now_us()
    top = exact_top(vecs, allowed, q)
    mem.delete(ids[int(top[0].split()[1])])  # gone now, there then
    ask(mem, q)
    ask(mem, q)
    assert state.catalog.dense.built == 1
    before = state.hnsw.searches
    past = mem.query(
        embedding=q, filter={"b": 3}, k=10, mode="vector", dedup=False, as_of=then / 1e6
    )
    got = [h.content for h in past.hits]
    assert got[0] == top[0]  # deleted since, but there then
    assert len(set(got) & set(top)) >= 8  # the graph's answer (approximate on random vectors)
    assert state.hnsw.searches > before  # answered by the graph, not the block


def test_blocks_stay_within_the_budget_least_recently_used_out() -> None:
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((1000, 8)).astype(np.float32)
    inv = (1 / np.linalg.norm(vectors, axis=1)).astype(np.float32)
    per_row = 8 * 4 + 12
    views = DenseViews(max_bytes=250 * per_row)
    q = np.ones(8, np.float32) / np.sqrt(8)

    def mask(mod: int) -> np.ndarray:
        return np.arange(1000) % 10 == mod

    def check(found: tuple[np.ndarray, np.ndarray] | None, ok: np.ndarray) -> None:
        assert found is not None
        want = np.flatnonzero(ok)[np.argsort(-(vectors[ok] @ q) * inv[ok], kind="stable")[:5]]
        assert found[0].tolist() == want.tolist()

    for key in ("a", "b"):
        ok = mask(ord(key) % 10)
        assert views.search(vectors, inv, key, 1, ok, 100, q, 5) is None  # asked once
        check(views.search(vectors, inv, key, 1, ok, 100, q, 5), ok)
        assert views.nbytes <= views.max_bytes
    assert views.built == 2 and views.nbytes == 2 * 100 * per_row
    # "c" would push "a" out: it goes in once asked at least twice more often than "a"
    ok = mask(ord("c") % 10)
    for _ in range(3):
        assert views.search(vectors, inv, "c", 1, ok, 100, q, 5) is None
    assert views.built == 2
    check(views.search(vectors, inv, "c", 1, ok, 100, q, 5), ok)
    assert views.built == 3 and views.nbytes == 2 * 100 * per_row  # "a" went out
    ok = mask(ord("a") % 10)
    assert views.search(vectors, inv, "a", 1, ok, 100, q, 5) is None  # 3 asks, "b" 2
    check(views.search(vectors, inv, "a", 1, ok, 100, q, 5), ok)
    assert views.built == 4 and views.nbytes <= views.max_bytes
    # a filter bigger than the whole budget is never built
    big = np.ones(1000, bool)
    assert views.search(vectors, inv, "big", 1, big, 1000, q, 5) is None
    assert views.search(vectors, inv, "big", 1, big, 1000, q, 5) is None
    assert views.built == 4


def test_filters_taking_turns_keep_the_blocks_they_have(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten filters in rotation over a budget of two blocks: two are built and used, the rest are
    answered by the caller (None) instead of a gather per query; once one filter is asked more
    often than the others, it takes a block."""
    monkeypatch.setattr(dense, "AGE_EVERY", 64)
    rng = np.random.default_rng(6)
    vectors = rng.standard_normal((1000, 8)).astype(np.float32)
    inv = (1 / np.linalg.norm(vectors, axis=1)).astype(np.float32)
    views = DenseViews(max_bytes=250 * (8 * 4 + 12))
    q = np.ones(8, np.float32) / np.sqrt(8)
    served = []
    for turn in range(300):
        key = turn % 10
        found = views.search(vectors, inv, key, 1, np.arange(1000) % 10 == key, 100, q, 5)
        if found is not None:
            served.append(key)
    assert views.built <= 4  # not one build per query
    assert len(set(served)) <= 4 and len(served) >= 2 * 25
    # one filter turns hot: within a few halvings it has a block
    for _ in range(200):
        views.search(vectors, inv, 7, 1, np.arange(1000) % 10 == 7, 100, q, 5)
    assert views.search(vectors, inv, 7, 1, np.arange(1000) % 10 == 7, 100, q, 5) is not None
