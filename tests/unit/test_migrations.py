from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

import synapsedb
from synapsedb.storage.sqlite import MIGRATIONS


def test_a_version_1_data_directory_is_upgraded_in_place(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "d"
    d.mkdir()
    conn = sqlite3.connect(d / "synapse.db")
    conn.executescript(f"BEGIN; {MIGRATIONS[0]}; PRAGMA user_version = 1; COMMIT;")
    conn.execute("INSERT INTO namespaces VALUES ('old', 1700000000000000, 2)")
    conn.execute(
        "INSERT INTO memory_versions VALUES ('old', 'm1', 1, 1700000000000000, 1700000000000000,"
        " 'user:1', 'fact', 'kept across the upgrade', '{}', ?, 0.5, 1700000000000000, NULL,"
        " 0, NULL, NULL, 0)",
        (b"\x00\x00\x80\x3f\x00\x00\x00\x40",),  # float32 [1.0, 2.0]
    )
    conn.commit()
    conn.close()
    with (
        caplog.at_level(logging.INFO, logger="synapsedb.storage"),
        synapsedb.open(d, durability="os") as db,
    ):
        mem = db.namespace("old")
        m = mem.get("m1")
        assert m.content == "kept across the upgrade"
        assert m.embedding is not None and m.embedding.tolist() == [1.0, 2.0]
        assert mem.stats().dim == 2
    conn = sqlite3.connect(d / "synapse.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    cols = [r[1] for r in conn.execute("PRAGMA table_info(namespaces)")]
    assert "embedder" in cols
    conn.close()
    told = [r.getMessage() for r in caplog.records]  # a long first open is explained
    assert any(f"from schema version 1 to {len(MIGRATIONS)}" in m for m in told)
    assert any(f"schema version {len(MIGRATIONS)} done in" in m for m in told)
