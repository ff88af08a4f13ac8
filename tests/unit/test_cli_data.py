"""The data commands, in this process (``cli.main``): each on a data directory (``--data``) and
on a real server (``--url``) gives the same answers; every command's help shows an example;
bad input is ``error [code]`` and exit 2, changing nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.live_server import serve

import synapsedb
from synapsedb import cli
from synapsedb.cli_data import COMMANDS
from synapsedb.server import create_app

# fields that differ by construction between two databases: times and random ids
VOLATILE = {"ts", "created_at", "recorded_at", "at", "as_of", "expires_at", "query_id"}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNAPSEDB_EMBEDDER", "none")
    monkeypatch.setenv("SYNAPSEDB_DURABILITY", "os")
    monkeypatch.setenv("SYNAPSEDB_BACKGROUND_MAINTENANCE", "false")
    for name in ("SYNAPSEDB_URL", "SYNAPSEDB_API_KEY", "SYNAPSEDB_NAMESPACE", "SYNAPSEDB_AGENT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server(tmp_path: Path, env: None) -> Iterator[str]:
    db = synapsedb.open(
        tmp_path / "served", durability="os", embedder=None, background_maintenance=False
    )
    try:
        with serve(create_app(db)) as url:
            yield url
    finally:
        db.close()


def call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def json_of(capsys: pytest.CaptureFixture[str], target: list[str], *argv: str) -> Any:
    code, out, err = call(capsys, *argv, *target, "-n", "cli", "--agent", "intake", "--json")
    assert code == 0, (argv, err)
    return json.loads(out)


def scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, str) and re.fullmatch(r"[0-9A-Z]{26}|\d{13}-\d+", value):
        return "<id>"  # a new ULID or stream event id
    if isinstance(value, str):
        return re.sub(r"\d{13}-\d+", "<event>", value)
    return value


def script(capsys: pytest.CaptureFixture[str], target: list[str], tmp: Path) -> list[Any]:
    """Every data command once, in an order where each has something to work on."""
    run = lambda *argv: json_of(capsys, target, *argv)  # noqa: E731
    batch = tmp / "batch.jsonl"
    batch.write_text(
        '{"entity": "user:2", "id": "b1", "content": "Prefers phone calls"}\n'
        '{"entity": "user:2", "id": "b2", "content": "Lives in Lisbon"}\n'
    )
    out = [
        run(
            "write",
            "user:1",
            "Refund requested for order 1458",
            "--id",
            "m1",
            "--salience",
            "0.9",
            "--metadata",
            '{"channel": "email"}',
            "--type",
            "episode",
        ),
        run("write-many", str(batch)),
        run("update", "m1", '{"content": "Refund approved for order 1458"}', "--if-version", "1"),
        run("get", "m1"),
        run("set", "user:1", "order", '{"id": 1458}'),
        run("set", "user:1", "order", '{"id": 1459}', "--if-version", "1"),
        run("get", "user:1", "order"),
        run("history", "m1"),
        run("history", "user:1", "order"),
        run("facts", "user:1"),
        run("memories", "user:1"),
        run("memories", "--type", "episode"),
        run(
            "append",
            "user:1",
            "Refund delivered",
            "--stream",
            "orders",
            "--event-data",
            '{"carrier": "dhl"}',
            "--not-searchable",
        ),
        run("events", "orders"),
    ]
    result = run("query", "refund", "--mode", "keyword", "--filter", '{"channel": "email"}')
    out.append(result)
    out.append(run("answer", "ans-1", result["query_id"], "--text", "approved", "--cite", "m1"))
    out += [
        run("lineage", "ans-1"),
        run("audit", "user:1", "--by", "intake"),
        run("snapshot", "user:1"),
        run("delete", "b2"),
        run("delete", "user:1", "order"),
        run("config", "set", "max_hot=10", "policy=reject"),
        run("config"),
        run("maintain", "--dry-run"),
        run("entities"),
        run("streams"),
        run("forget", "b1"),
        run("forget", "--entity", "user:2", "--purge"),
        run("recall", "refund for order 1458", "--entity", "user:1"),
        run("namespaces"),
    ]
    return out


def test_the_same_answers_on_a_data_directory_and_a_server(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = script(capsys, ["--data", str(tmp_path / "local")], tmp_path)
    remote = script(capsys, ["--url", server], tmp_path)
    assert len(local) == len(remote)
    for i, (a, b) in enumerate(zip(local, remote, strict=True)):
        assert scrub(a) == scrub(b), i
    assert local[0]["id"] == "m1" and local[0]["metadata"] == {"channel": "email"}
    assert "embedding" not in local[0]  # lean, embedded too
    assert [m["id"] for m in local[1]] == ["b1", "b2"]
    assert local[6]["value"] == {"id": 1459} and local[6]["version"] == 2
    assert local[13][0]["data"] == {"carrier": "dhl"}
    assert [h["id"] for h in local[14]["hits"]] == ["m1"]
    assert local[15]["cited"][0]["id"] == "m1"
    assert local[21]["policy"] == "reject" and local[22]["max_hot"] == 10
    assert local[26]["purged"] is False and local[26]["target"] == "b1"
    assert local[27]["purged"] is True and local[27]["target"] == "user:2"
    assert local[-1] == ["cli"]


def test_human_lines(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = ["--url", server, "-n", "lines"]
    code, out, _ = call(capsys, "write", "user:1", "Likes tea", "--id", "t1", *target)
    assert (code, out) == (0, "t1  v1  [user:1] fact: Likes tea\n")
    call(capsys, "set", "user:1", "drink", '"tea"', *target)
    code, out, _ = call(capsys, "get", "user:1", "drink", *target)
    assert out.startswith('user:1 drink = "tea"  (v1, ')
    code, out, _ = call(capsys, "query", "tea", "--mode", "keyword", *target)
    assert out.splitlines()[0].startswith("query ") and "t1  [user:1] Likes tea" in out
    code, out, _ = call(capsys, "forget", "--entity", "user:1", *target)
    assert out == "forgot user:1: 1 memories, 1 facts (tombstones: history keeps them)\n"
    code, out, _ = call(capsys, "maintain", *target)
    assert out == "maintenance of lines\n  nothing to do\n"
    code, out, _ = call(capsys, "config", "get", *target)
    assert 'policy: "evict"' in out.splitlines()


def test_include_embedding_prints_vectors(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = ["--url", server, "-n", "vec", "--json"]
    call(capsys, "write", "u", "x", "--id", "v1", *target)
    http = synapsedb.connect(server)
    http.namespace("vec").update("v1", {"embedding": [0.5, 0.5]})
    http.close()
    _, out, _ = call(capsys, "get", "v1", *target)
    assert "embedding" not in json.loads(out)
    _, out, _ = call(capsys, "get", "v1", "--include", "embedding", *target)
    assert json.loads(out)["embedding"] == pytest.approx([0.5, 0.5])
    _, out, _ = call(capsys, "snapshot", "u", "--include", "embedding", *target)
    assert json.loads(out)["memories"][0]["embedding"] == pytest.approx([0.5, 0.5])


def test_feeds_follow_and_changes(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = ["--url", server, "-n", "feeds"]
    call(capsys, "append", "user:1", "one", "--not-searchable", *target)
    call(capsys, "append", "user:1", "two", "--not-searchable", *target)
    code, out, err = call(capsys, "follow", "user:1", "--idle-timeout", "0.3", *target)
    assert code == 0, err
    assert [line.split("  ", 1)[1] for line in out.splitlines()] == ["[user:1] one", "[user:1] two"]
    first = out.split()[0]
    code, out, _ = call(
        capsys, "follow", "user:1", "--after", first, "--idle-timeout", "0.3", "--json", *target
    )
    assert [json.loads(line)["content"] for line in out.splitlines()] == ["two"]
    code, out, _ = call(capsys, "changes", "--since", "0", "--idle-timeout", "0.3", *target)
    assert [line.split()[2] for line in out.splitlines()] == ["append", "append"]
    code, _, err = call(capsys, "follow", "user:1", "--data", "somewhere", "-n", "feeds")
    assert code == 2 and "error [validation]: follow: live feeds are served by a server" in err


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["write", "u", "x", "--metadata", "{nope"], "metadata"),
        (["update", "m1", "[1, 2]"], "changes"),
        (["config", "set"], "setting"),
        (["config", "set", "max_hot"], "setting"),
        (["config", "set", "colour=red"], "colour"),
        (["forget"], "id"),
        (["remember", "user:1", "shouting"], "messages[0]"),
        (["query", "x", "--filter", '{"$bad": 1}'], None),
    ],
)
def test_bad_input_is_an_error_and_changes_nothing(
    tmp_path: Path,
    env: None,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    field: str | None,
) -> None:
    data = ["--data", str(tmp_path / "d")]
    code, out, err = call(capsys, *argv, *data)
    assert code == 2 and out == "" and err.startswith("error ["), err
    if field is not None:
        assert field in err
    with synapsedb.open(tmp_path / "d", embedder=None) as db:
        assert all(db.namespace(n).stats().memory_versions == 0 for n in db.namespaces())


def test_every_command_has_help_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    names = [
        *COMMANDS,
        "namespaces",
        "export",
        "import",
        "follow",
        "changes",
        "stats",
        "serve",
        "demo",
    ]
    for name in names:
        with pytest.raises(SystemExit):
            cli.main([name, "--help"])
        text = capsys.readouterr().out
        assert re.search(r"^examples?:\n  synapsedb ", text, re.M), name
        if name in COMMANDS:
            assert "--data" in text and "--json" in text and "--url" in text, name
    for name in ("create", "list", "limit", "revoke"):
        with pytest.raises(SystemExit):
            cli.main(["keys", name, "--help"])
        assert "example:\n  synapsedb keys " in capsys.readouterr().out


def test_the_cli_modules_stay_small() -> None:
    root = Path(cli.__file__).parent
    for path in root.glob("cli*.py"):
        assert len(path.read_text().splitlines()) <= 600, path.name


def test_stats_reads_a_server_too(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    call(capsys, "write", "u", "x", "--url", server, "-n", "counted")
    code, out, err = call(capsys, "stats", "--url", server, "--namespace", "counted")
    assert code == 0, err
    assert json.loads(out)["counted"]["memories"] == 1


def test_every_command_is_documented() -> None:
    root = Path(__file__).resolve().parents[2]  # the checkout's docs, not the installed package's
    http = (root / "docs" / "http.md").read_text()
    names = [*COMMANDS, "namespaces", "export", "import", "follow", "changes", "stats", "demo"]
    missing = [n for n in names if f"`synapsedb {n}" not in http]
    assert missing == []
    readme = (root / "README.md").read_text()
    block = readme.split("### Command line", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    for line in block.splitlines():  # each README example parses as the CLI's own
        argv = __import__("shlex").split(line.split("  #", 1)[0])
        assert argv[0] == "synapsedb"
        cli.build_parser().parse_args(argv[1:])
