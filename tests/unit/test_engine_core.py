"""The engine seam: Database builds one EngineCore; namespace handles, lineage, the writer and
the loader reach the engine through it, and no engine module below the database imports the
database or the namespace handle (issue 16, "First, the seam")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import synapsedb
from synapsedb import Database, ManualClock
from synapsedb.engine.core import EngineCore
from synapsedb.engine.ops import SetFact
from synapsedb.errors import ClosedError, NotFoundError
from synapsedb.query.executor import Fusion

ENGINE = Path(synapsedb.__file__).parent / "engine"
# the handle and the database sit on top; retrieval.py still takes the Database (to move)
ABOVE_THE_CORE = {"database", "namespace"}
NOT_YET_ON_THE_CORE = {"retrieval"}


def _engine_imports(path: Path) -> set[str]:
    """Engine modules ``path`` imports, at run time or under TYPE_CHECKING, anywhere in it."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_no_engine_module_below_the_handle_imports_the_database_or_the_handle() -> None:
    below = [
        p
        for p in ENGINE.glob("*.py")
        if p.stem not in ABOVE_THE_CORE | NOT_YET_ON_THE_CORE | {"__init__"}
    ]
    assert {p.stem for p in below} >= {"core", "handle", "reads", "writes", "lineage", "writer"}
    offenders = {p.stem: _engine_imports(p) & ABOVE_THE_CORE for p in below}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_nothing_the_core_imports_imports_the_core_back() -> None:
    reached: set[str] = set()
    todo = sorted(_engine_imports(ENGINE / "core.py"))
    while todo:
        mod = todo.pop()
        if mod not in reached and (ENGINE / f"{mod}.py").exists():
            reached.add(mod)
            todo.extend(_engine_imports(ENGINE / f"{mod}.py"))
    assert {"writer", "indexer", "loader", "lineage"} <= reached
    assert "core" not in reached
    assert not reached & (ABOVE_THE_CORE | {"handle", "reads", "writes", "retrieval"})


def test_every_namespace_handle_works_through_the_one_core(db: Database) -> None:
    assert isinstance(db.core, EngineCore)
    mem = db.namespace("acme")
    assert db.core.state("acme") is None  # nothing written yet
    mem.set("user:1", "plan", "pro")
    state = db.core.state("acme")
    assert state is not None and state.fact_at("user:1", "plan", db.core.now_us()) is not None
    # an op submitted to the core is what the handle reads back
    db.core.submit(SetFact("acme", "user:1", "plan", '"team"', None, None, "ops"))
    fact = db.namespace("acme").get("user:1", "plan")
    assert (fact.value, fact.version, fact.agent) == ("team", 2, "ops")
    assert db.core.now_us() >= db.last_commit_us == db.core.last_commit_us


def test_the_core_reads_the_database_clock_and_never_goes_before_a_commit(
    db: Database, clock: ManualClock
) -> None:
    mem = db.namespace("acme")
    mem.set("user:1", "plan", "pro")
    committed = db.last_commit_us
    clock.advance(-3600)  # a clock stepping back: reads stay at or after the last commit
    assert db.core.now_us() >= committed
    clock.advance(7200)
    assert db.core.now_us() > committed


def test_the_database_public_parts_are_the_cores(db: Database) -> None:
    core = db.core
    assert (db.settings, db.clock, db.embedding) == (core.settings, core.clock, core.embedding)
    assert (db.observers, db.rates, db.query_log) == (core.observers, core.rates, core.query_log)
    assert db.subject_of("user:1") == core.subject_of("user:1") != core.subject_of("user:2")
    assert db.erasure_pending is core.erasure_pending is False


def test_replacing_fusion_or_the_memory_loop_on_the_database_reaches_the_core(
    db: Database,
) -> None:
    fusion = Fusion()
    db.fusion = fusion
    assert db.core.fusion is fusion and db.fusion is fusion
    loop = db.memory_loop
    assert loop is not None and db.core.memory_loop is loop  # attached by synapsedb.open
    db.memory_loop = None
    try:
        assert db.core.memory_loop is None
        with pytest.raises(synapsedb.ValidationError, match="no memory loop"):
            db.namespace("acme").recall("what plan?")
    finally:
        db.memory_loop = loop  # closed with the database


def test_a_closed_database_closes_its_core_once(tmp_path: Path) -> None:
    db = synapsedb.open(tmp_path / "data", durability="os", background_maintenance=False)
    mem = db.namespace("acme")
    mem.set("user:1", "plan", "pro")
    db.close()
    assert db.closed and db.core.closed
    with pytest.raises(ClosedError):
        db.core.state("acme")
    with pytest.raises(ClosedError):
        db.core.submit(SetFact("acme", "user:1", "plan", '"x"', None, None, None))
    with pytest.raises(ClosedError):
        mem.get("user:1", "plan")
    db.close()  # idempotent: the directory lock is released once
    again = synapsedb.open(tmp_path / "data", durability="os", background_maintenance=False)
    try:
        assert again.namespace("acme").get("user:1", "plan").value == "pro"
        with pytest.raises(NotFoundError):
            again.namespace("acme").get("user:2", "plan")
    finally:
        again.close()
