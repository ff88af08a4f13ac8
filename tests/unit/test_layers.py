"""The dependency rules of docs/architecture.md, read from the source: the value types and the
namespace surface are leaves, and the client speaks the wire with them alone (no feature
package: conversation, cache, agentic, agents)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import synapsedb.types

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "synapsedb"
LEAVES = {"errors", "times", "types", "config"}
FEATURES = {"conversation", "cache", "agentic", "agents", "llm", "integrations"}


def imported(path: Path) -> set[str]:
    """The synapsedb modules ``path`` imports anywhere (``engine.namespace``, ``types``)."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    here = parts[:-1]  # the package the module is in (an __init__ too)
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(here[: len(here) - node.level + 1])
            target = [*base, *(node.module.split(".") if node.module else [])]
            out.add(".".join(target))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("synapsedb."):
            out.add(node.module.removeprefix("synapsedb."))  # type: ignore[union-attr]
    return out


def modules(package: str) -> list[Path]:
    return sorted((PACKAGE / package).rglob("*.py"))


@pytest.mark.parametrize("path", modules("types"), ids=lambda p: p.name)
def test_the_value_types_import_only_leaves(path: Path) -> None:
    outside = {m for m in imported(path) if m.split(".")[0] not in LEAVES}
    assert not outside, f"{path.name} imports {sorted(outside)}"


@pytest.mark.parametrize("path", modules("client"), ids=lambda p: p.name)
def test_the_client_imports_no_feature_package(path: Path) -> None:
    features = {m for m in imported(path) if m.split(".")[0] in FEATURES | {"engine", "server"}}
    assert not features, f"{path.name} imports {sorted(features)}"


def test_every_value_type_is_exported() -> None:
    """``synapsedb.types`` names every public class of its modules, and nothing else."""
    classes = set()
    for name in ("access", "cache", "messages", "records", "sessions"):
        module = getattr(synapsedb.types, name)
        classes |= {
            n
            for n, v in vars(module).items()
            if isinstance(v, type) and v.__module__ == module.__name__ and not n.startswith("_")
        }
    exported = set(synapsedb.types.__all__)
    assert classes <= exported
    assert all(hasattr(synapsedb.types, n) for n in exported)


def test_old_import_paths_still_work() -> None:
    from synapsedb.cache.records import CacheHit
    from synapsedb.conversation import Message, SessionInfo
    from synapsedb.conversation.messages import Message as Moved

    assert CacheHit is synapsedb.types.CacheHit
    assert Message is Moved is synapsedb.types.Message
    assert SessionInfo is synapsedb.types.SessionInfo
