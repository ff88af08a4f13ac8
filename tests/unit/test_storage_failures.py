"""Storage failures: a data directory that cannot be written is refused when it is opened (with
the path and the fix), and every StorageError the backend raises is logged, rate-limited."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import synapsedb
from synapsedb import StorageError
from synapsedb.storage.base import Batch
from synapsedb.storage.failures import FailureLog
from synapsedb.storage.sqlite import SQLiteStorage

NOBODY = 65534

# Opens the data directory given as argv[1] as user ``nobody`` (the imports happen first, as
# root: the interpreter's own files may not be readable by nobody) and prints what happened.
CHILD = textwrap.dedent(
    """
    import os, sys
    import synapsedb
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    try:
        with synapsedb.open(sys.argv[1], embedder=None) as db:
            db.namespace("n").write("e", "x")
        print("OPENED")
    except synapsedb.StorageError as exc:
        print("STORAGE", exc.details.get("path"), "|", exc.message)
    except Exception as exc:
        print("OTHER", type(exc).__name__, exc)
    """
)


def _make_read_only_directory(root: Path) -> Path:
    """A data directory written once, then made read-only for its owner (``nobody`` when the
    tests run as root: permission bits do not restrict root, so the check runs as nobody)."""
    d = root / "d"
    with synapsedb.open(d, embedder=None) as db:
        db.namespace("n").write("e", "written while it was writable")
    if os.geteuid() == 0:
        for path in [root, *root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
    os.chmod(root, 0o755)
    for path in d.rglob("*"):
        os.chmod(path, 0o500 if path.is_dir() else 0o400)
    os.chmod(d, 0o500)
    return d


@pytest.mark.skipif(not hasattr(os, "setuid"), reason="needs POSIX users")
def test_a_read_only_data_directory_is_refused_with_the_path_and_the_fix() -> None:
    """Real permission checks by the kernel, as an unprivileged user (a read-only mount cannot
    be made here; access(2), which the check uses, reports those with EROFS the same way)."""
    root = Path(tempfile.mkdtemp())
    try:
        d = _make_read_only_directory(root)
        src = Path(synapsedb.__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONPATH": str(src)}
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(d)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
        assert out.returncode == 0, out.stderr  # no crash (SIGBUS would be -7)
        assert out.stdout.startswith("STORAGE"), out.stdout + out.stderr
        assert str(d) in out.stdout and "chmod" in out.stdout and "not writable" in out.stdout
        assert "storage failure" in out.stderr  # and it was logged
    finally:
        for path in [root, *root.rglob("*")]:
            os.chmod(path, 0o700)
        shutil.rmtree(root)


def test_files_the_engine_cannot_write_are_named_even_for_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Simulated: access(2) answering "no" for the -shm file, as it does on a read-only mount
    even for root. This proves the check looks at each file and names it; the test above
    proves the answer comes from the kernel."""
    d = tmp_path / "d"
    with synapsedb.open(d, embedder=None) as db:
        db.namespace("n").write("e", "x")
    (d / "synapse.db-shm").write_bytes(b"")  # as a crashed run can leave it
    real = os.access

    def access(path: object, mode: int, **kwargs: object) -> bool:
        if str(path).endswith("-shm") and mode & os.W_OK:
            return False
        return real(path, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(StorageError) as err:
        synapsedb.open(d, embedder=None)
    assert err.value.details["path"] == str(d / "synapse.db-shm")
    assert "synapse.db-shm: not writable" in err.value.message
    monkeypatch.undo()
    with synapsedb.open(d, embedder=None) as db:  # the failed open left the directory usable
        assert db.namespace("n").memories()[0].content == "x"


def _bad_batch() -> Batch:
    """A batch SQLite refuses (the same memory version twice: a constraint failure)."""
    row = ("n", "m1", 1, 1, 1, "e", "fact", "x", "{}", None, 0.5, 1, None, 0, None, None, 0)
    return Batch(memories=[row, row])


def test_storage_errors_are_logged_once_per_failure_with_their_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    storage = SQLiteStorage(tmp_path, failures=FailureLog(60.0, clock=lambda: now[0]))
    try:
        with caplog.at_level(logging.ERROR, logger="synapsedb.storage"):
            for _ in range(5):
                with pytest.raises(StorageError, match="UNIQUE constraint failed"):
                    storage.commit(_bad_batch())
            errors = [r for r in caplog.records if r.levelno == logging.ERROR]
            assert len(errors) == 1  # five identical failures: one line
            assert "commit failed" in errors[0].getMessage()
            assert errors[0].exc_info is not None  # with its cause
            assert "IntegrityError" in str(errors[0].exc_info[0])
            now[0] = 61.0  # a minute later, the next one is logged, counting the rest
            with pytest.raises(StorageError):
                storage.commit(_bad_batch())
            errors = [r for r in caplog.records if r.levelno == logging.ERROR]
            assert len(errors) == 2 and "4 more like it" in errors[1].getMessage()
        storage.commit(Batch(memories=[_bad_batch().memories[0]]))  # and the store still works
    finally:
        storage.close()
