"""Opening a data directory never crashes on one bad row (issue 10, items 2 and 3).

Each test damages one stored row of namespace ``bad`` directly in the SQLite file, as an
import before imports were checked (or a hand edit) could, and reopens the directory: ``good``
serves reads and writes, ``bad`` answers StorageError, the log names the table, the namespace,
the row and the repair, and running that repair brings ``bad`` back.
"""

from __future__ import annotations

import logging
import re
import shlex
import sqlite3
from pathlib import Path

import pytest

import synapsedb
from synapsedb import ManualClock, StorageError
from synapsedb.times import to_datetime

YEAR_9999_US = 253_402_300_000_000_000


def _open(path: Path, clock: ManualClock) -> synapsedb.Database:
    return synapsedb.open(
        path, clock=clock, durability="os", background_maintenance=False, embedder=None
    )


def _populate(path: Path, clock: ManualClock) -> None:
    with _open(path, clock) as db:
        for name in ("good", "bad"):
            mem = db.namespace(name)
            mem.write("u", {"content": f"{name} parcel note", "embedding": [1.0, 0.0, 0.5]})
            mem.set("u", "order", 1)
            mem.append("u", "called about the parcel")
            res = mem.query("parcel", embedding=[1.0, 0.0, 0.5])
            mem.record_answer("a1", [res.query_id])
        clock.advance(1)


def _damage(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path / "synapse.db", isolation_level=None)
    before = conn.total_changes
    conn.executescript(f"BEGIN; {sql}; COMMIT;")
    assert conn.total_changes > before, sql
    conn.close()


def _counts(path: Path) -> list[int]:
    conn = sqlite3.connect(path / "synapse.db")
    tables = ("namespaces", "memory_versions", "fact_versions", "events", "answers", "tiers")
    out = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables]
    conn.close()
    return out


def _repair(message: str, path: Path) -> None:
    """Run the statement the log suggests (sqlite3 <file> <statement>)."""
    m = re.search(r"e\.g\. (sqlite3 .*), then restart", message)
    assert m is not None, message
    tool, file, statement = shlex.split(m.group(1))
    assert tool == "sqlite3" and Path(file) == path / "synapse.db"
    _damage(path, statement)


DAMAGE: list[tuple[str, str, str]] = [
    # (what, SQL that damages one row of namespace "bad", table named in the report)
    (
        "config not an object",
        "UPDATE namespaces SET config = '[1]' WHERE name = 'bad'",
        "namespaces",
    ),
    (
        "config value of the wrong type",
        """UPDATE namespaces SET config = '{"max_hot": "x"}' WHERE name = 'bad'""",
        "namespaces",
    ),
    (
        "salience not a number",
        "UPDATE memory_versions SET salience = 'x' WHERE ns = 'bad' AND type = 'fact'",
        "memory_versions",
    ),
    (
        "metadata not an object",
        "UPDATE memory_versions SET metadata = '[1]' WHERE ns = 'bad' AND type = 'fact'",
        "memory_versions",
    ),
    (
        "vector of another dimension",
        "UPDATE memory_versions SET embedding = x'0000803f' WHERE ns = 'bad' AND type = 'fact'",
        "memory_versions",
    ),
    (
        "versions going down",
        "UPDATE fact_versions SET version = 7 WHERE ns = 'bad'; INSERT INTO fact_versions "
        "SELECT ns, entity, key, 3, sys_us, created_us, value, agent, ttl, expires_us, deleted, "
        "erased FROM fact_versions WHERE ns = 'bad'",
        "fact_versions",
    ),
    (
        "time beyond year 9999",
        "UPDATE fact_versions SET sys_us = 4611686018427387000 WHERE ns = 'bad'",
        "fact_versions",
    ),
    (
        "time in the year 9999",
        f"UPDATE fact_versions SET sys_us = {YEAR_9999_US} WHERE ns = 'bad'",
        "fact_versions",
    ),
    (
        "fact value not JSON",
        "UPDATE fact_versions SET value = 'nope' WHERE ns = 'bad'",
        "fact_versions",
    ),
    ("event id not an integer", "UPDATE events SET seq = 'x' WHERE ns = 'bad'", "events"),
    (
        "answer memories malformed",
        """UPDATE answers SET memories = '[["m"]]' WHERE ns = 'bad'""",
        "answers",
    ),
    (
        "unknown tier",
        "INSERT INTO tiers SELECT ns, id, sys_us, 'lukewarm', NULL, 'x' "
        "FROM memory_versions WHERE ns = 'bad' AND type = 'fact'",
        "tiers",
    ),
]


