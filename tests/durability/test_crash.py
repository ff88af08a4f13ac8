"""Crash safety: SIGKILL a writing process at a random moment, reopen, check every ack.

A child process (``crash_child.py``) writes from several threads with ``durability="fsync"``
and prints a line per change only after the call returned. The parent kills it at a random
moment, keeps the complete lines (a partial last line was never acknowledged), reopens the
directory and checks:

* every acknowledged memory version, fact version and event is there, with the same content;
* no version chain has a gap (versions are exactly 1..n, system time never goes back);
* batches are all or nothing, and every searchable event has its memory;
* ``stats()`` agrees with the rows in the SQLite tables and with what the API shows;
* the database takes new writes; and the same holds after another kill on the same directory.

The child uses the default settings (durability "fsync", default embedder) with its own 8-d
vectors, which also exercises the race between automatic and caller vectors (see the update in
``crash_child.py``).
"""

from __future__ import annotations

import importlib.util
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

import synapsedb
from synapsedb import Database, NotFoundError

CHILD = Path(__file__).with_name("crash_child.py")
_spec = importlib.util.spec_from_file_location("synapsedb_crash_child", CHILD)
assert _spec is not None and _spec.loader is not None
child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(child)

FIRST_ACK_TIMEOUT = 60.0  # generous: a loaded CI machine may be slow to start the child
KILLS_PER_DIR = 2
PAGE = 10_000


@dataclass
class Acks:
    """Everything acknowledged on one data directory, over all its kill rounds."""

    memories: dict[tuple[str, str, int], tuple[bool, str]] = field(default_factory=dict)
    facts: dict[tuple[str, str, str, int], str] = field(default_factory=dict)
    events: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict)

    def add(self, line: str) -> None:
        kind, *f = line.split()
        if kind == "M":
            ns, mid, version, deleted, h = f
            self._put(self.memories, (ns, mid, int(version)), (deleted == "1", h))
        elif kind == "F":
            ns, entity, key, version, h = f
            self._put(self.facts, (ns, entity, key, int(version)), h)
        elif kind == "E":
            ns, stream, eid, memory_id, h = f
            self._put(self.events, (ns, stream, eid), (memory_id, h))
        else:
            raise AssertionError(f"unexpected line from the child: {line!r}")

    @staticmethod
    def _put(acks: dict[Any, Any], key: Any, value: Any) -> None:
        # the same version acknowledged twice with different contents: two writers won one slot
        assert acks.setdefault(key, value) == value, (key, acks[key], value)


def run_child(path: Path, seed: int, rng: random.Random, log: Path, *, early: bool) -> list[str]:
    """Start the child, let it write, SIGKILL it; return its complete acknowledgement lines.

    Normally the kill comes 0.05-0.6 s after the first acknowledgement; ``early`` kills at a
    random moment of the first 0.5 s instead: while it starts, opens (creates the schema) or
    makes its first writes.
    """
    lines: list[str] = []
    first = threading.Event()
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(path), str(seed)], stdout=subprocess.PIPE, stderr=err
        )
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:
        for raw in stdout:
            if raw.endswith(b"\n"):  # a partial last line was never acknowledged
                lines.append(raw.decode())
                first.set()
        first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if early:
            time.sleep(rng.uniform(0.0, 0.5))
        else:
            assert first.wait(FIRST_ACK_TIMEOUT), f"no acknowledgement:\n{log.read_text()}"
            time.sleep(rng.uniform(0.05, 0.6))
        assert proc.poll() is None, (
            f"the child exited by itself ({proc.returncode}):\n{log.read_text()}"
        )
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join()
        stdout.close()
    assert proc.returncode == -signal.SIGKILL, log.read_text()
    return lines


def all_events(mem: synapsedb.Namespace, stream: str) -> list[synapsedb.Event]:
    out = mem.events(stream, limit=PAGE)
    while len(out) % PAGE == 0 and out:
        more = mem.events(stream, after=out[-1].id, limit=PAGE)
        if not more:
            break
        out.extend(more)
    return out


