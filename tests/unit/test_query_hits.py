"""A query's hits carry each field of the memory version they come from (query/executor.py
builds them positionally, in Hit's field order, so a reordered Hit must fail here)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from synapsedb import Namespace
from synapsedb.types import Hit


def unit(seed: int, dim: int = 16) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).tolist()


def test_hit_field_order_is_the_one_the_executor_builds() -> None:
    assert [f.name for f in dataclasses.fields(Hit)] == [
        "id",
        "entity",
        "content",
        "type",
        "metadata",
        "ts",
        "version",
        "score",
        "agent",
        "salience",
        "duplicates",
        "explanation",
        "tier",
    ]


@pytest.mark.parametrize("mode", ["vector", "hybrid", "keyword"])
@pytest.mark.parametrize("explain", [False, True])
def test_each_hit_field_matches_the_memory(mem: Namespace, mode: str, explain: bool) -> None:
    written = mem.write_many(
        [
            {
                "entity": f"user:{i % 3}",
                "content": f"parcel {i} delivered to the depot",
                "type": ("note", "event")[i % 2],
                "metadata": {"bucket": i, "tags": ["a", str(i)], "deep": {"x": i / 2}},
                "embedding": unit(i),
                "salience": 0.1 + i / 100,
                "agent": f"agent-{i % 2}",
            }
            for i in range(12)
        ]
    )
    by_id = {m.id: m for m in written}
    res = mem.query(
        "parcel delivered",
        embedding=None if mode == "keyword" else unit(4),
        mode=mode,  # type: ignore[arg-type]
        k=5,
        explain=explain,
    )
    assert len(res) == 5
    for hit in res:
        m = by_id[hit.id]
        assert (hit.entity, hit.content, hit.type, hit.metadata) == (
            m.entity,
            m.content,
            m.type,
            m.metadata,
        )
        assert (hit.ts, hit.version, hit.agent, hit.salience) == (
            m.ts,
            m.version,
            m.agent,
            m.salience,
        )
        assert isinstance(hit.score, float) and hit.duplicates == () and hit.tier == "hot"
        if explain:
            assert hit.explanation is not None and hit.explanation["score"] == hit.score
            assert all(isinstance(v, float) for v in hit.explanation.values())
        else:
            assert hit.explanation is None
    if mode == "vector":
        assert res.hits[0].id == written[4].id
        assert res.hits[0].score == pytest.approx(1.0, abs=1e-6)
    # each hit's metadata is its own: changing one changes no later answer
    res.hits[0].metadata["bucket"] = -1
    again = mem.query(
        "parcel delivered", embedding=unit(4) if mode != "keyword" else None, mode=mode, k=5
    )  # type: ignore[arg-type]
    assert by_id[again.hits[0].id].metadata == again.hits[0].metadata
