"""The vectorized filter masks agree with the reference per-record semantics."""

from __future__ import annotations

import tempfile
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

import synapsedb
from synapsedb.query.filters import matches, parse_filter
from synapsedb.query.masks import filter_mask

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.0, 2.5]),
    st.sampled_from(["a", "b", "ab", "ba", ""]),
)
meta_values = st.one_of(
    scalars, st.lists(scalars, max_size=3), st.fixed_dictionaries({"s": scalars})
)
metadata = st.dictionaries(st.sampled_from(["k", "m", "n"]), meta_values, max_size=3)
records = st.fixed_dictionaries(
    {
        "entity": st.sampled_from(["user:1", "user:2", "ticket:9"]),
        "content": st.just("x"),
        "type": st.sampled_from(["fact", "event", "preference"]),
        "agent": st.sampled_from([None, "intake", "knowledge"]),
        "ts": st.integers(0, 5),
        "salience": st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]),
        "pinned": st.booleans(),
        "metadata": metadata,
    }
)

fields = st.sampled_from(
    ["entity", "type", "agent", "ts", "salience", "pinned", "k", "m", "n", "k.s", "metadata.m"]
)


@st.composite
def conditions(draw: Any) -> dict[str, Any]:
    field = draw(fields)
    op = draw(
        st.sampled_from(
            ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$contains"]
        )
    )
    if field == "ts":
        value: Any = draw(st.integers(0, 5))
    elif field == "salience":
        value = draw(st.sampled_from([0.0, 0.25, 0.5, 1.0]))
    elif field == "pinned":
        value = draw(st.booleans())
    elif field in ("entity", "type", "agent"):
        value = draw(st.sampled_from(["user:1", "fact", "intake", "user", "e"]))
    else:
        value = draw(scalars)
    if op == "$exists":
        value = draw(st.booleans())
    elif op in ("$in", "$nin"):
        value = [
            value,
            draw(scalars if field not in ("ts", "salience", "pinned") else st.just(value)),
        ]
        if field in ("entity", "type", "agent"):
            value = [v for v in value if isinstance(v, str)] or ["fact"]
    elif (op == "$contains" and field in ("ts", "salience", "pinned")) or (
        op in ("$gt", "$gte", "$lt", "$lte")
        and (field == "pinned" or value is None or isinstance(value, bool))
    ):
        op = "$eq"
    return {field: {op: value}}


filters = st.recursive(
    conditions(),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"$and": xs}),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"$or": xs}),
        inner.map(lambda x: {"$not": x}),
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(records, min_size=1, max_size=25), st.lists(filters, min_size=1, max_size=8))
def test_masks_match_reference(recs: list[dict[str, Any]], flts: list[dict[str, Any]]) -> None:
    with (
        tempfile.TemporaryDirectory() as d,
        synapsedb.open(d, durability="os", embedder=None) as db,
    ):
        mem = db.namespace("p")
        written = mem.write_many(recs)
        state = db._state("p")
        assert state is not None
        cat = state.catalog
        n = cat.n
        assert n == len(written)
        for flt in flts:
            node = parse_filter(flt)
            assert node is not None
            mask = filter_mask(node, cat, n, lambda mid: [r.row for r in state.mems.get(mid, [])])
            for r in range(n):
                rec = cat.recs[r]
                builtins = {
                    "id": rec.id,
                    "entity": rec.entity,
                    "type": rec.type,
                    "agent": rec.agent,
                    "ts": rec.ts_us,
                    "salience": rec.salience,
                    "pinned": rec.pinned,
                }
                expected = matches(node, builtins, orjson.loads(rec.meta_json))
                assert bool(mask[r]) == expected, (flt, builtins, rec.meta_json)


range_values = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.5, 2.5, 2**53 + 1, float(2**53)]),
    st.sampled_from(["a", "ab", "b"]),
)
range_filters = st.dictionaries(
    st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), range_values, min_size=1, max_size=4
).map(lambda ops: {"k": ops})


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(range_values, min_size=1, max_size=6), min_size=1, max_size=4),
    st.lists(range_filters, min_size=1, max_size=4),
)
def test_ranges_on_one_path_match_reference_as_values_arrive(
    batches: list[list[Any]], flts: list[dict[str, Any]]
) -> None:
    """Several range operators on one path are one interval of its ordered values; the order
    is rebuilt when a later write brings a new distinct value (big integers compare exactly)."""
    with (
        tempfile.TemporaryDirectory() as d,
        synapsedb.open(d, durability="os", embedder=None) as db,
    ):
        mem = db.namespace("p")
        for batch in batches:
            mem.write_many([{"entity": "e", "content": "x", "metadata": {"k": v}} for v in batch])
            state = db._state("p")
            assert state is not None
            cat = state.catalog
            for flt in flts:
                node = parse_filter(flt)
                assert node is not None
                mask = filter_mask(node, cat, cat.n, lambda mid: [])
                for r in range(cat.n):
                    expected = matches(node, {}, orjson.loads(cat.recs[r].meta_json))
                    assert bool(mask[r]) == expected, (flt, cat.recs[r].meta_json)
