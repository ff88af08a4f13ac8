"""Long memories (issue 13): content up to ``max_content_bytes`` (1 MiB by default) is accepted
whole, keyword-indexed to its last word, and round-trips embedded, over HTTP (a real server), through
export/import and across a SIGKILL and reopen. Over the limit, the error names the field and the
limit and nothing is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.live_server import serve

import synapsedb
from synapsedb import Database, Settings, ValidationError
from synapsedb.config import MAX_CONTENT_BYTES
from synapsedb.server import create_app

MIB = 1 << 20
HEAD, TAIL = "Quokka", "zanzibarite"  # words that occur once: at the start, at the very end


def long_text(size: int, filler: str = "the committee réviewed the budget again; ") -> str:
    """Exactly ``size`` UTF-8 bytes: HEAD first, TAIL last, multi-byte filler between."""
    head, tail = f"{HEAD} report. ", f" final word {TAIL}"
    body_bytes = size - len(head.encode()) - len(tail.encode())
    reps = body_bytes // len(filler.encode()) + 1
    body = (filler * reps).encode()[:body_bytes].decode("utf-8", "ignore")
    body += "x" * (body_bytes - len(body.encode()))  # a cut multi-byte character, made up
    text = head + body + tail
    assert len(text.encode()) == size
    return text


def escaped_text(size: int) -> str:
    """Control characters: 6 bytes each once JSON-escaped (the worst case for a request body)."""
    return long_text(size, filler="\x01\x02\x1f\x0b")


@pytest.fixture(scope="module")
def prose() -> str:
    return long_text(MIB)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with synapsedb.open(
        tmp_path / "db", durability="os", llm=None, background_maintenance=False
    ) as database:
        yield database


def check_round_trip(mem: Any, prose: str) -> None:
    """Write a 1 MiB memory and a 1 MiB worst-case one through ``mem`` (a namespace, embedded
    or remote); read them back whole; find each by its last word and its first."""
    escaped = escaped_text(MIB)
    a = mem.write("doc:1", prose)
    b, short = mem.write_many([("doc:2", escaped), ("doc:3", "a short note about lemurs")])
    assert mem.get(a.id).content == prose
    assert mem.get(b.id).content == escaped
    tail_hits = mem.query(TAIL, k=3, mode="keyword")
    assert {h.id for h in tail_hits} == {a.id, b.id}  # indexed to the last word
    head_hits = mem.query(f"{HEAD} report", k=3)
    assert head_hits[0].id in (a.id, b.id)
    # an update keeps all of it searchable too
    mem.update(short.id, {"content": prose.replace(TAIL, "ultimatequx")})
    assert [h.id for h in mem.query("ultimatequx", k=3, mode="keyword")] == [short.id]


def check_refused(mem: Any, limit: int) -> None:
    before = mem.stats().memory_versions
    over = long_text(limit + 1)
    with pytest.raises(ValidationError) as err:
        mem.write("doc:x", over)
    assert (err.value.field, err.value.details["limit"]) == ("content", limit)
    assert f"{limit + 1} bytes, over the limit of {limit}" in err.value.message
    with pytest.raises(ValidationError) as err:
        mem.write_many([("doc:y", "fine"), ("doc:x", over)])
    assert (err.value.field, err.value.details["limit"]) == ("items[1].content", limit)
    with pytest.raises(ValidationError) as err:
        mem.append("doc:x", over)
    assert (err.value.field, err.value.details["limit"]) == ("content", limit)
    assert mem.stats().memory_versions == before


def test_a_1_mib_memory_round_trips_embedded(db: Database, prose: str) -> None:
    mem = db.namespace("long")
    check_round_trip(mem, prose)
    check_refused(mem, MIB)


def test_a_1_mib_memory_round_trips_over_http(db: Database, prose: str) -> None:
    with serve(create_app(db)) as url, synapsedb.connect(url) as remote:
        mem = remote.namespace("long")
        check_round_trip(mem, prose)
        check_refused(mem, MIB)


def test_long_duplicates_collapse_by_their_normalized_text(db: Database, prose: str) -> None:
    """Dedup's "same text" holds for long memories too (compared by a digest of the
    normalized text, kept per version): case and spacing apart, one hit lists the other."""
    mem = db.namespace("dups")
    half = prose[len(prose) // 2 :]  # half a MiB, ending with TAIL; spaced out it still fits
    a = mem.write("doc:1", half)
    b = mem.write("doc:2", "  " + half.upper().replace(" ", "  "))
    c = mem.write("doc:3", half.replace(TAIL, "differentending"))
    for _ in range(2):  # the second query reads the kept keys
        hits = mem.query(TAIL, k=5, mode="keyword")
        assert len(hits) == 1 and {hits[0].id, *hits[0].duplicates} == {a.id, b.id}
        ids = {h.id for h in mem.query("differentending", k=5, mode="keyword")}
        assert ids == {c.id}


def test_the_limit_is_a_setting(tmp_path: Path) -> None:
    with synapsedb.open(
        tmp_path / "db", durability="os", llm=None, embedder=None, max_content_bytes=3 * MIB
    ) as db:
        mem = db.namespace("big")
        text = long_text(3 * MIB)
        m = mem.write("doc", text)
        assert mem.get(m.id).content == text
        check_refused(mem, 3 * MIB)
    assert Settings.from_env({"SYNAPSEDB_MAX_CONTENT_BYTES": "4096"}).max_content_bytes == 4096
    with pytest.raises(ValidationError) as err:
        Settings(max_content_bytes=MAX_CONTENT_BYTES + 1)
    assert (err.value.field, err.value.details["limit"]) == ("max_content_bytes", MAX_CONTENT_BYTES)


def test_export_and_import_carry_long_memories(tmp_path: Path, db: Database, prose: str) -> None:
    mem = db.namespace("long")
    a = mem.write("doc:1", prose)
    b = mem.write("doc:2", escaped_text(MIB))
    lines = [json.dumps(r) for r in mem.export()]  # one JSON object per line, as the CLI writes
    assert max(len(line) for line in lines) > 5.9 * MIB  # the escaped one, in JSON
    records = [json.loads(line) for line in lines]
    other = synapsedb.open(
        tmp_path / "copy", durability="os", llm=None, background_maintenance=False
    )
    with other, serve(create_app(other)) as url, synapsedb.connect(url) as remote:
        copy = remote.namespace("long")
        copy.import_records(records)
        assert copy.get(a.id).content == prose
        assert copy.get(b.id).content == mem.get(b.id).content
        assert {h.id for h in copy.query(TAIL, k=3, mode="keyword")} == {a.id, b.id}
        assert copy.stats().memories == 2


CHILD = textwrap.dedent(
    """
    import sys, time
    import synapsedb
    db = synapsedb.open(sys.argv[1], durability="fsync", llm=None, background_maintenance=False)
    text = open(sys.argv[2], encoding="utf-8").read()
    m = db.namespace("long").write("doc:1", text)
    print(m.id, flush=True)  # acknowledged: the write returned
    time.sleep(600)  # killed here, the database never closed
    """
)


def test_a_long_memory_survives_a_kill_and_reopen(tmp_path: Path, prose: str) -> None:
    source = tmp_path / "prose.txt"
    source.write_text(prose, encoding="utf-8")
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "db"), str(source)],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            mid = proc.stdout.readline().strip()
            assert mid, "the child wrote nothing"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    with synapsedb.open(
        tmp_path / "db", durability="os", llm=None, background_maintenance=False
    ) as db:
        mem = db.namespace("long")
        assert mem.get(mid).content == prose
        assert [h.id for h in mem.query(TAIL, k=3, mode="keyword")] == [mid]  # index rebuilt
        assert [h.id for h in mem.query(f"{HEAD} report", k=3, mode="vector")] == [mid]
