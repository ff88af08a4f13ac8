"""Wide metadata ranges compare a numeric column (index/numcol.py) instead of joining posting
lists: the mask must agree with the reference semantics as values of every kind arrive, with
the column built from the postings, extended row by row, and rebuilt after a large batch."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import synapsedb
from synapsedb.index import numcol
from synapsedb.query import masks
from synapsedb.query.filters import matches, parse_filter
from synapsedb.query.masks import filter_mask

pytestmark = pytest.mark.usefixtures("monkeypatch_wide")

wide_numbers = st.one_of(st.integers(-60, 60), st.floats(-60, 60, allow_nan=False).map(float))
values = st.one_of(
    wide_numbers,
    wide_numbers,
    st.booleans(),
    st.none(),
    st.sampled_from(["a", "m", "z"]),
    st.lists(wide_numbers, max_size=2),
    st.fixed_dictionaries({"s": wide_numbers}),
    st.sampled_from([2**53 + 1, -(2**60), float(2**53)]),
)
bounds = st.one_of(wide_numbers, st.sampled_from([2**53 + 1, float(2**53), -(2**60)]))
range_filters = st.one_of(
    st.dictionaries(
        st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), bounds, min_size=1, max_size=3
    ).map(lambda ops: {"k": ops}),
    st.tuples(bounds, bounds).map(
        lambda b: {"$and": [{"k": {"$gte": b[0]}}, {"k": {"$lt": b[1]}}]}
    ),
    st.tuples(bounds).map(lambda b: {"k.s": {"$lte": b[0]}}),
)


@pytest.fixture(scope="module")
def monkeypatch_wide() -> Iterator[None]:
    """Ranges over more than 2 distinct values use the column (the default is 32), so the
    small generated sets exercise it."""
    saved = masks.WIDE
    masks.WIDE = 2
    yield
    masks.WIDE = saved


def _check(db: Any, flts: list[dict[str, Any]]) -> None:
    cat = db.core.state("p").catalog
    for flt in flts:
        node = parse_filter(flt)
        assert node is not None
        mask = filter_mask(node, cat, cat.n, lambda mid: [])
        for r in range(cat.n):
            expected = matches(node, {}, orjson.loads(cat.recs[r].meta_json))
            assert bool(mask[r]) == expected, (flt, cat.recs[r].meta_json)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(values, min_size=1, max_size=40), min_size=1, max_size=4),
    st.lists(range_filters, min_size=1, max_size=4),
)
def test_wide_ranges_match_reference_as_values_arrive(
    batches: list[list[Any]], flts: list[dict[str, Any]]
) -> None:
    with (
        tempfile.TemporaryDirectory() as d,
        synapsedb.open(d, durability="os", embedder=None) as db,
    ):
        mem = db.namespace("p")
        for batch in batches:
            items = [{"entity": "e", "content": "x", "metadata": {"k": v}} for v in batch]
            mem.write_many(items)
            _check(db, flts)


def test_a_large_batch_rebuilds_the_column_and_big_integers_opt_out() -> None:
    with (
        tempfile.TemporaryDirectory() as d,
        synapsedb.open(d, durability="os", embedder=None) as db,
    ):
        mem = db.namespace("p")
        flts = [{"k": {"$gte": 10, "$lt": 90}}, {"k": {"$gt": 2.5}}, {"k": {"$lte": -1}}]
        mem.write_many([{"entity": "e", "content": "x", "metadata": {"k": i}} for i in range(100)])
        _check(db, flts)
        cat = db.core.state("p").catalog
        assert cat.num_cols[("k",)][0] == 100  # the column was used, and covers every row
        mem.write_many(
            [
                {"entity": "e", "content": "x", "metadata": {"k": i / 2}}
                for i in range(numcol.REBUILD_AFTER + 10)
            ]
        )
        _check(db, flts)
        assert cat.num_cols[("k",)][0] == cat.n
        mem.write("e", {"content": "x", "metadata": {"k": 2**60}})
        _check(db, [*flts, {"k": {"$gt": 2**53}}])
        assert cat.num_cols[("k",)][1] is None  # past 2**53: the postings answer


def test_an_update_closes_the_old_row_and_the_column_follows() -> None:
    with (
        tempfile.TemporaryDirectory() as d,
        synapsedb.open(d, durability="os", embedder=None) as db,
    ):
        mem = db.namespace("p")
        written = mem.write_many(
            [{"entity": "e", "content": f"x{i}", "metadata": {"k": i}} for i in range(50)]
        )
        wide = {"k": {"$gte": 0, "$lt": 1000}}
        assert len(mem.query(filter=wide, k=100).hits) == 50
        mem.update(written[0].id, {"metadata": {"k": 5000}})
        mem.forget(written[1].id)
        ids = {h.id for h in mem.query(filter=wide, k=100).hits}
        assert len(ids) == 48 and written[0].id not in ids and written[1].id not in ids
        _check(db, [wide, {"k": {"$gt": 4000}}])
