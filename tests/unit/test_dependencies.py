"""Every third-party module the package imports at module level is a declared core dependency
(a user's `pip install synapsedb` must be able to `synapsedb.connect`, serve and use the CLI).
Optional features import theirs inside functions, behind an extra; the adapters under
``synapsedb.integrations`` (imported only by their users) import their own extra's packages at
module level, and nothing outside them imports an adapter."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions, requires
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _names(deps: list[str]) -> set[str]:
    names = {re.split(r"[\[<>=!~; ]", d, maxsplit=1)[0] for d in deps}
    return {n.lower().replace("_", "-") for n in names}


def _declared(extra: str | None = None) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = _names(project["dependencies"])
    if extra is None:
        return core
    # an extra's packages and what they require themselves (langgraph brings langchain-core)
    direct = _names(project["optional-dependencies"][extra])
    brought = {r for d in direct for r in _names(requires(d) or []) if r}
    return core | direct | brought


def _extra_of(path: Path) -> str | None:
    """The extra an adapter module belongs to (integrations/langgraph/store.py: langgraph;
    integrations/langchain_messages.py: langchain), None for everything else."""
    parts = path.relative_to(ROOT / "src" / "synapsedb").parts
    if parts[0] != "integrations" or parts[1] == "__init__.py":
        return None
    return parts[1].removesuffix(".py").split("_")[0]


def _module_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in tree.body:  # module level only: imports inside functions are optional
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_module_level_imports_are_core_dependencies() -> None:
    dists = packages_distributions()
    missing = []
    for path in sorted((ROOT / "src" / "synapsedb").rglob("*.py")):
        declared = _declared(_extra_of(path))
        for module in _module_level_imports(path):
            if module in sys.stdlib_module_names or module == "synapsedb":
                continue
            names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
            if not names & declared:
                missing.append(f"{path.relative_to(ROOT)}: {module} ({', '.join(sorted(names))})")
    assert not missing, "imported at module level but not a core dependency:\n" + "\n".join(missing)


def test_only_adapters_import_adapters() -> None:
    """Core modules never import synapsedb.integrations at module level (it would need the
    extras); inside a function (``synapsedb mcp``, the server's /mcp mount) is lazy and fine."""
    offenders = []
    for path in sorted((ROOT / "src" / "synapsedb").rglob("*.py")):
        if _extra_of(path) is not None or "integrations" in path.parts:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom):
                name = ("." * node.level) + (node.module or "")
                if "integrations" in name.split("."):
                    offenders.append(f"{path.relative_to(ROOT)}: {name}")
            elif isinstance(node, ast.Import):
                offenders += [
                    f"{path.relative_to(ROOT)}: {a.name}"
                    for a in node.names
                    if "integrations" in a.name.split(".")
                ]
    assert not offenders, offenders
