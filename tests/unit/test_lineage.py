from __future__ import annotations

from pathlib import Path

import pytest

import synapsedb
from synapsedb import ManualClock, Namespace, NotFoundError, ValidationError


def refund_story(mem: Namespace) -> tuple[str, str]:
    a = mem.write("user:4321", {"content": "Refund requested for order #1458", "agent": "intake"})
    b = mem.write(
        "user:4321", {"content": "Refund confirmation email sent 10/21", "agent": "intake"}
    )
    return a.id, b.id


def test_lineage_shows_each_version_as_it_was(mem: Namespace, clock: ManualClock) -> None:
    a, b = refund_story(mem)
    res = mem.query("user:4321 refund status", agent="knowledge")
    assert {h.id for h in res} == {a, b}
    clock.advance(5)
    mem.update(a, {"content": "Refund for #1458 cancelled"}, agent="resolution")
    mem.delete(b, agent="resolution")
    lin = mem.record_answer(
        "ans-1", [res.query_id], agent="resolution", text="Refund on its way", cited=[a]
    )
    assert (
        lin.answer_id == "ans-1" and lin.agent == "resolution" and lin.text == "Refund on its way"
    )
    (q,) = lin.queries
    assert q.agent == "knowledge" and q.text == "user:4321 refund status"
    assert q.request["entity"] == "user:4321" and q.request["mode"] == "hybrid"
    seen = {h.id: h for h in q.hits}
    assert seen[a].version == 1 and seen[a].content == "Refund requested for order #1458"
    assert seen[b].content == "Refund confirmation email sent 10/21"  # deleted since
    assert [(c.id, c.version, c.content) for c in lin.cited] == [
        (a, 1, "Refund requested for order #1458")
    ]
    assert mem.lineage("ans-1") == lin
    assert mem._db._state(mem.name).impact[a] == 1  # type: ignore[union-attr]


def test_answers_and_the_query_log_survive_a_restart(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", durability="os") as db:
        mem = db.namespace("n", agent="knowledge")
        a, _ = refund_story(mem)
        res = mem.query("refund")
        mem.record_answer("ans-2", [res.query_id])
        unanswered = mem.query("email")  # only buffered: close() must flush it
    with synapsedb.open(tmp_path / "d", durability="os") as db:
        mem = db.namespace("n")
        lin = mem.lineage("ans-2")
        assert lin.queries[0].query_id == res.query_id and lin.queries[0].agent == "knowledge"
        assert db._state("n").impact[a] == 1  # type: ignore[union-attr]
        assert any(e.target == unanswered.query_id for e in mem.audit(agent="knowledge"))


def test_record_answer_errors(mem: Namespace) -> None:
    refund_story(mem)
    res = mem.query("refund")
    with pytest.raises(NotFoundError) as err:
        mem.record_answer("ans-3", [res.query_id, "no-such-query"])
    assert err.value.details["field"] == "query_ids"
    with pytest.raises(NotFoundError):
        mem.record_answer("ans-3", [res.query_id], cited=["no-such-memory"])
    mem.record_answer("ans-3", [res.query_id])
    with pytest.raises(ValidationError) as verr:
        mem.record_answer("ans-3", [res.query_id])
    assert verr.value.field == "answer_id"
    with pytest.raises(ValidationError):
        mem.record_answer("bad id with spaces", [res.query_id])
    with pytest.raises(NotFoundError):
        mem.lineage("ans-unknown")


def test_audit_lists_writes_reads_and_answers(mem: Namespace, clock: ManualClock) -> None:
    a, _ = refund_story(mem)
    mem.set("user:4321", "order", 1458, agent="intake")
    mem.append("user:4321", "Refund confirmed delivered on 10/28.", agent="resolution")
    mem.write("user:9", "someone else", agent="intake")
    clock.advance(1)
    res = mem.query("user:4321 refund", agent="knowledge")
    mem.record_answer("ans-4", [res.query_id], agent="resolution")
    entries = mem.audit(entity="user:4321")
    actions = [(e.action, e.agent) for e in entries]
    assert ("write", "intake") in actions and ("set", "intake") in actions
    assert ("append", "resolution") in actions and ("query", "knowledge") in actions
    assert ("answer", "resolution") in actions
    assert all(e.entity in ("user:4321", None) for e in entries)
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    assert {e.action for e in mem.audit(agent="knowledge")} == {"query"}
    assert not any(e.target == a for e in mem.audit(entity="user:9"))
    assert len(mem.audit(limit=2)) == 2


def test_snapshot_is_what_was_known_then(mem: Namespace, clock: ManualClock) -> None:
    mem.set("user:4321", "order", {"id": 1458, "status": "requested"})
    mem.write("user:4321", "Refund requested for order #1458")
    mem.append("user:4321", "Customer called about the refund")
    then = clock.now_us() / 1e6
    clock.advance(10)
    mem.set("user:4321", "order", {"id": 1458, "status": "refunded"})
    mem.append("user:4321", "Refund confirmed delivered on 10/28.")
    snap = mem.snapshot("user:4321", as_of=then)
    assert [f.value["status"] for f in snap.facts] == ["requested"]
    assert [e.content for e in snap.events] == ["Customer called about the refund"]
    assert {m.content for m in snap.memories} == {
        "Refund requested for order #1458",
        "Customer called about the refund",
    }
    now = mem.snapshot("user:4321")
    assert [f.value["status"] for f in now.facts] == ["refunded"] and len(now.events) == 2


def test_lineage_holds_after_the_memories_are_demoted(mem: Namespace) -> None:
    ids = [
        mem.write("user:1", {"content": f"fact number {i} about the parcel", "salience": 0.0}).id
        for i in range(6)
    ]
    res = mem.query("parcel", k=6, dedup=False)
    mem.record_answer("ans-cold", [res.query_id], cited=[ids[0]])
    mem.configure(max_hot=1)
    mem.maintain()
    assert mem.stats().cold_memories == 5
    lin = mem.lineage("ans-cold")
    assert {h.id for h in lin.queries[0].hits} == set(ids)
    assert all(not h.erased and h.content and "parcel" in h.content for h in lin.queries[0].hits)
    assert lin.cited[0].content == "fact number 0 about the parcel"
