from __future__ import annotations

import numpy as np
import pytest

from synapsedb import ManualClock, Namespace, ValidationError


def unit(seed: int, dim: int = 16) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).tolist()


def test_keyword_query_ranks_the_matching_memory_first(mem: Namespace) -> None:
    mem.write("user:4321", "Customer refund for order #1458 initiated on 10/20")
    mem.write("user:4321", "Refund confirmation email sent 10/21")
    mem.write("user:9", "Shipping address changed to Berlin")
    res = mem.query("refund for order 1458", mode="keyword")
    assert res.hits[0].content.startswith("Customer refund for order #1458")
    assert all("Berlin" not in h.content for h in res)
    assert res.query_id


def test_seed_query_scopes_to_the_entity_named_in_the_text(mem: Namespace) -> None:
    mem.write("user:4321", "Customer refund for order #1458 initiated on 10/20")
    mem.write("user:4321", "Refund confirmation email sent 10/21")
    mem.write("user:77", "Refund status: denied, order #2000")
    res = mem.query("user:4321 refund status")
    assert res.entity == "user:4321"
    assert {h.entity for h in res} == {"user:4321"}
    assert len(res) == 2
    # entity= wins over a token in the text
    assert {h.entity for h in mem.query("user:4321 refund status", entity="user:77")} == {"user:77"}
    # a token that names no entity is just text
    assert mem.query("user:5555 refund").entity is None


def test_vector_query_with_caller_embeddings(mem: Namespace) -> None:
    mem.write_many([{"entity": "e", "content": f"m{i}", "embedding": unit(i)} for i in range(50)])
    res = mem.query(embedding=unit(7), mode="vector", k=3)
    assert res.hits[0].content == "m7"
    assert res.hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert len(res) == 3


def test_a_filter_keeping_one_percent_still_returns_k(mem: Namespace) -> None:
    items = [
        {
            "entity": f"user:{i % 50}",
            "content": f"note {i}",
            "embedding": unit(i),
            "metadata": {"bucket": i % 100},
        }
        for i in range(2000)
    ]
    mem.write_many(items)
    res = mem.query(embedding=unit(3), filter={"bucket": 7}, k=10, mode="vector")
    assert len(res) == 10
    assert all(h.metadata["bucket"] == 7 for h in res)
    res = mem.query("note", filter={"bucket": {"$in": [7, 8]}}, k=30, mode="keyword")
    assert len(res) == 30 and {h.metadata["bucket"] for h in res} == {7, 8}


def test_query_as_of_sees_exactly_what_was_visible(mem: Namespace, clock: ManualClock) -> None:
    m = mem.write("u", "the parcel is in Hamburg")
    t1 = clock.now_us() / 1e6
    clock.advance(10)
    mem.update(m.id, {"content": "the parcel reached Munich"})
    later = mem.write("u", "parcel insurance claim filed")
    then = mem.query("parcel", as_of=t1)
    assert [(h.content, h.version) for h in then] == [("the parcel is in Hamburg", 1)]
    now = {h.content for h in mem.query("parcel")}
    assert now == {"the parcel reached Munich", later.content}
    clock.advance(10)
    mem.delete(later.id)
    assert later.id in {h.id for h in mem.query("parcel", as_of=clock.now_us() / 1e6 - 5)}
    assert later.id not in {h.id for h in mem.query("parcel")}


def test_dedup_collapses_identical_and_near_identical_hits(mem: Namespace) -> None:
    v = unit(1)
    near = (np.array(v) + 0.01 * np.array(unit(2))).tolist()
    a = mem.write("u", {"content": "Refund issued for order 1458", "embedding": v})
    b = mem.write("u", {"content": "refund issued for  order 1458", "embedding": unit(3)})
    c = mem.write("u", {"content": "Order 1458 refund was issued", "embedding": near})
    res = mem.query("refund issued order 1458", embedding=v)
    assert len(res) == 1
    assert res.hits[0].id == a.id
    assert set(res.hits[0].duplicates) == {b.id, c.id}
    assert len(mem.query("refund issued order 1458", embedding=v, dedup=False)) == 3


def test_types_time_range_min_score_and_explain(mem: Namespace) -> None:
    mem.write("u", {"content": "likes dark roast coffee", "type": "preference", "ts": "2025-01-05"})
    mem.write("u", {"content": "ordered coffee beans", "type": "event", "ts": "2025-02-05"})
    mem.write("u", {"content": "coffee machine broke", "type": "event", "ts": "2025-03-05"})
    assert [h.type for h in mem.query("coffee", types=["preference"])] == ["preference"]
    got = mem.query("coffee", since="2025-02-01", until="2025-03-01")
    assert [h.content for h in got] == ["ordered coffee beans"]
    res = mem.query("coffee machine", explain=True)
    assert res.hits[0].explanation is not None
    assert {"keyword", "vector", "cosine", "bm25", "base", "context", "score"} <= set(
        res.hits[0].explanation
    )
    scores = [h.score for h in mem.query("coffee machine")]
    cut = (scores[0] + scores[-1]) / 2
    assert scores[0] > scores[-1]
    above = mem.query("coffee machine", min_score=cut)
    assert 0 < len(above) < len(scores) and all(h.score >= cut for h in above)


def test_query_errors(mem: Namespace) -> None:
    mem.write("u", {"content": "x", "embedding": unit(1)})
    with pytest.raises(ValidationError) as err:
        mem.query("x", filter={"$or": [{"ts": {"$gt": "soon"}}]})
    assert err.value.field == "filter.$or[0].ts.$gt"
    with pytest.raises(ValidationError) as err:
        mem.query(embedding=[0.1] * 3)
    assert err.value.field == "embedding" and err.value.details["limit"] == 16
    for kwargs, field in [({"k": 0}, "k"), ({"mode": "fuzzy"}, "mode"), ({"since": "?"}, "since")]:
        with pytest.raises(ValidationError) as err:
            mem.query("x", **kwargs)
        assert err.value.field == field


def test_query_on_an_empty_namespace(mem: Namespace) -> None:
    assert len(mem.query("anything")) == 0


def test_a_text_of_only_stopwords_matches_nothing(mem: Namespace) -> None:
    mem.write("u", "the refund was issued")
    assert len(mem.query("the and of", mode="keyword")) == 0
    assert len(mem.query(filter={"type": "fact"})) == 1  # no text at all: filters only
