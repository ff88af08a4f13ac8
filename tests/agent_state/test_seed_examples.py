"""Seed 002's examples, as the seed writes them, run against SynapseDB embedded and over HTTP.

The only edits: the seed's imports (``memory.api``, ``memory.config``) name
``synapsedb.agent_state``; the seed's placeholder vector ``[0.1, 0.2, 0.3, ...]`` becomes a 384-d
one; the hooks and ``@cacheable`` examples are tested with their own modules
(tests/agent_state/test_hooks.py, the cache's tests). ``AgentMemoryAPI()`` with no database finds
it in ``SYNAPSEDB_AGENT_DATABASE`` (here the server's URL) or uses ``./agent-memory-data``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.support.live_server import serve

import synapsedb

IMPORTS = """
from synapsedb.agent_state import AgentMemoryAPI, MemoryConfig, RedisSTMConfig
from synapsedb.agent_state import AgentState, ActionResult, ActionData
from synapsedb.agent_state import MemoryStoreException, MemoryRetrievalException
"""

SEED = """
# Initialize with default configuration
memory_api = AgentMemoryAPI()

# Or, initialize with custom configuration
config = MemoryConfig(
    cleanup_interval=100,
    stm_config={"memory_limit": 10000}
)
memory_api = AgentMemoryAPI(config)

# Store an agent's state
memory_api.store_agent_state(
    agent_id="agent-123",
    state_data={
        "position": [10, 20],
        "health": 0.85,
        "inventory": {"wood": 5, "stone": 2}
    },
    step_number=1234,
    priority=0.75  # Important memory (0.0-1.0)
)

# Store an interaction
memory_api.store_agent_interaction(
    agent_id="agent-123",
    interaction_data={
        "interaction_type": "conversation",
        "other_agent_id": "agent-456",
        "content": "Hello, do you have any wood to trade?",
        "sentiment": 0.6
    },
    step_number=1235
)

# Store an action
memory_api.store_agent_action(
    agent_id="agent-123",
    action_data={
        "action_type": "trade",
        "target_agent": "agent-456",
        "items_given": {"wood": 2},
        "items_received": {"stone": 1},
        "outcome": "success"
    },
    step_number=1236
)

# Create a structured agent state
agent_state = AgentState(
    agent_id="agent-123",
    step_number=1234,
    health=0.85,
    position_x=10,
    position_y=20,
    extra_data={"inventory": {"wood": 5, "stone": 2}}
)

# Store the state using the model
state_dict = agent_state.as_dict()
memory_api.store_agent_state(
    agent_id=agent_state.agent_id,
    state_data=state_dict,
    step_number=agent_state.step_number
)

# Create an action result
result = ActionResult(
    action_type="trade",
    params={"target": "agent-456", "item": "wood"},
    reward=0.5
)

# Get memory agent instance for more specialized operations
memory_space = memory_api.get_memory_space("agent-123")

# Get recent states
recent_states = memory_space.retrieve_recent_states(
    count=5,
    memory_type="state"  # Optional filter
)

# Find similar states
current_state = {"position": [12, 22], "health": 0.8}
similar_states = memory_api.retrieve_similar_states(
    agent_id="agent-123",
    query_state=current_state,
    k=5
)

# Get memories within a time range
memories = memory_api.retrieve_by_time_range(
    agent_id="agent-123",
    start_step=1000,
    end_step=2000,
    memory_type="action"  # Optional filter
)

# Find memories with specific attributes
trading_memories = memory_api.retrieve_by_attributes(
    agent_id="agent-123",
    attributes={"action_type": "trade", "outcome": "success"},
    memory_type="action"
)

# Force memory maintenance (tier transitions)
memory_api.force_memory_maintenance(agent_id="agent-123")

# Get memory statistics
stats = memory_api.get_memory_statistics(agent_id="agent-123")
print(f"Total memories: {stats['total_memories']}")
print(f"Memory distribution: {stats['memory_type_distribution']}")

# Clear the cache to free up memory and ensure fresh results
memory_api.clear_cache()

# Configure cache TTL for balancing memory usage and performance
memory_api.set_cache_ttl(300)  # 5 minutes

# Get embedding from a state using your embedding logic
embedding = PLACEHOLDER_VECTOR

# Search using the raw embedding
memory_space = memory_api.get_memory_space("agent-123")
similar_memories = memory_space.search_by_embedding(
    query_embedding=embedding,
    k=10,
    memory_tiers=["stm", "im"]  # Optional: specific tiers to search
)

# Get memory agent instance
memory_space = memory_api.get_memory_space("agent-123")

# Search by content pattern
memories_by_content = memory_space.search_by_content(
    content_query="trade wood",
    k=5
)

# The merge_sorted parameter is enabled by default for appropriate methods
time_memories = memory_space.retrieve_by_time_range(
    agent_id="agent-123",
    start_step=1000,
    end_step=2000
)  # Uses efficient merge sort internally

# This query will cache results (using lru_cache)
similar_states = memory_space.retrieve_similar_states(
    agent_id="agent-123",
    query_state=current_state,
    k=5
)

# Subsequent identical calls will use the cached result
similar_states_again = memory_space.retrieve_similar_states(
    agent_id="agent-123",
    query_state=current_state,
    k=5
)  # Returns cached result without recomputing

# Configure the default cache TTL
memory_space.set_cache_ttl(300)  # 5 minutes

# Clear the entire cache
memory_space.clear_cache()

memory_api = AgentMemoryAPI()

try:
    # Attempt to store a state
    memory_api.store_agent_state(
        agent_id="agent-123",
        state_data={"position": [10, 20], "health": 0.8},
        step_number=42
    )
