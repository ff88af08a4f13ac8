"""The agent-state API's configuration: ``MemoryConfig`` and one config per tier.

The original Agent Memory API keeps STM and IM in Redis and LTM in SQLite; here every tier is a SynapseDB
namespace (docs/agent-state.md). A tier's connection fields (``host``, ``port``, ``db``,
``password``, ``namespace``, ``db_path``) are refused when set, with an error that says so:
the database is the one given to ``AgentMemoryAPI`` (or ``MemoryConfig.database``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import MemoryConfigError

__all__ = [
    "IMConfig",
    "LTMConfig",
    "MemoryConfig",
    "RedisIMConfig",
    "RedisSTMConfig",
    "SQLiteLTMConfig",
    "STMConfig",
    "TierConfig",
]


@dataclass(slots=True)
class TierConfig:
    """How long memories stay in a tier: at most ``memory_limit`` per agent (the lowest
    retention scores move down first) and at most ``ttl`` seconds since they were stored
    (``None``: no limit). The connection fields of the original API's Redis and SQLite tiers
    (``host``, ``port``, ``db``, ``password``, ``namespace``, ``db_path``) are refused when
    set: every tier lives in the one database, so a setting there would be ignored."""

    memory_limit: int | None = 1000
    ttl: float | None = None
    host: str | None = None
    port: int | None = None
    db: int | None = None
    password: str | None = None
    namespace: str | None = None
    db_path: str | None = None

    def check(self, where: str) -> None:
        for name in CONNECTION_FIELDS:
            if getattr(self, name) is not None:
                raise MemoryConfigError(
                    f"{where}.{name}: every tier lives in the one SynapseDB database (the one "
                    "given to AgentMemoryAPI, or MemoryConfig.database: a data directory or an "
                    "http(s):// server URL); no Redis or SQLite connection of a tier is used. "
                    f"Leave {name} out.",
                    field=f"{where}.{name}",
                )
        lim = self.memory_limit
        if lim is not None and (isinstance(lim, bool) or not isinstance(lim, int) or lim < 1):
            raise MemoryConfigError(
                f"{where}.memory_limit: expected a positive integer or None, got {lim!r}",
                field=f"{where}.memory_limit",
                limit=1,
            )
        ttl = self.ttl
        if ttl is not None and (
            isinstance(ttl, bool)
            or not isinstance(ttl, int | float)
            or not math.isfinite(ttl)
            or ttl <= 0
        ):
            raise MemoryConfigError(
                f"{where}.ttl: expected a positive number of seconds or None, got {ttl!r}",
                field=f"{where}.ttl",
            )


class STMConfig(TierConfig):
    """Short-term memory: full detail (default: the newest 1,000 memories of an agent)."""

    __slots__ = ()


class IMConfig(TierConfig):
    """Intermediate memory: compressed (default: 10,000 memories of an agent)."""

    __slots__ = ()

    def __init__(self, memory_limit: int | None = 10_000, **kw: Any) -> None:
        super().__init__(memory_limit, **kw)


class LTMConfig(TierConfig):
    """Long-term memory: abstract, the whole history (no limit: nothing leaves LTM except by
    TTL or forget)."""

    __slots__ = ()

    def __init__(self, memory_limit: int | None = None, **kw: Any) -> None:
        super().__init__(memory_limit, **kw)


CONNECTION_FIELDS = ("host", "port", "db", "password", "namespace", "db_path")

RedisSTMConfig = STMConfig  # the original API's names
RedisIMConfig = IMConfig
SQLiteLTMConfig = LTMConfig


def _tier(value: Any, cls: type[TierConfig], where: str) -> TierConfig:
    if value is None:
        out = cls()
    elif isinstance(value, TierConfig):
        out = value
    elif isinstance(value, Mapping):
        names = {f.name for f in dataclasses.fields(TierConfig)}
        for key in value:
            if key not in names:
                raise MemoryConfigError(
                    f"{where}.{key}: unknown setting; allowed: {', '.join(sorted(names))}",
                    field=f"{where}.{key}",
                )
        out = cls(**dict(value))
    else:
        raise MemoryConfigError(
            f"{where}: expected a {cls.__name__} or an object, got {type(value).__name__}",
            field=where,
        )
    out.check(where)
    return out


@dataclass(slots=True)
class MemoryConfig:
    """The Agent Memory API's ``MemoryConfig``.

    * ``database``: a data directory or an ``http(s)://`` URL, used when ``AgentMemoryAPI``
      is given no database (if None too: ``$SYNAPSEDB_AGENT_DATABASE``, read when the API is
      built, else ``./agent-memory-data``); ``namespace``: where the agents' memories live (one entity per
      agent).
    * ``cleanup_interval``: run tier maintenance for an agent every N of its stores (0: only
      ``force_memory_maintenance``).
    * ``memory_priority_decay``: a memory's retention score is its priority times this factor
      per ``decay_steps`` steps of age (age = the agent's newest step - the memory's step).
    * ``stm_config``, ``im_config``, ``ltm_config``: the tiers (objects or dicts).
    * ``hot_limit``: if set, the namespace's hot tier is capped at this many memories
      (``configure(max_hot=...)``): the engine then moves the lowest-salience unpinned
      memories, LTM first, to its cold tier (on disk only) at maintenance.
    * ``cache_ttl``, ``cache_size``: the result cache of retrievals (``clear_cache``,
      ``set_cache_ttl``); stores of an agent invalidate its entries.
    """

    database: str | None = None
    namespace: str = "agent-memory"
    cleanup_interval: int = 100
    memory_priority_decay: float = 0.95
    decay_steps: int = 100
    stm_config: Any = None
    im_config: Any = None
    ltm_config: Any = None
    hot_limit: int | None = None
    cache_ttl: float = 60.0
    cache_size: int = 1024

    def __post_init__(self) -> None:
        self.stm_config = _tier(self.stm_config, STMConfig, "stm_config")
        self.im_config = _tier(self.im_config, IMConfig, "im_config")
        self.ltm_config = _tier(self.ltm_config, LTMConfig, "ltm_config")
        for name, low in (("cleanup_interval", 0), ("decay_steps", 1), ("cache_size", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise MemoryConfigError(
                    f"{name}: expected an integer >= {low}, got {v!r}", field=name, limit=low
                )
        d = self.memory_priority_decay
        if isinstance(d, bool) or not isinstance(d, int | float) or not 0 < d <= 1:
            raise MemoryConfigError(
                f"memory_priority_decay: expected a number in (0, 1], got {d!r}",
                field="memory_priority_decay",
                limit=1,
            )
        hl = self.hot_limit
        if hl is not None and (isinstance(hl, bool) or not isinstance(hl, int) or hl < 1):
            raise MemoryConfigError(
                f"hot_limit: expected a positive integer or None, got {hl!r}", field="hot_limit"
            )
        check_ttl(self.cache_ttl)
        if self.database is not None and not isinstance(self.database, str):
            raise MemoryConfigError("database: expected a path or URL", field="database")


def check_ttl(value: Any) -> float:
    """A cache TTL in seconds (0 turns the cache off)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MemoryConfigError(
            f"cache_ttl: expected a number of seconds, got {value!r}", field="cache_ttl"
        )
    if value < 0:
        raise MemoryConfigError(
            f"cache_ttl: expected >= 0 seconds, got {value!r}", field="cache_ttl", limit=0
        )
    return float(value)
