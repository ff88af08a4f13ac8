"""Queries with the real local embedding model (the default ONNX MiniLM) give the same hits,
in the same order, with the same scores (to 1e-6) and explanations, embedded and over HTTP.

Both databases share one model instance, loaded once for the module; the corpus is small (37
memories), so the whole module is about a second of embedding.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.client import RemoteDatabase
from synapsedb.embed import OnnxMiniLM
from synapsedb.server import create_app
from tests.congruence.conftest import ServedStorage

from .test_embedded_vs_http import normalize

START_US = 1_761_264_000_000_000  # 2025-10-24T00:00:00Z
TOL = 1e-6

# (entity, content, type, metadata, ts): six customers of a parcel service.
CORPUS: list[tuple[str, str, str, dict[str, Any], str]] = [
    (
        "user:1",
        "Parcel 1458 was delayed at the Hamburg depot",
        "event",
        {"channel": "email", "priority": 2},
        "2025-10-01",
    ),
    (
        "user:1",
        "Customer asked for a refund of the delivery fee",
        "request",
        {"channel": "email", "priority": 3},
        "2025-10-02",
    ),
    (
        "user:1",
        "Refund of 4.90 EUR approved by the support lead",
        "event",
        {"channel": "phone", "priority": 3},
        "2025-10-03",
    ),
    (
        "user:1",
        "Prefers to be contacted by phone in the evening",
        "preference",
        {"channel": "phone", "priority": 1},
        "2025-09-20",
    ),
    (
        "user:1",
        "Lives on the fourth floor without an elevator",
        "fact",
        {"channel": "chat", "priority": 1},
        "2025-08-11",
    ),
    (
        "user:1",
        "Complained that the courier did not ring the bell",
        "request",
        {"channel": "chat", "priority": 2},
        "2025-10-05",
    ),
    (
        "user:2",
        "Ordered a standing desk, delivery in two parts",
        "event",
        {"channel": "web", "priority": 1},
        "2025-09-28",
    ),
    (
        "user:2",
        "The second box of the desk never arrived",
        "request",
        {"channel": "email", "priority": 3},
        "2025-10-06",
    ),
    (
        "user:2",
        "Wants deliveries left with the neighbour at number 12",
        "preference",
        {"channel": "email", "priority": 1},
        "2025-09-01",
    ),
    (
        "user:2",
        "Is allergic to cats; the courier must not bring the dog inside",
        "fact",
        {"channel": "phone", "priority": 2},
        "2025-07-15",
    ),
    (
        "user:2",
        "Replacement box shipped with express courier",
        "event",
        {"channel": "web", "priority": 2},
        "2025-10-08",
    ),
    (
        "user:2",
        "Asked whether weekend delivery is possible",
        "request",
        {"channel": "chat", "priority": 1},
        "2025-10-09",
    ),
    (
        "user:3",
        "Business customer with twenty parcels a week",
        "fact",
        {"channel": "email", "priority": 2},
        "2025-06-30",
    ),
    (
        "user:3",
        "Invoice 77 for September was paid late",
        "event",
        {"channel": "email", "priority": 2},
        "2025-10-04",
    ),
    (
        "user:3",
        "Needs pickups before 9 am at the warehouse gate",
        "preference",
        {"channel": "phone", "priority": 2},
        "2025-05-05",
    ),
    (
        "user:3",
        "Requested a discount for bulk shipping",
        "request",
        {"channel": "email", "priority": 3},
        "2025-10-07",
    ),
    (
        "user:3",
        "A pallet was damaged during unloading",
        "event",
        {"channel": "phone", "priority": 3},
        "2025-10-10",
    ),
    (
        "user:3",
        "Insurance claim opened for the damaged pallet",
        "event",
        {"channel": "web", "priority": 3},
        "2025-10-11",
    ),
    (
        "user:4",
        "Moved to Munich, new address registered",
        "fact",
        {"channel": "web", "priority": 1},
        "2025-09-15",
    ),
    (
        "user:4",
        "Parcel sent to the old address in Berlin by mistake",
        "event",
        {"channel": "email", "priority": 3},
        "2025-10-02",
    ),
    (
        "user:4",
        "Wants all messages in German",
        "preference",
        {"channel": "email", "priority": 1},
        "2025-09-16",
    ),
    (
        "user:4",
        "Asked to reroute the parcel to Munich",
        "request",
        {"channel": "phone", "priority": 3},
        "2025-10-03",
    ),
    (
        "user:4",
        "Rerouting fee waived as a goodwill gesture",
        "event",
        {"channel": "phone", "priority": 2},
        "2025-10-04",
    ),
    (
        "user:4",
        "Birthday gift inside the parcel, must arrive by Friday",
        "fact",
        {"channel": "chat", "priority": 3},
        "2025-10-01",
    ),
    (
        "user:5",
        "Subscribed to the monthly coffee delivery",
        "event",
        {"channel": "web", "priority": 1},
        "2025-08-01",
    ),
    (
        "user:5",
        "Coffee beans arrived ground instead of whole",
        "request",
        {"channel": "email", "priority": 2},
        "2025-10-03",
    ),
    (
        "user:5",
        "Prefers oat milk samples with the coffee",
        "preference",
        {"channel": "chat", "priority": 1},
        "2025-08-02",
    ),
    (
        "user:5",
        "Paused the subscription for the holidays",
        "event",
        {"channel": "web", "priority": 1},
        "2025-10-12",
    ),
    (
        "user:5",
        "Card payment failed twice this month",
        "event",
        {"channel": "email", "priority": 3},
        "2025-10-13",
    ),
    (
        "user:5",
        "Asked how to update the payment card",
        "request",
        {"channel": "chat", "priority": 2},
        "2025-10-13",
    ),
    (
        "user:6",
        "New customer, first order is a bicycle",
        "fact",
        {"channel": "web", "priority": 1},
        "2025-10-10",
    ),
    (
        "user:6",
        "The bicycle box was too large for the van",
        "event",
        {"channel": "phone", "priority": 2},
        "2025-10-11",
    ),
    (
        "user:6",
        "Delivery rescheduled with a bigger truck",
        "event",
        {"channel": "phone", "priority": 2},
        "2025-10-12",
    ),
    (
        "user:6",
        "Wants assembly service for the bicycle",
        "request",
        {"channel": "email", "priority": 2},
        "2025-10-12",
    ),
    (
        "user:6",
        "Prefers text messages over emails",
        "preference",
        {"channel": "chat", "priority": 1},
        "2025-10-10",
    ),
    (
        "user:6",
        "Bicycle delivered and assembled, customer happy",
        "event",
        {"channel": "phone", "priority": 1},
        "2025-10-14",
    ),
]


@pytest.fixture(scope="module")
def model() -> OnnxMiniLM:
    """The default embedder (``embedder="minilm"`` builds exactly this), loaded once."""
    return OnnxMiniLM()


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory, model: OnnxMiniLM, served_storage: ServedStorage
) -> Iterator[tuple[Any, Any]]:
    tmp = tmp_path_factory.mktemp("hybrid")
    opened = []
    for name in ("embedded", "served"):
        clock = synapsedb.ManualClock(START_US)
        storage = served_storage() if name == "served" else None
        db = synapsedb.open(
            tmp / name,
            clock=clock,
            durability="os",
            embedder=model,
            background_maintenance=False,
            storage=storage,
        )
        mem = db.namespace("desk", agent="support")
        mem.write_many(
            [
                {"entity": e, "id": f"m{i:02d}", "content": c, "type": t, "metadata": md, "ts": ts}
                for i, (e, c, t, md, ts) in enumerate(CORPUS)
            ]
        )
        clock.advance(3600)  # then a later day: what as_of=START_US must not see
        mem.update("m00", {"content": "Parcel 1458 finally delivered to the customer in Hamburg"})
        mem.delete("m35")
        mem.write("user:6", {"id": "m36", "content": "Bicycle returned, refund requested"})
        opened.append(db)
    http = TestClient(create_app(opened[1]))
    remote = RemoteDatabase("http://testserver", client=http)
    yield opened[0].namespace("desk"), remote.namespace("desk")
    remote.close()
    http.close()
    for db in opened:
        db.close()


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("where is my parcel", {}),
    ("where is my parcel", {"mode": "hybrid", "k": 5}),
    ("refund for a late delivery", {"mode": "vector"}),
    ("refund for a late delivery", {"mode": "keyword"}),
    ("courier", {"mode": "keyword", "k": 3}),
    ("payment problems", {"k": 4, "explain": True}),
    ("payment problems", {"mode": "vector", "explain": True}),
    ("desk delivery", {"mode": "keyword", "explain": True}),
    ("how does the customer like to be contacted", {"types": ["preference"]}),
    ("damaged goods", {"filter": {"priority": {"$gte": 3}}}),
    ("damaged goods", {"filter": {"$or": [{"channel": "phone"}, {"channel": "web"}]}, "k": 20}),
    ("address change", {"entity": "user:4"}),
    ("user:4 address change", {}),  # an entity named in the text scopes the search
    ("user:6 bicycle", {"mode": "keyword", "explain": True}),
    ("bicycle", {"min_score": 0.3, "k": 20}),
    ("bicycle", {"mode": "vector", "min_score": 0.25, "k": 20}),
    ("coffee subscription", {"since": "2025-10-01", "until": "2025-10-13T00:00:00Z"}),
    ("coffee subscription", {"dedup": False, "k": 30, "mode": "vector"}),
    ("something nobody ever wrote about: volcanoes", {"mode": "keyword"}),
    ("parcel delivered", {"explain": True}),
    ("parcel delivered", {"as_of": START_US / 1e6, "explain": True}),
    ("bicycle refund", {"as_of": "2025-10-24T00:00:00Z", "mode": "vector"}),
    ("bicycle refund", {"mode": "vector"}),
]


def close(a: Any, b: Any, path: str = "") -> None:
    """Equal, except floats (scores, explanation components) which agree to ``TOL``."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=TOL, abs_tol=TOL), f"{path}: {a} != {b}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.mark.parametrize(("text", "options"), QUERIES, ids=[f"{t}|{o}" for t, o in QUERIES])
