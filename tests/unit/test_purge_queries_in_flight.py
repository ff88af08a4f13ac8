"""A purge also erases the log rows of queries that were still running when it committed
(their rows reach the log buffer after the purge rewrote the stored log)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.unit.test_purge_erasure import found

import synapsedb
from synapsedb import ManualClock
from synapsedb.engine import lineage, retrieval
from synapsedb.engine.lineage import QueryLog
from synapsedb.engine.records import FactRec
from synapsedb.engine.writer import Tx
from synapsedb.storage.base import Purge
from synapsedb.storage.erasure import ERASED_REQUEST

ENTITY = "user:vx5188"
CONTENT = "tamarind-harbor-4471"
SETTINGS: dict[str, Any] = {"background_maintenance": False, "embedder": None}


def _logged(d: Path, qid: str) -> tuple[str | None, str, list[Any]]:
    conn = sqlite3.connect(d / "synapse.db")
    try:
        text, request, hits = conn.execute(
            "SELECT text, request, hits FROM queries WHERE id = ?", (qid,)
        ).fetchone()
    finally:
        conn.close()
    return text, request, orjson.loads(hits)


def test_queries_running_during_a_purge_are_logged_erased(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "d"
    clock = ManualClock()
    with synapsedb.open(d, clock=clock, **SETTINGS) as db:
        mem = db.namespace("acme")
        victim = mem.write(ENTITY, f"lives on {CONTENT} street")
        other = mem.write("user:9", "prefers email over phone")
        results: dict[str, Any] = {}
        real_touch = retrieval.touch
        calls = 0

        def touch(*args: Any, **kwargs: Any) -> None:
            """Between searching and logging: the first query starts a second one, and the
            second one purges the entity, so both log their rows after the purge."""
            nonlocal calls
            calls += 1
            if calls == 1:
                results["other"] = mem.query("who prefers email")
            elif calls == 2:
                clock.advance(1)
                results["purge"] = mem.forget(entity=ENTITY, purge=True)
            real_touch(*args, **kwargs)

        monkeypatch.setattr(retrieval, "touch", touch)
        named = mem.query(f"where does {ENTITY} live")
        monkeypatch.setattr(retrieval, "touch", real_touch)
        assert victim.id in {h.id for h in named}  # it ran on the state before the purge
        assert results["purge"].purged and not results["purge"].pending
        mem.set("user:9", "plan", "gold")  # a commit: the buffered rows are written now
        assert found(d, (ENTITY, CONTENT)) == {}  # in no file: database, -wal, -shm

        clock.advance(1)  # after the purge: the name may be used again, and is logged
        mem.write(ENTITY, "a new customer under the old name")
        later = mem.query(f"what about {ENTITY}")
    text, request, hits = _logged(d, named.query_id)
    assert (text, request) == (None, ERASED_REQUEST)
    assert [h[0] for h in hits] == [victim.id]  # it keeps its hits, as the purge keeps them
    text, _, hits = _logged(d, results["other"].query_id)
    assert text == "who prefers email" and [h[0] for h in hits] == [other.id]  # not about it
    assert _logged(d, later.query_id)[0] == f"what about {ENTITY}"  # started after the purge


def _row(qid: str, text: str, as_of: str, sys_us: int, hits: list[str]) -> tuple[Any, ...]:
    request = orjson.dumps({"as_of": as_of, "entity": None}).decode()
    return ("acme", qid, sys_us, None, text, request, orjson.dumps([[h, 1, 1.0] for h in hits]))


def test_the_query_log_forgets_a_purge_after_a_bounded_time() -> None:
    now = [1000.0]
    log = QueryLog(clock=lambda: now[0])
    visible = 2_000_000_000_000_000  # 2033-05-18T03:33:20Z
    log.remember_purge("acme", ENTITY, frozenset({"m1"}), visible)
    before, at = "2033-05-18T03:33:19Z", "2033-05-18T03:33:20Z"
    log.add(_row("q1", f"about {ENTITY}", before, visible + 5, []))  # started before: erased
    log.add(_row("q2", "card", before, visible + 5, ["m1"]))  # hit an erased memory: erased
    log.add(_row("q3", "card", before, visible + 5, ["m2"]))  # about something else: kept
    log.add(_row("q4", f"about {ENTITY}", "2033-05-18T03:33:21Z", visible + 2_000_000, []))
    log.add(_row("q5", f"in 2099 {ENTITY}", "2099-01-01T00:00:00Z", visible + 5, []))
    rows = {r[1]: r for r in log.drain()}
    assert {q for q, r in rows.items() if r[4] is None} == {"q1", "q2", "q5"}
    assert rows["q1"][5] == ERASED_REQUEST and rows["q3"][4] == "card"
    assert rows["q4"][4] == f"about {ENTITY}"  # started after the purge became visible
    log.add(_row("q6", f"about {ENTITY}", at, visible, []))
    now[0] += lineage.PURGE_MEMORY_S + 1  # long after: the name is no longer kept
    assert log.drain()[0][4] == f"about {ENTITY}"


def test_changes_erased_by_a_purge_in_the_same_batch_are_not_announced() -> None:
    """A write about the entity committed in the purge's own batch is erased by it: the
    change observers (the server's /changes ring) never hear of it, nor of its fact key."""
    tx = Tx({}, 1_000_000)
    keep = FactRec("user:9", "plan", 1, 1_000_000, 1_000_000, '"gold"', None, None, None, False)
    gone = FactRec(ENTITY, "secret_key", 1, 1_000_000, 1_000_000, "1", None, None, None, False)
    tx.add_fact("acme", gone)
    tx.add_fact("acme", keep)
    tx.add_fact("other", gone)  # the same name in another namespace is not purged
    tx.batch.purges.append(Purge("acme", ENTITY, "erased:x"))
    changes = lineage.changes_of(tx)
    assert [(e.entity, e.target) for e in changes["acme"]] == [("user:9", "plan")]
    assert [(e.entity, e.target) for e in changes["other"]] == [(ENTITY, "secret_key")]
