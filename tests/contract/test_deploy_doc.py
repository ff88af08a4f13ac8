"""docs/deploy.md: its Python example runs against a real PostgreSQL, and its Citus statements
name every table of the schema as it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from synapsedb.storage.postgres_schema import MIGRATIONS, REFERENCE_TABLES, SCHEMA_TABLES

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
EXAMPLE_URL = "postgresql://synapsedb:secret@db:5432/synapsedb?"


def test_the_python_example_runs(postgres_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert EXAMPLE_URL in code
    joiner = "&" if "?" in postgres_dsn else "?"
    exec(compile(code.replace(EXAMPLE_URL, postgres_dsn + joiner), str(DOC), "exec"), {})
    assert capsys.readouterr().out == f"schema version {len(MIGRATIONS)}\n"


def test_the_citus_statements_name_every_table() -> None:
    text = DOC.read_text()
    distributed = re.findall(r"create_distributed_table\('(\w+)', '(\w+)'", text)
    assert sorted(t for t, _ in distributed) == sorted(SCHEMA_TABLES)
    assert all(col == ("name" if t == "namespaces" else "ns") for t, col in distributed)
    assert sorted(re.findall(r"create_reference_table\('(\w+)'\)", text)) == sorted(
        REFERENCE_TABLES
    )
