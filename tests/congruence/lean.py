"""What a remote client answers by default: every memory's vector left out (``include`` not
asking for it), the rest as embedded. Congruence tests compare embedded results passed
through :func:`as_served` with a lean client's, and embedded results as they are with a client
made with ``include="embedding"``."""

from __future__ import annotations

import dataclasses
from typing import Any

from synapsedb.types import Memory


def as_served(value: Any) -> Any:
    """``value`` with ``embedding=None`` in every Memory inside it (lists, tuples, dicts and
    value objects are walked)."""
    if isinstance(value, Memory):
        return dataclasses.replace(value, embedding=None)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: as_served(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init
        }
        return dataclasses.replace(value, **changes)
    if isinstance(value, list):
        return [as_served(v) for v in value]
    if isinstance(value, tuple):
        return tuple(as_served(v) for v in value)
    if isinstance(value, dict):
        return {k: as_served(v) for k, v in value.items()}
    return value
