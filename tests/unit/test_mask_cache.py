"""A repeated query at the present reuses its allowed-row mask (query/executor.py
allowed_rows) only while nothing it depends on changed: no write, no expiry, not the past."""

from __future__ import annotations

import numpy as np
import pytest

from synapsedb import Database, ManualClock, Namespace
from synapsedb.query import executor


def _ids(mem: Namespace, **kw: object) -> set[str]:
    return {
        h.id for h in mem.query(embedding=[1.0, 0.0, 0.0], mode="vector", k=50, dedup=False, **kw)
    }


def test_a_cached_mask_follows_writes_expiry_and_as_of(mem: Namespace, clock: ManualClock) -> None:
    flt = {"team": "a"}
    first = mem.write(
        "u", {"content": "one", "embedding": [1.0, 0.0, 0.0], "metadata": {"team": "a"}}
    )
    brief = mem.write(
        "u",
        {"content": "brief", "embedding": [0.9, 0.1, 0.0], "ttl": 10, "metadata": {"team": "a"}},
    )
    t0 = clock.now_us() / 1e6
    assert _ids(mem, filter=flt) == {first.id, brief.id}
    assert _ids(mem, filter=flt) == {first.id, brief.id}  # answered from the cached mask
    clock.advance(11)  # the TTL ran out: the cached mask must not bring it back
    assert _ids(mem, filter=flt) == {first.id}
    later = mem.write(
        "v", {"content": "two", "embedding": [0.8, 0.2, 0.0], "metadata": {"team": "a"}}
    )
    assert _ids(mem, filter=flt) == {first.id, later.id}
    mem.update(first.id, {"metadata": {"team": "b"}})
    assert _ids(mem, filter=flt) == {later.id}
    assert _ids(mem, filter={"team": "b"}) == {first.id}
    assert _ids(mem, filter=flt, as_of=t0) == {first.id, brief.id}  # the past is not cached
    assert _ids(mem, filter=flt, entity="v") == {later.id}


def test_cached_masks_are_read_only_and_bounded(
    db: Database, mem: Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor, "MASK_CACHE", 3)
    for i in range(5):
        mem.write(
            "u", {"content": f"m{i}", "embedding": [1.0, float(i), 0.0], "metadata": {"i": i}}
        )
    for i in range(5):
        assert len(_ids(mem, filter={"i": i})) == 1
    state = db.core.state(mem.name)
    assert state is not None
    cat = state.catalog
    assert len(cat.masks) == 3
    for _epoch, _n, _until, mask in cat.masks.values():
        assert isinstance(mask, np.ndarray) and not mask.flags.writeable
    monkeypatch.setattr(executor, "MASK_CACHE", 0)
    cat.masks.clear()
    assert len(_ids(mem, filter={"i": 2})) == 1 and not cat.masks