def check_recovered(db: Database, path: Path, acks: Acks) -> None:
    """Everything acknowledged is there, intact; memory, disk and stats agree."""
    conn = sqlite3.connect(f"file:{path / 'synapse.db'}?mode=ro", uri=True)
    try:
        namespaces = sorted(r[0] for r in conn.execute("SELECT name FROM namespaces"))
        mem_rows = conn.execute(
            "SELECT ns, id, version, sys_us, created_us, metadata, deleted "
            "FROM memory_versions ORDER BY rowid"
        ).fetchall()
        fact_rows = conn.execute(
            "SELECT ns, entity, key, version, sys_us FROM fact_versions ORDER BY rowid"
        ).fetchall()
        event_rows = conn.execute(
            "SELECT ns, stream, ms, seq, memory_id FROM events ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()
    assert db.namespaces() == namespaces

    # chains on disk: versions 1..n in commit order, system time never going back
    mem_chains: dict[tuple[str, str], list[tuple[int, int, int]]] = defaultdict(list)
    batches: dict[str, list[int]] = defaultdict(list)
    for ns, mid, version, sys_us, created_us, meta, deleted in mem_rows:
        mem_chains[(ns, mid)].append((version, sys_us, created_us))
        batch = orjson.loads(meta).get("batch")
        if batch is not None and not deleted:  # tombstones copy the metadata
            batches[batch].append(orjson.loads(meta)["size"])
    for key, chain in mem_chains.items():
        assert [v for v, _, _ in chain] == list(range(1, len(chain) + 1)), key
        assert [s for _, s, _ in chain] == sorted(s for _, s, _ in chain), key
        assert {c for _, _, c in chain} == {chain[0][1]}, key  # created_at = version 1's time
    for batch, sizes in batches.items():  # write_many is all or nothing
        assert len(sizes) == sizes[0], f"batch {batch}: {len(sizes)} of {sizes[0]} items"
    fact_chains: dict[tuple[str, str, str], list[tuple[int, int]]] = defaultdict(list)
    for ns, entity, key, version, sys_us in fact_rows:
        fact_chains[(ns, entity, key)].append((version, sys_us))
    for key, fchain in fact_chains.items():
        assert [v for v, _ in fchain] == list(range(1, len(fchain) + 1)), key
        assert [s for _, s in fchain] == sorted(s for _, s in fchain), key
    stream_ids: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    event_memories: dict[tuple[str, str, int, int], str | None] = {}
    for ns, stream, ms, seq, memory_id in event_rows:
        stream_ids[(ns, stream)].append((ms, seq))
        event_memories[(ns, stream, ms, seq)] = memory_id
    for key, ids in stream_ids.items():
        assert ids == sorted(set(ids)), key  # strictly increasing in commit order

    # the engine shows exactly what is on disk
    for ns in namespaces:
        mem = db.namespace(ns)
        stats = mem.stats()
        ns_chains = {mid: c for (n, mid), c in mem_chains.items() if n == ns}
        ns_facts = {k[1:]: c for k, c in fact_chains.items() if k[0] == ns}
        ns_streams = {s: ids for (n, s), ids in stream_ids.items() if n == ns}
        assert stats.memory_versions == sum(len(c) for c in ns_chains.values()), ns
        assert stats.fact_versions == sum(len(c) for c in ns_facts.values()), ns
        assert stats.events == sum(len(ids) for ids in ns_streams.values()), ns
        assert stats.streams == len(ns_streams), ns
        for mid, chain in ns_chains.items():
            assert [m.version for m in mem.history(mid)] == [v for v, _, _ in chain], (ns, mid)
        for (entity, key), fchain in ns_facts.items():
            assert [f.version for f in mem.history(entity, key)] == [v for v, _ in fchain]
        assert mem.streams() == sorted(ns_streams)
        for stream, ids in ns_streams.items():
            got = all_events(mem, stream)
            assert [e.id for e in got] == [f"{ms}-{seq}" for ms, seq in ids], (ns, stream)
            for e in got:
                ms, seq = map(int, e.id.split("-"))
                assert e.memory_id == event_memories[(ns, stream, ms, seq)]
                if e.memory_id is not None:  # searchable: its memory came in the same commit
                    (m,) = mem.history(e.memory_id)[:1]
                    assert (m.content, m.metadata["event_id"]) == (e.content, e.id)
    totals = [db.namespace(ns).stats() for ns in namespaces]
    assert sum(s.memory_versions for s in totals) == len(mem_rows)
    assert sum(s.fact_versions for s in totals) == len(fact_rows)
    assert sum(s.events for s in totals) == len(event_rows)

    # every acknowledged change, with the acknowledged contents
    histories: dict[tuple[str, str], dict[int, synapsedb.Memory]] = {}
    for (ns, mid, version), (deleted, h) in acks.memories.items():
        if (ns, mid) not in histories:
            try:
                hist = db.namespace(ns).history(mid)
            except NotFoundError:
                hist = []
            histories[(ns, mid)] = {m.version: m for m in hist}
        m = histories[(ns, mid)].get(version)
        assert m is not None, f"acknowledged memory {ns}/{mid} v{version} lost"
        assert m.deleted == deleted, (ns, mid, version)
        assert child.memory_hash(m.content, m.metadata, m.embedding) == h, (ns, mid, version)
    fhistories: dict[tuple[str, str, str], dict[int, synapsedb.Fact]] = {}
    for (ns, entity, key, version), h in acks.facts.items():
        if (ns, entity, key) not in fhistories:
            try:
                fhist = db.namespace(ns).history(entity, key)
            except NotFoundError:
                fhist = []
            fhistories[(ns, entity, key)] = {f.version: f for f in fhist}
        f = fhistories[(ns, entity, key)].get(version)
        assert f is not None, f"acknowledged fact {ns}/{entity}/{key} v{version} lost"
        assert child.fact_hash(f.value) == h, (ns, entity, key, version)
    streams: dict[tuple[str, str], dict[str, synapsedb.Event]] = {}
    for (ns, stream, eid), (memory_id, h) in acks.events.items():
        if (ns, stream) not in streams:
            streams[(ns, stream)] = {e.id: e for e in all_events(db.namespace(ns), stream)}
        e = streams[(ns, stream)].get(eid)
        assert e is not None, f"acknowledged event {ns}/{stream}/{eid} lost"
        assert (e.memory_id or "-") == memory_id, (ns, stream, eid)
        assert child.event_hash(e.content, e.data) == h, (ns, stream, eid)


def write_after_recovery(db: Database, acks: Acks, tag: str) -> None:
    """The reopened database takes new writes of every kind (recorded as acks)."""
    for ns in child.NAMESPACES:
        mem = db.namespace(ns, agent="parent")
        try:
            pool = mem.get("p0")
        except NotFoundError:
            pool = None
        content, meta, vec = f"after {tag}", {"tag": tag}, [0.5] * child.DIM
        payload = {"id": "p0", "content": content, "metadata": meta, "embedding": vec}
        m = mem.write("user:0", payload)
        assert m.version == (pool.version + 1 if pool is not None else 1)
        assert mem.get("p0").content == content
        acks.add(f"M {ns} p0 {m.version} 0 {child.memory_hash(content, meta, vec)}")
        f = mem.set("user:0", "after", {"tag": tag})
        acks.add(f"F {ns} user:0 after {f.version} {child.fact_hash({'tag': tag})}")
        e = mem.append("user:0", {"content": content, "data": meta}, stream="s0")
        assert all_events(mem, "s0")[-1].id == e.id
        acks.add(f"E {ns} s0 {e.id} {e.memory_id} {child.event_hash(content, meta)}")


def crash_rounds(path: Path, seed: int, log: Path) -> int:
    """Kill and recover on one directory: an early kill for half the seeds (during startup and
    schema creation), then ``KILLS_PER_DIR`` kills while writing. Returns the number of acks."""
    rng = random.Random(seed)
    acks = Acks()
    kills = [True] * (seed % 2) + [False] * KILLS_PER_DIR
    for round_, early in enumerate(kills):
        lines = run_child(path, rng.randrange(1 << 30), rng, log, early=early)
        assert lines or early, "no acknowledged change before the kill"
        for line in lines:
            acks.add(line)
        with synapsedb.open(path) as db:
            check_recovered(db, path, acks)
            write_after_recovery(db, acks, f"{seed}-{round_}")
            check_recovered(db, path, acks)
    with synapsedb.open(path) as db:  # and a clean close/reopen after the last round
        check_recovered(db, path, acks)
    return len(acks.memories) + len(acks.facts) + len(acks.events)


@pytest.mark.parametrize("case", range(10))
def test_crash_recovery(tmp_path: Path, case: int) -> None:
    """10 directories x 2 kills while writing = 20 kill/recover rounds (+5 early kills)."""
    assert crash_rounds(tmp_path / "data", 1000 + case, tmp_path / "child.log") > 0


@pytest.mark.slow
def test_crash_recovery_many(tmp_path: Path) -> None:
    """100 directories x 2 kills while writing = 200 kill/recover rounds (+50 early kills)."""
    for case in range(100):
        path = tmp_path / f"data-{case}"
        try:
            crash_rounds(path, 5000 + case, tmp_path / "child.log")
        except BaseException as exc:
            exc.add_note(f"crash case {case} (seed {5000 + case}), directory {path}")
            raise
        shutil.rmtree(path)  # keep the failing directory only
