"""Export from SQLite, import into PostgreSQL, export again, import back into SQLite: every
record comes back the same (every version, tombstone, erased skeleton, fact, event, logged
query, answer, tier move, access count), and lineage, audit, history and as_of answer alike.
One leg goes through the CLI and a real ``synapsedb serve --storage postgresql://...``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import synapsedb
from synapsedb import ManualClock

from .conftest import PostgresBackend
from .test_processes_on_postgres import _serve


def url_of(dsn: str) -> str:
    pg = PostgresBackend(dsn)
    return f"{pg.dsn}{'&' if '?' in pg.dsn else '?'}schema={pg.schema}"


def open_(path: Path, clock: ManualClock, storage: str | None = None) -> synapsedb.Database:
    return synapsedb.open(
        path, storage=storage, clock=clock, llm=None, embedder=None, background_maintenance=False
    )


def populate(mem: Any, clock: ManualClock) -> dict[str, Any]:
    """A namespace with a bit of everything; returns what to ask of it afterwards."""
    m1 = mem.write(
        "user:1",
        {
            "content": "Refund requested",
            "embedding": [1.0, 0.0],
            "metadata": {"order": 1458},
            "salience": 0.9,
        },
    )
    clock.advance(10)
    t_before = clock.now_us() / 1e6
    mem.update(m1.id, {"content": "Refund approved"})
    m2 = mem.write("user:1", {"content": "Temporary note", "embedding": [0.0, 1.0], "ttl": 3600})
    mem.delete(m2.id)
    mem.set("user:1", "plan", "silver")
    clock.advance(5)
    mem.set("user:1", "plan", "gold")
    mem.append("user:1", {"content": "Called about refund", "data": {"minutes": 4}})
    for i in range(4):
        mem.write("user:2", {"content": f"old note {i}", "embedding": [0.5, 0.5], "salience": 0.1})
    mem.write("user:3", {"content": "Card 4111 on file", "embedding": [0.3, 0.7]})
    mem.set("user:3", "card", "4111")
    res = mem.query("refund", agent="knowledge")
    mem.record_answer("ans-1", [res.query_id], agent="resolution", text="Approved", cited=[m1.id])
    clock.advance(5)
    mem.forget(entity="user:3", purge=True, agent="dpo")
    mem.configure(max_hot=4)
    mem.maintain()  # demotes the low-salience notes to cold: tier moves
    clock.advance(5)
    return {"m1": m1.id, "before": t_before}


def exported(mem: Any) -> list[dict[str, Any]]:
    return list(mem.export())


def answers(mem: Any, marks: dict[str, Any]) -> Any:
    lineage = mem.lineage("ans-1")
    return (
        [(q.query_id, q.agent, [(h.id, h.version) for h in q.hits]) for q in lineage.queries],
        [(e.action, e.entity, e.agent) for e in mem.audit()],
        [v.content for v in mem.history(marks["m1"])],
        [m.content for m in mem.memories("user:1", as_of=marks["before"])],
        mem.get("user:1", "plan").value,
        [e.content for e in mem.events("user:1")],
    )


def test_sqlite_to_postgres_and_back_is_lossless(postgres_dsn: str, tmp_path: Path) -> None:
    clock = ManualClock()
    with open_(tmp_path / "sqlite-1", clock) as db:
        mem = db.namespace("acme")
        marks = populate(mem, clock)
        records, expected = exported(mem), answers(mem, marks)
    assert any(r.get("erased") for r in records)  # the purge left skeletons
    assert {r["kind"] for r in records} >= {
        "namespace",
        "memory",
        "fact",
        "event",
        "query",
        "answer",
        "tier",
        "access",
    }
    with open_(tmp_path / "pg", clock, url_of(postgres_dsn)) as db:
        mem = db.namespace("acme")
        assert mem.import_records(records) == sum(r["kind"] == "memory" for r in records)
        assert exported(mem) == records
        assert answers(mem, marks) == expected
        again = exported(mem)
    with open_(tmp_path / "sqlite-2", clock) as db:
        mem = db.namespace("acme")
        mem.import_records(again)
        assert exported(mem) == records
        assert answers(mem, marks) == expected


def test_the_cli_moves_a_namespace_from_sqlite_into_a_postgres_server(
    postgres_dsn: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    with open_(tmp_path / "sqlite", clock) as db:
        populate(db.namespace("acme"), clock)
        records = exported(db.namespace("acme"))
    out = tmp_path / "acme.jsonl"
    cli = [sys.executable, "-m", "synapsedb"]
    env = {**os.environ, "SYNAPSEDB_EMBEDDER": "none"}
    subprocess.run(
        [*cli, "export", "--data", str(tmp_path / "sqlite"), "-n", "acme", "--out", str(out)],
        check=True,
        env=env,
        capture_output=True,
    )
    url = url_of(postgres_dsn)
    base, proc = _serve(url, tmp_path / "served")
    try:
        subprocess.run(
            [*cli, "import", str(out), "-n", "acme", "--url", base],
            check=True,
            env=env,
            capture_output=True,
        )
    finally:
        proc.terminate()
        proc.wait(20)
    with open_(tmp_path / "check", clock, url) as db:
        assert exported(db.namespace("acme")) == records
    lines = out.read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == [r["kind"] for r in records]
