"""docs/console.md says what the console is: its views are the app's, its CSP is the one
served, its files are the shipped ones, and its screenshots exist."""

from __future__ import annotations

import re
from pathlib import Path

from synapsedb.server.routes.console import CSP

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "console.md").read_text()
FILES = ROOT / "src" / "synapsedb" / "server" / "console"


def test_every_view_in_the_doc_is_a_view_of_the_console_and_back() -> None:
    table = re.findall(r"^\| [^|]+ \| `#/(\w*)", DOC, re.M)
    app = (FILES / "app.js").read_text()
    block = app[app.index("const VIEWS = {") : app.index("};", app.index("const VIEWS = {"))]
    views = set(re.findall(r"^\s+(?:\"(\w*)\"|(\w+)):", block, re.M))
    names = {a or b for a, b in views}
    assert set(table) == names, (set(table), names)


def test_the_documented_csp_is_the_served_one() -> None:
    assert f"`{CSP}`" in DOC


def test_the_doc_names_every_shipped_file_and_counts_them() -> None:
    shipped = sorted(p.name for p in FILES.iterdir() if p.is_file())
    for name in shipped:
        assert f"`{name}`" in DOC, name
    words = {9: "Nine", 10: "Ten", 11: "Eleven", 12: "Twelve", 13: "Thirteen"}
    assert f"{words[len(shipped)]} small files" in DOC


def test_every_screenshot_linked_exists() -> None:
    linked = re.findall(r"\(img/(console-[\w-]+\.png)\)", DOC)
    assert len(set(linked)) >= 10
    for name in linked:
        assert (ROOT / "docs" / "img" / name).is_file(), name
