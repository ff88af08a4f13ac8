"""Servers that each own their share (issue 30, item 5): one against three ``synapsedb serve
--storage postgresql://...`` processes with ``SYNAPSEDB_PLACEMENT=sharded`` on one
PostgreSQL (pgserver, Unix socket, fsync on), every ratio against the one-process floor of the
same run.

1. Memory: ``--namespaces`` namespaces of 100 memories (384-d caller vectors; about 250 KB
   each in memory) written in-process, then served with ``SYNAPSEDB_MEMORY_BUDGET_MB``
   (``--budget-mb``) per process; every namespace queried once through its owner; then the
   namespaces each process holds, their counted bytes and each process's RSS.
2. Writes: ``--seconds`` of ``--threads`` client threads posting batches of 20 memories (no
   vector) to random namespaces of 600, each request sent to the namespace's owner (read
   from the ``shards`` table, as a client routing directly would); acknowledged memories/s,
   and the CPU seconds the server processes and PostgreSQL used. With three, once more with
   every request sent to any process (forwarded to the owner). Then both again with each
   server process held to ``--cpu-cap`` CPUs by a cgroup of its own: on a machine of two
   cores, one process with PostgreSQL and the load generator already keeps both busy, so
   only processes of a fixed size show what a process added adds.
3. A move: three processes under a light write load to 60 namespaces; one killed with
   SIGKILL; for each of its namespaces, the time from the kill to the first write to it
   acknowledged again (lease ``--lease-s``). Then a process added under the same load: its
   start, the time until the shares stop moving, and for the namespaces that moved to it
   the longest time without an acknowledged write (against those that stayed). Last, every
   acknowledged write read back.

The load generator shares the machine (2 cores here) with the servers and PostgreSQL: its
share of the busy CPU is reported.

    .venv/bin/python bench/bench_pg_shards.py [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # tests.support
from bench_pg import cpu_s, free_port, machine_busy_s  # noqa: E402
from common import append_report, git_rev, machine, rss_mib  # noqa: E402

import synapsedb  # noqa: E402
from synapsedb.storage.postgres_shards import shard_of  # noqa: E402

DIM = 384
CGROUP_CPU = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller (--cpu-cap)


def loadavg() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


class Server:
    """``synapsedb serve`` with sharded placement on 127.0.0.1."""

    def __init__(self, root: Path, name: str, url: str, *, budget_mb: int, lease_s: int,
                 cpu_cap: float | None = None) -> None:  # fmt: skip
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        data = root / name
        env = {**os.environ, "SYNAPSEDB_EMBEDDER": "none", "SYNAPSEDB_LLM_BASE_URL": "",
               "SYNAPSEDB_PLACEMENT": "sharded", "SYNAPSEDB_LEASE_S": str(lease_s),
               "SYNAPSEDB_MEMORY_BUDGET_MB": str(budget_mb),
               "SYNAPSEDB_BACKGROUND_MAINTENANCE": "false"}  # fmt: skip
        self.log = (root / f"{name}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "synapsedb", "serve", "--data", str(data), "--storage", url,
             "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
             "--auth", "none"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.cgroup = cap_cpu(self.proc.pid, f"{os.getpid()}-{name}", cpu_cap) if cpu_cap else None
        deadline = time.monotonic() + 300
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"synapsedb serve exited: see {self.log.name}")
            try:
                if request(self.port, "GET", "/readyz", None)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"synapsedb serve not ready: see {self.log.name}")
            time.sleep(0.2)

    def metric(self, name: str) -> float:
        text = request(self.port, "GET", "/metrics", None)[1].decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return float("nan")

    def cpu(self) -> float:
        return cpu_s(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if self.cgroup is not None:
            self.cgroup.rmdir()


def cap_cpu(pid: int, name: str, cores: float) -> Path:
    """Put process ``pid`` (all its threads, and those it starts later) in a cgroup of its own
    (the v1 cpu controller) that may use ``cores`` CPUs at most: as if each process ran on a
    machine of its own of that size, on a machine too small to give each a core."""
    group = CGROUP_CPU / f"synapsedb-bench-{name}"
    group.mkdir()
    (group / "cpu.cfs_period_us").write_text("100000")
    (group / "cpu.cfs_quota_us").write_text(str(int(cores * 100_000)))
    (group / "cgroup.procs").write_text(str(pid))
    return group


def request(port: int, method: str, path: str, body: bytes | None,
            conn: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:  # fmt: skip
    own = conn is None
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        c.request(method, path, body=body, headers=headers)
        resp = c.getresponse()
        return resp.status, resp.read()
    finally:
        if own:
            c.close()


class Owners:
    """Each share's owner, read from the shards table (re-read on demand)."""

    def __init__(self, dsn: str, schema: str, servers: list[Server]) -> None:
        self.dsn, self.schema = dsn, schema
        self.by_address = {s.base: s for s in servers}
        self.lock = threading.Lock()
        self.map: dict[int, Server] = {}
        self.read()

    def read(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(f"SELECT shard, owner FROM {self.schema}.shards").fetchall()
        with self.lock:
            self.map = {int(s): self.by_address[o] for s, o in rows if o in self.by_address}

    def of(self, ns: str) -> Server | None:
        return self.map.get(shard_of(ns))


def wait_settled(servers: list[Server], timeout: float = 120) -> None:
    """Until the processes own all 256 shares between them."""
    deadline = time.monotonic() + timeout
    while True:
        owned = [s.metric("synapsedb_owned_shares") for s in servers]
        if sum(owned) == 256 and min(owned) > 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the processes did not settle on the shares: {owned}")
        time.sleep(0.5)


def postgres_pids(dsn: str) -> list[int]:
    """The PostgreSQL server's processes (their CPU time is the database's share)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    me = int(row[0]) if row else 0
    import psutil

    try:
        parent = psutil.Process(me).parent()
    except psutil.Error:
        return []
    return [parent.pid, *(c.pid for c in parent.children())] if parent else []


def pg_cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds of each of ``pids`` and of the postmaster's children now (connections come
    and go: one opened later counts from zero)."""
    import psutil

    out: dict[int, float] = {}
    procs = []
    for pid in pids[:1]:
        try:
            parent = psutil.Process(pid)
            procs = [parent, *parent.children()]
        except psutil.Error:
            pass
    for proc in procs:
        try:
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def pg_delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


# -- 1: memory ------------------------------------------------------------------------------------


def preload(root: Path, url: str, namespaces: int, per: int) -> None:
    rng = np.random.default_rng(5)
    db = synapsedb.Database(root / "preload", storage=url, embedder=None,
                            background_maintenance=False)  # fmt: skip
    try:
        for k in range(namespaces):
            vecs = rng.standard_normal((per, DIM)).astype(np.float32)
            db.namespace(f"cap-{k}").write_many([
                {"entity": f"user:{i % 7}", "content": f"note {i}: order {k * per + i} and "
                 "the refund policy", "embedding": vecs[i]} for i in range(per)
            ])  # fmt: skip
    finally:
        db.close()


def bench_memory(root: Path, dsn: str, url: str, schema: str, a: argparse.Namespace,
                 k: int) -> dict[str, Any]:  # fmt: skip
    servers = [Server(root, f"mem{k}-{i}", url, budget_mb=a.budget_mb, lease_s=a.lease_s)
               for i in range(k)]  # fmt: skip
    try:
        wait_settled(servers)
        owners = Owners(dsn, schema, servers)
        body = json.dumps({"embedding": [1.0] * DIM, "k": 10, "mode": "vector"}).encode()
        conns = {s.base: http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
                 for s in servers}  # fmt: skip
        names = [f"cap-{i}" for i in range(a.namespaces)]
        random.Random(1).shuffle(names)
        t0 = time.perf_counter()
        for ns in names:
            s = owners.of(ns)
            assert s is not None
            status, text = request(s.port, "POST", f"/v1/namespaces/{ns}/query", body,
                                   conns[s.base])  # fmt: skip
            if status != 200:
                raise RuntimeError(f"query {ns}: {status} {text[:200]!r}")
        took = time.perf_counter() - t0
        time.sleep(3)  # the residency thread's last unloads
        held = [s.metric("synapsedb_resident_namespaces") for s in servers]
        counted = [s.metric("synapsedb_resident_bytes") / 2**20 for s in servers]
        rss = [rss_mib(s.proc.pid) for s in servers]
        for c in conns.values():
            c.close()
    finally:
        for s in servers:
            s.stop()
    return {"held": held, "counted_mib": counted, "rss_mib": rss, "query_s": took}


# -- 2: writes -------------------------------------------------------------------------------------


def write_load(servers: list[Server], owners: Owners | None, seconds: float, threads: int,
               names: list[str]) -> dict[str, Any]:  # fmt: skip
    """``threads`` threads posting batches of 20 memories for ``seconds``: to each namespace's
    owner (``owners``) or to any process (None)."""
    done = [0] * threads
    refused = [0] * threads
    stop = threading.Event()
    errors: list[str] = []

    def run(t: int) -> None:
        rng = random.Random(t)
        conns: dict[str, http.client.HTTPConnection] = {}
        i = 0
        try:
            while not stop.is_set():
                ns = names[rng.randrange(len(names))]
                s = owners.of(ns) if owners is not None else servers[(t + i) % len(servers)]
                s = s or servers[0]
                conn = conns.get(s.base) or conns.setdefault(
                    s.base, http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
                )
                body = json.dumps({"items": [
                    {"entity": f"user:{t}", "content": f"t{t} batch {i} note {j} about order "
                     f"{rng.randrange(10**6)}"} for j in range(20)]}).encode()  # fmt: skip
                status, text = request(s.port, "POST", f"/v1/namespaces/{ns}/memories:batch",
                                       body, conn)  # fmt: skip
                if status in (200, 201):
                    done[t] += 20
                elif status == 503:
                    refused[t] += 1
                    if owners is not None:
                        owners.read()
                else:
                    errors.append(f"{status} {text[:200]!r}")
                    return
                i += 1
        except OSError as exc:
            errors.append(repr(exc))
        finally:
            for c in conns.values():
                c.close()

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    cpu0 = [s.cpu() for s in servers]
    busy0, gen0, t0 = machine_busy_s(), time.process_time(), time.perf_counter()
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    busy, gen = machine_busy_s() - busy0, time.process_time() - gen0
    if errors:
        raise RuntimeError(f"load generator: {errors[0]}")
    server_cpu = sum(s.cpu() for s in servers) - sum(cpu0)
    return {"rate": sum(done) / wall, "refused": sum(refused), "server_cores": server_cpu / wall,
            "machine_busy": busy / wall, "gen_share": gen / busy if busy else 0.0,
            "per_server_cpu_s": sum(done) / server_cpu if server_cpu else 0.0}  # fmt: skip


def bench_writes(root: Path, dsn: str, a: argparse.Namespace, k: int,
                 cpu_cap: float | None = None) -> dict[str, Any]:  # fmt: skip
    schema = f"w{k}_{uuid.uuid4().hex[:8]}"
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    tag = f"w{k}{'c' if cpu_cap else ''}"
    servers = [Server(root, f"{tag}-{i}", url, budget_mb=a.budget_mb, lease_s=a.lease_s,
                      cpu_cap=cpu_cap) for i in range(k)]  # fmt: skip
    names = [f"ns-{i}" for i in range(600)]
    try:
        wait_settled(servers)
        owners = Owners(dsn, schema, servers)
        write_load(servers, owners, min(3.0, a.seconds), a.threads, names)  # warm-up
        pg = postgres_pids(dsn)
        pg0 = pg_cpu(pg)
        t0 = time.perf_counter()
        out = {"routed": write_load(servers, owners, a.seconds, a.threads, names)}
        out["routed"]["pg_cores"] = pg_delta(pg0, pg_cpu(pg)) / (time.perf_counter() - t0)
        if k > 1 and not cpu_cap:
            out["any"] = write_load(servers, None, a.seconds, a.threads, names)
        out["rss_mib"] = [rss_mib(s.proc.pid) for s in servers]
    finally:
        for s in servers:
            s.stop()
    return out


# -- 3: a move, then a process added --------------------------------------------------------------


def gaps(acks: dict[str, list[float]], names: list[str], lo: float, hi: float) -> list[float]:
    """Per namespace of ``names``: the longest time between two acknowledged writes to it
    (or the window's ends) within [lo, hi]."""
    out = []
    for ns in names:
        ts = [lo, *(t for t in acks.get(ns, []) if lo <= t <= hi), hi]
        out.append(max(b - a for a, b in itertools.pairwise(ts)))
    return out


def bench_move(root: Path, dsn: str, a: argparse.Namespace) -> dict[str, Any]:
    schema = f"mv_{uuid.uuid4().hex[:8]}"
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    servers = [Server(root, f"mv-{i}", url, budget_mb=a.budget_mb, lease_s=a.lease_s)
               for i in range(3)]  # fmt: skip
    names = [f"mv-{i}" for i in range(60)]
    acked: list[tuple[str, str, str]] = []
    acks: dict[str, list[float]] = {}  # namespace -> when each write to it was acknowledged
    refused: list[float] = []  # when a write was not acknowledged (503, a dead process)
    first_ok: dict[str, float] = {}
    lock = threading.Lock()
    stop = threading.Event()
    killed_at = [0.0]
    out: dict[str, Any] = {}
    try:
        wait_settled(servers)
        owners = Owners(dsn, schema, servers)
        victim = servers[2]
        of_victim = [ns for ns in names if owners.of(ns) is victim]

        def run(t: int) -> None:
            i = 0
            while not stop.is_set():
                ns = names[(t * 13 + i) % len(names)]
                live = [s for s in list(servers) if s.proc.poll() is None]
                s = live[(t + i) % len(live)]  # any live process: forwarded to the owner
                content = f"t{t}-{i} of {ns}"
                try:
                    status, text = request(s.port, "POST", f"/v1/namespaces/{ns}/memories",
                                           json.dumps({"entity": "user:1",
                                                       "content": content}).encode())  # fmt: skip
                except (OSError, http.client.HTTPException):  # (a process killed mid-answer)
                    status, text = 0, b""
                now = time.perf_counter()
                if status == 201:
                    with lock:
                        acked.append((ns, json.loads(text)["id"], content))
                        acks.setdefault(ns, []).append(now)
                        if killed_at[0] and ns in of_victim and ns not in first_ok:
                            first_ok[ns] = now - killed_at[0]
                else:
                    with lock:
                        refused.append(now)
                    time.sleep(0.02)
                i += 1

        workers = [threading.Thread(target=run, args=(t,)) for t in range(4)]
        for w in workers:
            w.start()
        time.sleep(3)
        killed_at[0] = time.perf_counter()
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        deadline = time.monotonic() + 10 * a.lease_s + 60
        while len(first_ok) < len(of_victim) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        # a process added under the same load: it takes about a third of the shares
        live = [s for s in servers if s.proc.poll() is None]
        owners = Owners(dsn, schema, live)
        before = {ns: owners.of(ns) for ns in names}
        added_at = time.perf_counter()
        newcomer = Server(root, "mv-3", url, budget_mb=a.budget_mb, lease_s=a.lease_s)
        ready_at = time.perf_counter()
        servers.append(newcomer)
        live.append(newcomer)
        seen: list[float] = []
        end = time.monotonic() + 10 * a.lease_s + 60
        while time.monotonic() < end:  # until the shares stop moving
            owned = [s.metric("synapsedb_owned_shares") for s in live]
            seen.append(owned[-1])
            if sum(owned) == 256 and owned[-1] > 0 and seen[-3:] == [owned[-1]] * 3:
                break
            time.sleep(0.2)
        settled_at = time.perf_counter() - 0.4  # (the last two looks found nothing new)
        time.sleep(3)
        stop.set()
        for w in workers:
            w.join()
        owners = Owners(dsn, schema, live)
        to_new = [ns for ns in names if owners.of(ns) is newcomer]
        stayed = [ns for ns in names if owners.of(ns) is before[ns]]
        window = (added_at, settled_at + 3)
        out["add"] = {
            "ready_s": ready_at - added_at, "settled_s": settled_at - added_at,
            "shares": seen[-1], "namespaces": len(to_new),
            "gap_moved": gaps(acks, to_new, *window), "gap_stayed": gaps(acks, stayed, *window),
            "refused": sum(1 for t in refused if window[0] <= t <= window[1]),
            "acked": sum(1 for ts in acks.values() for t in ts if window[0] <= t <= window[1]),
        }  # fmt: skip
        out["kill"] = {"refused": sum(1 for t in refused if killed_at[0] <= t < added_at)}
        lost = 0
        for n, (ns, mid, content) in enumerate(acked):  # (503 while a share moves: again)
            s, end = live[n % len(live)], time.monotonic() + 60
            while True:
                status, text = request(s.port, "GET", f"/v1/namespaces/{ns}/memories/{mid}", None)
                if status != 503 or time.monotonic() > end:
                    break
                time.sleep(0.2)
            if status != 200 or json.loads(text)["content"] != content:
                lost += 1
    finally:
        for s in servers:
            s.stop()
    moved = sorted(first_ok.values())
    return {"namespaces": len(of_victim), "moved": len(moved), "acked": len(acked),
            "lost": lost, "move_s": moved, **out}  # fmt: skip


# -- report ----------------------------------------------------------------------------------------


def report(r: dict[str, Any], a: argparse.Namespace) -> list[str]:
    m1, m3 = r["memory_1"], r["memory_3"]
    w1, w3 = r["writes_1"], r["writes_3"]
    mv = r["move"]
    ad = mv["add"]
    held1, held3 = sum(m1["held"]), sum(m3["held"])
    rate1, rate3 = w1["routed"]["rate"], w3["routed"]["rate"]
    lines = [
        f"Date {r['date']}; machine: {r['machine']}; commit {r['commit']}; PostgreSQL "
        f"{r['pg_version']} (pgserver, Unix socket, fsync on, synchronous_commit on). Command: "
        f"`{r['command']}`. Load (1/5/15 min): {r['load_start']} -> {r['load_end']}.",
        "",
        f"`synapsedb serve --storage postgresql://...` with `SYNAPSEDB_PLACEMENT=sharded`, "
        f"`SYNAPSEDB_LEASE_S={a.lease_s}`, `SYNAPSEDB_MEMORY_BUDGET_MB={a.budget_mb}` per "
        "process, 127.0.0.1; the load generator runs in the benchmark process.",
        "",
        "| measure | 1 process (floor) | 3 processes | 3 / 1 | target |",
        "|---|---|---|---|---|",
        f"| namespaces held in memory after querying each of {a.namespaces:,} once "
        f"| {held1:,.0f} | {held3:,.0f} ({', '.join(f'{x:,.0f}' for x in m3['held'])}) "
        f"| {held3 / held1:.2f}x | 3x: {'met' if held3 >= 2.9 * held1 else '**missed**'} |",
        f"| their counted size, MiB | {sum(m1['counted_mib']):,.0f} | "
        f"{sum(m3['counted_mib']):,.0f} | {sum(m3['counted_mib']) / sum(m1['counted_mib']):.2f}x"
        " | |",
        f"| RSS per process, MiB | {m1['rss_mib'][0]:,.0f} | "
        f"{', '.join(f'{x:,.0f}' for x in m3['rss_mib'])} | | |",
        f"| writes, memories/s (batches of 20, {a.threads} threads, each request to the "
        f"owner) | {rate1:,.0f} | {rate3:,.0f} | {rate3 / rate1:.2f}x | >= 2x: "
        f"{'met' if rate3 >= 2 * rate1 else '**missed**'} |",
        f"| server CPU, cores busy (sum of processes) | {w1['routed']['server_cores']:.2f} | "
        f"{w3['routed']['server_cores']:.2f} | | |",
        f"| PostgreSQL CPU, cores busy | {w1['routed']['pg_cores']:.2f} | "
        f"{w3['routed']['pg_cores']:.2f} | | |",
        f"| memories written per server CPU-second | {w1['routed']['per_server_cpu_s']:,.0f} | "
        f"{w3['routed']['per_server_cpu_s']:,.0f} | "
        f"{w3['routed']['per_server_cpu_s'] / w1['routed']['per_server_cpu_s']:.2f}x | |",
        f"| machine busy cores / generator's share | {w1['routed']['machine_busy']:.2f} / "
        f"{w1['routed']['gen_share']:.0%} | {w3['routed']['machine_busy']:.2f} / "
        f"{w3['routed']['gen_share']:.0%} | | |",
        f"| writes, memories/s, each request to any process (forwarded) | | "
        f"{w3['any']['rate']:,.0f} | {w3['any']['rate'] / rate1:.2f}x | |",
        *capped_rows(r, a),
        "",
        f"A move: 3 processes, 4 client threads writing one memory at a time to 60 namespaces "
        f"through any live process; one process killed with SIGKILL. Its {mv['namespaces']} "
        f"namespaces were written again after (from the kill to the first acknowledged write "
        f"of each): p50 {np.median(mv['move_s'] or [np.nan]):.1f} s, max "
        f"{max(mv['move_s'] or [np.nan]):.1f} s "
        f"({mv['moved']} of {mv['namespaces']} within the wait; lease {a.lease_s} s, renewed "
        f"every {a.lease_s / 3:.1f} s); writes not acknowledged meanwhile (retried): "
        f"{mv['kill']['refused']:,}.",
        "",
        f"Then a fourth process started under the same load: /readyz after "
        f"{ad['ready_s']:.1f} s; the shares stopped moving {ad['settled_s']:.1f} s after its "
        f"start, {ad['shares']:.0f} of 256 its own ({ad['namespaces']} of the 60 namespaces). "
        f"Longest time without an acknowledged write to a namespace, from the start until "
        f"3 s after it settled: p50 / max {np.median(ad['gap_moved'] or [np.nan]):.2f} / "
        f"{max(ad['gap_moved'] or [np.nan]):.2f} s for those that moved to it, "
        f"{np.median(ad['gap_stayed'] or [np.nan]):.2f} / {max(ad['gap_stayed'] or [np.nan]):.2f}"
        f" s for those that stayed (the floor); writes not acknowledged meanwhile: "
        f"{ad['refused']:,} of {ad['refused'] + ad['acked']:,}.",
        "",
        f"Every acknowledged write (kill and add, {mv['acked']:,}) read back through the "
        f"processes alive at the end: lost {mv['lost']}.",
    ]
    return lines


def capped_rows(r: dict[str, Any], a: argparse.Namespace) -> list[str]:
    """The write part with each server held to ``--cpu-cap`` CPUs: what the rate does when
    every process has CPU of its own, which this machine cannot give three processes."""
    if "capped_1" not in r:
        return []
    c1, c3 = r["capped_1"]["routed"], r["capped_3"]["routed"]
    return [
        "",
        f"The same writes with each server process held to {a.cpu_cap} CPU (a cgroup each, "
        "`cpu.cfs_quota_us`), as if each ran on a machine of its own of that size; "
        "PostgreSQL and the load generator are not held:",
        "",
        "| measure | 1 process (floor) | 3 processes | 3 / 1 | target |",
        "|---|---|---|---|---|",
        f"| writes, memories/s (each request to the owner) | {c1['rate']:,.0f} | "
        f"{c3['rate']:,.0f} | {c3['rate'] / c1['rate']:.2f}x | >= 2x: "
        f"{'met' if c3['rate'] >= 2 * c1['rate'] else '**missed**'} |",
        f"| server CPU, cores busy (sum of processes) | {c1['server_cores']:.2f} | "
        f"{c3['server_cores']:.2f} | | |",
        f"| PostgreSQL CPU, cores busy | {c1['pg_cores']:.2f} | {c3['pg_cores']:.2f} | | |",
        f"| machine busy cores / generator's share | {c1['machine_busy']:.2f} / "
        f"{c1['gen_share']:.0%} | {c3['machine_busy']:.2f} / {c3['gen_share']:.0%} | | |",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--namespaces", type=int, help="memory part (default 3,000; quick 300)")
    ap.add_argument("--budget-mb", type=int, help="per process (default 128; quick 16)")
    ap.add_argument("--seconds", type=float, help="per write phase (default 20; quick 5)")
    ap.add_argument("--threads", type=int, default=12)
    ap.add_argument("--lease-s", type=int, default=10)
    ap.add_argument("--cpu-cap", type=float, default=0.25,
                    help="the write part once more with each server process held to this many "
                         "CPUs (a cgroup each; 0: skip; needs root and cgroup v1's cpu "
                         "controller)")  # fmt: skip
    a = ap.parse_args()
    a.namespaces = a.namespaces or (300 if a.quick else 3000)
    a.budget_mb = a.budget_mb or (16 if a.quick else 128)
    a.seconds = a.seconds or (5.0 if a.quick else 20.0)
    from tests.support.backend_servers import postgres_server

    stamp = dt.datetime.now(dt.UTC)
    r: dict[str, Any] = {"date": stamp.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
                         "commit": git_rev(), "command": "python " + " ".join(sys.argv),
                         "load_start": loadavg()}  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="synapsedb-bench-shards-"))
    try:
        with postgres_server() as dsn:
            import psycopg

            with psycopg.connect(dsn) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                r["pg_version"] = row[0] if row else "?"
            schema = f"cap_{uuid.uuid4().hex[:8]}"
            url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
            print(f"preloading {a.namespaces:,} namespaces ...", flush=True)
            preload(root, url, a.namespaces, 100)
            for k in (1, 3):
                print(f"memory, {k} process(es) ...", flush=True)
                r[f"memory_{k}"] = bench_memory(root, dsn, url, schema, a, k)
                print(r[f"memory_{k}"], flush=True)
            for k in (1, 3):
                print(f"writes, {k} process(es) ...", flush=True)
                r[f"writes_{k}"] = bench_writes(root, dsn, a, k)
                print(r[f"writes_{k}"], flush=True)
            if a.cpu_cap:
                for k in (1, 3):
                    print(f"writes, {k} process(es) of {a.cpu_cap} CPU each ...", flush=True)
                    r[f"capped_{k}"] = bench_writes(root, dsn, a, k, a.cpu_cap)
                    print(r[f"capped_{k}"], flush=True)
            print("a move ...", flush=True)
            r["move"] = bench_move(root, dsn, a)
            print({k: v for k, v in r["move"].items() if k not in ("move_s", "add")},
                  {k: v for k, v in r["move"]["add"].items() if not k.startswith("gap")},
                  flush=True)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    r["load_end"] = loadavg()
    lines = report(r, a)
    text = "\n".join(lines) + "\n"
    base = Path(tempfile.gettempdir()) / f"synapsedb-bench-shards-{stamp:%Y%m%d-%H%M%S}"
    base.with_suffix(".md").write_text(text)
    base.with_suffix(".json").write_text(json.dumps(r, indent=1, default=str))
    print(f"written: {base}.md, {base}.json")
    append_report("Sharded placement on PostgreSQL", r["command"], lines, data=r)


if __name__ == "__main__":
    main()
