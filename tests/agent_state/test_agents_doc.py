"""docs/agent-state.md: every python example runs (in a fresh directory) and the call table names
every public method of AgentMemoryAPI."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from synapsedb.agent_state import AgentMemoryAPI

DOC = Path(__file__).resolve().parents[2] / "docs" / "agent-state.md"


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_doc_has_examples() -> None:
    assert len(_examples()) >= 3


@pytest.mark.parametrize("index", range(len(_examples())))
def test_every_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SYNAPSEDB_AGENT_DATABASE", raising=False)
    exec(compile(_examples()[index], f"docs/agent-state.md example {index + 1}", "exec"), {})


def test_every_public_method_is_documented() -> None:
    text = DOC.read_text()
    for name, _ in inspect.getmembers(AgentMemoryAPI, inspect.isfunction):
        if not name.startswith("_") and name not in ("close",):
            assert f"`{name}(" in text, name
