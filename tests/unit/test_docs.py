"""Docs that can drift get a test."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from synapsedb import Namespace, Settings

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_setting_is_documented_with_its_default() -> None:
    text = (DOCS / "concepts.md").read_text()
    for name, field in Settings.__dataclass_fields__.items():
        assert (
            f"| `{name}` | `{field.default}` |" in text or f"| `{name}` | {field.default} |" in text
        ), name


def test_every_llm_setting_is_documented_with_its_env_var_and_default() -> None:
    from synapsedb.config import LLMSettings

    text = (DOCS / "llm.md").read_text()
    for name, field in LLMSettings.__dataclass_fields__.items():
        default = f"`{field.default}`" if field.default != "" else "empty"
        row = f"| `{name}` | `{LLMSettings.env_var(name)}` | {default} | {field.metadata['doc']} |"
        assert row in text, row
    assert "[docs/llm.md](docs/llm.md)" in (DOCS.parent / "README.md").read_text()


def test_every_public_namespace_method_is_documented() -> None:
    text = (DOCS / "concepts.md").read_text()
    for name, _member in inspect.getmembers(Namespace, inspect.isfunction):
        if not name.startswith("_"):
            assert f"`{name}(" in text, name


def test_every_serve_option_is_documented(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from synapsedb import cli

    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    options = set(re.findall(r"--[a-z][a-z-]+", capsys.readouterr().out)) - {"--help"}
    assert "--max-connections" in options
    text = (DOCS / "http.md").read_text()
    missing = [o for o in sorted(options) if not re.search(rf"(?<![\w-]){o}(?![\w-])", text)]
    assert missing == []


def test_security_doc_names_regression_tests_that_exist() -> None:
    """docs/security.md's table of hostile-pass findings points at tests: each must exist."""
    import re

    text = (DOCS / "security.md").read_text()
    root = DOCS.parent
    named = set(re.findall(r"`(tests/[\w/]+\.py)`", text))
    short = re.findall(r"`(test_\w+\.py)`", text)  # the same folder as the path before it
    assert len(named) >= 10
    for path in named:
        assert (root / path).is_file(), path
    for name in short:
        assert any(root.glob(f"tests/*/{name}")), name
    for item in range(1, 19):
        assert re.search(rf"^\| {item} \|", text, re.M), f"finding {item} missing"


def test_every_loop_setting_is_documented_with_its_default() -> None:
    from synapsedb.memory_loop import LoopSettings

    text = (DOCS / "memory-loop.md").read_text()
    for name, field in LoopSettings.__dataclass_fields__.items():
        assert f"| `{name}` | `{field.default}` |" in text, name


def test_memory_loop_doc_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (DOCS / "memory-loop.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/memory-loop.md", "exec"), {})
    assert (tmp_path / "synapse-data").is_dir()
