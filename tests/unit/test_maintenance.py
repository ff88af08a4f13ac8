from __future__ import annotations

from pathlib import Path

import pytest

import synapsedb
from synapsedb import ManualClock, NotFoundError, ValidationError

MARK = "otter-quartz-9916"


def test_expired_memories_and_facts_are_erased_after_the_grace_period(tmp_path: Path) -> None:
    clock = ManualClock()
    d = tmp_path / "d"
    with synapsedb.open(d, clock=clock, ttl_grace_s=3600) as db:
        mem = db.namespace("n")
        short = mem.write("u", {"content": f"one-time code {MARK}", "ttl": 60})
        keep = mem.write("u", "no ttl, stays")
        mem.set("u", "otp", MARK, ttl=60)
        written = clock.now_us() / 1e6
        clock.advance(120)  # expired, but within the grace period
        with pytest.raises(NotFoundError):
            mem.get(short.id)
        assert mem.get(short.id, as_of=written + 1).content.endswith(MARK)  # still auditable
        report = mem.maintain()
        assert report.expired_memories == [] and report.expired_facts == []
        clock.advance(3600)
        preview = mem.maintain(dry_run=True)
        assert preview.dry_run and preview.expired_memories == [short.id]
        assert preview.expired_facts == [("u", "otp")]
        assert mem.get(short.id, as_of=written + 1).content.endswith(MARK)  # dry run: untouched
        done = mem.maintain()
        assert done.expired_memories == [short.id] and done.expired_facts == [("u", "otp")]
        with pytest.raises(NotFoundError):
            mem.get(short.id, as_of=written + 1)  # erased now, at every moment
        assert mem.history(short.id)[0].erased
        assert mem.history("u", "otp")[0].erased
        assert mem.get(keep.id).content == "no ttl, stays"
        assert mem.maintain().expired_memories == []  # nothing left to do
        assert [r.namespace for r in db.maintain(dry_run=True)] == ["n"]
    assert not any(MARK.encode() in p.read_bytes() for p in d.rglob("*") if p.is_file())


def test_maintain_arguments(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", durability="os") as db:
        with pytest.raises(ValidationError):
            db.namespace("n").maintain(dry_run="yes")  # type: ignore[arg-type]
        assert db.namespace("empty").maintain().expired_memories == []


def test_expired_cold_memories_are_erased_too(tmp_path: Path) -> None:
    clock = ManualClock()
    with synapsedb.open(
        tmp_path / "d",
        clock=clock,
        ttl_grace_s=10,
        durability="os",
        embedder=None,
        background_maintenance=False,
    ) as db:
        mem = db.namespace("n")
        short = mem.write("u", {"content": "expires while cold", "ttl": 5, "salience": 0.0})
        mem.write("u", {"content": "stays hot", "salience": 1.0})
        mem.configure(max_hot=1)
        assert [m for m, _s, _w in mem.maintain().demoted] == [short.id]
        clock.advance(60)
        assert mem.maintain().expired_memories == [short.id]
        assert mem.history(short.id)[0].erased
