"""Location filters: ``$near`` (radius) and ``$within`` (box) on a metadata path holding a
position, in the filter language, the vectorized masks, every search path and over HTTP."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from tests.support.live_server import serve

import synapsedb
from synapsedb import ValidationError
from synapsedb.query.filters import Box, Cond, Near, Not, matches, parse_filter
from synapsedb.query.masks import filter_mask
from synapsedb.server import create_app


def near(point: list[Any], radius: Any) -> dict[str, Any]:
    return {"position": {"$near": {"point": point, "radius": radius}}}


def within(a: list[Any], b: list[Any]) -> dict[str, Any]:
    return {"position": {"$within": {"box": [a, b]}}}


def test_parse_builds_geo_conditions() -> None:
    assert parse_filter(near([12, 22], 5)) == Cond(
        ("metadata", "position"), "$near", Near((12.0, 22.0), 5.0)
    )
    # corners in either order; a 3-d box
    assert parse_filter(within([10, 30, 1], [0, 0, -1])) == Cond(
        ("metadata", "position"), "$within", Box((0.0, 0.0, -1.0), (10.0, 30.0, 1.0))
    )
    node = parse_filter({"$not": {"seen.at": {"$near": {"point": [0, 0, 0], "radius": 0}}}})
    assert node == Not(Cond(("metadata", "seen", "at"), "$near", Near((0.0, 0.0, 0.0), 0.0)))


META = {"position": [12, 22], "pos3": [1.0, 2.0, 3.0], "bad": [1, "x"], "flag": [True, False]}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (near([12, 22], 0), True),
        (near([15, 26], 5), True),  # distance exactly 5: the edge is in
        (near([15, 26], 4.999), False),
        (near([12, 22, 0], 100), False),  # a 3-d point does not match a 2-d position
        (within([0, 0], [12, 22]), True),  # edges in
        (within([12, 23], [20, 30]), False),
        (within([20, 30], [0, 0]), True),  # corners in either order
        ({"pos3": {"$near": {"point": [1, 2, 4], "radius": 1}}}, True),
        ({"pos3": {"$within": {"box": [[0, 0, 0], [2, 2, 2]]}}}, False),
        ({"bad": {"$near": {"point": [1, 1], "radius": 10}}}, False),  # not numbers
        ({"flag": {"$near": {"point": [1, 0], "radius": 10}}}, False),  # booleans are no numbers
        ({"absent": {"$near": {"point": [1, 0], "radius": 10}}}, False),
        ({"$not": {"absent": {"$within": {"box": [[0, 0], [1, 1]]}}}}, True),
        ({"$or": [near([0, 0], 1), within([10, 20], [13, 23])]}, True),
    ],
)
def test_semantics(flt: dict[str, Any], expected: bool) -> None:
    node = parse_filter(flt)
    assert node is not None
    assert matches(node, {}, META) is expected


@pytest.mark.parametrize(
    ("flt", "where"),
    [
        ({"position": {"$near": [12, 22]}}, "filter.position.$near"),
        ({"position": {"$near": {"point": [12, 22]}}}, "filter.position.$near"),
        ({"position": {"$near": {"point": [1, 2], "radius": 1, "x": 1}}}, "filter.position.$near"),
        (near([12], 5), "filter.position.$near.point"),
        (near([1, 2, 3, 4], 5), "filter.position.$near.point"),
        (near("12,22", 5), "filter.position.$near.point"),
        (near([12, float("nan")], 5), "filter.position.$near.point[1]"),
        (near([float("inf"), 1], 5), "filter.position.$near.point[0]"),
        (near([True, 1], 5), "filter.position.$near.point[0]"),
        (near([1, "2"], 5), "filter.position.$near.point[1]"),
        (near([1, 2], -1), "filter.position.$near.radius"),
        (near([1, 2], float("inf")), "filter.position.$near.radius"),
        (near([1, 2], "5"), "filter.position.$near.radius"),
        (near([1, 2], None), "filter.position.$near.radius"),
        ({"position": {"$within": {"box": [[0, 0]]}}}, "filter.position.$within.box"),
        ({"position": {"$within": {"box": [0, 0, 1, 1]}}}, "filter.position.$within.box"),
        ({"position": {"$within": [[0, 0], [1, 1]]}}, "filter.position.$within"),
        ({"position": {"$within": {"box": [[0, 0], [1, 1]], "r": 1}}}, "filter.position.$within"),
        (within([0, 0], [1, 1, 1]), "filter.position.$within.box"),
        (within([0, 0], [1, float("nan")]), "filter.position.$within.box[1][1]"),
        ({"position": {"$within": {"box": [5, [1, 1]]}}}, "filter.position.$within.box[0]"),
        ({"ts": {"$near": {"point": [1, 2], "radius": 1}}}, "filter.ts.$near"),
        ({"entity": {"$within": {"box": [[0, 0], [1, 1]]}}}, "filter.entity.$within"),
        ({"$or": [{"type": "fact"}, near([1, 2], -3)]}, "filter.$or[1].position.$near.radius"),
    ],
)
def test_hostile_geo_filters_name_the_field(flt: Any, where: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_filter(flt)
    assert err.value.field == where
    assert where in str(err.value)


def _positions(n: int, seed: int = 0) -> np.ndarray:
    return np.round(np.random.default_rng(seed).uniform(0, 100, (n, 2)), 1)


def _unit(rng: np.random.Generator, dim: int = 16) -> list[float]:
    v = rng.standard_normal(dim)
    return (v / np.linalg.norm(v)).tolist()


def _items(pos: np.ndarray, seed: int = 1) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    items = []
    for i, (x, y) in enumerate(pos.tolist()):
        meta: dict[str, Any] = {"position": [x, y], "i": i}
        if i % 7 == 0:
            meta["position"] = [x, y, 1.0]  # 3-d: never matches a 2-d filter
        if i % 11 == 0:
            meta = {"i": i}  # no position
        if i % 13 == 0:
            meta["position"] = {"x": x, "y": y}  # not a list
        items.append(
            {
                "entity": f"agent:{i % 3}",
                "content": f"saw tree number {i}",
                "embedding": _unit(rng),
                "metadata": meta,
            }
        )
    return items


FILTERS = [
    near([12, 22], 5),
    near([50, 50], 30),
    near([50, 50], 0),
    within([10, 10], [40, 35]),
    within([0, 0], [100, 100]),
    {"$not": near([50, 50], 20)},
    {"$or": [near([10, 10], 8), within([80, 80], [95, 99])]},
    {"$and": [within([0, 0], [60, 60]), {"i": {"$gt": 100}}]},
    {"position.x": {"$gte": 50}},  # a dict position is still an ordinary metadata object
]


def test_masks_agree_with_the_reference(tmp_path: Path) -> None:
    pos = _positions(400)
    pos[5] = [12, 27]  # exactly on the radius-5 circle around (12, 22)
    pos[6] = [15, 26]
    with synapsedb.open(tmp_path / "d", durability="os", embedder=None) as db:
        mem = db.namespace("w")
        mem.write_many(_items(pos))
        state = db._state("w")
        assert state is not None
        cat = state.catalog
        counts = []
        for flt in FILTERS:
            node = parse_filter(flt)
            assert node is not None
            mask = filter_mask(node, cat, cat.n, lambda mid: [])
            expected = [
                matches(node, {}, orjson.loads(cat.recs[r].meta_json)) for r in range(cat.n)
            ]
            assert mask.tolist() == expected, flt
            counts.append(int(mask.sum()))
        assert counts[0] >= 2 and 0 < counts[1] < 400  # the filters select something, not all


def _brute(pos: np.ndarray, items: list[dict[str, Any]], flt: dict[str, Any]) -> set[int]:
    node = parse_filter(flt)
    assert node is not None
    return {i for i, it in enumerate(items) if matches(node, {}, it["metadata"])}


def test_every_search_path_honours_the_filter(tmp_path: Path) -> None:
    pos = _positions(6000, seed=3)
    items = _items(pos, seed=4)
    with synapsedb.open(tmp_path / "d", durability="os", embedder=None, hnsw_threshold=500) as db:
        mem = db.namespace("world")
        written = mem.write_many(items)
        assert db.wait_for_indexes(timeout=120)
        state = db._state("world")
        assert state is not None and state.hnsw is not None and state.hnsw.count == 6000
        vecs = np.array([it["embedding"] for it in items])
        q = vecs[17] * 0.6 + vecs[4242] * 0.4
        # a wide box keeps > 4,096 rows: the filtered graph search
        wide = within([0, 0], [95, 100])
        ok = _brute(pos, items, wide)
        assert len(ok) > 4096
        before = state.hnsw.searches
        hits = mem.query(embedding=q.tolist(), filter=wide, k=10, mode="vector", dedup=False)
        assert state.hnsw.searches > before
        got = {written.index(next(w for w in written if w.id == h.id)) for h in hits}
        assert len(got) == 10 and got <= ok
        exact = sorted(ok, key=lambda i: -float(vecs[i] @ q))[:10]
        assert len(got & set(exact)) >= 9
        # a small radius: the exact scan
        small = near([30, 60], 6)
        ok_small = _brute(pos, items, small)
        assert 0 < len(ok_small) < 200
        hits = mem.query(embedding=q.tolist(), filter=small, k=500, mode="vector", dedup=False)
        ids = {h.id for h in hits}
        assert ids == {written[i].id for i in ok_small}
        # keyword search and filter-only listing
        hits = mem.query("tree", filter=small, k=500, mode="keyword", dedup=False)
        assert {h.id for h in hits} == {written[i].id for i in ok_small}
        hits = mem.query(filter=small, k=500, dedup=False)
        assert {h.id for h in hits} == {written[i].id for i in ok_small}
        for h in hits:
            x, y = h.metadata["position"]
            assert math.hypot(x - 30, y - 60) <= 6


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[synapsedb.Database, str]]:
    db = synapsedb.open(
        tmp_path / "served", durability="os", embedder=None, llm=None, background_maintenance=False
    )
    try:
        with serve(create_app(db)) as url:
            yield db, url
    finally:
        db.close()


def test_geo_filters_over_http_equal_embedded(served: tuple[synapsedb.Database, str]) -> None:
    db, url = served
    pos = _positions(300, seed=9)
    items = _items(pos, seed=10)
    db.namespace("world").write_many(items)
    remote = synapsedb.connect(url)
    try:
        rmem = remote.namespace("world")
        for flt in FILTERS:
            local = db.namespace("world").query(filter=flt, k=400, dedup=False)
            over_http = rmem.query(filter=flt, k=400, dedup=False)
            assert [h.id for h in over_http] == [h.id for h in local], flt
            assert {h.id for h in local} == {
                h.id
                for h in local
                if matches(parse_filter(flt), {}, h.metadata)  # type: ignore[arg-type]
            }
        with pytest.raises(ValidationError) as err:
            rmem.query(filter=near([12, 22], -1), k=5)
        assert err.value.field == "filter.position.$near.radius"
        with pytest.raises(ValidationError) as err:
            rmem.query(filter=within([0, 0], [1, 1, 1]), k=5)
        assert err.value.field == "filter.position.$within.box"
    finally:
        remote.close()
