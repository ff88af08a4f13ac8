"""The Agent Memory API's ``MemorySpace``: one agent's memory (``AgentMemoryAPI.get_memory_space``), and
the argument checks its searches share with the API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from .records import TIERS, render

if TYPE_CHECKING:
    from .api import AgentMemoryAPI

__all__ = [
    "MemorySpace",
    "attribute_filter",
    "attribute_match",
    "check_tiers",
    "lookup_path",
    "type_list",
]


def type_list(memory_type: Any) -> list[str] | None:
    if memory_type is None:
        return None
    if not isinstance(memory_type, str) or not memory_type:
        raise ValidationError(
            f"memory_type: expected a type name such as 'state', got {memory_type!r}",
            field="memory_type",
        )
    return [memory_type]


def check_tiers(value: Any) -> tuple[str, ...]:
    """``memory_tiers``: None (all) or some of ``stm``, ``im``, ``ltm``."""
    if value is None:
        return TIERS
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Mapping) or not isinstance(value, Sequence):
        raise ValidationError(
            f"memory_tiers: expected a list of 'stm', 'im', 'ltm', got {value!r}",
            field="memory_tiers",
        )
    out = tuple(t.lower() if isinstance(t, str) else t for t in value)
    if not out or not all(t in TIERS for t in out):
        raise ValidationError(
            f"memory_tiers: expected some of 'stm', 'im', 'ltm', got {list(value)!r}",
            field="memory_tiers",
        )
    return tuple(t for t in TIERS if t in out)


def _flat(attributes: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for key, value in attributes.items():
        if not isinstance(key, str) or not key or key.startswith("$"):
            raise ValidationError(
                f"attributes: keys must be non-empty field names, got {key!r}",
                field=f"attributes.{key}",
            )
        path = f"{prefix}.{key}"
        if isinstance(value, Mapping) and value:
            _flat(value, path, out)
        else:
            out[path] = value


def attribute_filter(attributes: Any) -> dict[str, Any] | None:
    """The filter that narrows a search to memories that may hold ``attributes`` (scalars by
    equality inside the engine; lists by membership of each item, checked exactly after)."""
    if not isinstance(attributes, Mapping) or not attributes:
        raise ValidationError("attributes: expected a non-empty object", field="attributes")
    flat: dict[str, Any] = {}
    _flat(attributes, "data", flat)
    parts: list[dict[str, Any]] = []
    for path, value in flat.items():
        if isinstance(value, list):
            parts.extend(
                {path: {"$contains": v}}
                for v in value
                if v is None or isinstance(v, str | int | float)
            )
            if not value:
                parts.append({path: {"$exists": True}})
        elif isinstance(value, Mapping):  # an empty object: the field exists
            parts.append({path: {"$exists": True}})
        elif value is None or isinstance(value, str | int | float):
            parts.append({path: value})
        else:
            raise ValidationError(
                f"attributes.{path[5:]}: {type(value).__name__} is not a JSON value",
                field=f"attributes.{path[5:]}",
            )
    return parts[0] if len(parts) == 1 else {"$and": parts}


def lookup_path(data: Any, path: str) -> tuple[bool, Any]:
    for part in path.split("."):
        if not isinstance(data, Mapping) or part not in data:
            return False, None
        data = data[part]
    return True, data


def _equal(got: Any, want: Any) -> bool:
    if isinstance(want, Mapping) and not want:  # an empty object asks that the field is one
        return isinstance(got, Mapping)
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    return bool(got == want)


def attribute_match(data: Any, attributes: Mapping[str, Any]) -> bool:
    """Exact check of every attribute against a memory's data (numbers by value, so 1 == 1.0;
    booleans only equal booleans)."""
    flat: dict[str, Any] = {}
    _flat(attributes, "", flat)
    for path, want in flat.items():
        found, got = lookup_path(data, path[1:])
        if not found or not _equal(got, want):
            return False
    return True


class MemorySpace:
    """One agent's memory. Methods that take ``agent_id`` (as the original API's examples pass it)
    accept only this space's agent."""

    def __init__(self, api: AgentMemoryAPI, agent_id: str) -> None:
        self.api = api
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"<MemorySpace {self.agent_id!r}>"

    def _own(self, agent_id: str | None) -> str:
        if agent_id is not None and agent_id != self.agent_id:
            raise ValidationError(
                f"agent_id: this memory space is agent {self.agent_id!r}'s, not {agent_id!r}",
                field="agent_id",
            )
        return self.agent_id

    def retrieve_recent_states(
        self, count: int = 5, memory_type: str | None = None
    ) -> list[dict[str, Any]]:
        """The ``count`` memories with the highest steps (newest first; the later stored first
        among equal steps)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValidationError(
                f"count: expected a positive integer, got {count!r}", field="count"
            )
        return self.api._recent(self.agent_id, count, type_list(memory_type))

    def search_by_embedding(
        self,
        query_embedding: Sequence[float],
        k: int = 5,
        memory_tiers: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Nearest memories to a vector (cosine), over the tiers asked for (default all),
        merged by score; each record has its ``score`` and ``tier``."""
        if query_embedding is None:
            raise ValidationError("query_embedding: required", field="query_embedding")
        return self.api._search(
            self.agent_id, embedding=query_embedding, k=k, memory_tiers=memory_tiers
        )

    def search_by_content(
        self,
        content_query: str | Mapping[str, Any],
        k: int = 5,
        memory_tiers: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Memories by meaning and keywords (hybrid search over their text); an object query
        is searched as its rendered fields."""
        if isinstance(content_query, Mapping):
            text = render("", 0, content_query).split(": ", 1)[-1]
        elif isinstance(content_query, str) and content_query.strip():
            text = content_query
        else:
            raise ValidationError(
                "content_query: expected a non-empty string or an object", field="content_query"
            )
        return self.api._search(self.agent_id, text=text, k=k, memory_tiers=memory_tiers)

    def retrieve_similar_states(
        self,
        query_state: Mapping[str, Any],
        k: int = 5,
        memory_type: str | None = None,
        *,
        agent_id: str | None = None,
    ) -> list[dict[str, Any]]:
        return self.api.retrieve_similar_states(self._own(agent_id), query_state, k, memory_type)

    def retrieve_by_time_range(
        self,
        start_step: int | None = None,
        end_step: int | None = None,
        memory_type: str | None = None,
        *,
        agent_id: str | None = None,
        **times: Any,
    ) -> list[dict[str, Any]]:
        return self.api.retrieve_by_time_range(
            self._own(agent_id), start_step, end_step, memory_type, **times
        )

    def retrieve_by_attributes(
        self,
        attributes: Mapping[str, Any],
        memory_type: str | None = None,
        *,
        agent_id: str | None = None,
    ) -> list[dict[str, Any]]:
        return self.api.retrieve_by_attributes(self._own(agent_id), attributes, memory_type)

    def retrieve_by_importance(
        self, k: int = 10, memory_type: str | None = None, **kw: Any
    ) -> list[dict[str, Any]]:
        return self.api.retrieve_by_importance(self.agent_id, k, memory_type, **kw)

    def expand_memory(self, memory_id: str, *, restore: bool = False) -> dict[str, Any]:
        return self.api.expand_memory(self.agent_id, memory_id, restore=restore)

    def force_maintenance(self) -> dict[str, Any]:
        return self.api.force_memory_maintenance(self.agent_id)

    def get_statistics(self) -> dict[str, Any]:
        return self.api.get_memory_statistics(self.agent_id)

    def clear_cache(self) -> None:
        """Drop cached results (of every agent: the cache is the API's)."""
        self.api.clear_cache()

    def set_cache_ttl(self, ttl: float) -> None:
        self.api.set_cache_ttl(ttl)
