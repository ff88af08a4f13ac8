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
