"""Crash safety of checkpoints: SIGKILL a process while it writes a namespace's checkpoint (at
close) or while it writes after opening from one; the next open loses nothing acknowledged and
answers as a replay of the whole log does."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import synapsedb

CHILD = """
import sys, numpy as np, synapsedb
path, start, count, close = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
db = synapsedb.open(path, embedder=None, checkpoint_min_rows=1, background_maintenance=False)
mem = db.namespace("n")
rng = np.random.default_rng(start)
for lo in range(start, start + count, 500):
    written = mem.write_many([{"entity": f"user:{i % 7}", "content": f"note {i}",
                               "embedding": rng.standard_normal(64).astype(np.float32),
                               "metadata": {"b": i % 10}} for i in range(lo, lo + 500)])
    print("acked", lo, " ".join(w.id for w in written), flush=True)
    if lo % 2000 == 0:
        mem.update(written[0].id, {"content": f"note {lo} updated"})
        print(f"updated {written[0].id}", flush=True)
print("closing", flush=True)
if close:
    db.close()
    print("closed", flush=True)
"""


def _run(path: Path, start: int, count: int, close: bool, kill_after: float | None) -> list[str]:
    """Run the child; kill it ``kill_after`` seconds after it says it is closing (or at once
    when it writes, for ``kill_after`` < 0). Returns its complete lines."""
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(start), str(count), "1" if close else "0"],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        lines: list[str] = []
        for line in proc.stdout:
            lines.append(line.strip())
            if kill_after is not None and kill_after < 0 and len(lines) >= 3:
                proc.send_signal(signal.SIGKILL)
                break
            if line.startswith("closing") and kill_after is not None:
                time.sleep(kill_after)
                proc.send_signal(signal.SIGKILL)
                break
        rest = proc.stdout.read()
        lines += [x for x in rest.split("\n")[:-1] if x]  # a partial last line was never acked
        proc.wait(timeout=120)
    return lines


def _acked(lines: list[str], into: dict[str, str]) -> int:
    """Record each acknowledged memory's id and content in ``into``; the count of batches."""
    batches = 0
    for line in lines:
        kind, *rest = line.split()
        if kind == "acked":
            lo = int(rest[0])
            into.update({mid: f"note {lo + j}" for j, mid in enumerate(rest[1:])})
            batches += 1
        elif kind == "updated":
            into[rest[0]] += " updated"
    return batches


def _answers(path: Path, **kw: Any) -> list[Any]:
    with synapsedb.open(path, embedder=None, background_maintenance=False, **kw) as db:
        mem = db.namespace("n")
        rng = np.random.default_rng(99)
        out: list[Any] = [mem.stats().memories]
        for _ in range(10):
            q = rng.standard_normal(64).astype(np.float32)
            out.append([h.id for h in mem.query(embedding=q, k=5, mode="vector")])
            out.append([h.id for h in mem.query(embedding=q, k=5, mode="vector", filter={"b": 3})])
        return out


def test_a_kill_while_writing_a_checkpoint_or_after_one_loses_nothing(tmp_path: Path) -> None:
    rnd = random.Random(7)
    for case in range(4):
        d = tmp_path / f"d{case}"
        acked: dict[str, str] = {}
        # a clean close leaves a checkpoint; then a kill while writing after opening from it
        lines = _run(d, 0, 4000, close=True, kill_after=None)
        assert lines[-1] == "closed" and _acked(lines, acked) == 8
        assert (d / "indexes" / "n.ckpt").exists()
        assert _acked(_run(d, 4000, 20_000, close=False, kill_after=-1), acked) >= 1
        # and a kill while the close writes the next checkpoint
        lines = _run(d, 30_000, 4000, close=True, kill_after=rnd.uniform(0.0, 0.4))
        assert _acked(lines, acked) == 8
        with synapsedb.open(
            d, embedder=None, background_maintenance=False, checkpoint_min_rows=1
        ) as db:
            mem = db.namespace("n")
            assert mem.stats().memories == len(acked)
            for mid in list(acked)[::97]:
                assert mem.get(mid).content == acked[mid]
        # what the checkpoint (if the kill left one) gives is what the log gives
        assert _answers(d, checkpoint_min_rows=1) == _answers(d, checkpoints=False)
