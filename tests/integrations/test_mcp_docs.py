"""docs/integrations/mcp.md: its examples run as written (the HTTP one against a real keyed
server), its client configuration is a valid ``synapsedb mcp`` command line, and its tool
table and numbers are the code's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import synapsedb
from tests.support.live_server import serve

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from synapsedb.integrations.mcp import TOOLS
from synapsedb.integrations.mcp.resources import MAX_NAMES, PAGE, TEMPLATES

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "mcp.md"
URL_LITERAL = '"http://127.0.0.1:7379"'


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


def test_there_are_exactly_the_examples_tested() -> None:
    assert len(blocks("python")) == 2 and len(blocks("json")) == 1


def test_the_in_process_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(blocks("python")[0], "docs/integrations/mcp.md[0]", "exec"), {})
    assert "The budget for the Hawaii trip" in capsys.readouterr().out


def test_the_http_example_runs_against_a_keyed_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapsedb.server import create_app
    from synapsedb.server.keys import KeyStore

    code = blocks("python")[1]
    assert URL_LITERAL in code
    with synapsedb.open(tmp_path / "d", embedder=None, llm=None, durability="os") as db:
        keys = KeyStore(tmp_path / "d")
        monkeypatch.setenv("SYNAPSEDB_API_KEY", keys.create("acme", ["read", "write"])[1])
        with serve(create_app(db, keys)) as url:
            code = code.replace(URL_LITERAL, repr(url))
            exec(compile(code, "docs/integrations/mcp.md[1]", "exec"), {})
        assert db.namespace("acme..travel").get("user:42", "seat").value == "window"


def test_the_client_configuration_is_a_valid_command_line() -> None:
    from synapsedb.cli import build_parser

    config = json.loads(blocks("json")[0])["mcpServers"]["synapsedb"]
    assert config["command"] == "synapsedb"
    args = build_parser().parse_args(config["args"])
    assert (args.command, args.namespace, args.agent) == ("mcp", "travel", "assistant")


def test_every_tool_and_number_is_the_code_s() -> None:
    text = DOC.read_text()
    rows = re.findall(r"^\| `(\w+)` \| .*? \| (.*?) \| (.*?) \|$", text, re.M)
    assert {name for name, _s, _a in rows} == set(TOOLS)
    for name, scope, arguments in rows:
        spec = TOOLS[name]
        assert scope.startswith(spec.scope), name
        named = set(re.findall(r"`(\w+)`", arguments))
        assert named == set(spec.properties), (name, named ^ set(spec.properties))
    assert f"{PAGE} a page" in text
    flat = " ".join(text.split())
    assert f"at most the first {MAX_NAMES:,} names" in flat  # the entities resource's cap
    assert "carries `next`" in flat and "`prefix=`" in flat and "`after=`" in flat
    for _name, uri, _doc in TEMPLATES:
        assert f"`{uri}`" in text
