"""One namespace's failure in background maintenance never stops the others' (issue 10,
item 5): a bad config value used to end TTL erasure and eviction for every namespace."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import synapsedb
from synapsedb import ManualClock, Namespace


def _open(path: Path, clock: ManualClock) -> synapsedb.Database:
    # maintenance every second in the background thread; TTLs erased 1 s after they run out
    return synapsedb.open(
        path,
        clock=clock,
        durability="os",
        embedder=None,
        background_maintenance=True,
        maintenance_interval_s=1,
        ttl_grace_s=1,
    )


def _eventually(check: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def _erased(mem: Namespace) -> bool:
    return mem.history("u", "otp")[-1].erased


def test_a_failing_namespace_does_not_stop_maintenance_of_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    original = Namespace.maintain

    def maintain(self: Namespace, *, dry_run: bool = False) -> object:
        if self.name == "a-broken":  # sorts first: it used to end the pass for everyone
            raise RuntimeError("injected maintenance failure")
        return original(self, dry_run=dry_run)

    monkeypatch.setattr(Namespace, "maintain", maintain)
    with caplog.at_level(logging.ERROR), _open(tmp_path / "d", clock) as db:
        db.namespace("a-broken").set("u", "otp", "1234", ttl=1)
        ok = db.namespace("b-fine")
        ok.set("u", "otp", "5678", ttl=1)
        clock.advance(10)
        assert _eventually(lambda: _erased(ok))
        assert "background maintenance of namespace 'a-broken' failed" in caplog.text


def test_a_bad_stored_config_does_not_stop_maintenance_of_the_others(tmp_path: Path) -> None:
    """The case the hostile pass found: an imported config {"max_hot": "x"}."""
    clock = ManualClock()
    path = tmp_path / "d"
    with _open(path, clock) as db:
        db.namespace("a-bad").configure(max_hot=5)
        db.namespace("b-fine").set("u", "otp", "5678", ttl=1)
    conn = sqlite3.connect(path / "synapse.db")
    with conn:
        conn.execute("""UPDATE namespaces SET config = '{"max_hot": "x"}' WHERE name = 'a-bad'""")
    conn.close()
    clock.advance(10)
    with _open(path, clock) as db:
        ok = db.namespace("b-fine")
        assert _eventually(lambda: _erased(ok))
