"""A pip install as a new user makes it: a fresh venv, a fresh HOME, ``pip install synapsedb``
from this checkout (a wheel, not editable), then ``synapsedb models install``.

Slow (a minute or two: pip installs every dependency), so marked ``slow`` and run by
``make test-install``, which CI runs. pip's download cache is the machine's own, so the
dependencies come from it when they can; the model cache is under the fresh HOME.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
USE = """
import synapsedb
with synapsedb.open("data") as db:
    mem = db.namespace("acme-support", agent="intake")
    mem.write("user:4321", "Customer prefers email")
    print(mem.query("how to reach user:4321", k=1)[0].content)
"""


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)


def test_pip_install_then_models_install(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")
    bindir = tmp_path / "venv" / "bin"
    cache = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(home),
        "PIP_CACHE_DIR": cache,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "LANG": "C.UTF-8",
    }
    for name in ("PIP_CONFIG_FILE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "SSL_CERT_FILE"):
        if name in os.environ:
            env[name] = os.environ[name]
    done = _run([str(bindir / "python"), "-m", "pip", "install", "--quiet", str(ROOT)], env, work)
    assert done.returncode == 0, done.stderr[-3000:]

    before = _run([str(bindir / "python"), "-c", USE], env, work)
    assert before.returncode != 0
    assert "ModelMissingError" in before.stderr
    assert "run `synapsedb models install`" in before.stderr

    done = _run([str(bindir / "synapsedb"), "models", "install"], env, work)
    assert done.returncode == 0, done.stderr[-3000:]
    model = Path(done.stdout.strip())
    assert model.is_file() and model.is_relative_to(home / ".cache" / "synapsedb" / "models")

    after = _run([str(bindir / "python"), "-c", USE], env, work)
    assert after.returncode == 0, after.stderr[-3000:]
    assert after.stdout.strip() == "Customer prefers email"
    again = _run([str(bindir / "synapsedb"), "models", "install"], env, work)
    assert again.returncode == 0 and "up to date" in again.stderr
    assert sys.version_info[:2] == tuple(  # the venv is of the Python running the tests
        int(x)
        for x in _run(
            [
                str(bindir / "python"),
                "-c",
                "import sys; print('.'.join(map(str, sys.version_info[:2])))",
            ],
            env,
            work,
        ).stdout.split(".")
    )