def test_same_hits_order_scores_and_explanations(
    pair: tuple[Any, Any], text: str, options: dict[str, Any]
) -> None:
    local, remote = pair
    a, b = local.query(text, **options), remote.query(text, **options)
    assert [h.id for h in a] == [h.id for h in b]
    close(normalize(a), normalize(b))


def test_queries_are_not_vacuous(pair: tuple[Any, Any]) -> None:
    """The comparisons above compare real rankings: vector and keyword modes disagree, scores
    are distinct floats, explanations carry components, filters cut."""
    local, _ = pair
    vector = local.query("refund for a late delivery", mode="vector")
    keyword = local.query("refund for a late delivery", mode="keyword")
    assert len(vector) == 10 and [h.id for h in vector] != [h.id for h in keyword]
    scores = [h.score for h in vector]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    explained = local.query("payment problems", k=4, explain=True)
    assert all(h.explanation for h in explained)
    assert all(
        h.metadata["priority"] >= 3
        for h in local.query("damaged goods", filter={"priority": {"$gte": 3}})
    )
    assert {h.entity for h in local.query("user:4 address change")} == {"user:4"}
    then, now = (
        local.query("bicycle refund", mode="vector", as_of=t) for t in (START_US / 1e6, None)
    )
    assert "m35" in [h.id for h in then] and "m35" not in [h.id for h in now]
    assert now[0].id == "m36" and "m36" not in [h.id for h in then]


def test_same_hits_for_a_caller_embedding(pair: tuple[Any, Any], model: OnnxMiniLM) -> None:
    """A vector computed by the caller (a numpy array) travels as JSON and finds the same."""
    local, remote = pair
    vec = model.embed(["late parcel and an angry customer"])[0]
    for mode in ("vector", "hybrid"):
        a = local.query(embedding=vec, mode=mode, k=8)
        b = remote.query(embedding=vec, mode=mode, k=8)
        assert len(a) == 8
        close(normalize(a), normalize(b))
