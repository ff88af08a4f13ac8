"""Value objects as the JSON an MCP client reads: the HTTP API's field names and RFC 3339
times, without vectors (an embedding is hundreds of numbers no model should have to read)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

__all__ = ["dumps", "to_json"]


def to_json(value: Any) -> Any:
    """``value`` (a value object, a list of them, or JSON values) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.name != "embedding"
        }
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted(to_json(v) for v in value)
    if hasattr(value, "tolist"):  # a numpy array or scalar
        return value.tolist()
    return value


def dumps(value: Any) -> str:
    """Compact JSON text of ``to_json(value)``, non-ASCII kept as is."""
    return json.dumps(to_json(value), ensure_ascii=False, separators=(",", ":"))
