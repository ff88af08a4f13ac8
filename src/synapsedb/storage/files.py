"""The data directory on disk: private file modes and an up-front writability check.

Everything SynapseDB keeps in a data directory is private to the user running it: the
directory is ``0700`` and every file in it ``0600`` (the SQLite database, its ``-wal`` and
``-shm`` files, ``LOCK``, ``SECRET``, the saved vector graphs under ``indexes/``). Files are
created with those modes (SQLite gives ``-wal`` and ``-shm`` the mode of the database file) and
files left by older versions are tightened when the directory is opened.

A data directory SynapseDB cannot write is refused when it is opened, with the path and the fix:
SQLite would otherwise open it read-only, fail every write later, and a read-only ``-shm``
mapping can kill the process with SIGBUS.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

from ..errors import StorageError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "check_writable",
    "create_private_file",
    "make_private_dir",
    "read_or_create_secret",
    "restrict_tree",
    "storage_error",
]

DIR_MODE = 0o700
FILE_MODE = 0o600
# files of a data directory that SynapseDB writes (and must be able to)
WRITTEN = ("LOCK", "synapse.db", "synapse.db-wal", "synapse.db-shm")

log = logging.getLogger("synapsedb.storage")


def storage_error(message: str, path: Path, cause: BaseException | None = None) -> StorageError:
    """A StorageError about ``path``, logged at ERROR with its cause (for failures that happen
    once, when a data directory is opened; repeated failures go through FailureLog)."""
    log.error("storage failure: %s", message, exc_info=cause)
    return StorageError(message, path=str(path))


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) with mode 0700; tighten it if it exists."""
    try:
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(
            f"cannot create data directory {path}: {exc.strerror or exc}; create it, writable "
            f"by user id {os.geteuid()}, or choose another path",
            path,
            exc,
        ) from exc
    _tighten(path, DIR_MODE)


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (it keeps its content)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    except OSError as exc:
        raise storage_error(f"cannot create {path}: {exc.strerror or exc}", path, exc) from exc
    os.close(fd)


def read_or_create_secret(directory: Path) -> bytes:
    """The key in ``<directory>/SECRET`` (32 random bytes), created at the first call.

    Created 0600 from the first byte on (never readable by others, not even briefly), written
    to a temporary file and renamed, so a crash never leaves a partial key."""
    key = directory / "SECRET"
    try:
        return key.read_bytes()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise storage_error(f"cannot read {key}: {exc.strerror or exc}", key, exc) from exc
    value = os.urandom(32)
    tmp = directory / "SECRET.tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # left by a crash between creating and renaming it
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(value)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, key)
    except OSError as exc:
        raise storage_error(f"cannot create {key}: {exc.strerror or exc}", key, exc) from exc
    return value


def restrict_tree(path: Path) -> None:
    """Give the directories under ``path`` mode 0700 and its files 0600 (symlinks untouched).

    A file owned by someone else cannot be changed: it is left as it is, with a warning."""
    _tighten(path, DIR_MODE)
    for root, dirs, files in os.walk(path):
        for name in dirs:
            _tighten(Path(root) / name, DIR_MODE)
        for name in files:
            _tighten(Path(root) / name, FILE_MODE)


def _tighten(path: Path, mode: int) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:  # removed meanwhile (a temporary file)
        return
    if stat.S_ISLNK(st.st_mode) or stat.S_IMODE(st.st_mode) & ~mode == 0:
        return
    try:
        os.chmod(path, stat.S_IMODE(st.st_mode) & mode)
    except FileNotFoundError:
        return
    except OSError as exc:
        log.warning("cannot make %s private (mode %o): %s", path, mode, exc.strerror or exc)


def check_writable(directory: Path) -> None:
    """Raise StorageError, naming the path and the fix, unless this process can write the data
    directory and every file SynapseDB writes in it (and read ``SECRET``).

    Uses access(2) with the effective ids: it sees permissions, read-only mounts (EROFS) and
    immutable files (EPERM), also for root, who is otherwise exempt from permission bits.
    """
    effective = os.access in os.supports_effective_ids
    dir_ok = os.access(directory, os.W_OK | os.X_OK, effective_ids=effective)
    problems = [] if dir_ok else [(directory, "the directory is not writable")]
    for name in WRITTEN:
        path = directory / name
        if path.exists() and not os.access(path, os.R_OK | os.W_OK, effective_ids=effective):
            problems.append((path, "not writable"))
    secret = directory / "SECRET"
    if secret.exists() and not os.access(secret, os.R_OK, effective_ids=effective):
        problems.append((secret, "not readable"))
    indexes = directory / "indexes"
    if indexes.is_dir() and not os.access(indexes, os.W_OK | os.X_OK, effective_ids=effective):
        problems.append((indexes, "the directory is not writable"))
    if not problems:
        return
    listed = "; ".join(f"{path}: {why}" for path, why in problems)
    read_only_fs = _read_only_mount(directory)
    fix = (
        "the file system is mounted read-only; mount it read-write"
        if read_only_fs
        else f"give user id {os.geteuid()} write access to the directory and its files "
        f"(e.g. chown -R {os.geteuid()} {directory} && chmod -R u+rwX {directory})"
    )
    raise storage_error(
        f"data directory {directory} cannot be used: {listed}. SynapseDB must write to its "
        f"data directory: {fix}",
        problems[0][0],
    )


def _read_only_mount(path: Path) -> bool:
    with contextlib.suppress(OSError):
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    return False