@pytest.mark.parametrize(("what", "sql", "table"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_one_bad_row_takes_down_only_its_namespace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, what: str, sql: str, table: str
) -> None:
    path, clock = tmp_path / "d", ManualClock()
    _populate(path, clock)
    _damage(path, sql)
    with caplog.at_level(logging.ERROR, logger="synapsedb.database"), _open(path, clock) as db:
        # the other namespace serves, and the commit clock is the server's
        good = db.namespace("good")
        assert good.get("u", "order").value == 1
        assert [h.content for h in good.query("parcel", k=1).hits] == ["good parcel note"]
        fact = good.set("u", "order", 2, if_version=1)
        assert fact.recorded_at == to_datetime(clock.now_us())
        assert db.last_commit_us == clock.now_us()
        # the damaged one answers StorageError, for reads and for every kind of write
        bad = db.namespace("bad")
        counts = _counts(path)
        for call in (
            lambda: bad.get("u", "order"),
            lambda: bad.query("parcel"),
            lambda: bad.write("u", "more"),
            lambda: bad.set("u", "order", 3),
            lambda: bad.delete("u", "order"),
            lambda: bad.import_records([{"kind": "namespace", "format": 1, "created_us": 1}]),
        ):
            with pytest.raises(StorageError) as err:
                call()
            assert "'bad' is unavailable" in err.value.message and table in err.value.message
        assert _counts(path) == counts  # nothing written to it
        [report] = [r.getMessage() for r in caplog.records if "'bad'" in r.getMessage()]
        assert f"table {table}" in report and "Repair:" in report
        assert list(db.unavailable_namespaces()) == ["bad"]  # what /readyz tells an operator
        assert "Repair:" in db.unavailable_namespaces()["bad"]
        assert "bad" not in db.tier_counts() and "good" in db.tier_counts()
    _repair(report, path)
    with _open(path, clock) as db:  # repaired: it serves again
        db.namespace("bad").set("u", "fresh", True)
        assert db.namespace("bad").get("u", "fresh").value is True


def test_a_stored_future_time_does_not_move_the_commit_clock(tmp_path: Path) -> None:
    """Year 9999 in one namespace used to become every namespace's commit time at restart,
    hiding their later writes from as_of reads."""
    path, clock = tmp_path / "d", ManualClock()
    _populate(path, clock)
    _damage(path, f"UPDATE memory_versions SET sys_us = {YEAR_9999_US} WHERE ns = 'bad'")
    with _open(path, clock) as db:
        good = db.namespace("good")
        before = clock.now_us() / 1e6
        clock.advance(10)
        good.set("u", "late", "yes")
        assert good.get("u", "late", as_of=clock.now_us() / 1e6).value == "yes"
        assert [f.key for f in good.facts("u", as_of=before)] == ["order"]


def test_a_namespace_row_missing_makes_only_that_namespace_unavailable(tmp_path: Path) -> None:
    path, clock = tmp_path / "d", ManualClock()
    _populate(path, clock)
    _damage(path, "DELETE FROM namespaces WHERE name = 'bad'")
    with _open(path, clock) as db:
        assert db.namespaces() == ["good"]
        with pytest.raises(StorageError):
            db.namespace("bad").set("u", "order", 5)  # would collide with the stored chain
        assert db.namespace("good").get("u", "order").value == 1


def test_a_clock_stepping_back_does_not_make_a_namespace_unavailable(tmp_path: Path) -> None:
    """Rebuilding a namespace from storage (here after a demotion) measures "the future" from
    the commit clock, which never goes back, not from a system clock that did."""
    clock = ManualClock()
    with _open(tmp_path / "d", clock) as db:
        mem = db.namespace("n")
        keep = mem.write("u", {"content": "stays hot", "salience": 1.0})
        mem.write("u", {"content": "goes cold", "salience": 0.0})
        clock.advance(-3 * 86_400)
        mem.configure(max_hot=1)
        assert len(mem.maintain().demoted) == 1  # a tier move: the namespace is rebuilt
        assert mem.get(keep.id).content == "stays hot"


def test_the_repair_an_operator_is_shown_names_the_sqlite_file(tmp_path: Path) -> None:
    """``unavailable_namespaces()`` (what /readyz and the operator see) used to name the data
    directory as the SQLite file (``sqlite3 /data/dir '...'``), so its repair did nothing."""
    path, clock = tmp_path / "d", ManualClock()
    _populate(path, clock)
    _damage(path, "UPDATE fact_versions SET value = 'nope' WHERE ns = 'bad'")
    with _open(path, clock) as db:
        shown = db.unavailable_namespaces()["bad"]
    _repair(shown, path)  # checks the file is <dir>/synapse.db, and runs the statement
    with _open(path, clock) as db:
        assert db.unavailable_namespaces() == {}
        db.namespace("bad").set("u", "fresh", True)
