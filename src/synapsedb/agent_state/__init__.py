"""The Agent Memory API over SynapseDB (docs/agent-state.md).

    from synapsedb.agent_state import AgentMemoryAPI, MemoryConfig
    api = AgentMemoryAPI(MemoryConfig(), "./agent-data")          # or "http://127.0.0.1:7379"
    api.store_agent_state("agent-123", {"health": 0.85, "position": [10, 20]}, step_number=1)
    api.retrieve_by_time_range("agent-123", 0, 10)

States, actions and interactions are JSON objects stored by step as memories of the agent's
entity in one namespace; they age from STM (full detail) through IM (compressed) to LTM
(abstract) with every earlier version kept. The original API's hooks (``install_memory_hooks``,
``with_memory``, ``BaseAgent``: synapsedb.agent_state.hooks) and ``cacheable`` (synapsedb.cache) are
importable from here too, as the original API imports them from one module.
"""

from __future__ import annotations

from ..cache import cacheable
from ..errors import (
    MemoryAPIError,
    MemoryAPIException,
    MemoryConfigError,
    MemoryConfigException,
    MemoryMaintenanceError,
    MemoryMaintenanceException,
    MemoryRetrievalError,
    MemoryRetrievalException,
    MemoryStoreError,
    MemoryStoreException,
)
from .api import AgentMemoryAPI
from .config import (
    IMConfig,
    LTMConfig,
    MemoryConfig,
    RedisIMConfig,
    RedisSTMConfig,
    SQLiteLTMConfig,
    STMConfig,
    TierConfig,
)
from .hooks import BaseAgent, install_memory_hooks, with_memory
from .models import ActionData, ActionResult, AgentState
from .space import MemorySpace

__all__ = [
    "ActionData",
    "ActionResult",
    "AgentMemoryAPI",
    "AgentState",
    "BaseAgent",
    "IMConfig",
    "LTMConfig",
    "MemoryAPIError",
    "MemoryAPIException",
    "MemoryConfig",
    "MemoryConfigError",
    "MemoryConfigException",
    "MemoryMaintenanceError",
    "MemoryMaintenanceException",
    "MemoryRetrievalError",
    "MemoryRetrievalException",
    "MemorySpace",
    "MemoryStoreError",
    "MemoryStoreException",
    "RedisIMConfig",
    "RedisSTMConfig",
    "SQLiteLTMConfig",
    "STMConfig",
    "TierConfig",
    "cacheable",
    "install_memory_hooks",
    "with_memory",
]
