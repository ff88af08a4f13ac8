"""docs/cache.md: its examples run as written, and its numbers and routes match the code."""

from __future__ import annotations

import contextvars
import re
from pathlib import Path

import pytest

from synapsedb.cache import DEFAULT_THRESHOLD, DEFAULT_TTL_S, MAX_KEY_BYTES, MAX_VALUE_BYTES
from synapsedb.cache.counters import MAX_SCOPES
from synapsedb.cache.keying import MAX_PARAMS_BYTES, MAX_TAGS, SEMANTIC_CHARS

DOC = Path(__file__).resolve().parents[2] / "docs" / "cache.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


@pytest.mark.parametrize("index", range(2))
def test_every_example_runs(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    code = blocks()[index]
    # in a context of its own: set_default_cache must not leak into other tests
    contextvars.copy_context().run(exec, compile(code, f"docs/cache.md[{index}]", "exec"), {})


def test_there_are_exactly_the_examples_tested() -> None:
    assert len(blocks()) == 2


def test_the_numbers_in_the_doc_are_the_code_s() -> None:
    text = " ".join(DOC.read_text().split())
    assert f"default **{DEFAULT_THRESHOLD}**" in text
    assert f"threshold={DEFAULT_THRESHOLD}, ttl={DEFAULT_TTL_S:g}" in text
    assert f"{MAX_KEY_BYTES:,} UTF-8 bytes" in text
    assert f"{MAX_VALUE_BYTES:,} bytes of" in text
    assert f"params at most {MAX_PARAMS_BYTES:,} bytes" in text
    assert f"at most {MAX_TAGS} tags" in text
    assert f"over {SEMANTIC_CHARS:,} characters" in text
    assert f"at most {MAX_SCOPES:,} scopes" in text


def test_every_cache_route_is_in_the_doc(tmp_path: Path) -> None:
    import synapsedb
    from synapsedb.server import create_app

    text = DOC.read_text()
    with synapsedb.open(tmp_path / "d", embedder=None) as db:
        paths = [
            (m, r.path)
            for r in create_app(db).routes
            for m in (r.methods or ())
            if "/cache" in r.path and m != "HEAD"
        ]
    assert len(paths) == 4
    for method, path in paths:
        assert f"| {method} | `{path}` |" in text, (method, path)
