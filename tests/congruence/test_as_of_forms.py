"""``as_of`` (and ``since``/``until``) in every form the API accepts gives the same answer
embedded and over HTTP, and the same answer as the canonical form (an aware UTC datetime); every
form it refuses raises the same error class naming the same field on both sides.

The accepted forms are those of :func:`synapsedb.times.to_us`: a datetime (naive means UTC), an
ISO-8601 string (``Z`` or an offset, fractional seconds, date only, basic and week formats,
surrounding blanks), epoch seconds as int, float or a numeric string. A ``date``, NaN, a numpy
integer, a list or a Decimal are refused embedded; over HTTP such values used to be flattened by
the query string or turned into JSON ``null`` ("now") and answered instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.client import AsyncRemoteDatabase, RemoteDatabase
from synapsedb.server import create_app
from tests.congruence.conftest import ServedStorage

from .test_embedded_vs_http import normalize

# Three instants, each with a commit exactly at it and another 1 us later (as_of is inclusive,
# so an answer one microsecond off, or a local-time reading, shows).
DAY = datetime(2025, 10, 24, tzinfo=UTC)  # midnight: what date-only forms mean
FRACTION = datetime(2025, 10, 24, 10, 0, 0, 500_000, tzinfo=UTC)  # half a second
NOON = datetime(2025, 10, 24, 12, tzinfo=UTC)  # whole seconds: epoch ints
US = timedelta(microseconds=1)
PLUS2 = timezone(timedelta(hours=2))
MINUS5 = timezone(timedelta(hours=-5))
PLUS0530 = timezone(timedelta(hours=5, minutes=30))

ACCEPTED: list[tuple[datetime, Any]] = [
    (DAY, DAY),
    (DAY, datetime(2025, 10, 24)),  # naive: UTC
    (DAY, datetime(2025, 10, 24, 2, tzinfo=PLUS2)),
    (DAY, datetime(2025, 10, 23, 19, tzinfo=MINUS5)),
    (DAY, "2025-10-24"),
    (DAY, " 2025-10-24 "),
    (DAY, "20251024"),
    (DAY, "2025-10-24T00:00:00Z"),
    (DAY, "2025-10-24T00:00:00"),  # naive string: UTC
    (DAY, "2025-10-24 00:00:00+00:00"),
    (DAY, "2025-10-24T02:00:00+02:00"),
    (DAY, "2025-10-23T19:00:00-05:00"),
    (DAY, "20251024T000000Z"),
    (DAY, 1_761_264_000),
    (DAY, 1_761_264_000.0),
    (DAY, "1761264000"),
    (FRACTION, FRACTION),
    (FRACTION, datetime(2025, 10, 24, 10, 0, 0, 500_000)),
    (FRACTION, datetime(2025, 10, 24, 15, 30, 0, 500_000, tzinfo=PLUS0530)),
    (FRACTION, "2025-10-24T10:00:00.5Z"),
    (FRACTION, "2025-10-24T10:00:00.500Z"),
    (FRACTION, "2025-10-24T10:00:00.500000Z"),
    (FRACTION, "2025-10-24T10:00:00,5Z"),
    (FRACTION, "2025-10-24T10:00:00.5+0000"),
    (FRACTION, "2025-10-24T12:00:00.500+02:00"),
    (FRACTION, "2025-10-24T15:30:00.5+05:30"),
    (FRACTION, 1_761_300_000.5),
    (FRACTION, "1761300000.5"),
    (FRACTION, np.float64(1_761_300_000.5)),  # a float subclass: accepted embedded
    (NOON, NOON),
    (NOON, datetime(2025, 10, 24, 14, tzinfo=PLUS2)),
    (NOON, "2025-10-24T12:00:00Z"),
    (NOON, "2025-10-24T12:00Z"),
    (NOON, "2025-10-24T12Z"),
    (NOON, "2025-W43-5T12:00:00Z"),
    (NOON, "2025-10-24T12:00:00Z\n"),
    (NOON, 1_761_307_200),
    (NOON, 1_761_307_200.0),
    (NOON, "1761307200"),
    (NOON, " 1761307200 "),
]

REFUSED: list[Any] = [
    "",
    "   ",
    "yesterday",
    "2025-13-01",
    "2025-10-24T25:00:00Z",
    "2025-297",
    "nan",
    "inf",
    "\x00",
    True,
    False,
    float("nan"),
    float("inf"),
    float("-inf"),
    np.float64("nan"),
    1e12,  # past year 9999
    -1e12,
    1_761_264_000_000_000,  # epoch microseconds are not epoch seconds
    date(2025, 10, 24),  # not a datetime: refused embedded, so refused remote
    time(10),
    np.int64(1_761_264_000),  # not an int subclass
    Decimal("1761264000"),
    [1_761_264_000],
    ("2025-10-24",),
    {"t": 1_761_264_000},
    b"2025-10-24",
]


def _ids(values: list[Any]) -> list[str]:
    return [f"{type(v).__name__}:{v!r}"[:60] for v in values]


def _timeline(db: Any, clock: synapsedb.ManualClock) -> None:
    """The same history on both sides: memories, facts and events changing around each
    instant, so that each reader's answer tells the instants apart."""
    mem = db.namespace("acme", agent="ops")

    def at(t: datetime) -> None:
        clock.set((t - datetime(1970, 1, 1, tzinfo=UTC)) // US)

    at(DAY - timedelta(hours=12))
    mem.write("u:1", {"id": "m1", "content": "parcel packed in Hamburg", "ts": "2025-10-23"})
    mem.set("u:1", "status", "packed")
    mem.append("u:1", "label printed", stream="parcels", searchable=False)
    at(DAY)
    mem.update("m1", {"content": "parcel left Hamburg"})
    mem.set("u:1", "status", "in transit")
    mem.write(
        "u:2",
        {"id": "m2", "content": "invoice 77 sent for the parcel", "ts": "2025-10-24T00:00:00Z"},
    )
    at(DAY + US)
    mem.set("u:1", "eta", "monday")
    mem.append("u:1", "sorted in Hannover", stream="parcels", searchable=False)
    at(FRACTION - timedelta(milliseconds=250))
    mem.update("m1", {"content": "parcel in the Munich depot"})
    mem.write(
        "u:3",
        {"id": "m3", "content": "courier assigned to the parcel", "ts": "2025-10-24T10:00:00Z"},
    )
    at(FRACTION)
    mem.set("u:1", "courier", "Ana")
    at(FRACTION + US)
    mem.update("m1", {"content": "parcel out for delivery"})
    mem.delete("m2")
    mem.set("u:1", "status", "out for delivery")
    at(NOON)
    mem.update("m1", {"content": "parcel delivered"})
    mem.append("u:2", "refund asked", stream="claims", searchable=False)
    mem.delete("u:1", "eta")
    at(NOON + US)
    mem.write(
        "u:4", {"id": "m4", "content": "photo of the parcel stored", "ts": "2025-10-24T12:00:00Z"}
    )
    mem.set("u:1", "status", "delivered")
    at(DAY + timedelta(days=1))


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory, served_storage: ServedStorage
) -> Iterator[tuple[Any, Any]]:
    tmp = tmp_path_factory.mktemp("as_of")
    opened = []
    for name in ("embedded", "served"):
        clock = synapsedb.ManualClock()
        storage = served_storage() if name == "served" else None
        db = synapsedb.open(
            tmp / name,
            clock=clock,
            durability="os",
            embedder=None,
            background_maintenance=False,
            storage=storage,
        )
        _timeline(db, clock)
        opened.append(db)
    http = TestClient(create_app(opened[1]))
    remote = RemoteDatabase("http://testserver", client=http)
    yield opened[0].namespace("acme"), remote.namespace("acme")
    remote.close()
    http.close()
    for db in opened:
        db.close()


