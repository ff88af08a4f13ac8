"""The state featuriser: states are near by their values, not by how their JSON reads."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from synapsedb.agent_state.similar import (
    MAX_K,
    MAX_LEAVES,
    EmbeddingCache,
    StateFeaturizer,
    flatten_state,
    rank_similar,
)
from synapsedb.errors import ValidationError


class RecordingEmbed:
    """A deterministic toy embedder: bag of words hashed into 64 dims; records its calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        out = []
        for text in texts:
            vec = [0.0] * 64
            for word in text.lower().split():
                vec[sum(map(ord, word)) % 64] += 1.0
            out.append(vec)
        return out


def test_flatten_walks_nested_lists_and_kinds() -> None:
    flat = flatten_state(
        {
            "position": [10, 20],
            "health": 0.5,
            "alive": True,
            "inventory": {"wood": 5, "stone": None},
            "tags": ["a", "b"],
            "goals": [{"kind": "gather"}, {"kind": "rest"}],
            "bad": float("nan"),
        }
    )
    assert flat["position"] == ("vec", (10.0, 20.0))
    assert flat["health"] == ("vec", (0.5,))
    assert flat["alive"] == ("str", "true")
    assert flat["inventory.wood"] == ("vec", (5.0,))
    assert "inventory.stone" not in flat  # null is missing
    assert flat["tags"] == ("set", frozenset({"a", "b"}))
    assert flat["goals.0.kind"] == ("str", "gather")
    assert flat["goals.1.kind"] == ("str", "rest")
    assert "bad" not in flat  # NaN is missing


def test_numbers_decide_not_the_words() -> None:
    # the JSON of these differs by one character; the values by a lot
    states = [
        ("low", {"health": 0.1, "position": [10, 20]}),
        ("high", {"health": 0.9, "position": [10, 20]}),
        ("mid", {"health": 0.5, "position": [10, 20]}),
    ]
    ranked = rank_similar({"health": 0.85, "position": [10, 20]}, states, 3)
    assert [i for i, _ in ranked] == ["high", "mid", "low"]
    dists = [d for _, d in ranked]
    assert dists == sorted(dists)


def test_key_order_does_not_matter_and_identical_is_zero() -> None:
    a = {"position": [1, 2], "status": "idle", "inventory": {"wood": 3, "stone": 1}}
    b = json.loads(json.dumps({k: a[k] for k in reversed(list(a))}))
    other = {"position": [9, 9], "status": "fighting", "inventory": {"wood": 0, "stone": 7}}
    ranked = rank_similar(a, [("other", other), ("same", b)], 2)
    assert ranked[0] == ("same", 0.0)
    assert ranked[1][1] > 0


def test_position_query_ranks_by_geometry() -> None:
    cands = [(f"p{x}", {"position": [x, 22], "health": float(x)}) for x in range(0, 40, 4)]
    ranked = rank_similar({"position": [12, 22]}, cands, 3)
    assert ranked[0][0] == "p12"
    assert {ranked[1][0], ranked[2][0]} == {"p8", "p16"}
    assert math.isclose(ranked[1][1], ranked[2][1])


def test_categorical_mismatch_costs_and_missing_is_typical() -> None:
    cands = [
        ("idle", {"status": "idle", "x": 1.0}),
        ("fight", {"status": "fighting", "x": 1.0}),
        ("unknown", {"x": 1.0}),
        ("flee", {"status": "fleeing", "x": 1.0}),
    ]
    ranked = dict(rank_similar({"status": "idle", "x": 1.0}, cands, 4))
    assert ranked["idle"] == 0.0
    assert ranked["fight"] == ranked["flee"] > 0
    # missing costs the median over candidates that have it: here a mismatch (2 of 3 differ)
    assert ranked["unknown"] == ranked["fight"]


