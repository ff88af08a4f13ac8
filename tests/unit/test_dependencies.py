"""Every third-party module the package imports at module level is a declared core dependency
(a user's `pip install synapsedb` must be able to `synapsedb.connect`, serve and use the CLI).
Optional integrations import theirs inside functions, behind an extra."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[\[<>=!~; ]", d, maxsplit=1)[0] for d in project["dependencies"]}
    return {n.lower().replace("_", "-") for n in names}


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
    declared = _declared()
    dists = packages_distributions()
    missing = []
    for path in sorted((ROOT / "src" / "synapsedb").rglob("*.py")):
        for module in _module_level_imports(path):
            if module in sys.stdlib_module_names or module == "synapsedb":
                continue
            names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
            if not names & declared:
                missing.append(f"{path.relative_to(ROOT)}: {module} ({', '.join(sorted(names))})")
    assert not missing, "imported at module level but not a core dependency:\n" + "\n".join(missing)
