"""Valid time embedded and over HTTP: the same bounds stored from every time form, the same
answers to ``valid_at`` (alone, with filters, with ``as_of``) in every form ``as_of`` takes,
and the same errors naming the same fields."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.client import AsyncRemoteDatabase, RemoteDatabase
from synapsedb.client.sync import RemoteNamespace
from synapsedb.engine import Namespace
from synapsedb.server import create_app
from tests.congruence.conftest import ServedStorage

from .test_as_of_forms import ACCEPTED, DAY, FRACTION, NOON, REFUSED, US, _ids
from .test_embedded_vs_http import normalize

START = 1_770_000_000_000_000  # system time: after every valid time used here
S1 = START + 10_000_000  # the first writes are known at S1; the updates come at S1 + 10 s


def _timeline(mem: Any, clock: synapsedb.ManualClock) -> list[Any]:
    """Bounds at the three instants of test_as_of_forms and a microsecond off them, each
    written in another time form; then updates that close and keep intervals."""
    clock.set(S1)
    out = [
        mem.write(
            "u:1",
            {
                "id": "a",
                "content": "parcel a",
                "valid_from": DAY,
                "valid_to": "2025-10-24T10:00:00.5Z",
            },
        ),
        mem.write(
            "u:1",
            {"id": "b", "content": "parcel b", "valid_from": datetime(2025, 10, 24, 0, 0, 0, 1)},
        ),  # naive: UTC
        mem.write("u:2", {"id": "c", "content": "parcel c", "valid_to": 1_761_307_200}),
        mem.write(
            "u:2",
            {
                "id": "d",
                "content": "parcel d",
                "valid_from": 1_761_300_000.5,
                "valid_to": "2025-10-24T12:00:00.000001Z",
            },
        ),
        mem.write("u:1", {"id": "e", "content": "parcel e", "metadata": {"k": 1}}),
        mem.write_many(
            [
                {"entity": "u:2", "id": "f", "content": "parcel f", "valid_from": "1761307200"},
                (
                    "u:1",
                    {"id": "g", "content": "parcel g", "metadata": {"valid_from": 1_761_264_000}},
                ),
            ]
        ),
    ]
    clock.set(S1 + 10_000_000)
    out.append(mem.update("e", {"valid_to": np.float64(DAY.timestamp())}))  # closed later
    out.append(mem.update("a", {"metadata": {"note": "checked"}}))  # keeps its interval
    out.append(mem.update("g", {"valid_to": None, "content": "parcel g2"}))
    return out


@pytest.fixture(scope="module")
def sides(
    tmp_path_factory: pytest.TempPathFactory, served_storage: ServedStorage
) -> Iterator[dict[str, Any]]:
    """The embedded database and a remote one (its writes made over HTTP), each with the
    timeline written, and what the writes returned."""
    tmp = tmp_path_factory.mktemp("valid_time")
    clocks = [synapsedb.ManualClock(START), synapsedb.ManualClock(START)]
    storages = [None, served_storage()]
    local, served = (
        synapsedb.open(
            tmp / name,
            clock=clock,
            durability="os",
            embedder=None,
            background_maintenance=False,
            storage=storage,
        )
        for name, clock, storage in zip(("embedded", "served"), clocks, storages, strict=True)
    )
    http = TestClient(create_app(served))
    remote = RemoteDatabase("http://testserver", client=http)
    dbs = (local, remote)
    written = [
        _timeline(db.namespace("acme", agent="intake"), clock)
        for db, clock in zip(dbs, clocks, strict=True)
    ]
    yield {"dbs": dbs, "written": written}
    remote.close()
    http.close()
    served.close()
    local.close()


@pytest.fixture(scope="module")
def pair(sides: dict[str, Any]) -> tuple[Any, Any]:
    return tuple(db.namespace("acme") for db in sides["dbs"])  # type: ignore[return-value]


def test_writes_store_the_same_bounds(sides: dict[str, Any]) -> None:
    local, remote = sides["written"]
    assert normalize(local) == normalize(remote)
    a = local[0]
    assert a.metadata == {"valid_from": DAY.timestamp(), "valid_to": FRACTION.timestamp()}


KNOWN_AT_S1 = S1 / 1_000_000

READERS: dict[str, Callable[[Any, Any], Any]] = {
    "memories": lambda m, t: m.memories(valid_at=t),
    "memories of entity": lambda m, t: m.memories("u:1", valid_at=t, limit=3),
    "memories as_of": lambda m, t: m.memories(valid_at=t, as_of=KNOWN_AT_S1),
    "query": lambda m, t: m.query("parcel", mode="keyword", valid_at=t, k=20),
    "query filters only": lambda m, t: m.query(None, valid_at=t, k=20),
    "query with filter": lambda m, t: m.query(
        "parcel", mode="keyword", valid_at=t, filter={"$or": [{"entity": "u:2"}, {"k": 1}]}
    ),
    "query as_of": lambda m, t: m.query("parcel", mode="keyword", valid_at=t, as_of=KNOWN_AT_S1),
}


def outcome(read: Callable[[Any, Any], Any], mem: Any, when: Any) -> Any:
    try:
        return ("answer", normalize(read(mem, when)))
    except synapsedb.SynapseError as err:
        return ("error", type(err), err.code, err.details.get("field"))


INSTANTS = [DAY - US, DAY, DAY + US, FRACTION - US, FRACTION, NOON - US, NOON, NOON + US]


@pytest.fixture(scope="module")
def canonical(pair: tuple[Any, Any]) -> dict[tuple[datetime, str], Any]:
    local, _ = pair
    return {(t, name): outcome(read, local, t) for t in INSTANTS for name, read in READERS.items()}


def test_the_instants_are_told_apart(canonical: dict[tuple[datetime, str], Any]) -> None:
    """Every bound sits at an instant or a microsecond off it, so an answer a microsecond off
    (or read in local time, or truncated to the second) is another answer."""
    ids = {t: sorted(m["id"] for m in canonical[t, "memories"][1]) for t in INSTANTS}
    for t in (DAY, DAY + US, FRACTION, NOON, NOON + US):
        assert ids[t - US] != ids[t], t
    assert ids[DAY] == ["a", "c", "g"]  # e closed at DAY; g's open end; b a us later
    assert ids[NOON + US] == ["b", "f", "g"]


@pytest.mark.parametrize("instant", INSTANTS, ids=[t.isoformat() for t in INSTANTS])
def test_same_answers_at_every_instant(
    pair: tuple[Any, Any], canonical: dict[tuple[datetime, str], Any], instant: datetime
) -> None:
    _, remote = pair
    for name, read in READERS.items():
        assert outcome(read, remote, instant) == canonical[instant, name], name


@pytest.mark.parametrize(("instant", "form"), ACCEPTED, ids=_ids([f for _, f in ACCEPTED]))
def test_accepted_form_gives_the_canonical_answer_on_both_sides(
    pair: tuple[Any, Any],
    canonical: dict[tuple[datetime, str], Any],
    instant: datetime,
    form: Any,
) -> None:
    local, remote = pair
    for name, read in READERS.items():
        want = canonical[instant, name]
        assert outcome(read, local, form) == want, f"embedded {name}"
        assert outcome(read, remote, form) == want, f"remote {name}"


@pytest.mark.parametrize("form", REFUSED, ids=_ids(REFUSED))
def test_refused_form_raises_the_same_error_on_both_sides(pair: tuple[Any, Any], form: Any) -> None:
    local, remote = pair
    for name, read in READERS.items():
        got = outcome(read, local, form)
        assert got == ("error", synapsedb.ValidationError, "validation", "valid_at"), name
        assert outcome(read, remote, form) == got, f"remote {name}"


ERRORS: list[Callable[[Any], Any]] = [
    lambda m: m.write("u", {"content": "x", "valid_from": NOON, "valid_to": DAY}),
    lambda m: m.write("u", {"content": "x", "valid_from": NOON, "valid_to": NOON}),
    lambda m: m.write("u", {"content": "x", "valid_from": "soon"}),
    lambda m: m.write("u", {"content": "x", "valid_from": date(2025, 10, 24)}),
    lambda m: m.write("u", {"content": "x", "valid_to": float("nan")}),
    lambda m: m.write("u", {"content": "x", "metadata": {"valid_from": "2025-10-24"}}),
    lambda m: m.write("u", {"content": "x", "metadata": {"valid_to": None}}),
    lambda m: m.write_many([("u", "fine"), ("u", {"content": "x", "valid_to": "later"})]),
    lambda m: m.update("m1", {"valid_to": DAY}),
    lambda m: m.update("m1", {"metadata": {"valid_from": "2025"}}),
    lambda m: m.update("m1", {"metadata": {"valid_to": DAY.timestamp()}}),
    lambda m: m.memories(valid_at="soon"),
    lambda m: m.query("x", valid_at=[1]),
]


@pytest.mark.parametrize("op", range(len(ERRORS)))
def test_same_errors(sides: dict[str, Any], op: int) -> None:
    caught = []
    for db in sides["dbs"]:
        mem = db.namespace("errs")
        mem.write("u", {"id": "m1", "content": "exists", "valid_from": NOON})
        with pytest.raises(synapsedb.SynapseError) as err:
            ERRORS[op](mem)
        caught.append(err.value)
        assert mem.get("m1").metadata == {"valid_from": NOON.timestamp()}  # unchanged
    a, b = caught
    assert type(a) is type(b) is synapsedb.ValidationError
    assert a.details.get("field") == b.details.get("field") is not None


def test_remote_signatures_match_the_engine() -> None:
    for name in ("query", "memories"):
        local = inspect.signature(getattr(Namespace, name)).parameters
        remote = inspect.signature(getattr(RemoteNamespace, name)).parameters
        assert list(local) == list(remote), name
        assert {k: p.default for k, p in local.items()} == {
            k: p.default for k, p in remote.items()
        }, name


def test_async_client_sends_valid_at_the_same_way(pair: tuple[Any, Any], tmp_path: Path) -> None:
    local, _ = pair
    clock = synapsedb.ManualClock(START)
    served = synapsedb.open(
        tmp_path / "served",
        clock=clock,
        durability="os",
        embedder=None,
        background_maintenance=False,
    )
    _timeline(served.namespace("acme", agent="intake"), clock)
    forms: list[Any] = [
        FRACTION,
        np.float64(FRACTION.timestamp()),
        NOON + timedelta(hours=2),
        date(2025, 10, 24),
        float("nan"),
    ]
    reads = (READERS["query"], READERS["memories"])

    async def run() -> list[Any]:
        out = []
        transport = httpx.ASGITransport(app=create_app(served))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            mem = AsyncRemoteDatabase("http://testserver", client=http).namespace("acme")
            for form in forms:
                for read in reads:
                    try:  # a refused form raises as the call is made, before any await
                        out.append(("answer", normalize(await read(mem, form))))
                    except synapsedb.SynapseError as err:
                        out.append(("error", type(err), err.code, err.details.get("field")))
        return out

    try:
        got = asyncio.run(run())
    finally:
        served.close()
    want = [outcome(read, local, form) for form in forms for read in reads]
    assert got == want
    assert [w[0] for w in want] == ["answer"] * 6 + ["error"] * 4
    assert want[0][1]["hits"] and want[0] != want[4]  # a non-empty answer, and another later
    assert all(w[3] == "valid_at" for w in want[6:])
