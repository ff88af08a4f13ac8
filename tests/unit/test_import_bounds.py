"""Whatever an import accepts, the loader loads (issue 10, second hostile pass, F6).

Import used to accept versions and access counts up to 2^62 while the loader allows far less:
the import answered 201 and, after a restart, the namespace was unavailable until an operator
repaired it by hand. Both now check against one set of bounds (``engine/loader.py``). For every
bounded integer field of an export record, each value an import accepts (its bounds, the values
around them and random ones) must load after a reopen, and still load after a write on top.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import ManualClock, ValidationError
from synapsedb.engine.loader import (
    IMPORT_MAX_COUNTER,
    IMPORT_MAX_EVENT_PART,
    MAX_DIM,
    MAX_STORED_INT,
)
from synapsedb.times import EARLIEST_US, LATEST_US

T = 1_600_000_000_000_000
NOW = ManualClock().now_us()
MID = "01EJ3PX000PQT4Z8MHR0TWGCVJ"
RECORDS: list[dict[str, Any]] = [
    {
        "kind": "namespace",
        "format": 1,
        "created_us": T,
        "dim": None,
        "embedder": None,
        "config": None,
    },
    {
        "kind": "memory",
        "id": MID,
        "version": 1,
        "recorded_us": T,
        "created_us": T,
        "entity": "u",
        "type": "fact",
        "content": "parcel in Hamburg",
        "metadata": {},
        "embedding": None,
        "salience": 0.5,
        "ts_us": T,
        "agent": None,
        "pinned": False,
        "ttl": None,
        "expires_us": None,
        "deleted": False,
        "erased": False,
    },
    {
        "kind": "fact",
        "entity": "u",
        "key": "order",
        "version": 1,
        "recorded_us": T,
        "created_us": T,
        "value": {"id": 1},
        "agent": None,
        "ttl": None,
        "expires_us": None,
        "deleted": False,
        "erased": False,
    },
    {
        "kind": "event",
        "stream": "u",
        "ms": T // 1000,
        "seq": 0,
        "recorded_us": T,
        "entity": "u",
        "ts_us": T,
        "agent": None,
        "content": "called",
        "data": {"n": 1},
        "memory_id": None,
        "erased": False,
    },
    {"kind": "access", "id": MID, "count": 3, "last_us": T},
]
KIND = {r["kind"]: i for i, r in enumerate(RECORDS)}

# every bounded integer field: (record kind, field, the import's bounds)
FIELDS = [
    ("memory", "version", 1, IMPORT_MAX_COUNTER),
    ("fact", "version", 1, IMPORT_MAX_COUNTER),
    ("access", "count", 0, IMPORT_MAX_COUNTER),
    ("event", "ms", 0, IMPORT_MAX_EVENT_PART),
    ("event", "seq", 0, IMPORT_MAX_EVENT_PART),
    ("namespace", "dim", 1, MAX_DIM),
    ("memory", "ts_us", EARLIEST_US, LATEST_US),
    ("memory", "expires_us", EARLIEST_US, LATEST_US),
    ("fact", "expires_us", EARLIEST_US, LATEST_US),
    ("event", "ts_us", EARLIEST_US, LATEST_US),
]


def _open(path: Path) -> synapsedb.Database:
    return synapsedb.open(
        path,
        clock=ManualClock(),
        durability="os",
        background_maintenance=False,
        embedder=None,
        max_dim=MAX_DIM,
    )


def _candidates(lo: int, hi: int, rng: random.Random) -> list[int]:
    """The bounds, one past them, the old import bound (2^62) and other edges, random values."""
    edges = {
        lo,
        lo + 1,
        hi - 1,
        hi,
        hi + 1,
        lo - 1,
        1 << 53,
        MAX_STORED_INT,
        MAX_STORED_INT + 1,
        1 << 62,
        (1 << 63) - 1,
    }
    edges |= {rng.randint(lo, hi) for _ in range(3)}
    edges |= {rng.randint(hi, 1 << 63) for _ in range(2)}
    return sorted(edges)


def test_every_value_an_import_accepts_loads_after_a_reopen(tmp_path: Path) -> None:
    rng = random.Random(10)
    path = tmp_path / "d"
    accepted: dict[str, tuple[str, str, int]] = {}
    with _open(path) as db:
        for kind, name, lo, hi in FIELDS:
            for value in _candidates(lo, hi, rng):
                records = copy.deepcopy(RECORDS)
                records[KIND[kind]][name] = value
                ns = f"n{len(accepted)}-{rng.getrandbits(32)}"
                try:
                    db.namespace(ns).import_records(records)
                except ValidationError as exc:
                    assert exc.field == f"records[{KIND[kind]}].{name}", exc.message
                    assert not lo <= value <= hi, (kind, name, value, exc.message)
                    continue
                assert lo <= value <= hi, (kind, name, value)  # the bounds are the import's
                accepted[ns] = (kind, name, value)
        # the check is not vacuous: each field's own bounds were accepted
        for kind, name, lo, hi in FIELDS:
            got = {v for k, n, v in accepted.values() if (k, n) == (kind, name)}
            assert {lo, hi} <= got, (kind, name)
    with _open(path) as db:  # every accepted namespace loads
        assert db.unavailable_namespaces() == {}
        assert set(accepted) <= set(db.namespaces())
        updated = set()
        for ns, (_kind, name, value) in accepted.items():  # writes on top of the maxima
            mem = db.namespace(ns)
            if name != "expires_us" or value > NOW:  # (an expiry in the past hid the memory)
                mem.update(MID, {"content": "parcel in Munich"})
                mem.get(MID)  # counts an access
                updated.add(ns)
            mem.set("u", "order", {"id": 2})
            mem.append("u", {"content": "called again"})
        assert len(updated) > len(accepted) // 2
    with _open(path) as db:  # ... and still load
        assert db.unavailable_namespaces() == {}
        for ns in updated:
            assert db.namespace(ns).get(MID).content == "parcel in Munich", accepted[ns]


def test_the_import_bounds_leave_room_below_what_the_loader_loads() -> None:
    assert IMPORT_MAX_COUNTER < MAX_STORED_INT // 2
    assert IMPORT_MAX_EVENT_PART < MAX_STORED_INT // 2


@pytest.mark.parametrize("value", [1 << 62, MAX_STORED_INT])
def test_an_import_refuses_a_version_the_loader_would_refuse(tmp_path: Path, value: int) -> None:
    """The hostile pass's case: version 2^62 answered 201, then the namespace was 503."""
    records = copy.deepcopy(RECORDS)
    records[KIND["memory"]]["version"] = value
    with _open(tmp_path / "d") as db, pytest.raises(ValidationError) as err:
        db.namespace("n").import_records(records)
    assert err.value.field == "records[1].version"
    assert str(IMPORT_MAX_COUNTER) in err.value.message


def test_max_dim_cannot_exceed_what_a_directory_loads() -> None:
    """A namespace's dimension is bounded by what the loader accepts: the setting cannot be
    raised past it, so no write can store a vector the next open would refuse."""
    from synapsedb.config import MAX_DIM, Settings

    assert Settings(max_dim=MAX_DIM).max_dim == MAX_DIM
    with pytest.raises(ValidationError) as err:
        Settings(max_dim=MAX_DIM + 1)
    assert err.value.field == "max_dim" and err.value.details["limit"] == MAX_DIM
