"""A keys file that cannot be used is a clear error, not a traceback (issue 10, second hostile
pass, F8).

``synapsedb serve`` (both auth modes) and ``synapsedb keys list`` on a read-only data directory
used to crash with a raw Python traceback (``os.chmod(keys.db)`` failing with EROFS, or SQLite
unable to open its journal). KeyStore now turns OS and SQLite failures into a StorageError
naming the path and the fix, which the CLI prints as ``error [storage]: ...``; keys.db stays
private (0600).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import synapsedb
from synapsedb import StorageError, cli
from synapsedb.server.keys import KeyStore

NOBODY = 65534


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _read_only_mount(monkeypatch: pytest.MonkeyPatch) -> None:
    """chmod fails as on a read-only mount (EROFS), whoever runs the test."""

    def chmod(path: object, mode: int, **kwargs: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(os, "chmod", chmod)


def test_keys_db_is_created_private_and_a_lax_mode_is_tightened(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "d")
    path = tmp_path / "d" / "keys.db"
    assert _mode(path) == 0o600
    store.create("acme", ["read"])
    os.chmod(path, 0o644)
    assert [k.tenant for k in store.list()] == ["acme"]
    assert _mode(path) == 0o600


def test_a_chmod_refused_by_a_read_only_mount_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "d"
    KeyStore(d).create("acme", ["read"])
    os.chmod(d / "keys.db", 0o644)  # a mode to tighten
    _read_only_mount(monkeypatch)
    with pytest.raises(StorageError) as err:
        KeyStore(d)
    assert err.value.details["path"] == str(d / "keys.db")
    assert "read-only" in err.value.message and "mount it read-write" in err.value.message


@pytest.mark.parametrize(
    "argv", [["keys", "list"], ["serve", "--auth", "none"], ["serve", "--auth", "keys"]]
)
def test_the_cli_prints_the_error_and_no_traceback(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    d = tmp_path / "d"
    KeyStore(d).create("acme", ["read"])
    os.chmod(d / "keys.db", 0o644)
    _read_only_mount(monkeypatch)
    assert cli.main([*argv, "--data", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error [storage]: keys: cannot use ") and str(d / "keys.db") in err


def test_keys_db_that_is_not_a_database_is_a_storage_error(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "keys.db").write_bytes(b"not a database at all, " * 10)
    os.chmod(d / "keys.db", 0o600)
    with pytest.raises(StorageError) as err:
        KeyStore(d)
    assert str(d / "keys.db") in err.value.message and "restore" in err.value.message


# Runs the CLI as user ``nobody`` on the data directory argv[1] (imports first, as root: the
# interpreter's own files may not be readable by nobody) and prints the exit code.
CHILD = textwrap.dedent(
    """
    import os, sys
    import ssl, uvicorn
    import synapsedb.server, synapsedb.server.observe, synapsedb.config
    from synapsedb import cli
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    print("EXIT", cli.main(sys.argv[2:] + ["--data", sys.argv[1]]))
    """
)


@pytest.mark.skipif(not hasattr(os, "setuid"), reason="needs POSIX users")
@pytest.mark.parametrize(
    "argv",
    [
        ["keys", "create", "--tenant", "acme", "--scopes", "read"],
        ["serve", "--auth", "none"],
        ["serve", "--auth", "keys"],
    ],
)
def test_a_read_only_data_directory_gives_a_clear_error(argv: list[str]) -> None:
    """Real permission checks by the kernel, as an unprivileged user."""
    root = Path(tempfile.mkdtemp())
    try:
        d = root / "d"
        with synapsedb.open(d, embedder=None) as db:
            db.namespace("n").write("e", "written while it was writable")
        KeyStore(d).create("acme", ["read"])
        if os.geteuid() == 0:
            for path in [root, *root.rglob("*")]:
                os.chown(path, NOBODY, NOBODY)
        os.chmod(root, 0o755)
        for path in d.rglob("*"):
            os.chmod(path, 0o500 if path.is_dir() else 0o400)
        os.chmod(d, 0o500)
        src = Path(synapsedb.__file__).resolve().parents[1]
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(d), *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(src)},
            check=False,
        )
        assert "Traceback" not in out.stderr, out.stderr
        assert out.stdout.strip().endswith("EXIT 2"), out.stdout + out.stderr
        assert "error [storage]: " in out.stderr and str(d) in out.stderr, out.stderr
    finally:
        for path in [root, *root.rglob("*")]:
            os.chmod(path, 0o700)
        shutil.rmtree(root)
