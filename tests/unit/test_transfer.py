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
    src_view = (
        mem.history(m.id),
        mem.get(m.id, as_of=t1),
        mem.history("user:1", "order"),
        mem.events("user:1"),
        mem.lineage("a1"),
        mem.stats(),
        mem.config,
        sorted(src._state("acme").cold),
    )  # type: ignore[union-attr]
    src.close()

    dst = open_db(tmp_path / "dst", clock)
    new = dst.namespace("acme")
    assert new.import_records(records) == sum(1 for r in records if r["kind"] == "memory")
    dst_view = (
        new.history(m.id),
        new.get(m.id, as_of=t1),
        new.history("user:1", "order"),
        new.events("user:1"),
        new.lineage("a1"),
        new.stats(),
        new.config,
        sorted(dst._state("acme").cold),
    )  # type: ignore[union-attr]
    assert dst_view == src_view
    assert {e.action for e in new.audit()} >= {
        "write",
        "update",
        "delete",
        "query",
        "answer",
        "erase",
        "demote",
    }
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


def test_erased_events_and_answers_stay_erased_through_export(tmp_path: Path) -> None:
    """A purge's skeletons keep their flags on the way through export and import: an erased
    stream event does not come back as a visible empty event, an erased answer stays erased."""
    clock = ManualClock()
    src = open_db(tmp_path / "src", clock)
    mem = src.namespace("acme")
    mem.append("user:9", "user:9 asked about a refund", stream="shared")
    mem.append("user:1", "user:1 said hello", stream="shared")
    m = mem.write("user:9", "user:9 lives in Hamburg")
    res = mem.query("Hamburg", entity="user:9")
    mem.record_answer("a9", [res.query_id], cited=[m.id], text="They live in Hamburg")
    mem.forget(entity="user:9", purge=True)
    before = (mem.events("shared"), mem.lineage("a9"))
    assert [e.content for e in before[0]] == ["user:1 said hello"]
    assert before[1].erased and before[1].text is None
    records = [json.loads(json.dumps(r)) for r in mem.export()]
    assert [r["erased"] for r in records if r["kind"] == "answer"] == [True]
    src.close()

    with open_db(tmp_path / "dst", clock) as dst:
        new = dst.namespace("acme")
        new.import_records(records)
        assert (new.events("shared"), new.lineage("a9")) == before
    with open_db(tmp_path / "dst", clock) as dst:  # and after a restart, from what was stored
        assert dst.namespace("acme").events("shared") == before[0]


def test_answer_records_from_before_the_erased_flag_still_import(tmp_path: Path) -> None:
    clock = ManualClock()
    with open_db(tmp_path / "src", clock) as src:
        mem = src.namespace("acme")
        mem.write("user:1", "something to ask about")
        res = mem.query("anything")
        mem.record_answer("a1", [res.query_id], text="an answer")
        records = list(mem.export())
    for r in records:
        r.pop("erased", None) if r["kind"] == "answer" else None
    with open_db(tmp_path / "dst", clock) as dst:
        new = dst.namespace("acme")
        new.import_records(records)
        assert new.lineage("a1").text == "an answer" and not new.lineage("a1").erased
    bad = [dict(r, erased="yes") if r["kind"] == "answer" else r for r in records]
    with open_db(tmp_path / "dst2", clock) as dst, pytest.raises(ValidationError) as err:
        dst.namespace("acme").import_records(bad)
    assert err.value.field is not None and err.value.field.endswith(".erased")
