"""``synapsedb export`` and ``import`` show progress on a terminal (a real pseudo-terminal
here) and stay quiet on a pipe, printing their counts either way; a data directory and a
server are both sources and targets."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import synapsedb
from synapsedb.cli_transfer import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_only() -> None:
    tty = Terminal()
    p = Progress("exporting acme:", total_bytes=2000, stream=tty, every=0)
    p.update(1, 1000)
    p.update(1, 1000)
    p.done("exported 2 records")
    text = tty.getvalue()
    assert text.count("\r") >= 3  # two draws, one clear
    assert "exporting acme: 2 records, 2.0 KB of 2.0 KB (100%)" in text
    assert text.endswith("exported 2 records\n")
    pipe = io.StringIO()
    p = Progress("exporting acme:", stream=pipe, every=0)
    p.update(1, 10)
    p.note("importing...")
    p.done("exported 1 records")
    assert pipe.getvalue() == "exported 1 records\n"


def cli(args: list[str], *, terminal: bool) -> tuple[int, str]:
    """Run ``synapsedb ARGS`` with standard error on a pseudo-terminal (or a pipe); its code
    and standard error."""
    env = {**os.environ, "SYNAPSEDB_EMBEDDER": "none", "SYNAPSEDB_DURABILITY": "os"}
    cmd = [sys.executable, "-m", "synapsedb", *args]
    if not terminal:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        return done.returncode, done.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # the child closed the terminal (EIO)
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode()


def test_export_and_import_show_progress_on_a_terminal(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", embedder=None, durability="os") as db:
        mem = db.namespace("acme")
        mem.write_many([("user:1", f"memory {i}") for i in range(50)])
        mem.set("user:1", "k", 1)
    out = tmp_path / "acme.jsonl"
    code, err = cli(
        ["export", "--data", str(tmp_path / "d"), "-n", "acme", "--out", str(out)], terminal=True
    )
    assert code == 0, err
    assert "\r" in err and "exporting acme:" in err  # the progress line was drawn
    last = [line for line in err.replace("\r", "\n").splitlines() if line.strip()][-1]
    assert last.startswith("exported 5") and last.endswith("from acme")  # then the counts
    code, err = cli(
        ["import", str(out), "--data", str(tmp_path / "e"), "-n", "copy"], terminal=True
    )
    assert code == 0, err
    assert "\r" in err and "reading " in err and "(one transaction)" in err
    assert "imported 50 memory versions" in err
    with synapsedb.open(tmp_path / "e", embedder=None) as db:
        assert db.namespace("copy").stats().memories == 50


def test_export_and_import_are_quiet_on_a_pipe(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", embedder=None, durability="os") as db:
        db.namespace("acme").write("user:1", "only one")
    out = tmp_path / "acme.jsonl"
    code, err = cli(
        ["export", "--data", str(tmp_path / "d"), "-n", "acme", "--out", str(out)], terminal=False
    )
    assert code == 0 and "\r" not in err
    assert err.startswith("exported ") and " records (" in err and err.count("\n") == 1
    code, err = cli(
        ["import", str(out), "--data", str(tmp_path / "e"), "-n", "acme"], terminal=False
    )
    assert code == 0 and "\r" not in err and err.startswith("imported 1 memory versions")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "memory"}\nnot json\n')
    code, err = cli(["import", str(bad), "--data", str(tmp_path / "f")], terminal=False)
    assert code == 2 and "line 2 is not JSON" in err
