"""The README's Python quickstart runs as written (in a scratch directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [
        b
        for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
        # the embedded example; the ones talking to a server are tests/api's job
        if "synapsedb.open(" in b and "synapsedb.connect(" not in b
    ]
    assert blocks, "README has no embedded python example"
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    assert (tmp_path / "synapse-data" / "synapse.db").exists()