def test_scale_is_robust_to_an_outlier() -> None:
    # one candidate with an absurd value must not flatten the differences among the rest
    cands = [(f"c{i}", {"gold": float(i), "status": "idle"}) for i in range(10)]
    cands.append(("rich", {"gold": 1e9, "status": "idle"}))
    cands.append(("near_other_status", {"gold": 3.0, "status": "fighting"}))
    ranked = rank_similar({"gold": 3.0, "status": "idle"}, cands, 4)
    assert ranked[0][0] == "c3"
    # gold 2 or 4 beats a status mismatch at the same gold: scaled units, not raw
    assert {ranked[1][0], ranked[2][0]} == {"c2", "c4"}


def test_text_fields_use_the_embedder_and_strings_with_few_words_are_categories() -> None:
    embed = RecordingEmbed()
    cands = [
        ("calm", {"mood": "calm and happy by the river", "zone": "forest"}),
        ("angry", {"mood": "angry and hungry in the cave", "zone": "forest"}),
    ]
    ranked = rank_similar(
        {"mood": "happy and calm near the river", "zone": "forest"}, cands, 2, embed=embed
    )
    assert ranked[0][0] == "calm"
    assert len(embed.calls) == 1
    assert "forest" not in embed.calls[0]  # a one-word string is categorical, not embedded
    assert sorted(embed.calls[0]) == sorted(
        [
            "happy and calm near the river",
            "calm and happy by the river",
            "angry and hungry in the cave",
        ]
    )


def test_field_kind_overrides_and_weights() -> None:
    embed = RecordingEmbed()
    cands = [("a", {"name": "red fox den", "hp": 10.0}), ("b", {"name": "blue fox den", "hp": 1.0})]
    f = StateFeaturizer(categorical_fields=frozenset({"name"}), embed=embed)
    f.rank({"name": "red fox den", "hp": 1.0}, cands, 2)
    assert embed.calls == []
    # weight 0 on hp: only the name decides
    g = StateFeaturizer(weights={"hp": 0.0}, categorical_fields=frozenset({"name"}))
    assert g.rank({"name": "red fox den", "hp": 1.0}, cands, 1)[0][0] == "a"
    h = StateFeaturizer(weights={"name": 0.0}, categorical_fields=frozenset({"name"}))
    assert h.rank({"name": "red fox den", "hp": 1.0}, cands, 1)[0][0] == "b"


def test_group_weight_is_shared_by_its_leaves() -> None:
    # twenty inventory counts that move together count as much as one: the field's weight is
    # shared by its leaves, so an inventory does not drown out a position
    def states(items: int) -> list[tuple[str, dict[str, Any]]]:
        return [
            (
                f"c{v}",
                {"position": [v * 7 % 10, v], "inventory": {f"i{j}": v for j in range(items)}},
            )
            for v in range(10)
        ]

    query_one = {"position": [3, 3], "inventory": {"i0": 5}}
    query_many = {"position": [3, 3], "inventory": {f"i{j}": 5 for j in range(20)}}
    one = rank_similar(query_one, states(1), 10)
    many = rank_similar(query_many, states(20), 10)
    assert [i for i, _ in one] == [i for i, _ in many]
    np.testing.assert_allclose([d for _, d in one], [d for _, d in many])


def test_vector_of_other_length_counts_as_missing() -> None:
    cands = [("2d", {"p": [1, 1]}), ("3d", {"p": [1, 1, 1]}), ("far", {"p": [50, 50]})]
    d = dict(rank_similar({"p": [1, 1]}, cands, 3))
    assert d["2d"] == 0.0
    assert d["3d"] == pytest.approx(np.median([d["2d"], d["far"]]))


def test_ties_keep_candidate_order_and_k_caps() -> None:
    cands = [(f"c{i}", {"s": "x"}) for i in range(5)]
    assert [i for i, _ in rank_similar({"s": "x"}, cands, 3)] == ["c0", "c1", "c2"]
    assert rank_similar({"s": "x"}, [], 3) == []
    assert len(rank_similar({"s": "x"}, cands, 10)) == 5


