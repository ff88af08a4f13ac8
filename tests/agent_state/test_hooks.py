"""Memory hooks: act is captured (states before and after, the diff, the action), steps are
numbered automatically, and a failing memory never breaks the agent.

Most tests use a fake API that records the calls (named so); the last ones use the real
``AgentMemoryAPI``, embedded and over HTTP."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from tests.support.live_server import serve

import synapsedb
from synapsedb.agent_state import AgentMemoryAPI, MemoryConfig
from synapsedb.agent_state.hooks import (
    BaseAgent,
    install_memory_hooks,
    memory_hook_stats,
    with_memory,
)
from synapsedb.agent_state.models import ActionResult, AgentState
from synapsedb.errors import StorageError, ValidationError
from synapsedb.server import create_app


class FakeApi:
    """Records store_agent_state / store_agent_action calls; can be told to fail."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str, dict[str, Any], int]] = []
        self.fail = fail

    def store_agent_state(
        self, agent_id: str, state_data: dict[str, Any], step_number: int, priority: float = 1.0
    ) -> None:
        if self.fail:
            raise StorageError("the database is down")
        self.calls.append(("state", agent_id, state_data, step_number))

    def store_agent_action(
        self, agent_id: str, action_data: dict[str, Any], step_number: int, priority: float = 1.0
    ) -> None:
        if self.fail:
            raise StorageError("the database is down")
        self.calls.append(("action", agent_id, action_data, step_number))


class Walker(BaseAgent):
    def __init__(self, config: Any = None, agent_id: str | None = None) -> None:
        super().__init__(config, agent_id)
        self.x = 0
        self.health = 1.0

    def act(self, observation: Any) -> Any:
        if observation == "boom":
            raise RuntimeError("agent error")
        self.x += observation["dx"]
        self.health -= 0.1
        return ActionResult(action_type="move", params={"dx": observation["dx"]}, reward=1.5)

    def get_state(self) -> AgentState:
        state = super().get_state()
        state.extra_data["x"] = self.x
        state.health = self.health
        return state


def hooked_walker(api: Any) -> type[Walker]:
    """A fresh hooked subclass (decorating Walker itself would hook it for every test)."""
    return install_memory_hooks(api=api)(type("HookedWalker", (Walker,), {}))  # type: ignore[no-any-return]


def test_decorated_agent_records_states_actions_and_steps_with_fake_api() -> None:
    api = FakeApi()
    Hooked = hooked_walker(api)
    agent = Hooked(agent_id="walker-1")
    result = agent.act({"dx": 2})
    assert isinstance(result, ActionResult) and result.action_type == "move"
    agent.act({"dx": 3})
    kinds = [(c[0], c[3]) for c in api.calls]
    # the first before-state at 0, then per step: the action at s and the state after at s+1
    assert kinds == [("state", 0), ("action", 0), ("state", 1), ("action", 1), ("state", 2)]
    assert {c[1] for c in api.calls} == {"walker-1"}
    s0, a0, s1 = api.calls[0][2], api.calls[1][2], api.calls[2][2]
    assert s0 == {"health": 1.0, "x": 0}  # agent_id and step_number are the memory's, not data
    assert s1 == {"x": 2, "health": 0.9}
    assert a0["action_type"] == "move" and a0["action_params"] == {"dx": 2}
    assert a0["reward"] == 1.5 and a0["success"] is True
    assert a0["state_before"] == s0 and a0["state_after"] == s1
    assert a0["state_difference"] == {"x": 2, "health": pytest.approx(-0.1)}
    assert a0["observation"] == {"dx": 2}
    assert a0["execution_time"] >= 0
    assert agent.step_number == 2
    stats = memory_hook_stats(agent)
    assert (stats.steps, stats.stored, stats.failures) == (2, 5, 0)


def test_state_changed_between_steps_is_stored_again_with_fake_api() -> None:
    api = FakeApi()
    agent = hooked_walker(api)(agent_id="w")
    agent.act({"dx": 1})
    agent.x = 100  # teleported outside act
    agent.act({"dx": 1})
    states = [(c[3], c[2]["x"]) for c in api.calls if c[0] == "state"]
    assert states == [(0, 0), (1, 1), (1, 100), (2, 101)]


def test_seed_style_decorator_and_get_state_extension_with_fake_api() -> None:
    @install_memory_hooks
    class MyAgent(BaseAgent):
        def __init__(self, config: Any = None, agent_id: str | None = None) -> None:
            super().__init__(config, agent_id)
            self.some_internal_state = "curious"

        def act(self, observation: Any) -> Any:
            return self.process(observation)

        def get_state(self) -> AgentState:
            state = super().get_state()
            state.extra_data["custom_field"] = self.some_internal_state
            return state

    api = FakeApi()
    agent = MyAgent(agent_id="seed-agent")
    agent.memory_api = api  # the agent's own API
    out = agent.act({"user_input": "What's the weather today?"})
    assert isinstance(out, ActionResult) and out.action_type == "observe"
    action = next(c for c in api.calls if c[0] == "action")
    assert action[2]["action_params"] == {
        "observation": {"user_input": "What's the weather today?"}
    }
    assert api.calls[0][2] == {"custom_field": "curious"}


