"""The retrieval result cache of ``AgentMemoryAPI`` (the Agent Memory API's ``clear_cache`` and
``set_cache_ttl``): LRU, entries live ``ttl`` seconds, and every store or maintenance of an
agent drops that agent's entries, so a cached answer never hides a write made through the
same API object. Writes by other processes are seen once the TTL runs out."""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["ResultCache"]


class ResultCache:
    def __init__(self, ttl: float, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.size, self._clock = ttl, size, clock
        self._items: OrderedDict[tuple[str, Hashable], tuple[float, Any]] = OrderedDict()
        self._by_agent: dict[str, set[tuple[str, Hashable]]] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def get_or_compute(self, agent: str, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The cached value of ``key`` for ``agent`` (a deep copy: callers may change it), or
        ``compute()``'s, cached."""
        full = (agent, key)
        now = self._clock()
        if self.ttl > 0:
            with self._lock:
                item = self._items.get(full)
                if item is not None and item[0] > now:
                    self._items.move_to_end(full)
                    self.hits += 1
                    return copy.deepcopy(item[1])
                self.misses += 1
        value = compute()
        if self.ttl > 0:
            with self._lock:
                self._items[full] = (now + self.ttl, copy.deepcopy(value))
                self._items.move_to_end(full)
                self._by_agent.setdefault(agent, set()).add(full)
                while len(self._items) > self.size:
                    old, _ = self._items.popitem(last=False)
                    self._by_agent.get(old[0], set()).discard(old)
        return value

    def invalidate(self, agent: str | None = None) -> None:
        """Drop one agent's entries (or all)."""
        with self._lock:
            if agent is None:
                self._items.clear()
                self._by_agent.clear()
            else:
                for key in self._by_agent.pop(agent, ()):
                    self._items.pop(key, None)

    def set_ttl(self, ttl: float) -> None:
        with self._lock:
            self.ttl = ttl
            self._items.clear()
            self._by_agent.clear()
