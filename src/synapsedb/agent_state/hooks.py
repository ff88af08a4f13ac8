"""Memory hooks: an agent's steps recorded without changing the agent.

``@install_memory_hooks`` on a :class:`BaseAgent` subclass, or ``with_memory(agent,
agent_id=...)`` on an object that already exists, wraps its ``act``. Each call to ``act`` is
one step:

1. the state before is captured (``get_state()``: an :class:`~.models.AgentState`, anything
   with ``as_dict()``, or a mapping; an agent without ``get_state`` gives its public attributes
   that are JSON values). It is stored with ``store_agent_state`` at step ``s`` unless it equals
   the state stored after the previous step (states are not stored twice);
2. ``act`` runs, untouched: its result is returned and its exceptions propagate;
3. the state after is captured and stored at step ``s + 1``; the action is stored at step ``s``
   with ``store_agent_action``: its type and parameters, the states before and after, their
   ``state_difference``, the reward, the execution time, the observation and the result (an
   :class:`~.models.ActionResult`, a mapping with ``action_type``, or any value), or the error.

Step numbers are automatic: per agent they start at the agent's ``step_number`` attribute when
it is an integer (else 0) and grow by one per ``act``; a :class:`BaseAgent`'s ``step_number``
follows them. ``agent_id`` and ``step_number`` are left out of the stored state (they are the
memory's agent and step).

Memory never breaks the agent: a failure to capture or store (the database down, a state that is
not JSON, a hostile ``get_state``) is logged on the ``synapsedb.agent_state.hooks`` logger and counted
(:func:`memory_hook_stats`), and ``act`` goes on. The API is ``api=`` if given, else the agent's
``memory_api`` attribute, else one default ``AgentMemoryAPI()`` per process.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ..errors import ValidationError
from .models import ActionResult, AgentState, state_difference

__all__ = [
    "BaseAgent",
    "HookStats",
    "StepRecorder",
    "install_memory_hooks",
    "memory_hook_stats",
    "with_memory",
]

log = logging.getLogger("synapsedb.agent_state.hooks")

_MAX_DEPTH = 16
_HOOK_ATTR = "__synapsedb_memory_hook__"
_WRAPPED = "__synapsedb_memory_wrapped__"
_API_ATTR = "__synapsedb_memory_api__"
_STRIP = ("agent_id", "step_number")


class StepRecorder(Protocol):
    """What the hooks need of the memory API (``AgentMemoryAPI`` has it)."""

    def store_agent_state(
        self, agent_id: str, state_data: dict[str, Any], step_number: int, priority: float = 1.0
    ) -> Any: ...

    def store_agent_action(
        self, agent_id: str, action_data: dict[str, Any], step_number: int, priority: float = 1.0
    ) -> Any: ...


class BaseAgent:
    """The agent base class of the Agent Memory API: ``act(observation)`` runs ``process(observation)``;
    ``get_state()`` returns an :class:`~.models.AgentState` that subclasses extend (its
    ``extra_data``). ``step_number`` counts the steps (the hooks advance it)."""

    def __init__(self, config: Any = None, agent_id: str | None = None) -> None:
        if agent_id is not None and (not isinstance(agent_id, str) or not agent_id):
            raise ValidationError("agent_id: expected a non-empty string", field="agent_id")
        self.config = config
        self.agent_id = agent_id or f"{type(self).__name__.lower()}-{uuid.uuid4().hex[:12]}"
        self.step_number = 0

    def get_state(self) -> AgentState:
        return AgentState(agent_id=self.agent_id, step_number=self.step_number)

    def process(self, observation: Any) -> Any:
        """Decide what to do; the default observes (an ``observe`` action holding it)."""
        return ActionResult(action_type="observe", params={"observation": _jsonable(observation)})

    def act(self, observation: Any) -> Any:
        return self.process(observation)


@dataclass
class HookStats:
    """What the hooks of one agent did: steps run, memories stored, failures (and the last)."""

    steps: int = 0
    stored: int = 0
    failures: int = 0
    last_error: str | None = None


@dataclass
class _Hook:
    agent_id: str | None
    api: StepRecorder | None
    step: int | None = None
    last_state: dict[str, Any] | None = None
    depth: int = 0
    stats: HookStats = field(default_factory=HookStats)
    lock: threading.RLock = field(default_factory=threading.RLock)


@functools.lru_cache(maxsize=1)
def _default_api() -> StepRecorder:
    from . import AgentMemoryAPI  # type: ignore[attr-defined]  # the core API, built lazily

    api: StepRecorder = AgentMemoryAPI()
    return api


def _jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON value for ``value``: containers walked, NaN/infinity as None, anything else by
    ``as_dict()`` when it has one, else its ``repr``."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= _MAX_DEPTH:
        return repr(value)[:200]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value]
    as_dict = getattr(value, "as_dict", None)
    if callable(as_dict):
        return _jsonable(as_dict(), depth + 1)
    return repr(value)[:200]


def _capture(agent: Any) -> dict[str, Any]:
    get_state = getattr(agent, "get_state", None)
    if callable(get_state):
        raw = get_state()
        as_dict = getattr(raw, "as_dict", None)
        if callable(as_dict):
            raw = as_dict()
        if not isinstance(raw, Mapping):
            raise ValidationError(
                f"get_state() returned {type(raw).__name__}, not a state object",
                field="get_state",
            )
        state = _jsonable(raw)
    else:
        state = {
            k: _jsonable(v)
            for k, v in vars(agent).items()
            if not k.startswith("_") and isinstance(v, str | int | float | bool | list | dict)
        }
    for key in _STRIP:
        state.pop(key, None)
    assert isinstance(state, dict)
    return state


def _action(
    observation: Any, result: Any, error: BaseException | None
) -> tuple[str, dict[str, Any], float, dict[str, Any]]:
    """(action_type, params, reward, extra fields) of one act."""
    if error is not None:
        return "act", {}, 0.0, {"success": False, "error": f"{type(error).__name__}: {error}"[:500]}
    if isinstance(result, ActionResult):
        extra: dict[str, Any] = {"success": result.success}
        if result.action_id is not None:
            extra["action_id"] = result.action_id
        return result.action_type, _jsonable(result.params), float(result.reward), extra
    if (
        isinstance(result, Mapping)
        and isinstance(result.get("action_type"), str)
        and result["action_type"]
    ):
        params = result.get("params", result.get("action_params", {}))
        reward = result.get("reward", 0.0)
        ok = (
            isinstance(reward, int | float)
            and not isinstance(reward, bool)
            and math.isfinite(reward)
        )
        return (
            result["action_type"],
            _jsonable(params) if isinstance(params, Mapping) else {"value": _jsonable(params)},
            float(reward) if ok else 0.0,
            {"result": _jsonable(result)},
        )
    return "act", {}, 0.0, {"result": _jsonable(result)}


class _Recorder:
    """Runs one hooked ``act`` and records it; every memory step guarded."""

    def __init__(self, agent: Any, hook: _Hook) -> None:
        self.agent = agent
        self.hook = hook

    def guarded(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # memory must never break the agent
            hook = self.hook
            hook.stats.failures += 1
            hook.stats.last_error = f"{what}: {type(exc).__name__}: {exc}"[:500]
            log.warning(
                "memory hook failed (%s) for agent %r: %s: %s",
                what,
                hook.agent_id,
                type(exc).__name__,
                exc,
            )
            return None

    def api(self) -> StepRecorder:
        if self.hook.api is not None:
            return self.hook.api
        own = getattr(self.agent, "memory_api", None)
        return own if own is not None else _default_api()

    def agent_id(self) -> str:
        hook = self.hook
        if hook.agent_id is None:
            own = getattr(self.agent, "agent_id", None)
            hook.agent_id = (
                own
                if isinstance(own, str) and own
                else f"{type(self.agent).__name__.lower()}-{uuid.uuid4().hex[:12]}"
            )
        return hook.agent_id

    def store(self, kind: str, data: dict[str, Any], step: int) -> bool:
        def run() -> bool:
            api = self.api()
            if kind == "state":
                api.store_agent_state(self.agent_id(), data, step)
            else:
                api.store_agent_action(self.agent_id(), data, step)
            self.hook.stats.stored += 1
            return True

        return bool(self.guarded(f"store_agent_{kind}", run))

    def run(self, act: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        hook = self.hook
        self.guarded("agent_id", self.agent_id)
        with hook.lock:
            if hook.step is None:
                own = getattr(self.agent, "step_number", None)
                ok = isinstance(own, int) and not isinstance(own, bool) and own >= 0
                hook.step = own if ok and isinstance(own, int) else 0
            step = int(hook.step)
            hook.step = step + 1
            hook.stats.steps += 1
        before = self.guarded("get_state before act", lambda: _capture(self.agent))
        if before is not None and before != hook.last_state and self.store("state", before, step):
            hook.last_state = before
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            result = act(*args, **kwargs)
        except BaseException as exc:
            error, result = exc, None
            raise
        finally:
            elapsed = time.perf_counter() - started
            if isinstance(self.agent, BaseAgent):
                self.guarded("step_number", lambda: setattr(self.agent, "step_number", step + 1))
            self.after(step, before, args, kwargs, result, error, elapsed)
        return result

    def after(
        self,
        step: int,
        before: dict[str, Any] | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        result: Any,
        error: BaseException | None,
        elapsed: float,
    ) -> None:
        hook = self.hook
        after = self.guarded("get_state after act", lambda: _capture(self.agent))

        def action() -> dict[str, Any]:
            kind, params, reward, extra = _action(args[0] if args else kwargs, result, error)
            data = {
                "action_type": kind,
                "action_params": params,
                "state_before": before or {},
                "state_after": after or {},
                "state_difference": state_difference(before or {}, after or {}),
                "reward": reward,
                "execution_time": elapsed,
                "observation": _jsonable(args[0] if len(args) == 1 else list(args)),
                **extra,
            }
            if kwargs:
                data["keywords"] = _jsonable(kwargs)
            return data

        data = self.guarded("action data", action)
        if data is not None:
            self.store("action", data, step)
        if after is not None and after != hook.last_state and self.store("state", after, step + 1):
            hook.last_state = after


def _hook_of(agent: Any, agent_id: str | None = None, api: StepRecorder | None = None) -> _Hook:
    hook = agent.__dict__.get(_HOOK_ATTR) if hasattr(agent, "__dict__") else None
    if hook is None:
        hook = _Hook(agent_id=agent_id, api=api)
        # an object without a __dict__ keeps no hook (with_memory gives it a proxy instead)
        with contextlib.suppress(AttributeError, TypeError):
            object.__setattr__(agent, _HOOK_ATTR, hook)
    return hook


def _wrap_act(act: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(act)
    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        hook = _hook_of(self, api=getattr(type(self), _API_ATTR, None))
        if hook.depth:  # super().act() inside a hooked act: the outer call records the step
            return act(self, *args, **kwargs)
        hook.depth += 1
        try:
            return _Recorder(self, hook).run(lambda *a, **k: act(self, *a, **k), args, kwargs)
        finally:
            hook.depth -= 1

    setattr(hooked, _WRAPPED, True)
    return hooked


_C = TypeVar("_C", bound=type)


def install_memory_hooks(cls: _C | None = None, *, api: StepRecorder | None = None) -> Any:
    """Class decorator: every ``act`` of the class (and of subclasses that override it) records
    its step in memory. ``@install_memory_hooks`` or ``@install_memory_hooks(api=memory_api)``."""

    def decorate(target: _C) -> _C:
        if not isinstance(target, type):
            raise ValidationError(
                f"install_memory_hooks decorates a class, got {type(target).__name__}",
                field="cls",
            )
        act = getattr(target, "act", None)
        if not callable(act):
            raise ValidationError(f"{target.__name__} has no act method to hook", field="act")
        if not getattr(act, _WRAPPED, False):
            target.act = _wrap_act(act)  # type: ignore[attr-defined]
        setattr(target, _API_ATTR, api)  # read at each agent's first act
        previous = target.__dict__.get("__init_subclass__")
        base: type = target

        def __init_subclass__(sub: type, **kw: Any) -> None:
            if previous is not None:
                previous.__func__(sub, **kw)
            else:
                super(base, sub).__init_subclass__(**kw)  # type: ignore[arg-type]
            own = sub.__dict__.get("act")
            if callable(own) and not getattr(own, _WRAPPED, False):
                sub.act = _wrap_act(own)  # type: ignore[attr-defined]

        target.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]
        return target

    if cls is None:
        return decorate
    return decorate(cls)


class _MemoryProxy:
    """``with_memory`` on an object whose attributes cannot be set: a stand-in whose ``act``
    is hooked and whose other attributes are the agent's."""

    def __init__(self, agent: Any, hook: _Hook) -> None:
        object.__setattr__(self, "_agent", agent)
        object.__setattr__(self, "_hook", hook)

    def act(self, *args: Any, **kwargs: Any) -> Any:
        agent, hook = self._agent, self._hook
        if hook.depth:
            return agent.act(*args, **kwargs)
        hook.depth += 1
        try:
            return _Recorder(agent, hook).run(agent.act, args, kwargs)
        finally:
            hook.depth -= 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._agent, name, value)


