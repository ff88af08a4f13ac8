"""Values that JSON or a query string cannot carry as they are (NaN, ``date``, numpy scalars, a
list where a number goes) must give the same answer or error embedded and over HTTP.

Time arguments (as_of, since, until) are covered by test_as_of_forms.py. Each field's kind in the
operations table (synapsedb.surface.kinds) refuses, with the engine's error, a value the wire
would carry changed: a numpy integer (JSON and the query string would send its digits), a list
where a number goes (the query string would repeat the parameter), NaN (JSON null).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.client import RemoteDatabase
from synapsedb.server import create_app
from tests.congruence.conftest import ServedStorage

from .test_embedded_vs_http import normalize


@pytest.fixture
def pair(tmp_path: Path, served_storage: ServedStorage) -> Iterator[tuple[Any, Any]]:
    start = 1_761_264_000_000_000
    local = synapsedb.open(
        tmp_path / "a",
        clock=synapsedb.ManualClock(start),
        durability="os",
        embedder=None,
        background_maintenance=False,
    )
    served = synapsedb.open(
        tmp_path / "b",
        clock=synapsedb.ManualClock(start),
        durability="os",
        embedder=None,
        background_maintenance=False,
        storage=served_storage(),
    )
    http = TestClient(create_app(served))
    remote = RemoteDatabase("http://testserver", client=http)
    yield local.namespace("acme"), remote.namespace("acme")
    remote.close()
    http.close()
    served.close()
    local.close()


NAN = float("nan")
CASES: list[Any] = [
    pytest.param(lambda m: m.write("u", {"content": "x", "salience": NAN}), id="salience NaN"),
    pytest.param(lambda m: m.write("u", {"content": "x", "ts": NAN}), id="write ts NaN"),
    pytest.param(
        lambda m: m.write("u", {"content": "x", "ts": date(2025, 10, 24)}), id="write ts date"
    ),
    pytest.param(
        lambda m: m.write("u", {"content": "x", "metadata": {"a": NAN}}), id="metadata NaN"
    ),
    pytest.param(
        lambda m: m.write("u", {"content": "x", "metadata": {"a": date(2025, 1, 1)}}),
        id="metadata date",
    ),
    pytest.param(lambda m: m.set("u", "k", NAN), id="fact value NaN"),
    pytest.param(lambda m: m.set("u", "k", 1, ttl=NAN), id="fact ttl NaN"),
    pytest.param(
        lambda m: m.write("u", {"id": "m1", "content": "x", "salience": np.float64(0.9)}),
        id="salience numpy float",
    ),
    pytest.param(lambda m: m.query("x", k=np.int64(5)), id="query k numpy int"),
    pytest.param(lambda m: m.query("x", mode="keyword", min_score=NAN), id="min_score NaN"),
    pytest.param(lambda m: m.events("s", limit=np.int64(5)), id="events limit numpy int"),
    pytest.param(lambda m: m.events("s", limit=[5]), id="events limit list"),
    pytest.param(lambda m: m.entities(limit=np.int64(5)), id="entities limit numpy int"),
    pytest.param(lambda m: m.entities(limit=[5]), id="entities limit list"),
    pytest.param(lambda m: m.entities(limit=2.0), id="entities limit float"),
    pytest.param(lambda m: m.entities(prefix=b"u"), id="entities prefix bytes"),
    pytest.param(lambda m: m.entities(after=np.str_("a")), id="entities after numpy str"),
    pytest.param(lambda m: m.memories(before=["m0"]), id="memories before list"),
    pytest.param(lambda m: m.streams(limit=np.int64(5)), id="streams limit numpy int"),
    pytest.param(lambda m: m.streams(limit=[5]), id="streams limit list"),
    pytest.param(lambda m: m.streams(limit=2.0), id="streams limit float"),
    pytest.param(lambda m: m.streams(prefix=b"s"), id="streams prefix bytes"),
    pytest.param(lambda m: m.streams(after=np.str_("a")), id="streams after numpy str"),
]


def outcome(call: Callable[[Any], Any], mem: Any) -> Any:
    try:
        return ("answer", normalize(call(mem)))
    except synapsedb.SynapseError as err:
        return ("error", type(err), err.code, err.details.get("field"))


@pytest.mark.parametrize("call", CASES)
def test_same_answer_or_error(pair: tuple[Any, Any], call: Callable[[Any], Any]) -> None:
    local, remote = pair
    for mem in pair:
        mem.write("u", {"id": "m0", "content": "x marks the spot"})
        mem.append("u", "e", stream="s", searchable=False)
    assert outcome(call, remote) == outcome(call, local)
