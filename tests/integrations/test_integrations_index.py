"""docs/integrations.md lists every adapter page, each page has a test that runs it, and every
extra it names exists in pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INDEX = (ROOT / "docs" / "integrations.md").read_text()


def test_every_page_is_listed_and_tested() -> None:
    pages = sorted(p.name for p in (ROOT / "docs" / "integrations").glob("*.md"))
    assert pages, "no pages"
    linked = sorted(set(re.findall(r"\(integrations/([\w-]+\.md)\)", INDEX)))
    assert linked == pages
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    tests += "\n".join(
        p.read_text() for p in (ROOT / "clients" / "typescript" / "test").glob("*.ts")
    )
    for page in pages:
        assert f"integrations/{page}" in tests or f'integrations", "{page}' in tests, page


def test_named_extras_exist() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    named = set(re.findall(r"synapsedb\[(\w+)\]", INDEX))
    assert named and named <= set(extras), named - set(extras)


def test_every_page_says_how_to_install_the_model() -> None:
    """What a plain pip install lacks, named where each integration is set up."""
    for page in sorted((ROOT / "docs" / "integrations").glob("*.md")):
        assert "synapsedb models install" in page.read_text(), page.name
