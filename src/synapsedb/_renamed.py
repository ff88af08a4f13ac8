"""Old import paths of renamed packages: ``synapsedb.agentic`` is :mod:`synapsedb.memory_loop`
and ``synapsedb.agents`` is :mod:`synapsedb.agent_state`. Each old name, and each of its
submodules, is the very module of the new name (one class, one ``isinstance``)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from types import ModuleType


def alias(old: str, new: str) -> ModuleType:
    """Register ``old`` and ``old.<sub>`` for every submodule of the package ``new``; returns
    the package, for the old module to stand for."""
    package = importlib.import_module(new)
    sys.modules[old] = package
    for info in pkgutil.iter_modules(package.__path__):
        sys.modules[f"{old}.{info.name}"] = importlib.import_module(f"{new}.{info.name}")
    return package
