"""NUL characters: PostgreSQL's text cannot hold them, so no backend takes them. Every text
field refuses them with a ValidationError naming the field (embedded and over HTTP, on SQLite
and PostgreSQL) and writes nothing; a row that would carry one all the same fails its own op,
never the other writes of its group commit."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb import ValidationError
from synapsedb.engine.writer import Op, Tx
from synapsedb.server import create_app

from .conftest import PostgresBackend

NS = "/v1/namespaces/acme"


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[synapsedb.Database]:
    storage = None
    if request.param == "postgres":
        pg = PostgresBackend(request.getfixturevalue("postgres_dsn"))
        storage = f"{pg.dsn}{'&' if '?' in pg.dsn else '?'}schema={pg.schema}"
    opened = synapsedb.open(
        tmp_path / "d", storage=storage, llm=None, durability="os", background_maintenance=False
    )
    yield opened
    opened.close()


def nothing_written(db: synapsedb.Database) -> bool:
    return db.core.storage.count_rows()["memory_versions"] == 0 and db.namespaces() == []


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.write("u", "a\x00b"), "content"),
        (lambda m: m.write("u", {"content": "ok", "agent": "a\x00"}), "agent"),
        (lambda m: m.write("u\x00", "ok"), "entity"),
        (lambda m: m.write_many([("u", "ok"), ("u", "\x00 bad")]), "items[1].content"),
        (lambda m: m.set("u", "k\x00", 1), "key"),
        (lambda m: m.append("u", "event \x00"), "content"),
        (lambda m: m.append("u", {"content": "ok"}, stream="s\x00"), "stream"),
        (lambda m: m.query("find \x00 this"), "text"),
    ],
)
def test_every_text_field_refuses_nul_and_writes_nothing(
    db: synapsedb.Database, call: Any, field: str
) -> None:
    with pytest.raises(ValidationError, match="NUL") as err:
        call(db.namespace("acme"))
    assert err.value.field == field
    assert nothing_written(db)


def test_nul_in_json_values_is_stored_escaped(db: synapsedb.Database) -> None:
    """JSON carries NUL as the escape \\u0000, which every backend stores as it is."""
    mem = db.namespace("acme")
    m = mem.write("u", {"content": "ok", "metadata": {"note": "a\x00b"}})
    mem.set("u", "k", {"v": "x\x00y"})
    assert mem.get(m.id).metadata["note"] == "a\x00b"
    assert mem.get("u", "k").value == {"v": "x\x00y"}


def test_an_answer_text_with_nul_fails_alone(db: synapsedb.Database) -> None:
    mem = db.namespace("acme")
    mem.write("u", "refund requested")
    qid = mem.query("refund").query_id
    with pytest.raises(ValidationError, match="NUL") as err:
        mem.record_answer("a1", [qid], text="answer \x00")
    assert err.value.field == "text"
    assert mem.record_answer("a2", [qid], text="a fine answer").answer_id == "a2"


class _Gate(Op):
    """Holds the writer's leader until released, so that the ops queued meanwhile commit
    together in the next batch."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        super().__init__()
        self.entered, self.release = entered, release

    def plan(self, tx: Tx) -> None:
        self.entered.set()
        assert self.release.wait(10)


class _RawAnswer(Op):
    """Emits an answers row as given (a field no input check looked at)."""

    def __init__(self, answer_id: str, text: str) -> None:
        super().__init__()
        self.answer_id, self.text = answer_id, text

    def plan(self, tx: Tx) -> str:
        tx.batch.answers.append(
            ("acme", self.answer_id, tx.now_us, None, self.text, "[]", "[]", "[]", "[]")
        )
        return self.answer_id


def test_a_row_with_nul_never_fails_the_other_writes_of_its_batch(db: synapsedb.Database) -> None:
    core = db.core
    entered, release = threading.Event(), threading.Event()
    gate = threading.Thread(target=core.submit, args=(_Gate(entered, release),))
    gate.start()
    assert entered.wait(10)
    outcomes: dict[str, Any] = {}

    def submit(name: str, op: Op) -> None:
        try:
            outcomes[name] = core.submit(op)
        except Exception as exc:
            outcomes[name] = exc

    others = [
        threading.Thread(target=submit, args=("bad", _RawAnswer("bad", "x\x00y"))),
        threading.Thread(target=submit, args=("good", _RawAnswer("good", "fine"))),
    ]
    for t in others:
        t.start()
    while len(core._writer._queue) < 2:  # both queued behind the gate
        threading.Event().wait(0.005)
    release.set()
    for t in [gate, *others]:
        t.join(10)
    assert isinstance(outcomes["bad"], ValidationError) and outcomes["bad"].field == "text"
    assert outcomes["good"] == "good"
    assert core.storage.read_answer("acme", "good") is not None
    assert core.storage.read_answer("acme", "bad") is None


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", f"{NS}/memories", {"entity": "u", "content": "a\x00b"}, "content"),
        ("post", f"{NS}/memories", {"entity": "u\x00", "content": "ok"}, "entity"),
        ("put", f"{NS}/facts", {"entity": "u", "key": "k\x00", "value": 1}, "key"),
        ("post", f"{NS}/events", {"entity": "u", "event": "a\x00"}, "content"),
        ("post", f"{NS}/query", {"text": "a\x00"}, "text"),
    ],
)
def test_over_http_nul_is_a_422_naming_the_field(
    db: synapsedb.Database, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    with TestClient(create_app(db)) as client:
        r = getattr(client, method)(path, json=body)
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "validation" and err["details"]["field"] == field
        assert "NUL" in err["message"]
    assert nothing_written(db)