def test_subclass_overriding_act_is_hooked_once_with_fake_api() -> None:
    api = FakeApi()

    @install_memory_hooks(api=api)
    class Parent(BaseAgent):
        def act(self, observation: Any) -> Any:
            return {"action_type": "parent", "params": {"o": observation}, "reward": 2}

    class Child(Parent):
        def act(self, observation: Any) -> Any:
            inner = super().act(observation)  # nested: recorded once, by the outer call
            return {**inner, "action_type": "child"}

    child = Child(agent_id="c")
    child.act(5)
    actions = [c for c in api.calls if c[0] == "action"]
    assert len(actions) == 1
    assert actions[0][2]["action_type"] == "child"
    assert actions[0][2]["reward"] == 2.0
    assert actions[0][2]["action_params"] == {"o": 5}


def test_with_memory_on_an_existing_object_with_fake_api() -> None:
    class ExistingAgentClass:  # no BaseAgent, no get_state
        def __init__(self) -> None:
            self.mood = "ok"
            self.energy = 10
            self._secret = "x"
            self.helper = print  # not a JSON value: left out

        def act(self, observation: Any) -> str:
            self.energy -= 1
            return f"answer to {observation['user_input']}"

    api = FakeApi()
    agent = ExistingAgentClass()
    enhanced = with_memory(agent, agent_id="agent-456", api=api)
    assert enhanced is agent
    result = enhanced.act({"user_input": "What's the weather today?"})
    assert result == "answer to What's the weather today?"
    assert [c[0] for c in api.calls] == ["state", "action", "state"]
    assert api.calls[0][2] == {"mood": "ok", "energy": 10}
    action = api.calls[1][2]
    assert action["action_type"] == "act"
    assert action["result"] == "answer to What's the weather today?"
    assert action["state_difference"] == {"energy": -1}
    assert {c[1] for c in api.calls} == {"agent-456"}
    # hooking again replaces the hook (its id and api); no double recording
    api2 = FakeApi()
    with_memory(agent, agent_id="agent-789", api=api2)
    agent.act({"user_input": "again"})
    assert len(api.calls) == 3
    assert [c[1] for c in api2.calls] == ["agent-789"] * len(api2.calls) and api2.calls


def test_with_memory_on_a_slotted_object_gives_a_proxy_with_fake_api() -> None:
    class Slotted:
        __slots__ = ("n",)

        def __init__(self) -> None:
            self.n = 0

        def act(self, observation: Any) -> int:
            self.n += observation
            return self.n

        def get_state(self) -> dict[str, Any]:
            return {"n": self.n}

    api = FakeApi()
    raw = Slotted()
    agent = with_memory(raw, agent_id="s", api=api)
    assert agent is not raw
    assert agent.act(4) == 4 and agent.n == 4 and raw.n == 4
    agent.n = 10
    assert raw.n == 10
    assert [c[3] for c in api.calls] == [0, 0, 1]
    assert memory_hook_stats(agent).steps == 1


