"""AgentMemoryAPI, embedded and over HTTP (the agent_db fixture runs each test on both)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from synapsedb import ManualClock, SynapseError, ValidationError
from synapsedb.agent_state import (
    ActionData,
    AgentMemoryAPI,
    AgentState,
    MemoryAPIException,
    MemoryConfig,
    MemoryConfigException,
    MemoryStoreException,
)


def api_of(agent_db: tuple[Any, ManualClock], **config: Any) -> AgentMemoryAPI:
    db, clock = agent_db
    config.setdefault("cleanup_interval", 0)
    return AgentMemoryAPI(MemoryConfig(**config), db, clock=clock)


def test_a_state_round_trips_exactly(agent_db: tuple[Any, ManualClock]) -> None:
    api = api_of(agent_db)
    state = {
        "position": [10, 20],
        "health": 0.85,
        "inventory": {"wood": 5, "stone": 2},
        "tags": ["a", "b"],
        "ok": True,
        "none": None,
        "big": 2**62,
        "tiny": 1e-300,
        "text": "ünïcode ✓",
        "nested": {"deep": {"list": [{"x": 1.5}]}},
    }
    mid = api.store_agent_state("agent-123", state, step_number=1234, priority=0.75)
    rec = api.retrieve_by_id("agent-123", mid)
    assert rec["contents"] == state
    assert [type(v) for v in rec["contents"].values()] == [type(v) for v in state.values()]
    assert rec["step_number"] == 1234 and rec["memory_type"] == "state"
    assert rec["metadata"]["importance_score"] == 0.75 and rec["tier"] == "stm"


def test_entries_carry_their_retrieval_count_and_last_access_time(
    agent_db: tuple[Any, ManualClock],
) -> None:
    api = api_of(agent_db, cache_ttl=0)
    mid = api.store_agent_state("agent-1", {"health": 1.0}, step_number=1)
    other = api.store_agent_state("agent-1", {"health": 0.5}, step_number=2)
    first = api.retrieve_by_id("agent-1", mid)["metadata"]
    assert first["retrieval_count"] == 1 and first["last_access_time"] is not None
    again = api.retrieve_by_id("agent-1", mid)["metadata"]
    assert again["retrieval_count"] == 2 and again["last_access_time"] >= first["last_access_time"]
    ranged = {r["memory_id"]: r["metadata"] for r in api.retrieve_by_time_range("agent-1", 1, 2)}
    assert ranged[mid]["retrieval_count"] == 3  # this retrieval read it too
    assert ranged[other]["retrieval_count"] == 1


def test_time_range_by_step_and_by_clock(agent_db: tuple[Any, ManualClock]) -> None:
    _, clock = agent_db
    api = api_of(agent_db)
    steps = list(range(40))
    random.Random(3).shuffle(steps)  # stored out of step order
    t_mid = None
    for i, step in enumerate(steps):
        kind = api.store_agent_action if step % 2 else api.store_agent_state
        kind("a1", {"n": step}, step_number=step)
        api.store_agent_state("other", {"n": step}, step_number=step)
        clock.advance(1.0)
        if i == 19:
            t_mid = clock.now_us() / 1e6
    got = api.retrieve_by_time_range("a1", 10, 19)
    assert [r["step_number"] for r in got] == list(range(10, 20))
    assert all(r["agent_id"] == "a1" for r in got)
    acts = api.retrieve_by_time_range("a1", 10, 19, memory_type="action")
    assert [r["step_number"] for r in acts] == [11, 13, 15, 17, 19]
    assert [r["step_number"] for r in api.retrieve_by_time_range("a1", start_step=38)] == [38, 39]
    late = api.retrieve_by_time_range("a1", start_time=t_mid)
    assert sorted(r["step_number"] for r in late) == sorted(steps[20:])
    early = api.retrieve_by_time_range("a1", end_time=t_mid, start_step=0, end_step=100)
    assert sorted(r["step_number"] for r in early) == sorted(steps[:20])


def test_recent_states_are_the_highest_steps_even_out_of_order(
    agent_db: tuple[Any, ManualClock],
) -> None:
    _, clock = agent_db
    api = api_of(agent_db)
    for step in [5, 1, 9, 3, 7, 100, 2, 8]:
        api.store_agent_state("a1", {"s": step}, step_number=step)
        clock.advance(0.001)
    space = api.get_memory_space("a1")
    assert [r["step_number"] for r in space.retrieve_recent_states(3)] == [100, 9, 8]
    # stored last, but an old step: recent means highest step
    api.store_agent_state("a1", {"s": 0}, step_number=0)
    assert [r["step_number"] for r in space.retrieve_recent_states(2)] == [100, 9]
    assert len(space.retrieve_recent_states(50)) == 9
    api.store_agent_action("a1", {"action_type": "move"}, step_number=101)
    assert [r["step_number"] for r in space.retrieve_recent_states(2, "state")] == [100, 9]
    assert space.retrieve_recent_states(1)[0]["memory_type"] == "action"


def test_scans_page_past_a_thousand_with_shared_times(plain_db: tuple[Any, ManualClock]) -> None:
    _, clock = plain_db
    api = api_of(plain_db)
    for step in range(2300):
        api.store_agent_state("a1", {"s": step}, step_number=step, priority=(step % 10) / 10)
        if step % 3 == 2:  # three memories to one clock microsecond
            clock.advance(us=1)
    got = api.retrieve_by_time_range("a1", 100, 2199)
    assert [r["step_number"] for r in got] == list(range(100, 2200))
    assert api.get_memory_statistics("a1")["total_memories"] == 2300
    top = api.retrieve_by_importance("a1", k=5)
    assert [r["step_number"] for r in top] == [2299, 2289, 2279, 2269, 2259]
    assert all(r["metadata"]["importance_score"] == 0.9 for r in top)
    recent = api.get_memory_space("a1").retrieve_recent_states(1200)
    assert [r["step_number"] for r in recent] == list(range(2299, 1099, -1))


@pytest.mark.parametrize(
    "priorities",
    [
        [1.0] * 30,  # every memory ties at the top: all are read
        [0.995, 0.2, 0.95, 0.92, 0.6, 0.3, 0.55, 0.1] * 4,  # thresholds 0.99, 0.9, 0.5 in turn
        [0.1, 0.2, 0.3, 0.05] * 8,  # below every threshold: the floor decides
    ],
)
def test_importance_is_the_k_best_by_a_full_sort(
    plain_db: tuple[Any, ManualClock], priorities: list[float]
) -> None:
    api = api_of(plain_db)
    for step, p in enumerate(priorities):
        api.store_agent_state("a1", {"s": step}, step_number=step, priority=p)
    best = sorted(range(len(priorities)), key=lambda s: (-priorities[s], -s))
    for k in (1, 3, 9, 40):
        got = api.retrieve_by_importance("a1", k=k)
        assert [r["step_number"] for r in got] == best[:k], k
    floor = 0.25
    got = api.retrieve_by_importance("a1", k=40, min_importance=floor)
    assert [r["step_number"] for r in got] == [s for s in best if priorities[s] >= floor]


def test_attributes(agent_db: tuple[Any, ManualClock]) -> None:
    api = api_of(agent_db)
    api.store_agent_action(
        "a1",
        {"action_type": "trade", "outcome": "success", "items": {"wood": 2}, "pos": [1, 2]},
        10,
    )
    api.store_agent_action("a1", {"action_type": "trade", "outcome": "failure"}, 11)
    api.store_agent_action("a1", {"action_type": "move", "outcome": "success", "flag": 1}, 12)
    api.store_agent_action("a1", {"action_type": "move", "flag": True, "pos": [2, 1]}, 13)
    api.store_agent_state("a1", {"action_type": "trade", "outcome": "success"}, 14)

    def steps(attrs: dict[str, Any], t: str | None = "action") -> list[int]:
        return [r["step_number"] for r in api.retrieve_by_attributes("a1", attrs, t)]

    assert steps({"action_type": "trade", "outcome": "success"}) == [10]
    assert steps({"action_type": "trade", "outcome": "success"}, None) == [14, 10]
    assert steps({"items": {"wood": 2}}) == [10] == steps({"items.wood": 2})
    assert steps({"pos": [1, 2]}) == [10]  # a list must equal the stored list
    assert steps({"flag": True}) == [13] and steps({"flag": 1}) == [12]
    assert steps({"outcome": "nothing"}) == []
    for bad in ({}, {"$or": 1}, {"x": object()}, [("a", 1)]):
        with pytest.raises(ValidationError) as exc:
            api.retrieve_by_attributes("a1", bad)  # type: ignore[arg-type]
        assert exc.value.field and exc.value.field.startswith("attributes")


def test_tiers_compress_expand_and_merge_by_score(agent_db: tuple[Any, ManualClock]) -> None:
    api = api_of(
        agent_db,
        stm_config={"memory_limit": 4},
        im_config={"memory_limit": 3},
        memory_priority_decay=0.8,
        decay_steps=1,
    )
    ids = {}
    for step in range(10):
        state = {
            "position": [step, 2 * step],
            "health": 1 / (step + 3),
            "log": "x" * 300,
            "inventory": {"wood": step, "stone": 1},
        }
        ids[step] = api.store_agent_state("a1", state, step, priority=1.0 if step == 1 else 0.5)
    report = api.force_memory_maintenance("a1")
    assert report == {"agents": 1, "to_im": 3, "to_ltm": 3}
    stats = api.get_memory_statistics("a1")
    assert stats["tier_distribution"] == {"stm": 4, "im": 3, "ltm": 3}
    assert stats["total_memories"] == 10
    tiers = {r["step_number"]: r["tier"] for r in api.retrieve_by_time_range("a1", 0, 9)}
    # retention = priority x 0.8 ** age: step 1 (priority 1.0, 0.168) outranks step 3 (0.131)
    assert tiers == {
        9: "stm",
        8: "stm",
        7: "stm",
        6: "stm",
        5: "im",
        4: "im",
        1: "im",
        3: "ltm",
        2: "ltm",
        0: "ltm",
    }
    im = api.retrieve_by_id("a1", ids[4])
    assert im["contents"]["log"] == "x" * 119 + "…" and im["contents"]["health"] == 0.143
    assert im["metadata"]["compression_level"] == 1
    ltm = api.retrieve_by_id("a1", ids[2])
    assert ltm["contents"] == {
        "position": [2, 4],
        "health": 0.2,
        "log": "x" * 39 + "…",
        "inventory": "<2 fields>",
    }
    full = api.expand_memory("a1", ids[2])
    assert full["contents"]["log"] == "x" * 300 and full["contents"]["inventory"]["wood"] == 2
    assert full["metadata"]["expanded_from"] == "ltm"
    # searches: tiers filter, merged by score
    space = api.get_memory_space("a1")
    hits = space.search_by_content("position", k=10, memory_tiers=["stm", "im"])
    assert {h["tier"] for h in hits} == {"stm", "im"} and len(hits) == 7
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert {h["tier"] for h in space.search_by_content("position", 10, ["ltm"])} == {"ltm"}
    # a second pass moves nothing more; restore brings the full detail back to STM
    assert api.force_memory_maintenance("a1")["to_ltm"] == 0
    api.expand_memory("a1", ids[2], restore=True)
    back = api.retrieve_by_id("a1", ids[2])
    assert back["tier"] == "stm" and back["contents"]["log"] == "x" * 300


def test_tiers_by_clock_ttl_and_by_cleanup_interval(agent_db: tuple[Any, ManualClock]) -> None:
    _, clock = agent_db
    api = api_of(agent_db, cleanup_interval=5, stm_config={"memory_limit": None, "ttl": 60})
    for step in range(4):
        api.store_agent_state("a1", {"s": step}, step)
    clock.advance(120)
    assert api.get_memory_statistics("a1")["tier_distribution"]["im"] == 0
    api.store_agent_state("a1", {"s": 4}, 4)  # the 5th store runs maintenance
    assert api.get_memory_statistics("a1")["tier_distribution"] == {"stm": 1, "im": 4, "ltm": 0}


def test_hot_limit_sends_ltm_to_the_engines_cold_tier(agent_db: tuple[Any, ManualClock]) -> None:
    api = api_of(
        agent_db, hot_limit=6, stm_config={"memory_limit": 3}, im_config={"memory_limit": 3}
    )
    for step in range(10):
        api.store_agent_state("a1", {"s": step, "word": f"w{step}"}, step)
    api.force_memory_maintenance()
    stats = api.get_memory_statistics("a1")
    assert stats["engine_tiers"] == {"hot": 6, "cold": 4}
    assert stats["tier_distribution"] == {"stm": 3, "im": 3, "ltm": 4}
    assert [r["step_number"] for r in api.retrieve_by_time_range("a1", 0, 9)] == list(range(10))
    space = api.get_memory_space("a1")
    ltm = space.search_by_content("step", 10, ["ltm"])
    assert sorted(h["step_number"] for h in ltm) == [0, 1, 2, 3]
    assert {h["metadata"]["engine_tier"] for h in ltm} == {"cold"}


def test_search_by_embedding_and_similar_states(agent_db: tuple[Any, ManualClock]) -> None:
    api = api_of(agent_db)
    for step in range(12):
        api.store_agent_state("a1", {"position": [step, step], "mood": "calm"}, step)
    space = api.get_memory_space("a1")
    probe = space.search_by_content("position 5 5", k=1)[0]
    assert probe["step_number"] == 5
    with pytest.raises(ValidationError) as exc:
        space.search_by_embedding([0.1, 0.2, 0.3], k=3)
    assert exc.value.field == "query_embedding"
    vec = api.db.namespace(api.config.namespace).get(probe["memory_id"]).embedding
    if vec is not None:  # embedded: the stored vector is at hand
        near = space.search_by_embedding(list(map(float, vec)), k=3, memory_tiers=["stm"])
        assert near[0]["step_number"] == 5 and near[0]["score"] == pytest.approx(1.0, abs=1e-5)
    sim = api.retrieve_similar_states("a1", {"position": [7.2, 6.9], "mood": "calm"}, k=3)
    got = [r["step_number"] for r in sim]
    assert got[0] == 7 and sorted(got) == [6, 7, 8]
    assert [r["distance"] for r in sim] == sorted(r["distance"] for r in sim)
    assert (
        space.retrieve_similar_states(agent_id="a1", query_state={"position": [0, 0]}, k=1)[0][
            "step_number"
        ]
        == 0
    )
    with pytest.raises(ValidationError):
        space.retrieve_similar_states(agent_id="someone-else", query_state={"x": 1})


def test_the_cache_serves_until_a_store_or_clear(agent_db: tuple[Any, ManualClock]) -> None:
    api = api_of(agent_db, cache_ttl=300)
    api.store_agent_state("a1", {"s": 1}, 1)
    first = api.retrieve_by_time_range("a1", 0, 10)
    first[0]["contents"]["s"] = "changed by the caller"
    assert api.retrieve_by_time_range("a1", 0, 10)[0]["contents"] == {"s": 1}
    assert api.cache.hits == 1
    api.store_agent_state("a1", {"s": 2}, 2)  # a store drops the agent's entries
    assert len(api.retrieve_by_time_range("a1", 0, 10)) == 2
    api.clear_cache()
    assert len(api.cache) == 0
    api.set_cache_ttl(0)
    api.retrieve_by_time_range("a1", 0, 10)
    assert len(api.cache) == 0
    with pytest.raises(MemoryConfigException):
        api.set_cache_ttl(-1)


def test_models(agent_db: tuple[Any, ManualClock]) -> None:
    api = api_of(agent_db)
    state = AgentState(
        agent_id="a1",
        step_number=3,
        health=0.5,
        position_x=1,
        extra_data={"inventory": {"wood": 1}},
    )
    mid = api.store_agent_state("a1", state, state.step_number)
    assert api.retrieve_by_id("a1", mid)["contents"] == {
        "agent_id": "a1",
        "step_number": 3,
        "health": 0.5,
        "position_x": 1,
        "inventory": {"wood": 1},
    }
    data = ActionData("move", {"dx": 1}, {"x": 1, "hp": 5}, {"x": 2, "hp": 5}, 0.5, 0.01, 3)
    assert data.as_dict()["state_difference"] == {"x": 1}
    aid = api.store_agent_action("a1", data, 3)
    assert api.retrieve_by_id("a1", aid)["contents"]["state_after"] == {"x": 2, "hp": 5}
    with pytest.raises(ValidationError) as exc:
        AgentState(agent_id="a1", step_number=1, health=0.2, extra_data={"health": 1}).as_dict()
    assert exc.value.field == "extra_data.health"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda a: a.store_agent_state("a1", {"x": float("nan")}, 1), "state_data.x"),
        (lambda a: a.store_agent_state("a1", ["not", "a", "dict"], 1), "state_data"),
        (lambda a: a.store_agent_state("a1", {1: "x"}, 1), "state_data"),
        (lambda a: a.store_agent_state("a1", {"x": 1}, 1.5), "step_number"),
        (lambda a: a.store_agent_state("a1", {"x": 1}, True), "step_number"),
        (lambda a: a.store_agent_state("a1", {"x": 1}, 2**60), "step_number"),
        (lambda a: a.store_agent_state("a1", {"x": 1}, 1, priority=1.5), "priority"),
        (lambda a: a.store_agent_state("", {"x": 1}, 1), "agent_id"),
        (lambda a: a.store_agent_state("a1", {"x": "y" * 40000}, 1), "state_data"),
        (lambda a: a.store_agent_action("a1", {"x": {"y": 2**70}}, 1), "action_data"),
        (lambda a: a.retrieve_by_time_range("a1", "1", 2), "start_step"),
        (lambda a: a.get_memory_space("a1").retrieve_recent_states(0), "count"),
        (lambda a: a.get_memory_space("a1").search_by_content("", 3), "content_query"),
        (lambda a: a.get_memory_space("a1").search_by_content("x", 3, ["mtm"]), "memory_tiers"),
        (lambda a: a.get_memory_space("a1").search_by_content("x", 0), "k"),
        (lambda a: a.retrieve_similar_states("a1", {"x": 1}, k=0), "k"),
        (lambda a: a.retrieve_by_importance("a1", min_importance=2), "priority"),
    ],
)
def test_hostile_inputs_are_refused_and_store_nothing(
    agent_db: tuple[Any, ManualClock], call: Any, field: str
) -> None:
    api = api_of(agent_db)
    with pytest.raises(ValidationError) as exc:
        call(api)
    assert exc.value.field == field, exc.value
    assert api.get_memory_statistics("a1")["total_memories"] == 0


def test_store_failures_are_seed_exceptions_and_synapse_errors(tmp_path: Any) -> None:
    import synapsedb

    db = synapsedb.open(tmp_path / "d", durability="os", llm=None, embedder=None)
    api = AgentMemoryAPI(MemoryConfig(cleanup_interval=0), db)
    api.store_agent_state("a1", {"x": 1}, 1)
    db.close()
    with pytest.raises(MemoryStoreException) as exc:
        api.store_agent_state("a1", {"x": 2}, 2)
    assert isinstance(exc.value, MemoryAPIException) and isinstance(exc.value, SynapseError)
    assert exc.value.details["cause"] == "closed"
    from synapsedb.agent_state import MemoryRetrievalException

    with pytest.raises(MemoryRetrievalException):
        api.retrieve_by_time_range("a1", 0, 5)


def test_config_errors_name_the_setting() -> None:
    for kwargs, field in [
        ({"memory_priority_decay": 0}, "memory_priority_decay"),
        ({"stm_config": {"memory_limit": 0}}, "stm_config.memory_limit"),
        ({"im_config": {"ttl": -1}}, "im_config.ttl"),
        ({"ltm_config": {"nope": 1}}, "ltm_config.nope"),
        ({"cleanup_interval": -1}, "cleanup_interval"),
        ({"hot_limit": 0}, "hot_limit"),
        ({"stm_config": 5}, "stm_config"),
    ]:
        with pytest.raises(MemoryConfigException) as exc:
            MemoryConfig(**kwargs)
        assert exc.value.field == field and isinstance(exc.value, ValidationError)


def test_location_queries(plain_db: tuple[Any, ManualClock]) -> None:
    api = api_of(plain_db)
    for step, pos in enumerate([[10, 20], [12, 22], [13, 21], [40, 40], [12, 23, 1]]):
        api.store_agent_state("a1", {"position": pos}, step)
    api.store_agent_state("a1", {"position": "nowhere"}, 9)
    near = api.retrieve_by_location("a1", [12, 22], 2.0)
    assert [r["step_number"] for r in near] == [1, 2]
    assert near[0]["distance"] == 0.0 and near[1]["distance"] == pytest.approx(2**0.5)
    boxed = api.retrieve_by_location("a1", box=[[13, 23], [10, 20]])
    assert [r["step_number"] for r in boxed] == [2, 1, 0]
    for kwargs, field in [
        ({"point": [1, 2], "radius": -1}, "filter.data.position.$near"),
        ({}, "point"),
        ({"point": [1, 2], "radius": 1, "field": "$x"}, "field"),
    ]:
        with pytest.raises(ValidationError) as exc:
            api.retrieve_by_location("a1", **kwargs)
        assert (exc.value.field or "").startswith(field)