def with_memory(agent: Any, agent_id: str | None = None, api: StepRecorder | None = None) -> Any:
    """Hook an existing agent object's ``act``; returns the agent (the same object when its
    attributes can be set, else a stand-in forwarding everything else to it)."""
    act = getattr(agent, "act", None)
    if not callable(act):
        raise ValidationError(f"{type(agent).__name__} has no act method to hook", field="agent")
    if agent_id is not None and (not isinstance(agent_id, str) or not agent_id):
        raise ValidationError("agent_id: expected a non-empty string", field="agent_id")
    hook = _Hook(agent_id=agent_id, api=api)
    try:
        object.__setattr__(agent, _HOOK_ATTR, hook)
    except (AttributeError, TypeError):
        return _MemoryProxy(agent, hook)
    if getattr(act, _WRAPPED, False):  # the class is hooked already: this hook's id and api
        return agent

    @functools.wraps(act)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        current = _hook_of(agent)  # a later with_memory on this agent replaces the hook
        if current.depth:
            return act(*args, **kwargs)
        current.depth += 1
        try:
            return _Recorder(agent, current).run(act, args, kwargs)
        finally:
            current.depth -= 1

    setattr(hooked, _WRAPPED, True)
    object.__setattr__(agent, "act", hooked)
    return agent


def memory_hook_stats(agent: Any) -> HookStats:
    """The hook counters of a hooked agent (a fresh zero set for an agent not hooked yet)."""
    hook = getattr(agent, "_hook", None) if isinstance(agent, _MemoryProxy) else None
    if hook is None:
        hook = getattr(agent, _HOOK_ATTR, None)
    return hook.stats if isinstance(hook, _Hook) else HookStats()
