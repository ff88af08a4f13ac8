"""The Agent Memory API's structured models: an agent's state, an action's result, and an action's record.

Each has ``as_dict()``, the JSON object that ``AgentMemoryAPI.store_agent_state`` (or
``store_agent_action``) stores. Fields left ``None`` are left out, so a stored state holds only
what the agent knows; ``extra_data`` is merged into the top level (its keys may not repeat a
named field).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import ValidationError

__all__ = ["ActionData", "ActionResult", "AgentState", "state_difference"]


def _number(value: Any, name: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"{name}: expected a finite number, got {value!r}", field=name)


def _merge(named: dict[str, Any], extra: Mapping[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(extra, Mapping):
        raise ValidationError(
            f"{where}: expected an object, got {type(extra).__name__}", field=where
        )
    out = {k: v for k, v in named.items() if v is not None}
    for key, value in extra.items():
        if key in named:
            raise ValidationError(
                f"{where}.{key}: repeats the named field {key!r}", field=f"{where}.{key}"
            )
        out[key] = value
    return out


@dataclass(slots=True)
class AgentState:
    """An agent's state at one step: the usual fields, and ``extra_data`` for the
    rest (inventory, goals, ...)."""

    agent_id: str
    step_number: int
    health: float | None = None
    reward: float | None = None
    position_x: float | None = None
    position_y: float | None = None
    position_z: float | None = None
    resource_level: float | None = None
    extra_data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.agent_id, str) or not self.agent_id:
            raise ValidationError("agent_id: expected a non-empty string", field="agent_id")
        if isinstance(self.step_number, bool) or not isinstance(self.step_number, int):
            raise ValidationError(
                f"step_number: expected an integer, got {self.step_number!r}", field="step_number"
            )
        for name in (
            "health",
            "reward",
            "position_x",
            "position_y",
            "position_z",
            "resource_level",
        ):
            _number(getattr(self, name), name)

    def as_dict(self) -> dict[str, Any]:
        """The state as a JSON object: named fields that are set, then ``extra_data``'s keys."""
        named = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra_data"}
        return _merge(named, self.extra_data, "extra_data")


@dataclass(slots=True)
class ActionResult:
    """What an agent's action did: its type, parameters and reward."""

    action_type: str
    params: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    success: bool = True
    action_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.action_type, str) or not self.action_type:
            raise ValidationError("action_type: expected a non-empty string", field="action_type")
        if not isinstance(self.params, Mapping):
            raise ValidationError("params: expected an object", field="params")
        _number(self.reward, "reward")
        if not isinstance(self.success, bool):
            raise ValidationError("success: expected true or false", field="success")

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "action_type": self.action_type,
            "params": dict(self.params),
            "reward": self.reward,
            "success": self.success,
        }
        if self.action_id is not None:
            out["action_id"] = self.action_id
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out


@dataclass(slots=True)
class ActionData:
    """One action as memory keeps it: the action, the states before and after it,
    its reward and how long it took. ``as_dict()`` adds ``state_difference``."""

    action_type: str
    action_params: dict[str, Any] = field(default_factory=dict)
    state_before: dict[str, Any] = field(default_factory=dict)
    state_after: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    execution_time: float = 0.0
    step_number: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.action_type, str) or not self.action_type:
            raise ValidationError("action_type: expected a non-empty string", field="action_type")
        for name in ("action_params", "state_before", "state_after"):
            if not isinstance(getattr(self, name), Mapping):
                raise ValidationError(f"{name}: expected an object", field=name)
        _number(self.reward, "reward")
        _number(self.execution_time, "execution_time")

    def get_state_difference(self) -> dict[str, Any]:
        """The numeric fields that changed, as after - before (see :func:`state_difference`)."""
        return state_difference(self.state_before, self.state_after)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "action_type": self.action_type,
            "action_params": dict(self.action_params),
            "state_before": dict(self.state_before),
            "state_after": dict(self.state_after),
            "reward": self.reward,
            "execution_time": self.execution_time,
            "state_difference": self.get_state_difference(),
        }
        if self.step_number is not None:
            out["step_number"] = self.step_number
        return out


def state_difference(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """Top-level numeric fields present in both states whose value changed: ``after - before``
    (booleans and other kinds are not differences of numbers and are left out)."""

    def num(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    return {
        key: after[key] - value
        for key, value in before.items()
        if key in after and num(value) and num(after[key]) and after[key] != value
    }
