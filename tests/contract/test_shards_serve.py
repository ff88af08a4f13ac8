"""Three real ``synapsedb serve --storage postgresql://...`` processes with sharded placement
on one PostgreSQL: writes through any of them, forwarded to each namespace's owner; one killed
with SIGKILL under load (its share moves to the others when its lease runs out, and every
write that was acknowledged is still there); then a fourth added (it takes a share, the
namespaces rebalance, everything stays readable through every process).

Leases of 2 s keep the test near half a minute. Timing is never asserted: waits are
``eventually`` with generous deadlines; how long a move takes is measured in
bench/bench_pg_shards.py.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .conftest import PostgresBackend
from .test_processes_on_postgres import eventually

NAMESPACES = [f"tenant-{i}" for i in range(24)]


class Serve:
    def __init__(self, url: str, data: Path) -> None:
        from tests.support.live_server import free_port

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "SYNAPSEDB_EMBEDDER": "none", "SYNAPSEDB_LLM_BASE_URL": "",
               "SYNAPSEDB_PLACEMENT": "sharded", "SYNAPSEDB_LEASE_S": "2",
               "SYNAPSEDB_BACKGROUND_MAINTENANCE": "false"}  # fmt: skip
        self.log = data.with_suffix(".log")
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "synapsedb", "serve", "--data", str(data), "--storage",
                 url, "--port", str(self.port), "--auth", "none"],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        end = time.monotonic() + 90
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"synapsedb serve exited: {self.log.read_text()}")
            try:
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"synapsedb serve did not start within 90 s: {self.log.read_text()}")

    def owned(self) -> int:
        text = httpx.get(f"{self.base}/metrics", timeout=10).text
        found = re.search(r"^synapsedb_owned_shares (\S+)$", text, re.M)
        return int(float(found.group(1))) if found else -1

    def forwarded(self) -> int:
        text = httpx.get(f"{self.base}/metrics", timeout=10).text
        found = re.search(r"^synapsedb_forwarded_requests_total (\S+)$", text, re.M)
        return int(float(found.group(1))) if found else 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def servers(postgres_dsn: str, tmp_path: Path) -> Iterator[tuple[str, list[Serve]]]:
    pg = PostgresBackend(postgres_dsn)
    url = f"{pg.dsn}{'&' if '?' in pg.dsn else '?'}schema={pg.schema}"
    started: list[Serve] = []
    try:
        for name in "abc":
            started.append(Serve(url, tmp_path / name))
        yield url, started
    finally:
        for s in started:
            s.stop()


class Load:
    """Threads writing one memory at a time to every namespace in turn, each through the
    next live server; a write counts once a server acknowledged it (201)."""

    def __init__(self, servers: list[Serve], threads: int = 4) -> None:
        self.servers = servers
        self.acked: list[tuple[str, str, str]] = []  # (namespace, memory id, content)
        self.refused = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(t,)) for t in range(threads)]
        for th in self._threads:
            th.start()

    def _run(self, t: int) -> None:
        with httpx.Client(timeout=10) as client:
            i = 0
            while not self._stop.is_set():
                live = [s for s in self.servers if s.proc.poll() is None]
                server = live[(t + i) % len(live)]
                ns = NAMESPACES[(t * 7 + i) % len(NAMESPACES)]
                content = f"w{t}-{i} for {ns}"
                try:
                    r = client.post(f"{server.base}/v1/namespaces/{ns}/memories",
                                    json={"entity": f"user:{t}", "content": content})  # fmt: skip
                except httpx.HTTPError:
                    r = None
                if r is not None and r.status_code == 201:
                    with self._lock:
                        self.acked.append((ns, r.json()["id"], content))
                else:  # not acknowledged (a dead server, a share moving): retried as new
                    with self._lock:
                        self.refused += 1
                    time.sleep(0.05)
                i += 1

    def stop(self) -> None:
        self._stop.set()
        for th in self._threads:
            th.join()


def _read(base: str, ns: str, mid: str) -> str:
    r = httpx.get(f"{base}/v1/namespaces/{ns}/memories/{mid}", timeout=10)
    return r.json()["content"] if r.status_code == 200 else f"<{r.status_code} {r.text}>"


def test_kill_one_under_load_then_add_one(servers: tuple[str, list[Serve]], tmp_path: Path) -> None:
    url, (a, b, c) = servers
    eventually(lambda: [s.owned() for s in (a, b, c)], lambda o: sum(o) == 256 and min(o) > 0,
               deadline_s=30)  # fmt: skip
    load = Load([a, b, c])
    try:
        eventually(lambda: len(load.acked), lambda n: n >= 60, deadline_s=60)
        c.proc.send_signal(signal.SIGKILL)  # under load: no goodbye, its lease just ends
        c.proc.wait(10)
        # its share moves: a and b own everything, and writes to every namespace succeed
        eventually(lambda: [s.owned() for s in (a, b)], lambda o: sum(o) == 256,
                   deadline_s=60)  # fmt: skip
        mark = len(load.acked)
        eventually(lambda: {ns for ns, _, _ in load.acked[mark:]},
                   lambda seen: seen == set(NAMESPACES), deadline_s=60)  # fmt: skip
    finally:
        load.stop()
    assert load.acked and len({ns for ns, _, _ in load.acked}) == len(NAMESPACES)
    for ns, mid, content in load.acked:  # nothing acknowledged is lost, through either
        assert _read(a.base, ns, mid) == content
        assert _read(b.base, ns, mid) == content
    # a fourth process joins: it takes a share (about a third of a's and b's), and every
    # namespace stays readable through every process
    d = Serve(url, tmp_path / "d")
    try:
        owned = eventually(lambda: [s.owned() for s in (a, b, d)],
                           lambda o: sum(o) == 256 and o[2] > 40, deadline_s=60)  # fmt: skip
        assert min(owned) > 40
        for ns, mid, content in load.acked[:: max(1, len(load.acked) // 50)]:
            for server in (a, b, d):  # (a process that has not looked since may say 503)
                eventually(lambda s=server, n=ns, m=mid: _read(s.base, n, m),  # type: ignore[misc]
                           lambda got, want=content: got == want, deadline_s=20)  # fmt: skip
        r = httpx.get(f"{d.base}/v1/namespaces", timeout=10)
        assert set(NAMESPACES) <= set(r.json())
        # a change feed through a process that does not own the namespace: forwarded, streamed
        for ns in NAMESPACES[:6]:
            httpx.post(f"{a.base}/v1/namespaces/{ns}/events",
                       json={"entity": "user:9", "event": f"called {ns}"}).raise_for_status()  # fmt: skip
            for server in (a, b, d):
                with httpx.stream("GET", f"{server.base}/v1/namespaces/{ns}/events/follow",
                                  params={"stream": "user:9", "idle_timeout": "0.5"},
                                  timeout=30) as feed:  # fmt: skip
                    assert feed.status_code == 200
                    assert f"called {ns}" in "".join(feed.iter_text())
        assert sum(s.forwarded() for s in (a, b, d)) > 0
    finally:
        d.stop()
