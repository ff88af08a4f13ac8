"""docs/integrations/langgraph.md: its examples run as written, and what it states about
limits and the conformance result matches the code."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from synapsedb.integrations.langgraph.blobs import DEFAULT_CHUNK_CHARS
from synapsedb.integrations.langgraph.index import INDEX_TYPE, MAX_CONTENT_CHARS, MAX_K
from synapsedb.integrations.langgraph.naming import MAX_NAME, STORE_PREFIX

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "langgraph.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


@pytest.mark.parametrize("index", range(2))
def test_every_example_runs(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # as a module of its own: LangGraph reads the State's type hints from its module
    module = types.ModuleType(f"langgraph_doc_example_{index}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    code = compile(blocks()[index], f"docs/integrations/langgraph.md[{index}]", "exec")
    exec(code, module.__dict__)


def test_there_are_exactly_the_examples_tested() -> None:
    assert len(blocks()) == 2


def test_the_numbers_in_the_doc_are_the_code_s() -> None:
    text = " ".join(DOC.read_text().split())
    assert f"`chunk_chars` ({DEFAULT_CHUNK_CHARS:,})" in text
    assert f"at most {MAX_CONTENT_CHARS:,} characters" in text
    assert f"Past {MAX_K:,} index entries under the prefix, the best {MAX_K:,} come first" in text
    assert (
        f"at most {MAX_NAME} characters ({MAX_NAME - len(STORE_PREFIX)} for the namespace)" in text
    )
    assert f"memory of type `{INDEX_TYPE}`" in text
    assert "81 tests: `FULL (8/8)`" in text
