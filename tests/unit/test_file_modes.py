"""The data directory is private: the directory 0700, every file in it 0600, whatever the
umask, while open (the SQLite -wal and -shm files included) and after close."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import synapsedb


@pytest.fixture
def lax_umask() -> Iterator[None]:
    old = os.umask(0o022)  # the usual default: new files 0644, directories 0755
    try:
        yield
    finally:
        os.umask(old)


def modes(directory: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(os.stat(directory).st_mode)}
    for path in directory.rglob("*"):
        out[str(path.relative_to(directory))] = stat.S_IMODE(os.lstat(path).st_mode)
    return out


def assert_private(directory: Path) -> None:
    for name, mode in modes(directory).items():
        want = 0o700 if (directory / name).is_dir() else 0o600
        assert mode == want, f"{name}: {mode:o}"


@pytest.mark.usefixtures("lax_umask")
def test_every_file_is_created_private(tmp_path: Path) -> None:
    d = tmp_path / "d"
    rng = np.random.default_rng(1)
    with synapsedb.open(d, embedder=None, hnsw_threshold=50, background_maintenance=False) as db:
        mem = db.namespace("n")
        mem.write_many(
            [
                {"entity": "u", "content": f"note {i}", "embedding": rng.standard_normal(8)}
                for i in range(80)
            ]
        )
        mem.set("u", "k", 1)
        mem.forget(entity="u", purge=True)
        mem.write_many(
            [
                {"entity": "v", "content": f"note {i}", "embedding": rng.standard_normal(8)}
                for i in range(80)
            ]
        )
        assert db.wait_for_indexes(60)
        names = set(modes(d))
        assert {"synapse.db", "synapse.db-wal", "synapse.db-shm", "LOCK", "SECRET"} <= names
        assert_private(d)
    names = set(modes(d))
    assert "indexes/n.hnsw" in names  # the saved vector graph
    assert_private(d)


@pytest.mark.usefixtures("lax_umask")
def test_files_left_world_readable_are_tightened_on_open(tmp_path: Path) -> None:
    d = tmp_path / "d"
    with synapsedb.open(d, embedder=None) as db:
        db.namespace("n").write("u", "x")
    os.chmod(d, 0o755)
    for path in d.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    with synapsedb.open(d, embedder=None) as db:
        assert_private(d)
        assert db.namespace("n").memories()[0].content == "x"


@pytest.mark.usefixtures("lax_umask")
def test_a_new_data_directory_and_its_parents(tmp_path: Path) -> None:
    d = tmp_path / "a" / "b"
    with synapsedb.open(d, embedder=None):
        pass
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert_private(d)