# Every reader that takes as_of, with arguments whose answer changes between the instants.
READERS: dict[str, Callable[[Any, Any], Any]] = {
    "get memory": lambda m, t: m.get("m1", as_of=t),
    "get deleted memory": lambda m, t: m.get("m2", as_of=t),
    "get fact": lambda m, t: m.get("u:1", "status", as_of=t),
    "get deleted fact": lambda m, t: m.get("u:1", "eta", as_of=t),
    "memories": lambda m, t: m.memories(as_of=t),
    "memories of entity": lambda m, t: m.memories("u:1", as_of=t),
    "memory history": lambda m, t: m.history("m1", as_of=t),
    "fact history": lambda m, t: m.history("u:1", "status", as_of=t),
    "facts": lambda m, t: m.facts("u:1", as_of=t),
    "snapshot": lambda m, t: m.snapshot("u:1", as_of=t),
    "query": lambda m, t: m.query("parcel", mode="keyword", as_of=t),
    "query hybrid": lambda m, t: m.query("parcel", as_of=t, k=3, explain=True),
    "events": lambda m, t: m.events("parcels", as_of=t),
    "events desc": lambda m, t: m.events("parcels", as_of=t, order="desc", limit=1),
    "entities": lambda m, t: m.entities(as_of=t),
    "streams": lambda m, t: m.streams(as_of=t),
}

