"""Valid time (when a memory was true in the world) kept apart from system time (when it was
recorded): ``valid_from``/``valid_to`` on writes and updates, ``valid_at=`` on ``query`` and
``memories``, and how it combines with ``as_of``."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import Database, ManualClock, Namespace, ValidationError

DOCS = Path(__file__).resolve().parents[2] / "docs"

Y2019 = datetime(2019, 1, 1, tzinfo=UTC)
Y2020 = datetime(2020, 1, 1, tzinfo=UTC)
Y2021 = datetime(2021, 1, 1, tzinfo=UTC)
Y2023 = datetime(2023, 1, 1, tzinfo=UTC)
Y2025 = datetime(2025, 1, 1, tzinfo=UTC)
US = timedelta(microseconds=1)


def secs(t: datetime) -> float:
    return t.timestamp()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_760_000_000_000_000)


@pytest.fixture
def db(tmp_path: Path, clock: ManualClock) -> Iterator[Database]:
    database = synapsedb.open(
        tmp_path / "data", clock=clock, durability="os", embedder=None, background_maintenance=False
    )
    yield database
    database.close()


@pytest.fixture
def mem(db: Database) -> Namespace:
    return db.namespace("acme", agent="intake")


def found(mem: Namespace, when: Any, **kw: Any) -> dict[str, set[str]]:
    """The ids valid at ``when`` through every read path: the keyword search, the
    filters-only search (no text), and ``memories`` (the per-record evaluator)."""
    return {
        "keyword": {h.id for h in mem.query("lives", mode="keyword", k=100, valid_at=when, **kw)},
        "filters": {h.id for h in mem.query(None, k=100, valid_at=when, **kw)},
        "memories": {m.id for m in mem.memories(valid_at=when, **kw)},
    }


def same(ids: set[str]) -> dict[str, set[str]]:
    return {"keyword": ids, "filters": ids, "memories": ids}


# -- writes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "form",
    [
        Y2020,
        datetime(2020, 1, 1),
        datetime(2020, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))),
        "2020-01-01",
        "2020-01-01T00:00:00Z",
        "2019-12-31T19:00:00-05:00",
        1_577_836_800,
        1_577_836_800.0,
        "1577836800",
    ],
)
def test_bounds_in_any_time_form_are_stored_as_epoch_seconds(mem: Namespace, form: Any) -> None:
    m = mem.write(
        "u",
        {
            "content": "lives in Paris",
            "valid_from": form,
            "valid_to": "2023-01-01",
            "metadata": {"city": "Paris"},
        },
    )
    assert m.metadata == {"city": "Paris", "valid_from": secs(Y2020), "valid_to": secs(Y2023)}
    assert all(type(m.metadata[k]) is float for k in ("valid_from", "valid_to"))
    assert mem.get(m.id).metadata == m.metadata


def test_top_level_bounds_win_over_metadata_and_none_means_not_given(mem: Namespace) -> None:
    m = mem.write(
        "u",
        {
            "content": "x",
            "valid_from": "2021-01-01",
            "valid_to": None,
            "metadata": {"valid_from": 1.0, "valid_to": 2e9},
        },
    )
    assert m.metadata == {"valid_from": secs(Y2021), "valid_to": 2e9}
    plain = mem.write("u", {"content": "y", "metadata": {"valid_from": 1_577_836_800}})
    assert plain.metadata == {"valid_from": 1_577_836_800}  # numbers in metadata kept as given


def test_write_many_and_append_take_bounds(mem: Namespace) -> None:
    a, b = mem.write_many(
        [
            ("u", {"content": "a", "valid_from": Y2020}),
            {"entity": "u", "content": "b", "valid_to": Y2023},
        ]
    )
    assert a.metadata == {"valid_from": secs(Y2020)} and b.metadata == {"valid_to": secs(Y2023)}
    ev = mem.append("u", {"content": "moved", "metadata": {"valid_from": secs(Y2023)}})
    assert ev.memory_id is not None
    assert mem.get(ev.memory_id).metadata["valid_from"] == secs(Y2023)


# -- valid_at -----------------------------------------------------------------------------------


@pytest.fixture
def lives(mem: Namespace) -> Namespace:
    mem.write(
        "u", {"id": "paris", "content": "lives in Paris", "valid_from": Y2020, "valid_to": Y2023}
    )
    mem.write("u", {"id": "berlin", "content": "lives in Berlin", "valid_from": Y2023})
    mem.write("u", {"id": "lyon", "content": "lives in Lyon", "valid_to": Y2020})
    mem.write("u", {"id": "always", "content": "lives on Earth"})
    return mem


@pytest.mark.parametrize(
    ("when", "ids"),
    [
        (Y2020 - US, {"lyon", "always"}),  # valid_to is exclusive
        (Y2020, {"paris", "always"}),  # valid_from is inclusive
        (Y2021, {"paris", "always"}),
        (Y2023 - US, {"paris", "always"}),
        (Y2023, {"berlin", "always"}),
        (Y2025, {"berlin", "always"}),
        (datetime(1900, 1, 1), {"lyon", "always"}),  # open start
        (datetime(9000, 1, 1), {"berlin", "always"}),  # open end
    ],
)
def test_valid_at_keeps_the_memories_true_then(
    lives: Namespace, when: datetime, ids: set[str]
) -> None:
    assert found(lives, when) == same(ids)
    assert found(lives, when.isoformat()) == same(ids)
    assert found(lives, when.timestamp()) == same(ids)


def test_without_valid_at_a_query_leaves_out_what_ended(
    lives: Namespace, clock: ManualClock
) -> None:
    assert {m.id for m in lives.memories()} == {"paris", "berlin", "lyon", "always"}
    got = lives.query("lives", mode="keyword", k=10)
    assert {h.id for h in got} == {"berlin", "always"}  # Paris and Lyon are no longer true
    every = lives.query("lives", mode="keyword", k=10, include_ended=True)
    assert {h.id for h in every} == {"paris", "berlin", "lyon", "always"}
    # a plan (valid from a time still to come) is not ended: it stays
    lives.write("u", {"id": "rome", "content": "lives in Rome", "valid_from": "9000-01-01"})
    assert "rome" in {h.id for h in lives.query("lives", mode="keyword", k=10)}
    # "ended" is asked at the read's own time: as of a moment before its valid_to, it showed
    start = clock.now_us()
    lives.write(
        "u", {"id": "oslo", "content": "lives in Oslo", "valid_to": (start + 5_000_000) / 1e6}
    )
    clock.set(start + 10_000_000)
    assert "oslo" not in {h.id for h in lives.query("lives", mode="keyword", k=10)}
    before = lives.query("lives", mode="keyword", k=10, as_of=(start + 1_000_000) / 1e6)
    assert "oslo" in {h.id for h in before}
    with pytest.raises(ValidationError, match="include_ended"):
        lives.query("lives", include_ended="yes")  # type: ignore[arg-type]


def test_valid_at_composes_with_the_callers_filter_and_shorthands(lives: Namespace) -> None:
    lives.write(
        "u",
        {
            "id": "pref",
            "content": "lives for coffee",
            "type": "preference",
            "valid_from": Y2021,
            "metadata": {"channel": "chat"},
        },
    )
    got = lives.query("lives", mode="keyword", valid_at=Y2025, filter={"type": "preference"})
    assert [h.id for h in got] == ["pref"]
    got = lives.query(
        "lives",
        mode="keyword",
        valid_at=Y2020,
        filter={"$or": [{"channel": "chat"}, {"type": "fact"}]},
    )
    assert {h.id for h in got} == {"paris", "always"}
    got = lives.query("lives", mode="keyword", valid_at=Y2025, types=["fact"], entity="u")
    assert {h.id for h in got} == {"berlin", "always"}
    assert {m.id for m in lives.memories("u", types=["preference"], valid_at=Y2020)} == set()
    assert {m.id for m in lives.memories("u", types=["preference"], valid_at=Y2021)} == {"pref"}


def test_valid_at_applies_to_the_cold_tier(lives: Namespace) -> None:
    lives.configure(max_hot=1)
    report = lives.maintain()
    assert len(report.demoted) == 3
    for when, ids in ((Y2021, {"paris", "always"}), (Y2025, {"berlin", "always"})):
        got = lives.query("lives", mode="keyword", valid_at=when, tiers=["hot", "cold"])
        assert {h.id for h in got} == ids
        assert {m.id for m in lives.memories(valid_at=when)} == ids


def test_the_filter_and_the_per_record_evaluator_agree(mem: Namespace) -> None:
    """query (a mask over the catalog) and memories (one record at a time) give the same ids
    for random intervals, probed at every bound, a microsecond either side, and between."""
    rng = random.Random(11)
    base = secs(Y2020)
    points = []
    for i in range(60):
        start = base + rng.randrange(0, 10_000) if rng.random() < 0.7 else None
        end = (start or base) + rng.randrange(1, 10_000) if rng.random() < 0.7 else None
        memory: dict[str, Any] = {"content": f"lives in town {i}"}
        if start is not None:
            memory["valid_from"] = start
            points.append(start)
        if end is not None:
            memory["valid_to"] = end
            points.append(end)
        mem.write("u", memory)
    probes = sorted({p + d for p in points for d in (-1e-6, 0.0, 1e-6)} | {base - 1, base + 9e4})
    for t in probes:
        answers = found(mem, t)
        assert answers["keyword"] == answers["filters"] == answers["memories"], t
        want = set()
        for m in mem.memories(limit=100):
            lo, hi = m.metadata.get("valid_from"), m.metadata.get("valid_to")
            if (lo is None or lo <= t) and (hi is None or hi > t):
                want.add(m.id)
        assert answers["memories"] == want, t


# -- updates --------------------------------------------------------------------------------------


def test_update_keeps_the_interval_when_metadata_is_replaced(mem: Namespace) -> None:
    m = mem.write(
        "u",
        {
            "content": "lives in Paris",
            "valid_from": Y2020,
            "valid_to": Y2023,
            "metadata": {"source": "chat", "city": "Paris"},
        },
    )
    m2 = mem.update(m.id, {"metadata": {"source": "email"}})
    assert m2.metadata == {"source": "email", "valid_from": secs(Y2020), "valid_to": secs(Y2023)}
    m3 = mem.update(m.id, {"metadata": None})
    assert m3.metadata == {"valid_from": secs(Y2020), "valid_to": secs(Y2023)}
    m4 = mem.update(m.id, {"content": "lives in Paris, France"})  # other changes keep it too
    assert m4.metadata == m3.metadata
    # the new metadata may name a bound itself; a top-level bound wins over it
    m5 = mem.update(m.id, {"metadata": {"valid_to": secs(Y2025)}})
    assert m5.metadata == {"valid_from": secs(Y2020), "valid_to": secs(Y2025)}
    m6 = mem.update(m.id, {"metadata": {"valid_to": secs(Y2025)}, "valid_to": "2021-01-01"})
    assert m6.metadata == {"valid_from": secs(Y2020), "valid_to": secs(Y2021)}
    assert [v.metadata.get("valid_to") for v in mem.history(m.id)] == [
        secs(Y2023),
        secs(Y2023),
        secs(Y2023),
        secs(Y2023),
        secs(Y2025),
        secs(Y2021),
    ]


def test_update_closes_reopens_and_clears_bounds(mem: Namespace) -> None:
    m = mem.write(
        "u", {"content": "lives in Paris", "valid_from": Y2020, "metadata": {"city": "Paris"}}
    )
    closed = mem.update(m.id, {"valid_to": Y2023})
    assert closed.metadata == {"city": "Paris", "valid_from": secs(Y2020), "valid_to": secs(Y2023)}
    assert found(mem, Y2025) == same(set()) and found(mem, Y2021) == same({m.id})
    reopened = mem.update(m.id, {"valid_to": None})
    assert reopened.metadata == {"city": "Paris", "valid_from": secs(Y2020)}
    assert found(mem, Y2025) == same({m.id})
    cleared = mem.update(m.id, {"valid_from": None, "metadata": {"city": "Lyon"}})
    assert cleared.metadata == {"city": "Lyon"}
    assert found(mem, datetime(1900, 1, 1)) == same({m.id})


def test_a_metadata_bound_that_is_not_a_number_is_not_carried(mem: Namespace) -> None:
    """A bound is a number; an older string under the key (written before valid time existed,
    so never a bound) goes with the rest of the replaced metadata."""
    from synapsedb.validtime import BoundsPatch

    prev = '{"valid_from": "2020-01-01", "valid_to": 1672531200.0, "x": 1}'
    assert BoundsPatch({}, 4096).apply(prev, '{"y": 2}') == '{"y":2,"valid_to":1672531200.0}'


# -- as_of x valid_at ---------------------------------------------------------------------------


def test_as_of_is_what_we_knew_and_valid_at_what_was_true(
    mem: Namespace, clock: ManualClock
) -> None:
    """At system time S1 we learn "lives in Paris since 2020"; at S2 that the move to Berlin
    happened in 2023 (Paris closed, Berlin added)."""
    s0 = clock.now_us()
    clock.advance(10)
    paris = mem.write("u", {"content": "lives in Paris", "valid_from": Y2020})
    s1 = clock.now_us()
    clock.advance(10)
    mem.update(paris.id, {"valid_to": Y2023})
    berlin = mem.write("u", {"content": "lives in Berlin", "valid_from": Y2023})
    s2 = clock.now_us()
    p, b = paris.id, berlin.id
    matrix = {
        (s0, Y2021): set(),
        (s0, Y2025): set(),  # knew nothing yet
        (s1, Y2019): set(),
        (s1, Y2021): {p},
        (s1, Y2025): {p},  # then we believed Paris still held
        (s2, Y2019): set(),
        (s2, Y2021): {p},
        (s2, Y2025): {b},
        (None, Y2021): {p},
        (None, Y2025): {b},
    }
    for (known, true), ids in matrix.items():
        as_of = None if known is None else known / 1_000_000
        assert found(mem, true, as_of=as_of) == same(ids), (known, true)
    # as_of alone: both versions of Paris, as they were recorded
    assert {m.id for m in mem.memories(as_of=s1 / 1_000_000)} == {p}
    versions = mem.history(p)
    assert [v.metadata for v in versions] == [
        {"valid_from": secs(Y2020)},
        {"valid_from": secs(Y2020), "valid_to": secs(Y2023)},
    ]


# -- bad input -----------------------------------------------------------------------------------


BAD_WRITES: list[tuple[Any, str]] = [
    ({"content": "x", "valid_from": "soon"}, "valid_from"),
    ({"content": "x", "valid_to": True}, "valid_to"),
    ({"content": "x", "valid_to": float("nan")}, "valid_to"),
    ({"content": "x", "valid_to": 1e300}, "valid_to"),
    ({"content": "x", "valid_from": Y2023, "valid_to": Y2020}, "valid_to"),
    ({"content": "x", "valid_from": Y2023, "valid_to": Y2023}, "valid_to"),  # empty interval
    ({"content": "x", "valid_from": Y2023, "metadata": {"valid_to": secs(Y2020)}}, "valid_from"),
    ({"content": "x", "valid_to": Y2020, "metadata": {"valid_from": secs(Y2023)}}, "valid_to"),
    ({"content": "x", "metadata": {"valid_from": "2020-01-01"}}, "metadata.valid_from"),
    ({"content": "x", "metadata": {"valid_to": None}}, "metadata.valid_to"),
    ({"content": "x", "metadata": {"valid_to": False}}, "metadata.valid_to"),
    ({"content": "x", "metadata": {"valid_from": [1]}}, "metadata.valid_from"),
    ({"content": "x", "metadata": {"valid_from": 1e300}}, "metadata.valid_from"),
    ({"content": "x", "metadata": {"valid_from": 2e9, "valid_to": 1e9}}, "metadata.valid_to"),
]


@pytest.mark.parametrize(("memory", "field"), BAD_WRITES)
def test_bad_bounds_on_write_name_the_field_and_change_nothing(
    mem: Namespace, memory: dict[str, Any], field: str
) -> None:
    mem.write("u", "exists")
    with pytest.raises(ValidationError) as err:
        mem.write("u", memory)
    assert err.value.details["field"] == field
    assert field in str(err.value)
    with pytest.raises(ValidationError) as err:
        mem.write_many([("u", "fine"), ("u", memory)])
    assert err.value.details["field"] == f"items[1].{field}"
    assert len(mem.memories()) == 1


def test_bad_bounds_on_update_name_the_field_and_change_nothing(mem: Namespace) -> None:
    m = mem.write("u", {"content": "x", "valid_from": Y2021, "valid_to": Y2023})
    bad: list[tuple[dict[str, Any], str]] = [
        ({"valid_to": Y2020}, "valid_to"),  # before the kept valid_from
        ({"valid_to": Y2021}, "valid_to"),
        ({"valid_from": Y2025}, "valid_from"),  # after the kept valid_to
        ({"valid_from": "later"}, "valid_from"),
        ({"metadata": {"valid_from": "2020"}}, "metadata.valid_from"),
        ({"metadata": {"valid_to": secs(Y2020)}}, "metadata.valid_to"),  # vs the kept start
        ({"metadata": {"valid_from": 2e9, "valid_to": 1e9}}, "metadata.valid_to"),
        ({"metadata": {"valid_to": 1e9}, "valid_from": 2e9}, "valid_from"),
    ]
    for changes, field in bad:
        with pytest.raises(ValidationError) as err:
            mem.update(m.id, changes)
        assert err.value.details["field"] == field, changes
    assert len(mem.history(m.id)) == 1


def test_merged_metadata_is_held_to_the_size_limit(tmp_path: Path) -> None:
    db = synapsedb.open(
        tmp_path / "d",
        embedder=None,
        durability="os",
        background_maintenance=False,
        max_metadata_bytes=64,
    )
    try:
        mem = db.namespace("acme")
        m = mem.write("u", {"content": "x", "valid_from": Y2020, "valid_to": Y2023})
        with pytest.raises(ValidationError) as err:  # 50 bytes alone, 104 with the bounds
            mem.update(m.id, {"metadata": {"note": "n" * 39}})
        assert err.value.details == {"field": "metadata", "limit": 64}
    finally:
        db.close()


@pytest.mark.parametrize("form", ["soon", True, float("nan"), [2020], 1e300])
def test_a_bad_valid_at_names_the_field(lives: Namespace, form: Any) -> None:
    for read in (
        lambda: lives.query("lives", valid_at=form),
        lambda: lives.query(None, valid_at=form),
        lambda: lives.memories(valid_at=form),
    ):
        with pytest.raises(ValidationError) as err:
            read()
        assert err.value.details["field"] == "valid_at"


# -- export/import and the query log ---------------------------------------------------------------


def test_export_import_keeps_the_bounds_and_their_history(db: Database, mem: Namespace) -> None:
    m = mem.write("u", {"content": "lives in Paris", "valid_from": Y2020})
    mem.update(m.id, {"valid_to": Y2023})
    mem.write("u", {"content": "lives in Berlin", "valid_from": "2023-01-01"})
    copy = db.namespace("copy")
    assert copy.import_records(list(mem.export())) == 3
    assert [v.metadata for v in copy.history(m.id)] == [v.metadata for v in mem.history(m.id)]
    for when in (Y2021, Y2023, Y2025):
        assert found(copy, when) == found(mem, when)


def test_import_refuses_a_bound_that_is_not_a_number(db: Database, mem: Namespace) -> None:
    mem.write("u", {"content": "x", "metadata": {"k": 1}})
    records = list(mem.export())
    for rec in records:
        if "metadata" in rec:
            rec["metadata"] = {"valid_from": "2020-01-01"}
    with pytest.raises(ValidationError) as err:
        db.namespace("copy").import_records(records)
    assert str(err.value.details["field"]).endswith(".metadata.valid_from")
    assert db.namespace("copy").memories() == []


def test_the_query_log_records_valid_at(lives: Namespace) -> None:
    a = lives.query("lives", valid_at="2021-06-01")
    b = lives.query("lives")
    lives.record_answer("ans", [a.query_id, b.query_id])
    first, second = lives.lineage("ans").queries
    assert first.request["valid_at"] == "2021-06-01T00:00:00Z"
    assert "valid_at" not in second.request


# -- docs ---------------------------------------------------------------------------------------


def test_the_concepts_example_runs(tmp_path: Path) -> None:
    text = (DOCS / "concepts.md").read_text()
    section = text.split("## Valid time", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "docs/concepts.md: the Valid time section has no python example"
    code = "\n".join(blocks).replace('synapsedb.open("data"', f"synapsedb.open({str(tmp_path)!r}")
    exec(compile(code, "docs/concepts.md", "exec"), {"__name__": "docs"})
