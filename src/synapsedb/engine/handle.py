"""The base of the namespace handle: the attributes and helpers every part of it uses.

:class:`~synapsedb.engine.Namespace` is assembled from mixins (``writes``, ``reads`` and the
query/lineage/lifecycle methods in ``namespace``); each derives from :class:`NamespaceHandle`,
which declares the shared attributes (set by ``Namespace.__init__``, which holds the slots)
and the helpers they all call: the agent to record, the time a read is as of, and the rate
limit and rehydration every write goes through first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ..times import TimeLike, to_us
from ..validation import check_agent
from .lifecycle import MoveTiers

if TYPE_CHECKING:
    from .database import Database

__all__ = ["MemoryLoopSeam", "NamespaceHandle"]


class MemoryLoopSeam(Protocol):
    """What the engine needs of the memory loop (``synapsedb.agentic.MemoryLoop``), which
    lives above it: ``Namespace.remember``/``recall`` pass themselves in. The engine never
    imports the loop; :func:`synapsedb.open` attaches one as ``Database.memory_loop``."""

    def remember(
        self, ns: Any, messages: Any, *, entity: str, session: str | None = ...,
        agent: str | None = ..., memories: Any = ..., wait: bool = ...,
    ) -> Any: ...  # fmt: skip

    def recall(
        self, ns: Any, messages_or_text: Any, *, entity: str | None = ...,
        budget_tokens: int | None = ..., k: int | None = ..., threshold: float | None = ...,
        rewrite: str | None = ..., agent: str | None = ...,
    ) -> Any: ...  # fmt: skip

    def close(self) -> None: ...


class NamespaceHandle:
    """What the Namespace mixins share: the database, the namespace name, the default agent."""

    __slots__ = ()

    _db: Database
    name: str
    _agent: str | None

    def _agent_for(self, agent: str | None) -> str | None:
        return self._agent if agent is None else check_agent(agent)

    def _time(self, as_of: TimeLike | None) -> int:
        return self._db._now_us() if as_of is None else to_us(as_of, "as_of")

    def _before_write(self, n: int, ids: Iterable[str | None] = ()) -> None:
        """Rate limit, then bring cold memories that are about to change back to hot."""
        state = self._db._state(self.name)
        if state is None:
            return
        self._db.rates.take(self.name, state.config.max_writes_per_s, n)
        cold = [m for m in ids if m is not None and m in state.cold]
        if cold:
            self._db._submit(MoveTiers(self.name, [(m, "hot", None, "written") for m in cold]))