# since/until travel the same way (query: JSON body; events and audit: query string).
WINDOWS: dict[str, Callable[[Any, Any], Any]] = {
    "query since": lambda m, t: m.query("parcel", mode="keyword", since=t),
    "query until": lambda m, t: m.query("parcel", mode="keyword", until=t),
    "events since": lambda m, t: m.events("parcels", since=t),
    "events until": lambda m, t: m.events("parcels", until=t),
    "audit since": lambda m, t: [a for a in m.audit("u:1", since=t) if a.action != "query"],
    "audit until": lambda m, t: [a for a in m.audit("u:1", until=t) if a.action != "query"],
}


def outcome(read: Callable[[Any, Any], Any], mem: Any, when: Any) -> Any:
    """What ``read(mem, when)`` answers, or the error class, code and field it raises."""
    try:
        return ("answer", normalize(read(mem, when)))
    except synapsedb.SynapseError as err:
        return ("error", type(err), err.code, err.details.get("field"))


@pytest.fixture(scope="module")
def canonical(pair: tuple[Any, Any]) -> dict[tuple[datetime, str], Any]:
    """Each reader's embedded answer at each instant, given as an aware UTC datetime."""
    local, _ = pair
    out = {}
    for instant in (DAY, FRACTION, NOON):
        for name, read in {**READERS, **WINDOWS}.items():
            out[instant, name] = outcome(read, local, instant)
    return out


def test_the_instants_are_told_apart(pair: tuple[Any, Any]) -> None:
    """Each instant has a commit exactly at it and one 1 us later, so a form read one
    microsecond off (or in local time, or truncated to the second) gives another answer."""
    local, _ = pair
    for t in (DAY, FRACTION, NOON):
        before, at, after = (outcome(READERS["facts"], local, x) for x in (t - US, t, t + US))
        assert before != at != after != before, t


KNOWN: dict[str, pytest.MarkDecorator] = {}  # incongruences found and not yet fixed


@pytest.mark.parametrize(
    ("instant", "form"),
    [
        pytest.param(t, f, id=_ids([f])[0], marks=KNOWN.get(f, ()) if isinstance(f, str) else ())
        for t, f in ACCEPTED
    ],
)
def test_accepted_form_gives_the_canonical_answer_on_both_sides(
    pair: tuple[Any, Any],
    canonical: dict[tuple[datetime, str], Any],
    instant: datetime,
    form: Any,
) -> None:
    local, remote = pair
    for name, read in {**READERS, **WINDOWS}.items():
        want = canonical[instant, name]
        assert outcome(read, local, form) == want, f"embedded {name}"
        assert outcome(read, remote, form) == want, f"remote {name}"


@pytest.mark.parametrize("form", REFUSED, ids=_ids(REFUSED))
def test_refused_form_raises_the_same_error_on_both_sides(pair: tuple[Any, Any], form: Any) -> None:
    local, remote = pair
    for name, read in {**READERS, **WINDOWS}.items():
        field = name.split()[-1] if name in WINDOWS else "as_of"
        got = outcome(read, local, form)
        assert got == ("error", synapsedb.ValidationError, "validation", field), f"embedded {name}"
        assert outcome(read, remote, form) == got, f"remote {name}"


def test_async_client_carries_time_forms_the_same_way(
    pair: tuple[Any, Any], tmp_path: Path
) -> None:
    """The async client builds its requests with the same code: one accepted and a few refused
    forms, through the JSON body (query) and the query string (get)."""
    local, _ = pair
    clock = synapsedb.ManualClock()
    served = synapsedb.open(
        tmp_path / "served",
        clock=clock,
        durability="os",
        embedder=None,
        background_maintenance=False,
    )
    _timeline(served, clock)
    forms: list[Any] = [np.float64(1_761_300_000.5), date(2025, 10, 24), float("nan"), [1]]

    async def run() -> list[Any]:
        out = []
        transport = httpx.ASGITransport(app=create_app(served))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            mem = AsyncRemoteDatabase("http://testserver", client=http).namespace("acme")
            for form in forms:
                for read in (READERS["query"], READERS["get memory"]):
                    try:  # a refused form raises as the call is made, before any await
                        out.append(("answer", normalize(await read(mem, form))))
                    except synapsedb.SynapseError as err:
                        out.append(("error", type(err), err.code, err.details.get("field")))
        return out

    try:
        got = asyncio.run(run())
    finally:
        served.close()
    want = [
        outcome(read, local, form)
        for form in forms
        for read in (READERS["query"], READERS["get memory"])
    ]
    assert got == want
    assert want[0][0] == "answer" and all(w[0] == "error" for w in want[2:])
