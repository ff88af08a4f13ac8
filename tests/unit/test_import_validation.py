"""Imports are checked as strictly as writes, and never reach past their namespace (issue 10,
items 2 and 3).

A two-line import used to set the server-wide commit clock to year 148,108 (every later write
of every tenant failed, and was committed anyway), or commit a row that no restart could load.
Now the first bad record fails the import with a ValidationError naming ``records[i].field``,
nothing is written, and the directory still opens with every namespace intact.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import ManualClock, ValidationError
from synapsedb.times import to_datetime


def _open(path: Path, clock: ManualClock) -> synapsedb.Database:
    return synapsedb.open(
        path, clock=clock, durability="os", background_maintenance=False, embedder=None
    )


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """A real export: namespace, memory (2 versions), fact, event, query, answer, tier,
    access and erasure records, through real JSON."""
    clock = ManualClock(1_600_000_000_000_000)  # long before the importing server's clock
    with _open(tmp_path_factory.mktemp("src"), clock) as db:
        mem = db.namespace("src")
        m = mem.write("u", {"content": "parcel in Hamburg", "embedding": [1.0, 0.0, 0.0]})
        clock.advance(1)
        mem.update(m.id, {"content": "parcel in Munich"})
        mem.set("u", "order", {"id": 1})
        mem.append("u", {"content": "called", "data": {"n": 1}})
        mem.write("gone", "to erase")
        mem.forget(entity="gone", purge=True)
        res = mem.query("parcel", embedding=[1.0, 0.0, 0.0])
        mem.record_answer("a1", [res.query_id], cited=[m.id])
        mem.configure(max_hot=1)
        mem.maintain()
        return [json.loads(json.dumps(r)) for r in mem.export()]


def _first(records: list[dict[str, Any]], kind: str) -> int:
    return next(i for i, r in enumerate(records) if r["kind"] == kind)


def test_an_export_imports(tmp_path: Path, export: list[dict[str, Any]]) -> None:
    with _open(tmp_path / "d", ManualClock()) as db:
        assert db.namespace("n").import_records(export) == sum(
            1 for r in export if r["kind"] == "memory"
        )


FUTURE = [4_611_686_018_427_387_000, 253_402_300_000_000_000, 1_700_000_000_000_001]


@pytest.mark.parametrize("future_us", FUTURE, ids=["year 148108", "year 9999", "1 us ahead"])
@pytest.mark.parametrize("kind", ["memory", "fact", "event", "query", "namespace"])
def test_an_import_never_moves_the_commit_clock(
    tmp_path: Path, export: list[dict[str, Any]], kind: str, future_us: int
) -> None:
    clock = ManualClock()  # 1_700_000_000_000_000
    records = copy.deepcopy(export)
    i = _first(records, kind)
    name = "created_us" if kind == "namespace" else "recorded_us"
    records[i][name] = future_us
    path = tmp_path / "d"
    with _open(path, clock) as db:
        db.namespace("other").set("u", "k", 1)
        with pytest.raises(ValidationError) as err:
            db.namespace("n").import_records(records)
        assert err.value.field == f"records[{i}].{name}"
        assert "later than this server's clock" in err.value.message
        assert db.namespace("n").stats().memory_versions == 0
        assert db.last_commit_us == clock.now_us()
        clock.advance(1)
        fact = db.namespace("other").set("u", "k", 2, if_version=1)
        assert fact.recorded_at == to_datetime(clock.now_us())
    with _open(path, clock) as db:  # and after a restart
        assert db.last_commit_us == clock.now_us()
        assert db.namespaces() == ["other"]


BAD: list[tuple[str, Any, str | None]] = [
    # (kind.field of the first record of that kind, a bad value, the field the error names)
    ("memory.salience", "x", "salience"),
    ("memory.salience", 1.5, "salience"),
    ("memory.content", ["a list"], "content"),
    ("memory.content", 5, "content"),
    ("memory.content", "", "content"),
    ("memory.metadata", [1], "metadata"),
    (
        "memory.metadata",
        {"deep": {"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}},
        "metadata.deep.a" + "[0]" * 31,
    ),
    ("memory.embedding", [1.0, 0.0], "embedding"),
    ("memory.embedding", ["x", 0.0, 0.0], "embedding[0]"),
    ("memory.id", "", "id"),
    ("memory.id", ["x"], "id"),
    ("memory.version", 0, "version"),
    ("memory.version", "1", "version"),
    ("memory.type", "Not A Type", "type"),
    ("memory.pinned", "yes", "pinned"),
    ("memory.deleted", 1, "deleted"),
    ("memory.entity", {"a": 1}, "entity"),
    ("memory.ts_us", 10**20, "ts_us"),
    ("memory.ttl", -1, "ttl"),
    ("memory.recorded_us", -5, "recorded_us"),
    ("memory.created_us", 1_650_000_000_000_000, "created_us"),
    ("memory.agent", 7, "agent"),
    ("memory.extra", 1, "extra"),
    ("fact.value", float("nan"), "value"),
    ("fact.key", "", "key"),
    ("fact.created_us", 1_650_000_000_000_000, "created_us"),
    ("fact.expires_us", "soon", "expires_us"),
    ("event.data", [1], "data"),
    ("event.seq", -1, "seq"),
    ("event.content", None, "content"),
    ("event.memory_id", 5, "memory_id"),
    ("query.hits", [["m", "v", 1.0]], "hits"),
    ("query.request", [1], "request"),
    ("answer.memories", "x", "memories"),
    ("answer.memories", [["m"]], "memories"),
    ("answer.query_ids", [1], "query_ids"),
    ("tier.tier", "lukewarm", "tier"),
    ("tier.id", "NOT-IMPORTED", "id"),
    ("access.count", -1, "count"),
    ("erasure.counts", [1], "counts"),
    ("namespace.config", [1], "config"),
    ("namespace.config", {"max_hot": "x"}, "config.max_hot"),
    ("namespace.config", {"policy": "drop"}, "config.policy"),
    ("namespace.config", {"no_such": 1}, "config.no_such"),
    ("namespace.dim", 2, None),  # the memory's 3-dimensional vector no longer fits
    ("namespace.dim", "3", "dim"),
]


@pytest.mark.parametrize(
    ("edit", "value", "field"), BAD, ids=[f"{e}={v!r}"[:40] for e, v, _ in BAD]
)
def test_a_bad_record_fails_the_import_and_writes_nothing(
    tmp_path: Path, export: list[dict[str, Any]], edit: str, value: Any, field: str | None
) -> None:
    kind, name = edit.split(".")
    records = copy.deepcopy(export)
    i = _first(records, kind)
    records[i][name] = value
    path, clock = tmp_path / "d", ManualClock()
    with _open(path, clock) as db:
        db.namespace("other").set("u", "k", 1)
        with pytest.raises(ValidationError) as err:
            db.namespace("n").import_records(records)
        if field is None:  # the dimension is checked on the memory record
            i, field = _first(records, "memory"), "embedding"
        assert err.value.field == f"records[{i}].{field}", err.value.message
        assert db.namespace("n").stats().memory_versions == 0
    with _open(path, clock) as db:  # the directory opens, every namespace intact
        assert db.namespaces() == ["other"]
        assert db.namespace("other").get("u", "k").value == 1
        assert db.namespace("n").import_records(export) > 0  # and the good export goes in


@pytest.mark.parametrize(
    ("records", "field"),
    [
        (["not an object", {"kind": "namespace"}], "records[0]"),
        ([[{"kind": "namespace"}]], "records[0]"),
        ("a string", "records"),
    ],
)
def test_records_that_are_not_objects(tmp_path: Path, records: Any, field: str) -> None:
    with _open(tmp_path / "d", ManualClock()) as db:
        with pytest.raises(ValidationError) as err:
            db.namespace("n").import_records(records)
        assert err.value.field == field


def test_chains_must_increase(tmp_path: Path, export: list[dict[str, Any]]) -> None:
    with _open(tmp_path / "d", ManualClock()) as db:
        mem = db.namespace("n")
        records = copy.deepcopy(export)
        first = _first(records, "memory")
        second = next(
            i
            for i in range(first + 1, len(records))
            if records[i].get("id") == records[first]["id"]
        )
        records[second]["version"] = records[first]["version"]
        with pytest.raises(ValidationError) as err:
            mem.import_records(records)
        assert err.value.field == f"records[{second}].version"
        records = copy.deepcopy(export)
        records[second]["entity"] = "someone else"
        with pytest.raises(ValidationError) as err:
            mem.import_records(records)
        assert err.value.field == f"records[{second}].entity"
        records = copy.deepcopy(export)
        records.append(copy.deepcopy(records[_first(records, "query")]))
        with pytest.raises(ValidationError) as err:
            mem.import_records(records)
        assert err.value.field == f"records[{len(records) - 1}].id"
        assert mem.stats().memory_versions == 0


def test_erased_records_stay_erased(tmp_path: Path, export: list[dict[str, Any]]) -> None:
    """An erased version's content is stored blank whatever the record carries."""
    records = copy.deepcopy(export)
    i = next(i for i, r in enumerate(records) if r["kind"] == "memory" and r["erased"])
    records[i]["content"] = "smuggled text"
    records[i]["metadata"] = {"smuggled": True}
    with _open(tmp_path / "d", ManualClock()) as db:
        mem = db.namespace("n")
        mem.import_records(records)
        [version] = mem.history(records[i]["id"])
        assert version.erased and version.content == "" and version.metadata == {}
