"""The base of the namespace handle: the attributes and helpers every part of it uses.

:class:`~synapsedb.engine.Namespace` is assembled from mixins (``writes``, ``reads`` and the
query/lineage/lifecycle methods in ``namespace``); each derives from :class:`NamespaceHandle`,
which declares the shared attributes (set by ``Namespace.__init__``, which holds the slots)
and the helpers they all call: the agent to record, the time a read is as of, and the rate
limit and rehydration every write goes through first. The handle reaches the engine only
through its :class:`~synapsedb.engine.core.EngineCore` (``_core``), bound once per handle.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..times import TimeLike, to_us
from ..validation import check_agent
from .core import EngineCore, MemoryLoopSeam
from .lifecycle import MoveTiers

__all__ = ["MemoryLoopSeam", "NamespaceHandle"]


class NamespaceHandle:
    """What the Namespace mixins share: the engine core, the namespace name, the default
    agent."""

    __slots__ = ()

    _core: EngineCore
    name: str
    _agent: str | None

    def _agent_for(self, agent: str | None) -> str | None:
        return self._agent if agent is None else check_agent(agent)

    def _time(self, as_of: TimeLike | None) -> int:
        return self._core.now_us() if as_of is None else to_us(as_of, "as_of")

    def _before_write(self, n: int, ids: Iterable[str | None] = ()) -> None:
        """Rate limit, then bring cold memories that are about to change back to hot."""
        core = self._core
        state = core.state(self.name)
        if state is None:
            return
        core.rates.take(self.name, state.config.max_writes_per_s, n)
        cold = [m for m in ids if m is not None and m in state.cold]
        if cold:
            core.submit(MoveTiers(self.name, [(m, "hot", None, "written") for m in cold]))
