"""The README's quickstart runs top to bottom, in order, as a new user pastes it.

A real ``synapsedb serve`` (what ``make serve`` runs: ``python -m synapsedb serve``, data in
``./synapse-data`` of its working directory) in a scratch directory on a free port stands for
the first shell; the README's own text, with that port for 7379, is run in a second: the curl
block with bash, the ``connect()`` example, the command-line block with bash and the venv's
``bin`` first on ``PATH`` (what ``source .venv/bin/activate`` does), then the embedded example
while the server still holds ``./synapse-data``. Every block is accounted for: one this test
does not know fails it. The set-up blocks are the commands that run this test (``make test``)
and tests/install's job (``pip install``, ``synapsedb models install``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import free_port

README = Path(__file__).resolve().parents[2] / "README.md"
BIN = Path(sys.executable).parent


def blocks() -> list[tuple[str, str]]:
    """The README's fenced code blocks, in order: (language, code)."""
    return re.findall(r"```(\w*)\n(.*?)```", README.read_text(), re.S)


@contextlib.contextmanager
def make_serve(cwd: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``make serve``'s command in ``cwd``, on ``port``, until ready; stopped after."""
    env = {**os.environ, "SYNAPSEDB_PORT": str(port)}
    env.pop("SYNAPSEDB_DATA", None)
    log = cwd / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "synapsedb", "serve"],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "synapsedb serve was not ready in 120 s"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                    break
            time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a stuck server
            proc.kill()
            proc.wait()


def bash(script: str, cwd: Path, port: int) -> str:
    """``script`` in bash, the venv's bin first on PATH; the CLI's default server URL (port
    7379) is the test server's."""
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "SYNAPSEDB_URL": f"http://127.0.0.1:{port}",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (script, done.stdout[-2000:], done.stderr[-3000:])
    return done.stdout


def run_python(code: str, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(cwd)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    return out.getvalue()


def test_the_readme_runs_top_to_bottom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    todo = [(lang, code.replace("7379", str(port))) for lang, code in blocks()]
    ran: list[str] = []
    with make_serve(tmp_path, port):
        for lang, code in todo:
            if lang == "bash" and code.startswith("make test"):
                assert "make serve" in code  # the set-up this test runs under
                ran.append("make")
            elif lang == "bash" and code.startswith("pip install"):
                assert "synapsedb models install" in code  # tests/install runs these
                ran.append("pip")
            elif lang == "bash" and code.startswith("curl"):
                out = bash(code, tmp_path, port)
                assert '"content":"Refund requested for order #1458"' in out.replace(": ", ":")
                ran.append("curl")
            elif lang == "python" and "synapsedb.connect(" in code:
                out = run_python(code, tmp_path, monkeypatch)
                assert "Refund requested for order #1458" in out, out
                ran.append("connect")
            elif lang == "bash" and code.startswith("synapsedb "):
                # `changes` follows the feed until Ctrl-C: here until it has been idle a while
                script = code.replace("synapsedb changes ", "synapsedb changes --idle-timeout 1 ")
                out = bash(script, tmp_path, port)
                assert "refund" in out.lower()
                assert (tmp_path / "acme.jsonl").stat().st_size > 0
                ran.append("cli")
            elif lang == "python" and "synapsedb.open(" in code:
                out = run_python(code, tmp_path, monkeypatch)  # the server holds synapse-data
                assert "Refund requested for order #1458 last week" in out, out
                ran.append("embedded")
            else:
                pytest.fail(f"a README block this test does not know how to run:\n{code}")
        gone = httpx.post(
            f"http://127.0.0.1:{port}/v1/namespaces/acme-support/query",
            json={"text": "user:4321 refund status"},
        ).json()
        assert gone["hits"] == []  # the command line's last line purged the entity
    assert ran == ["make", "pip", "curl", "connect", "cli", "embedded"]
    assert (tmp_path / "synapse-data" / "synapse.db").exists()
    assert (tmp_path / "agent-memory" / "synapse.db").exists()
