"""The seed's hooks (synapsedb.agent_state.hooks) storing into a real AgentMemoryAPI, embedded and
over HTTP: what an agent's ``act`` captured is found again by step."""

from __future__ import annotations

from typing import Any

from synapsedb import ManualClock
from synapsedb.agent_state import AgentMemoryAPI, BaseAgent, MemoryConfig, with_memory


class Counter:
    def __init__(self) -> None:
        self.value = 0

    def get_state(self) -> dict[str, Any]:
        return {"value": self.value, "health": 1.0}

    def act(self, observation: dict[str, Any]) -> dict[str, Any]:
        self.value += observation["add"]
        return {"action_type": "add", "amount": observation["add"]}


def test_with_memory_stores_states_and_actions_by_step(
    plain_db: tuple[Any, ManualClock],
) -> None:
    db, clock = plain_db
    api = AgentMemoryAPI(MemoryConfig(cleanup_interval=0), db, clock=clock)
    agent = with_memory(Counter(), agent_id="counter-1", api=api)
    for n in (1, 2, 3):
        agent.act({"add": n})
    stats = api.get_memory_statistics("counter-1")
    assert stats["memory_type_distribution"]["action"] == 3
    assert stats["memory_type_distribution"]["state"] >= 3
    states = api.retrieve_by_time_range("counter-1", memory_type="state")
    assert states[-1]["contents"]["value"] == 6
    steps = [
        m["step_number"] for m in api.retrieve_by_time_range("counter-1", memory_type="action")
    ]
    assert steps == sorted(steps) and len(set(steps)) == 3
    assert isinstance(BaseAgent, type)
