"""docs/integrations/langchain.md: its examples run as written (in a temporary directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "langchain.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


@pytest.mark.parametrize("index", range(2))
def test_every_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks()[index], f"docs/integrations/langchain.md[{index}]", "exec"), {})


def test_there_are_exactly_the_examples_tested() -> None:
    assert len(blocks()) == 2
