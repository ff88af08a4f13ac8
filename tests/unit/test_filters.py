from __future__ import annotations

from typing import Any

import pytest

from synapsedb import ValidationError
from synapsedb.query.filters import And, Cond, Not, Or, matches, parse_filter

REC = {
    "id": "m1",
    "entity": "user:1",
    "type": "fact",
    "agent": "intake",
    "ts": 1_000_000,
    "salience": 0.7,
    "pinned": False,
}
META = {
    "channel": "email",
    "n": 3,
    "tags": ["vip", "refund"],
    "order": {"status": "open"},
    "flag": None,
}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"type": "fact"}, True),
        ({"type": {"$ne": "fact"}}, False),
        ({"entity": {"$in": ["user:1", "user:2"]}}, True),
        ({"agent": {"$nin": ["intake"]}}, False),
        ({"salience": {"$gt": 0.5, "$lte": 0.7}}, True),
        ({"salience": {"$gt": 0.7}}, False),
        ({"ts": {"$gte": 1.0}}, True),  # epoch seconds
        ({"ts": {"$lt": "1970-01-01T00:00:01Z"}}, False),
        ({"channel": "email"}, True),
        ({"metadata.channel": "email"}, True),
        ({"n": {"$gte": 3}}, True),
        ({"n": {"$gt": "2"}}, False),  # no cross-kind comparison
        ({"n": "3"}, False),
        ({"tags": {"$contains": "vip"}}, True),
        ({"channel": {"$contains": "mai"}}, True),
        ({"order.status": "open"}, True),
        ({"order.missing": {"$exists": False}}, True),
        ({"flag": {"$exists": True}}, True),
        ({"flag": None}, True),
        ({"absent": {"$ne": "x"}}, True),  # $ne matches a missing field
        ({"absent": {"$nin": ["x"]}}, True),
        ({"absent": "x"}, False),
        ({"$or": [{"type": "event"}, {"n": 3}]}, True),
        ({"$and": [{"type": "fact"}, {"n": 4}]}, False),
        ({"$not": {"type": "event"}}, True),
        ({"type": "fact", "channel": "sms"}, False),
        ({"pinned": False}, True),
        ({"agent": {"$exists": True}}, True),
    ],
)
def test_semantics(flt: dict[str, Any], expected: bool) -> None:
    node = parse_filter(flt)
    assert node is not None
    assert matches(node, REC, META) is expected


def test_missing_agent_counts_as_missing() -> None:
    node = parse_filter({"agent": {"$exists": False}})
    assert node is not None and matches(node, {**REC, "agent": None}, META)


def test_tree_shape() -> None:
    node = parse_filter({"type": "fact", "$or": [{"n": {"$gt": 1}}, {"$not": {"entity": "x"}}]})
    assert node == And(
        (
            Cond("type", "$eq", "fact"),
            Or((Cond(("metadata", "n"), "$gt", 1), Not(Cond("entity", "$eq", "x")))),
        )
    )


@pytest.mark.parametrize(
    ("flt", "where"),
    [
        ([], "filter"),
        ({}, "filter"),
        ({"$xor": []}, "filter.$xor"),
        ({"$and": []}, "filter.$and"),
        ({"$or": [{"type": "fact"}, 3]}, "filter.$or[1]"),
        ({"ts": {"$gt": "last week"}}, "filter.ts.$gt"),
        ({"salience": {"$gt": "high"}}, "filter.salience.$gt"),
        ({"n": {"$between": [1, 2]}}, "filter.n.$between"),
        ({"n": {"$in": 3}}, "filter.n.$in"),
        ({"n": {"$exists": "yes"}}, "filter.n.$exists"),
        ({"n": {"$gt": [1]}}, "filter.n.$gt"),
        ({"n": {"$gt": True}}, "filter.n.$gt"),
        ({"n": {"$eq": float("nan")}}, "filter.n.$eq"),
        ({"n": {"$eq": {"a": 1}}}, "filter.n.$eq"),
        ({"metadata.": 1}, "filter.metadata."),
        ({"a..b": 1}, "filter.a..b"),
        ({"type": 3}, "filter.type"),
        ({"$not": {"ts": {"$contains": 1}}}, "filter.$not.ts.$contains"),
    ],
)
def test_malformed_filters_say_where(flt: Any, where: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_filter(flt)
    assert err.value.field == where
    assert where in str(err.value)


def test_size_limits() -> None:
    with pytest.raises(ValidationError) as err:
        parse_filter({"$or": [{"n": i} for i in range(300)]})
    assert err.value.details["limit"] == 256
    with pytest.raises(ValidationError) as err:
        parse_filter({"n": {"$in": list(range(2000))}})
    assert err.value.details["limit"] == 1024