def test_query_field_nobody_has_is_dropped() -> None:
    cands = [("a", {"x": 1.0}), ("b", {"x": 5.0})]
    assert rank_similar({"x": 1.0, "nobody": "here"}, cands, 1)[0] == ("a", 0.0)
    assert rank_similar({"nobody": 3}, cands, 2) == [("a", 0.0), ("b", 0.0)]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("not a dict", [("a", {})], 1), "query_state"),
        (({"x": 1}, [("a", {})], 0), "k"),
        (({"x": 1}, [("a", {})], MAX_K + 1), "k"),
        (({"x": 1}, [("a", {})], True), "k"),
        (({"x": 1}, [("a", {})], 1.5), "k"),
        (({"x": 1}, "ab", 1), "candidates"),
        (({"x": 1}, [("a",)], 1), "candidates[0]"),
        (({"x": 1}, [(1, {})], 1), "candidates[0][0]"),
        (({"x": 1}, [("a", {}), ("b", [1, 2])], 1), "candidates[1][1]"),
        (({f"f{i}": i for i in range(MAX_LEAVES + 1)}, [("a", {})], 1), "query_state"),
    ],
)
def test_hostile_input_names_the_field(args: tuple[Any, ...], field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        rank_similar(*args)
    assert exc.value.field == field


def test_hostile_states_are_handled() -> None:
    deep: dict[str, Any] = {}
    cur = deep
    for _ in range(100):
        cur["d"] = {}
        cur = cur["d"]
    cands = [
        ("deep", deep),
        ("inf", {"x": float("inf")}),
        ("wide", {f"f{i}": i for i in range(MAX_LEAVES + 50)}),
        ("ok", {"x": 2.0}),
        ("far", {"x": 50.0}),
    ]
    ranked = rank_similar({"x": 2.0}, cands, 5)
    assert ranked[0] == ("ok", 0.0)
    assert ranked[-1][0] == "far"
    assert {i for i, _ in ranked} == {"deep", "inf", "wide", "ok", "far"}
    assert all(math.isfinite(d) for _, d in ranked)


def test_bad_embedder_output_is_a_validation_error() -> None:
    cands = [("a", {"t": "some words here now"})]
    with pytest.raises(ValidationError) as exc:
        rank_similar({"t": "other words here now"}, cands, 1, embed=lambda texts: [[1.0, 0.0]])
    assert exc.value.field == "embed"
    with pytest.raises(ValidationError):
        rank_similar(
            {"t": "other words here now"},
            cands,
            1,
            embed=lambda texts: [[float("nan")] * 3 for _ in texts],
        )


def test_weights_are_validated() -> None:
    with pytest.raises(ValidationError):
        StateFeaturizer(weights={"x": -1.0})
    with pytest.raises(ValidationError):
        StateFeaturizer(weights={"x": float("nan")})
    with pytest.raises(ValidationError):
        StateFeaturizer(weights={"": 1.0})


def test_embedding_cache_embeds_each_text_once_and_evicts() -> None:
    inner = RecordingEmbed()
    cache = EmbeddingCache(inner, max_entries=2)
    first = cache(["a b", "c d", "a b"])
    assert first.shape == (3, 64)
    assert inner.calls == [["a b", "c d"]]
    cache(["a b"])
    assert len(inner.calls) == 1
    cache(["e f"])  # evicts "c d", the least recently used
    assert len(cache) == 2
    cache(["c d"])
    assert inner.calls[-1] == ["c d"]
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-6)
    with pytest.raises(ValidationError):
        EmbeddingCache(inner, max_entries=0)


def test_default_embedder_is_the_database_model() -> None:
    cands = [
        ("sad", {"note": "I feel terrible and sad about losing the fight"}),
        ("glad", {"note": "I am delighted and happy that we won the battle"}),
    ]
    ranked = rank_similar({"note": "so happy we won the battle today"}, cands, 2)
    assert ranked[0][0] == "glad"
