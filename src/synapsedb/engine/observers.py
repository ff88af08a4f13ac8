"""Hooks for observability: the engine reports, a server (or anything) listens.

The engine imports no metrics library; ``Database.observers`` holds plain callables that are
called with numbers. A failing observer is logged and never breaks the operation it observes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Observers"]

log = logging.getLogger("synapsedb.observers")


@dataclass
class Observers:
    commit: list[Callable[[int, float], None]] = field(default_factory=list)  # rows, seconds
    query: list[Callable[[str, dict[str, float]], None]] = field(default_factory=list)  # mode
    embed: list[Callable[[int], None]] = field(default_factory=list)  # texts in a batch
    maintain: list[Callable[[Any], None]] = field(default_factory=list)  # MaintenanceReport
    # namespace, [AuditEntry]: what one commit changed there, called once it is visible
    change: list[Callable[[str, list[Any]], None]] = field(default_factory=list)
    # namespace, entity: a purge of the entity there is visible (its changes were just
    # rewritten in storage); a listener drops what it kept about the entity and the name
    erase: list[Callable[[str, str], None]] = field(default_factory=list)

    def emit(self, hooks: list[Callable[..., None]], *args: Any) -> None:
        for hook in hooks:
            try:
                hook(*args)
            except Exception:
                log.exception("observer failed")
