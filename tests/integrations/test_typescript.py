"""The TypeScript client (clients/typescript): its own suite, ``node --test``, against real
``synapsedb serve`` processes it starts with this interpreter.

Skipped, saying why, when node or npm is missing or node is older than 20 (``make test`` installs
Debian's nodejs and npm first when it runs as root and they are absent). ``npm ci`` runs only when package-lock.json
changed since the last install (node_modules, git-ignored, keeps a hash of it); then ``tsc``
builds the package and its tests, and ``node --test`` runs them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
MIN_NODE = 20
STAMP = PACKAGE / "node_modules" / ".synapsedb-lock.sha256"


def _unavailable(reason: str) -> None:
    pytest.skip(f"TypeScript client not tested: {reason}")


def _tools() -> tuple[str, str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing = " and ".join(n for n, p in (("node", node), ("npm", npm)) if p is None)
        _unavailable(f"{missing} not on PATH (Debian: apt-get install nodejs npm)")
    assert node is not None and npm is not None
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    version = out.stdout.strip().lstrip("v")
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
    if major < MIN_NODE:
        _unavailable(f"node {version or '?'} is older than {MIN_NODE} (no fetch, node --test)")
    return node, npm


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One run at a time per checkout: sessions sharing the tree share node_modules and build."""
    digest = hashlib.sha256(str(PACKAGE).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"synapsedb-ts-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(args: list[str], what: str, timeout: float, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        args, cwd=PACKAGE, capture_output=True, text=True, timeout=timeout, env=env
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{output[-12000:]}"
    return output


def _install(npm: str) -> None:
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == lock:
        return
    _run([npm, "ci", "--no-audit", "--no-fund"], "npm ci", timeout=600)
    STAMP.write_text(lock)


def test_typescript_client_suite() -> None:
    node, npm = _tools()
    with _locked():
        _install(npm)
        shutil.rmtree(PACKAGE / "build", ignore_errors=True)  # no stale compiled tests
        shutil.rmtree(PACKAGE / "dist", ignore_errors=True)
        tsc = str(PACKAGE / "node_modules" / "typescript" / "bin" / "tsc")
        _run([node, tsc, "-p", "tsconfig.json"], "tsc (the package)", timeout=300)
        _run([node, tsc, "-p", "tsconfig.test.json"], "tsc (the tests)", timeout=300)
        files = sorted(
            str(p.relative_to(PACKAGE)) for p in (PACKAGE / "build" / "test").glob("*.test.js")
        )
        assert len(files) >= 5, files
        env = {**os.environ, "SYNAPSEDB_PYTHON": sys.executable}
        env.pop("NODE_OPTIONS", None)
        out = _run(
            [node, "--test", "--test-concurrency=2", *files], "node --test", timeout=900, env=env
        )
    assert "# fail 0" in out and "# pass " in out, out[-4000:]


def test_installs_from_a_path_and_as_a_packed_tarball(tmp_path: Path) -> None:
    """``npm install <path>`` of a fresh copy (no node_modules, no dist: a clone) builds dist/
    through ``prepare``, and so does ``npm pack``; a project then imports the package."""
    node, npm = _tools()
    pkg = tmp_path / "client"
    shutil.copytree(PACKAGE, pkg, ignore=shutil.ignore_patterns("node_modules", "dist", "build"))
    check = (
        "import { connect, ModelMissingError } from '@synapsedb/client'; "
        "console.log(typeof connect, ModelMissingError.code)"
    )

    def project(name: str, spec: str) -> str:
        app = tmp_path / name
        app.mkdir()
        (app / "package.json").write_text(
            json.dumps({"name": name, "private": True, "type": "module"})
        )
        out = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", spec],
            cwd=app,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
        ran = subprocess.run(
            [node, "--input-type=module", "-e", check],
            cwd=app,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ran.returncode == 0, ran.stderr[-4000:]
        return ran.stdout.strip()

    assert project("from-path", str(pkg)) == "function model_missing"
    assert (pkg / "dist" / "index.js").is_file() and (pkg / "dist" / "ai.d.ts").is_file()
    packed = subprocess.run(
        [npm, "pack", "--pack-destination", str(tmp_path)],
        cwd=pkg,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert packed.returncode == 0, packed.stderr[-4000:]
    tarball = tmp_path / packed.stdout.strip().splitlines()[-1]
    assert project("from-tarball", str(tarball)) == "function model_missing"
