"""``synapsedb chat`` on standard input against a real server (uvicorn on loopback) whose memory
proxy forwards to ScriptedUpstream, a stand-in for a hosted model that streams its answers
over a real socket and records what it was sent."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import synapsedb
from synapsedb import cli
from synapsedb.config import LLMSettings
from synapsedb.conversation import Sessions
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore
from tests.support.live_server import serve
from tests.support.scripted_upstream import Reply, Request, ScriptedUpstream

ROOT = Path(__file__).resolve().parents[2]


def answer(request: Request) -> Any:
    """The model: says how many conversation turns it was sent and echoes the last one."""
    if request.response_format is not None:  # the memory loop (no LLM of its own here)
        raise AssertionError("unexpected structured request")
    turns = [m for m in request.messages if m["role"] in ("user", "assistant")]
    return Reply.text(f"Heard {len(turns)} turns; you said: {turns[-1]['content']}")


@dataclass
class Server:
    url: str
    upstream: ScriptedUpstream
    db: synapsedb.Database
    key: str | None = None

    def chats(self) -> list[list[dict[str, Any]]]:
        """The conversation turns (user, assistant) of each request the model got."""
        return [
            [
                {"role": m["role"], "content": m["content"]}
                for m in r.messages
                if m["role"] in ("user", "assistant")
            ]
            for r in self.upstream.chat_requests()
        ]

    def session(self, sid: str, ns: str = "default") -> list[tuple[str, str]]:
        remote = synapsedb.connect(self.url, api_key=self.key)
        try:
            return [(m.role, m.content) for m in Sessions(remote.namespace(ns)).load(sid)]
        finally:
            remote.close()


def _server(path: Path, keys: KeyStore | None = None) -> Iterator[Server]:
    with ScriptedUpstream(responder=answer) as up:
        llm = LLMSettings(base_url=up.base_url, model="scripted", max_retries=0, timeout_s=10)
        db = synapsedb.open(
            path, durability="os", embedder=None, background_maintenance=False, llm=None
        )
        try:
            with serve(create_app(db, keys, llm=llm)) as url:
                yield Server(url, up, db)
        finally:
            db.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    yield from _server(tmp_path / "d")


def chat(
    server: Server,
    lines: str,
    *args: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    code = cli.main(["chat", "--url", server.url, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_chat_keeps_its_turns_in_the_session_and_sends_them_as_context(
    server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = "My parcel is 1458.\n\nWhere is it?\n/clear\nHello again\n/exit\nnever sent\n"
    code, out, err = chat(
        server,
        lines,
        "--session",
        "t1",
        "--user",
        "user:42",
        "--system",
        "Be brief.",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0, err
    assert out.splitlines() == [  # streamed word by word, each answer on its line
        "Heard 1 turns; you said: My parcel is 1458.",
        "Heard 3 turns; you said: Where is it?",
        "Heard 1 turns; you said: Hello again",
    ]
    assert "session 't1'" in err and "(session cleared)" in err
    _first, second, third = server.chats()
    assert second == [
        {"role": "user", "content": "My parcel is 1458."},
        {"role": "assistant", "content": "Heard 1 turns; you said: My parcel is 1458."},
        {"role": "user", "content": "Where is it?"},
    ]
    assert third == [{"role": "user", "content": "Hello again"}]  # after /clear
    sent = server.upstream.chat_requests()[0]
    assert sent.body["stream"] is True and sent.body["user"] == "user:42"
    assert sent.messages[0] == {"role": "system", "content": "Be brief."}
    # each turn stored once, by the proxy, in the session (the clear hides the first two)
    assert server.session("t1") == [
        ("user", "Hello again"),
        ("assistant", "Heard 1 turns; you said: Hello again"),
    ]
    remote = synapsedb.connect(server.url)
    try:
        stream = [e.content for e in remote.namespace("default").events("session:t1")]
    finally:
        remote.close()
    assert stream == [
        "My parcel is 1458.",
        "Heard 1 turns; you said: My parcel is 1458.",
        "Where is it?",
        "Heard 3 turns; you said: Where is it?",
        "Hello again",
        "Heard 1 turns; you said: Hello again",
    ]


def test_a_named_session_resumes_and_the_window_bounds_the_context(
    server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    talk = "".join(f"turn {i}\n" for i in range(4))
    assert (
        chat(
            server,
            talk,
            "--session",
            "long",
            "-n",
            "support",
            monkeypatch=monkeypatch,
            capsys=capsys,
        )[0]
        == 0
    )
    code, out, err = chat(
        server,
        "and now?\n",
        "--session",
        "long",
        "-n",
        "support",
        "--window",
        "3",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0 and "resuming 8 messages" in err
    assert out == "Heard 4 turns; you said: and now?\n"  # the last 3 of 8, then the new one
    assert [t["content"] for t in server.chats()[-1]] == [
        "Heard 5 turns; you said: turn 2",
        "turn 3",
        "Heard 7 turns; you said: turn 3",
        "and now?",
    ]
    code, out, _ = chat(
        server,
        "budget?\n",
        "--session",
        "long",
        "-n",
        "support",
        "--strategy",
        "token_buffer",
        "--max-tokens",
        "40",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    sent = server.chats()[-1]
    assert code == 0 and len(sent) < 9 and sent[-1]["content"] == "budget?"


def test_upstream_failures_and_bad_commands_do_not_end_the_chat(
    server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server.upstream.push(
        Reply.error(400, "model 'nope' does not exist", kind="invalid_request_error", param="model")
    )
    code, out, err = chat(
        server, "first\n/bogus\nsecond\n", "--session", "f", monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0
    assert "error: HTTP 400: model 'nope' does not exist" in err
    assert "unknown command /bogus" in err
    assert out.splitlines() == ["Heard 1 turns; you said: second"]  # the failed turn: nothing
    assert server.session("f") == [
        ("user", "second"),
        ("assistant", "Heard 1 turns; you said: second"),
    ]


def test_keys_scopes_and_an_unreachable_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = KeyStore(tmp_path / "d")
    writer = keys.create("acme", ["read", "write"], None, None)[1]
    reader = keys.create("acme", ["read"], None, None)[1]
    for srv in _server(tmp_path / "d", keys):
        srv.key = writer
        code, out, err = chat(
            srv,
            "hi\n",
            "--api-key",
            writer,
            "--session",
            "k",
            monkeypatch=monkeypatch,
            capsys=capsys,
        )
        assert code == 0 and out == "Heard 1 turns; you said: hi\n", err
        code, out, err = chat(
            srv,
            "hi\n/clear\n",
            "--api-key",
            reader,
            "--session",
            "k",
            monkeypatch=monkeypatch,
            capsys=capsys,
        )
        assert code == 0 and out == "" and "lacks the 'write' scope" in err
        assert "error [forbidden]" in err  # /clear too
        assert srv.session("k") == [("user", "hi"), ("assistant", "Heard 1 turns; you said: hi")]
        code, _, err = chat(srv, "hi\n", "--session", "k", monkeypatch=monkeypatch, capsys=capsys)
        assert code == 2 and "unauthorized" in err
    code, _, err = chat(
        Server("http://127.0.0.1:9", None, None),
        "hi\n",  # type: ignore[arg-type]
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 2 and "unreachable" in err


def test_the_command_reads_a_pipe(server: Server) -> None:
    """``python -m synapsedb chat`` as a user runs it, its input piped."""
    run = subprocess.run(
        [sys.executable, "-m", "synapsedb", "chat", "--url", server.url, "--session", "pipe"],
        input="Hello there\nAnd again\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "Heard 1 turns; you said: Hello there",
        "Heard 3 turns; you said: And again",
    ]