except MemoryStoreException as e:
    # Handle storage failure (e.g., retry or log)
    print(f"Storage failed: {e}")
    # Implement recovery strategy...

try:
    # Attempt to retrieve similar states
    similar_states = memory_api.retrieve_similar_states(
        agent_id="agent-123",
        query_state={"position": [12, 22]}
    )
except MemoryRetrievalException as e:
    # Handle retrieval failure (e.g., fallback to non-vector search)
    print(f"Retrieval failed: {e}")
    # Implement fallback strategy...

# Search only STM and IM (faster than searching all tiers)
results = memory_space.search_by_embedding(
    query_embedding=embedding,
    k=10,
    memory_tiers=["stm", "im"]  # Skip LTM for faster results
)

"""


# the design note's configuration example, whose STM lives in Redis: here every tier lives in
# the one database, so a Redis connection setting is refused (never silently ignored)
CONFIG = """config = MemoryConfig(
    # System-wide settings
    cleanup_interval=100,  # Check for maintenance every N insertions
    memory_priority_decay=0.95,  # Priority decay factor for older memories

    # Tier-specific settings
    stm_config=RedisSTMConfig(
        host="localhost",
        port=6379,
        memory_limit=10000,  # Max entries in STM
        ttl=3600  # 1 hour TTL
    )
)

memory_api = AgentMemoryAPI(config)
"""


def _run(monkeypatch: pytest.MonkeyPatch, cwd: Path) -> dict[str, object]:
    """Run the examples; every AgentMemoryAPI they build is closed after (the seed's code
    leaves them open: its Redis clients need no closing, a client socket does)."""
    import synapsedb.agent_state

    made: list[synapsedb.agent_state.AgentMemoryAPI] = []

    class Recorded(synapsedb.agent_state.AgentMemoryAPI):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(synapsedb.agent_state, "AgentMemoryAPI", Recorded)
    scope: dict[str, object] = {"PLACEHOLDER_VECTOR": [0.1, 0.2, 0.3] + [0.05] * 381}
    try:
        exec(compile(IMPORTS + SEED, "seed-002-examples", "exec"), scope)
    finally:
        for api in made:
            api.close()
    return scope


def _check(scope: dict[str, object]) -> None:
    stats = scope["stats"]
    assert isinstance(stats, dict)
    assert stats["total_memories"] == 4
    assert stats["memory_type_distribution"] == {"state": 2, "action": 1, "interaction": 1}
    recent = scope["recent_states"]
    assert [r["step_number"] for r in recent] == [1234, 1234]  # type: ignore[attr-defined]
    assert [m["step_number"] for m in scope["memories"]] == [1236]  # type: ignore[attr-defined]
    trading = scope["trading_memories"]
    assert [m["contents"]["outcome"] for m in trading] == ["success"]  # type: ignore[attr-defined]
    similar = scope["similar_states"]
    assert similar and similar[0]["contents"]["position"] == [10, 20]  # type: ignore[index]
    found = scope["memories_by_content"]
    top = {found[0]["memory_type"], found[1]["memory_type"]}  # type: ignore[index]
    assert top == {"action", "interaction"}  # the two that speak of trading wood
    assert [m["step_number"] for m in scope["time_memories"]] == [  # type: ignore[attr-defined]
        1234,
        1234,
        1235,
        1236,
    ]
    assert len(scope["similar_memories"]) == 4  # type: ignore[arg-type]


def test_seed_examples_embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SYNAPSEDB_AGENT_DATABASE", raising=False)
    scope = _run(monkeypatch, tmp_path)
    _check(scope)
    assert (tmp_path / "agent-memory-data").is_dir()  # the default data directory


def test_seed_examples_over_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from synapsedb.server import create_app

    db = synapsedb.open(tmp_path / "server", durability="os", llm=None)
    try:
        with serve(create_app(db)) as url:
            monkeypatch.setenv("SYNAPSEDB_AGENT_DATABASE", url)
            scope = _run(monkeypatch, tmp_path)
            _check(scope)
            assert not (tmp_path / "agent-memory-data").exists()
            assert os.environ["SYNAPSEDB_AGENT_DATABASE"] == url
    finally:
        db.close()


def test_a_tiers_redis_connection_is_refused_not_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapsedb.agent_state import MemoryConfigException

    monkeypatch.chdir(tmp_path)
    with pytest.raises(MemoryConfigException) as err:
        exec(compile(IMPORTS + CONFIG, "design-note-config", "exec"), {})
    assert err.value.details["field"] == "stm_config.host"
    assert "Leave host out" in err.value.message and "MemoryConfig.database" in err.value.message
    assert not (tmp_path / "agent-memory-data").exists()  # refused before anything opened
    # the same example without the connection: its limits hold
    works = CONFIG.replace('host="localhost",', "").replace("port=6379,", "")
    scope: dict[str, object] = {}
    exec(compile(IMPORTS + works + "memory_api.close()\n", "design-note-config", "exec"), scope)
    config = scope["config"]
    assert config.stm_config.memory_limit == 10000 and config.stm_config.ttl == 3600  # type: ignore[attr-defined]


def test_the_design_notes_error_names_are_the_same_classes() -> None:
    import synapsedb.agent_state as agents
    import synapsedb.errors as errors

    for kind in ("API", "Store", "Retrieval", "Maintenance", "Config"):
        new = getattr(errors, f"Memory{kind}Error")
        assert getattr(errors, f"Memory{kind}Exception") is new
        assert getattr(agents, f"Memory{kind}Exception") is new
        assert issubclass(new, errors.SynapseError) and new.__name__.endswith("Error")
    assert errors.error_from_code("memory_config", "bad").__class__ is errors.MemoryConfigError
