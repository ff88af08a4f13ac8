from __future__ import annotations

import json
from pathlib import Path

import pytest

import synapsedb
from synapsedb import ManualClock, ValidationError


def open_db(path: Path, clock: ManualClock) -> synapsedb.Database:
    return synapsedb.open(path, clock=clock, durability="os", background_maintenance=False)


def test_a_namespace_moves_losslessly(tmp_path: Path) -> None:
    clock = ManualClock()
    src = open_db(tmp_path / "src", clock)
    mem = src.namespace("acme", agent="intake")
    m = mem.write("user:1", {"content": "parcel in Hamburg", "metadata": {"tags": ["x"]}})
    t1 = clock.now_us() / 1e6
    clock.advance(5)
    mem.update(m.id, {"content": "parcel in Munich"}, agent="resolution")
    gone = mem.write("user:1", "to be deleted")
    mem.delete(gone.id)
    mem.set("user:1", "order", {"id": 1458})
    mem.append("user:1", {"content": "called about the parcel", "data": {"n": 1}})
    for i in range(4):
        mem.write("user:2", {"content": f"old note {i}", "salience": 0.0})
    mem.write("user:3", "secret to erase")
    mem.forget(entity="user:3", purge=True)
    res = mem.query("parcel", agent="knowledge")
    mem.record_answer("a1", [res.query_id], cited=[m.id])
    mem.configure(max_hot=3)
    mem.maintain()
    records = [json.loads(json.dumps(r)) for r in mem.export()]  # through real JSON
    assert records[0]["kind"] == "namespace"
    src_view = (mem.history(m.id), mem.get(m.id, as_of=t1), mem.history("user:1", "order"),
                mem.events("user:1"), mem.lineage("a1"), mem.stats(), mem.config,
                sorted(src._state("acme").cold))  # type: ignore[union-attr]  # fmt: skip
    src.close()

    dst = open_db(tmp_path / "dst", clock)
    new = dst.namespace("acme")
    assert new.import_records(records) == sum(1 for r in records if r["kind"] == "memory")
    dst_view = (new.history(m.id), new.get(m.id, as_of=t1), new.history("user:1", "order"),
                new.events("user:1"), new.lineage("a1"), new.stats(), new.config,
                sorted(dst._state("acme").cold))  # type: ignore[union-attr]  # fmt: skip
    assert dst_view == src_view
    assert {e.action for e in new.audit()} >= {"write", "update", "delete", "query", "answer",
                                                "erase", "demote"}  # fmt: skip
    assert new.history(gone.id)[-1].deleted
    later = new.write("user:1", "written after the move")  # system time continues forward
    assert later.recorded_at >= new.history(m.id)[-1].recorded_at
    with pytest.raises(ValidationError) as err:  # only into an empty namespace
        new.import_records(records)
    assert err.value.field == "namespace"
    dst.close()


def test_bad_import_streams(tmp_path: Path) -> None:
    with open_db(tmp_path / "d", ManualClock()) as db:
        mem = db.namespace("n")
        for records, field in [
            ([{"kind": "memory"}], "records[0].id"),
            ([{"no": "kind"}], "records[0]"),
            ([{"kind": "planet"}], "records[0].kind"),
            ([], "records"),
            ([{"kind": "namespace", "format": 99, "created_us": 1}], "records[0].format"),
        ]:
            with pytest.raises(ValidationError) as err:
                mem.import_records(records)
            assert err.value.field == field
        assert mem.stats().memory_versions == 0
