"""The memory loop: retrieve, inject, extract, store. A layer above the engine that
uses only the public namespace API, so it runs on embedded and remote namespaces alike; the
engine never imports it (``Namespace.remember``/``recall`` reach it through the
``Database.memory_loop`` seam that :func:`synapsedb.open` fills)."""

from .loop import CONFIG_ENTITY, MemoryLoop
from .recall import needs_memory, rewrite_heuristic, similarity, tokens
from .resolve import DECISIONS_STREAM
from .settings import MEMORY_TYPES, LoopSettings
from .when import resolve as resolve_date

__all__ = [
    "CONFIG_ENTITY",
    "DECISIONS_STREAM",
    "MEMORY_TYPES",
    "LoopSettings",
    "MemoryLoop",
    "needs_memory",
    "resolve_date",
    "rewrite_heuristic",
    "similarity",
    "tokens",
]
