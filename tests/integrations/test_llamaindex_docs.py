"""docs/integrations/llamaindex.md: its example runs as written (in a temporary directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "llamaindex.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("SYNAPSEDB_LLM_BASE_URL", "SYNAPSEDB_LLM_MODEL"):  # no model: as documented
        monkeypatch.delenv(name, raising=False)
    found = blocks()
    assert len(found) == 2  # the chat stores and memory block; the vector store
    for i, code in enumerate(found):
        exec(compile(code, f"docs/integrations/llamaindex.md[{i}]", "exec"), {})