def test_memory_failure_never_breaks_the_agent_with_fake_api(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeApi(fail=True)
    agent = hooked_walker(api)(agent_id="w")
    with caplog.at_level(logging.WARNING, logger="synapsedb.agent_state.hooks"):
        assert agent.act({"dx": 1}).action_type == "move"
        assert agent.act({"dx": 1}).action_type == "move"
    assert agent.x == 2
    stats = memory_hook_stats(agent)
    assert stats.steps == 2 and stats.stored == 0
    # state 0, action 0, state 1; state 1 again (a state never stored is tried again as the
    # next step's state before), action 1, state 2
    assert stats.failures == 6
    assert stats.last_error is not None and "StorageError" in stats.last_error
    assert sum("memory hook failed" in r.message for r in caplog.records) == 6
    api.fail = False  # memory back: recording resumes, the steps went on counting
    agent.act({"dx": 1})
    assert [(c[0], c[3]) for c in api.calls] == [("state", 2), ("action", 2), ("state", 3)]


def test_a_hostile_get_state_is_counted_not_raised_with_fake_api() -> None:
    class Broken(BaseAgent):
        def act(self, observation: Any) -> int:
            return 1

        def get_state(self) -> Any:
            raise ValueError("no state today")

    class NotAState(BaseAgent):
        def act(self, observation: Any) -> int:
            return 1

        def get_state(self) -> Any:
            return 42

    for cls in (Broken, NotAState):
        api = FakeApi()
        agent = install_memory_hooks(api=api)(cls)()
        assert agent.act(None) == 1
        assert [c[0] for c in api.calls] == ["action"]  # the action is still recorded
        assert memory_hook_stats(agent).failures == 2  # state before and after


def test_agent_errors_propagate_and_are_recorded_with_fake_api() -> None:
    api = FakeApi()
    agent = hooked_walker(api)(agent_id="w")
    with pytest.raises(RuntimeError, match="agent error"):
        agent.act("boom")
    action = next(c for c in api.calls if c[0] == "action")
    assert action[2]["success"] is False and "RuntimeError: agent error" in action[2]["error"]
    assert agent.step_number == 1
    assert memory_hook_stats(agent).failures == 0


def test_non_json_observations_and_results_are_stored_as_json_with_fake_api() -> None:
    class Odd(BaseAgent):
        def act(self, observation: Any) -> Any:
            return {"action_type": "odd", "params": {"obj": object(), "nan": float("nan")}}

    api = FakeApi()
    agent = install_memory_hooks(api=api)(Odd)()
    agent.act({1: {2, 3}})
    action = next(c for c in api.calls if c[0] == "action")[2]
    assert action["action_params"]["nan"] is None
    assert action["action_params"]["obj"].startswith("<object object")
    assert list(action["observation"]) == ["1"]


def test_misuse_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        install_memory_hooks(3)  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as err:
        install_memory_hooks(type("NoAct", (), {}))
    assert err.value.field == "act"
    with pytest.raises(ValidationError) as err:
        with_memory(object(), agent_id="x")
    assert err.value.field == "agent"
    with pytest.raises(ValidationError) as err:
        with_memory(Walker(), agent_id="")
    assert err.value.field == "agent_id"
    with pytest.raises(ValidationError):
        BaseAgent(agent_id=7)  # type: ignore[arg-type]


def test_steps_start_at_the_agents_step_number_with_fake_api() -> None:
    api = FakeApi()
    agent = Walker(agent_id="w")
    agent.step_number = 40
    with_memory(agent, api=api)
    agent.act({"dx": 1})
    assert [c[3] for c in api.calls] == [40, 40, 41]
    assert agent.step_number == 41


def _steps(api: Any, agent_id: str) -> list[tuple[str, int, Any]]:
    recs = api.retrieve_by_time_range(agent_id, 0, 100)
    return sorted((r["memory_type"], r["step_number"], r["contents"]) for r in recs)


def test_hooks_with_the_real_api_embedded(tmp_path: Path) -> None:
    with AgentMemoryAPI(MemoryConfig(), tmp_path / "db", durability="os", embedder=None) as api:
        agent = hooked_walker(api)(agent_id="walker-real")
        agent.act({"dx": 2})
        agent.act({"dx": 3})
        got = _steps(api, "walker-real")
        states = [(step, data) for kind, step, data in got if kind == "state"]
        assert states == [
            (0, {"health": 1.0, "x": 0}),
            (1, {"health": 0.9, "x": 2}),
            (2, {"health": pytest.approx(0.8), "x": 5}),
        ]
        actions = {step: data for kind, step, data in got if kind == "action"}
        assert sorted(actions) == [0, 1]
        assert actions[1]["action_type"] == "move"
        assert actions[1]["state_difference"] == {"x": 3, "health": pytest.approx(-0.1)}
        # the states stored by the hooks are what retrieve_similar_states ranks
        near = api.retrieve_similar_states("walker-real", {"x": 5, "health": 0.8}, k=1)
        assert near[0]["step_number"] == 2
        assert memory_hook_stats(agent).failures == 0
    # the database closed under the agent: memory fails, the agent does not
    assert agent.act({"dx": 1}).action_type == "move"
    stats = memory_hook_stats(agent)
    assert stats.failures >= 2 and stats.last_error is not None


def test_with_memory_and_the_real_api_over_http(tmp_path: Path) -> None:
    db = synapsedb.open(
        tmp_path / "served", durability="os", embedder=None, llm=None, background_maintenance=False
    )
    try:
        with serve(create_app(db)) as url, AgentMemoryAPI(MemoryConfig(), url) as api:
            agent = with_memory(Walker(), agent_id="remote-walker", api=api)
            for dx in (1, 1, 1):
                agent.act({"dx": dx})
            got = _steps(api, "remote-walker")
            assert [(k, s) for k, s, _ in got] == [
                ("action", 0),
                ("action", 1),
                ("action", 2),
                ("state", 0),
                ("state", 1),
                ("state", 2),
                ("state", 3),
            ]
            assert got[-1][2] == {"health": pytest.approx(0.7), "x": 3}
            assert memory_hook_stats(agent).stored == 7
    finally:
        db.close()
