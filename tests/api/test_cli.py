"""The CLI's data commands against a real server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_http import free_port


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "synapsedb",
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--port",
            str(port),
        ],
        env={**os.environ, "SYNAPSEDB_EMBEDDER": "none"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/readyz", timeout=1)
            break
        except httpx.TransportError:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SYNAPSEDB_URL": url, "SYNAPSEDB_NAMESPACE": "cli"}
    return subprocess.run(
        [sys.executable, "-m", "synapsedb", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_commands(server: str) -> None:
    w = run(
        server,
        "write",
        "user:4321",
        "Refund requested for order 1458",
        "--salience",
        "0.9",
        "--metadata",
        '{"channel": "email"}',
        "--agent",
        "intake",
        "--json",
    )
    assert w.returncode == 0, w.stderr
    m = json.loads(w.stdout)
    assert m["agent"] == "intake" and m["metadata"] == {"channel": "email"}
    q = run(server, "query", "user:4321 refund")
    assert q.returncode == 0 and "Refund requested for order 1458" in q.stdout
    assert "(entity user:4321)" in q.stdout
    qid = json.loads(run(server, "query", "refund", "--json").stdout)["query_id"]
    assert json.loads(run(server, "get", m["id"], "--json").stdout)["content"].startswith("Refund")
    assert run(server, "get", m["id"]).stdout.startswith(f"{m['id']}  v1  [user:4321] fact: Refund")
    assert run(server, "set", "user:4321", "order", '{"id": 1458}').returncode == 0
    assert json.loads(run(server, "get", "user:4321", "order", "--json").stdout)["value"] == {
        "id": 1458
    }
    httpx.post(f"{server}/v1/namespaces/cli/events", json={"entity": "s", "event": "hello"})
    assert json.loads(run(server, "events", "s", "--json").stdout)[0]["content"] == "hello"
    httpx.post(f"{server}/v1/namespaces/cli/answers", json={"answer_id": "a1", "query_ids": [qid]})
    assert json.loads(run(server, "lineage", "a1", "--json").stdout)["answer_id"] == "a1"
    missing = run(server, "get", "no-such-id")
    assert missing.returncode == 2 and "error [not_found]" in missing.stderr
    bad = run(server, "set", "u", "k", "{not json")
    assert bad.returncode == 2 and "JSON" in bad.stderr


def test_export_import_between_namespaces(server: str, tmp_path: Path) -> None:
    import synapsedb

    with synapsedb.connect(server) as db:
        mem = db.namespace("cli")
        m = mem.write("u", "first version")
        mem.update(m.id, {"content": "second version"})
        mem.set("u", "k", [1, 2])
        res = mem.query("version")
        mem.record_answer("a1", [res.query_id], cited=[m.id])
    out = tmp_path / "cli.jsonl"
    exp = run(server, "export", "--out", str(out))
    assert exp.returncode == 0, exp.stderr
    assert "exported" in exp.stderr and out.read_bytes().count(b"\n") >= 5
    assert out.stat().st_mode & 0o777 == 0o600  # an export holds every memory: owner only
    imp = run(server, "import", str(out), "-n", "cli-copy")
    assert imp.returncode == 0, imp.stderr
    with synapsedb.connect(server) as db:
        a, b = db.namespace("cli"), db.namespace("cli-copy")
        assert a.history(m.id) == b.history(m.id)
        assert a.lineage("a1") == b.lineage("a1")
        assert a.get("u", "k") == b.get("u", "k")
        assert list(a.export())[1:] == list(b.export())[1:]
    again = run(server, "import", str(out), "-n", "cli-copy")
    assert again.returncode == 2 and "already holds data" in again.stderr


def test_cli_query_valid_at(server: str) -> None:
    base = f"{server}/v1/namespaces/cli/memories"
    for mid, bounds in (
        ("paris", {"valid_from": "2020-01-01", "valid_to": "2023-01-01"}),
        ("berlin", {"valid_from": "2023-01-01"}),
    ):
        resp = httpx.post(
            base, json={"entity": "u", "id": mid, "content": f"lives in {mid}", **bounds}
        )
        assert resp.status_code == 201, resp.text
    for flags, ids in (
        (["--valid-at", "2021-06-01"], ["paris"]),
        (["--valid-at", "1700000000"], ["berlin"]),
        ([], ["berlin"]),  # now: Paris ended in 2023
        (["--include-ended"], ["berlin", "paris"]),
    ):
        out = run(server, "query", "lives", "--json", *flags)
        assert out.returncode == 0, out.stderr
        got = sorted(h["id"] for h in json.loads(out.stdout)["hits"])
        assert got == ids, flags
    bad = run(server, "query", "lives", "--valid-at", "soon")
    assert bad.returncode == 2 and "valid_at" in bad.stderr


def test_demo(server: str) -> None:
    out = run(server, "demo", "--demo-namespace", "demo-test")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "order number already known: #1458" in text
    assert "-- lineage of answer-" in text and "cited:" in text
    assert "Refund requested for order #1458" in text


def test_sse_follow_is_live_and_resumable(server: str) -> None:
    base = f"{server}/v1/namespaces/live"
    first = httpx.post(f"{base}/events", json={"entity": "user:1", "event": "one"}).json()

    def read(headers: dict[str, str], want: int, during: list[str]) -> list[tuple[str, str]]:
        got: list[tuple[str, str]] = []
        with httpx.stream(
            "GET", f"{base}/events/follow", params={"stream": "user:1"}, headers=headers, timeout=30
        ) as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            event_id = ""
            for line in resp.iter_lines():
                if line.startswith("id: "):
                    event_id = line[4:]
                elif line.startswith("data: "):
                    got.append((event_id, json.loads(line[6:])["content"]))
                    if during:  # append while the feed is open: it must arrive live
                        httpx.post(
                            f"{base}/events", json={"entity": "user:1", "event": during.pop(0)}
                        )
                    if len(got) == want:
                        break
        return got

    live = read({}, 3, ["two", "three"])
    assert [c for _, c in live] == ["one", "two", "three"] and live[0][0] == first["id"]
    httpx.post(f"{base}/events", json={"entity": "user:1", "event": "four"})
    resumed = read({"Last-Event-ID": live[-1][0]}, 1, [])
    assert [c for _, c in resumed] == ["four"]
    bad = httpx.get(f"{base}/events/follow", params={"stream": "user:1", "after": "x"})
    assert bad.status_code == 422


def _changes(
    url: str, want: int, params: dict[str, str], headers: dict[str, str], during: list[Any]
) -> list[tuple[str, dict[str, Any]]]:
    """Read ``want`` change events; after each of the first ones, run the next of ``during``
    (writes made while the feed is open must arrive live)."""
    got: list[tuple[str, dict[str, Any]]] = []
    with httpx.stream("GET", f"{url}/changes", params=params, headers=headers, timeout=30) as resp:
        assert resp.status_code == 200, resp.read()
        event_id = ""
        if during:
            during.pop(0)()
        for line in resp.iter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                got.append((event_id, json.loads(line[6:])))
                if during:
                    during.pop(0)()
                if len(got) == want:
                    break
    return got


def test_namespace_change_feed_live_resumable_and_replayed(server: str) -> None:
    base = f"{server}/v1/namespaces/shared"
    vec = [0.1, 0.2, 0.3]
    ids: dict[str, str] = {}

    def write() -> None:
        m = httpx.post(
            f"{base}/memories",
            json={"entity": "user:1", "content": "refund asked", "embedding": vec},
            headers={"X-Agent": "intake"},
        ).json()
        ids["m"] = m["id"]

    steps = [
        write,
        lambda: httpx.put(
            f"{base}/facts", json={"entity": "user:1", "key": "order", "value": 1458}
        ),
        lambda: httpx.post(
            f"{base}/events", json={"entity": "user:2", "event": "hello", "searchable": False}
        ),
        lambda: httpx.patch(f"{base}/memories/{ids['m']}", json={"changes": {"salience": 0.9}}),
    ]
    live = _changes(base, 4, {}, {}, steps)
    assert [(c["action"], c["entity"]) for _, c in live] == [
        ("write", "user:1"),
        ("set", "user:1"),
        ("append", "user:2"),
        ("update", "user:1"),
    ]
    assert live[0][1]["agent"] == "intake" and live[0][1]["target"] == ids["m"]
    assert live[0][1]["namespace"] == "shared" and live[3][1]["version"] == 2
    # resume from the last id: exactly what came after, nothing again
    httpx.delete(f"{base}/memories/{ids['m']}")
    resumed = _changes(base, 1, {}, {"Last-Event-ID": live[-1][0]}, [])
    assert [(c["action"], c["version"]) for _, c in resumed] == [("delete", 3)]
    # only one entity's changes
    only = _changes(base, 1, {"entity": "user:2", "since": "0"}, {}, [])
    assert [c["action"] for _, c in only] == ["append"]
    # an id from another server process (a restart): replayed from durable history, from that
    # id's commit time on; nothing after it is missed
    sys_us, _, seq = live[1][0].split("-")
    foreign = f"{sys_us}-00000000-{seq}"
    replayed = _changes(base, 4, {}, {"Last-Event-ID": foreign}, [])
    assert [c["action"] for _, c in replayed][-3:] == ["append", "update", "delete"]
    assert replayed[0][0].endswith("-r-0")
    # errors before the stream starts
    assert httpx.get(f"{base}/changes", params={"after": "nope"}).status_code == 422
    assert httpx.get(f"{base}/changes", params={"idle_timeout": "-1"}).status_code == 422
    assert httpx.get(f"{base}/changes", params={"since": "not a time"}).status_code == 422
    # idle_timeout ends a quiet feed
    quiet = httpx.get(f"{base}/changes", params={"idle_timeout": "0.2"}, timeout=10)
    assert quiet.status_code == 200 and quiet.text == ""


def test_serve_refuses_zero_blas_threads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from synapsedb import cli

    assert (
        cli.main(["serve", "--data", str(tmp_path / "d"), "--blas-threads", "0", "--auth", "none"])
        == 2
    )
    assert "--blas-threads" in capsys.readouterr().err


def test_serve_caps_blas_threads_in_its_process(tmp_path: Path) -> None:
    """The server process runs numpy's BLAS with --blas-threads threads (1 by default), and
    hands the GIL to a waiting thread after 1 ms (requests before background work)."""
    code = (
        "import sys, threadpoolctl\n"
        "from synapsedb import cli\n"
        "import uvicorn\n"
        "def fake_run(*a, **k):\n"
        "    print('switch', sys.getswitchinterval())\n"
        "    print([i['num_threads'] for i in threadpoolctl.threadpool_info()"
        " if i['user_api'] == 'blas'])\n"
        "uvicorn.run = fake_run\n"
        "sys.exit(cli.main(['serve', '--data', sys.argv[1], '--auth', 'none']))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "2"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] in ("[1]", "[1, 1]"), out.stdout
    assert out.stdout.strip().splitlines()[-2] == "switch 0.001", out.stdout
