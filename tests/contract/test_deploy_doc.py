"""docs/deploy.md: its Python example runs against a real PostgreSQL, and its Citus statements
name every table of the schema as it is."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from synapsedb.storage.postgres_schema import MIGRATIONS, REFERENCE_TABLES, SCHEMA_TABLES

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
EXAMPLE_URL = "postgresql://synapsedb:secret@db:5432/synapsedb?"


def test_the_python_examples_run(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Both examples, in order, against a real PostgreSQL (a fresh schema), the data
    directory in a temporary one."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 2 and all(EXAMPLE_URL in code for code in blocks)
    joiner = "&" if "?" in postgres_dsn else "?"
    schema = f"schema=doc_{uuid.uuid4().hex[:12]}"
    for code in blocks:
        code = code.replace(EXAMPLE_URL + "schema=synapsedb", postgres_dsn + joiner + schema)
        code = code.replace('"./synapse-data"', repr(str(tmp_path / "data")))
        assert "synapse-data" not in code and "@db:5432" not in code
        exec(compile(code, str(DOC), "exec"), {})
    assert capsys.readouterr().out == f"schema version {len(MIGRATIONS)}\n['Prefers email']\n"


def test_the_citus_statements_name_every_table() -> None:
    text = DOC.read_text()
    distributed = re.findall(r"create_distributed_table\('(\w+)', '(\w+)'", text)
    assert sorted(t for t, _ in distributed) == sorted(SCHEMA_TABLES)
    assert all(col == ("name" if t == "namespaces" else "ns") for t, col in distributed)
    assert sorted(re.findall(r"create_reference_table\('(\w+)'\)", text)) == sorted(
        REFERENCE_TABLES
    )
