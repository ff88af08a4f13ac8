"""Conversation memory (issue 12, docs/conversation.md): sessions, context assembly and what the
strategies put in a prompt on LoCoMo.

Parts (each flag runs one; no flag runs them all):

``--sessions``  ``Sessions.append`` on a 100,000-message session (filled with durability os,
                then 2,000 appends timed under fsync, and 2,000 under os for reference),
                alternated with appends to a session growing from empty; ``load(last=50)`` on it
                against a 100-message session, and Window/TokenBuffer reading the same tails;
                then ``load(last=50)`` over HTTP through ``synapsedb serve`` on that data
                directory (the session route when the server has one, and ``Sessions`` over
                ``synapsedb.connect(url).namespace(..)``).
``--context``   SmartContextManager at an 8,000-token budget (o200k_base, exact) over a
                10,000-message searchable session, memories from ``ns.recall``: a long-lived
                manager resumed from the whole session (its first build folds it) then one
                build per new user turn; and a stateless request (TokenBuffer read of the session,
                recall, a fresh manager, build). The parts of a turn are timed apart.
``--locomo``    LoCoMo dev (read in place; bench/conversation_locomo.py): each conversation a
                searchable session played turn by turn, a SummaryBuffer load and a context build
                after every turn. Then, for every question of categories 1-4 at the
                conversation's end: the prompt tokens and the evidence turns contained of the
                whole history, SummaryBuffer(max_tokens=2000, extractive),
                SmartContextManager(total 4,000: recent 2,000, recall memories for the question
                2,000, summary 1,000 by default) and, as a reference, TokenBuffer at 4,000
                (recent only). An evidence turn is contained when its text appears verbatim in
                the context, or (the extractive summary's form of it) when every one of its
                sentences does. The question itself is in none of the contexts. No parameter is
                tuned on these questions: every setting is a documented default or a budget the
                issue names.

Embedded databases live in a temporary directory; every number is from one process on the
machine named in the report. No LLM anywhere (summaries are extractive).

    python bench/bench_conversation.py [--sessions] [--context] [--locomo] [--quick] [--no-report]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo
from common import ROOT, append_report
from conversation_locomo import MODEL, part_locomo

import synapsedb
from synapsedb.conversation import Sessions
from synapsedb.conversation.context import SmartContextManager
from synapsedb.conversation.strategies import TokenBuffer, Window
from synapsedb.conversation.tokens import count_message_tokens, encoding_for

NS = "bench"
SYSTEM = "You are a helpful assistant. Use the memories when they help, and say when unsure."


def ms(samples: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples) * 1e3, q))


def p50_p99(samples: Sequence[float]) -> str:
    return f"{ms(samples, 50):.3f} / {ms(samples, 99):.3f}"


def turns_of(texts: Sequence[str], n: int, offset: int = 0) -> Iterator[tuple[str, str]]:
    """``n`` chat turns, user and assistant alternating, LoCoMo lines cycled."""
    for i in range(offset, offset + n):
        yield ("user" if i % 2 == 0 else "assistant"), texts[i % len(texts)]


def fill(sessions: Sessions, sid: str, n: int, texts: Sequence[str], chunk: int = 1000) -> None:
    done = 0
    while done < n:
        k = min(chunk, n - done)
        sessions.append_many(sid, list(turns_of(texts, k, done)))
        done += k


def open_db(path: Path, durability: str, *, embedder: Any = "settings") -> Any:
    return synapsedb.open(path, llm=None, embedder=embedder, durability=durability)


# -- Sessions: append and load on a 100,000-message session -----------------------------------


def part_sessions(root: Path, texts: Sequence[str], n_long: int, n_timed: int) -> list[str]:
    data = root / "sessions"
    warm = 20
    db = open_db(data, "os", embedder=None)
    sessions = Sessions(db.namespace(NS))
    t0 = time.perf_counter()
    fill(sessions, "long", n_long, texts)
    fill_s = time.perf_counter() - t0
    fill(sessions, "short", 100, texts)
    db.close()
    print(f"  filled {n_long:,} messages in {fill_s:.1f} s", flush=True)

    appends: dict[str, tuple[list[float], list[float]]] = {}
    loads: dict[str, tuple[list[float], list[float]]] = {}
    for durability in ("fsync", "os"):
        db = open_db(data, durability, embedder=None)
        sessions = Sessions(db.namespace(NS))
        long_s: list[float] = []
        new_s: list[float] = []
        turns = list(turns_of(texts, warm + n_timed, 7))
        for i, turn in enumerate(turns):  # alternated, so drift hits both alike
            for sid, out in (("long", long_s), (f"new-{durability}", new_s)):
                t = time.perf_counter()
                sessions.append(sid, turn)
                if i >= warm:
                    out.append(time.perf_counter() - t)
        appends[durability] = (long_s, new_s)
        if durability == "fsync":
            loads = measure_loads(sessions, n_timed)
        db.close()
        print(f"  appends under {durability} done", flush=True)

    long_n = n_long + warm + n_timed
    lines = [
        f"Embedded, no embedder (messages not searchable: one stream event each). The long "
        f"session was filled with {n_long:,} LoCoMo lines (user and assistant alternating, "
        f"`append_many` under durability os: {n_long / fill_s:,.0f} messages/s), then "
        f"{n_timed:,} appends were timed under each durability after {warm} untimed, alternated "
        "with appends to a session growing from empty. The loads ran after the fsync appends "
        f"(long session: {long_n:,} messages).",
        "",
        "| measure | p50 / p99 ms | target | |",
        "|---|---|---|---|",
    ]
    p50 = ms(appends["fsync"][0], 50)
    lines.append(
        f"| `append`, {n_long:,}-message session, fsync | {p50_p99(appends['fsync'][0])} "
        f"| p50 <= 1 ms | {'met' if p50 <= 1 else '**missed**'} |"
    )
    lines.append(
        f"| `append`, a new session (0 to {n_timed:,} messages), fsync | "
        f"{p50_p99(appends['fsync'][1])} | | |"
    )
    lines.append(
        f"| `append`, {n_long:,}-message session, durability os | {p50_p99(appends['os'][0])} | | |"
    )
    lines.append(f"| `append`, a new session, durability os | {p50_p99(appends['os'][1])} | | |")
    for name, (long_s, short_s) in loads.items():
        ratio = ms(long_s, 50) / ms(short_s, 50)
        target = ""
        if name.startswith("`load(last=50)`"):
            met = ms(long_s, 50) <= 1
            target = f" p50 <= 1 ms | {'met' if met else '**missed**'} |"
        else:
            target = " | |"
        lines.append(f"| {name}, {long_n:,}-message session | {p50_p99(long_s)} |{target}")
        lines.append(
            f"| {name}, 100-message session (long / short p50: {ratio:.2f}) | "
            f"{p50_p99(short_s)} | | |"
        )
    head_long, head_short = loads[next(k for k in loads if k.startswith("`ns.events"))]
    lines += [
        "",
        f"`load(last=50)` reads the tail from the end of the stream "
        '(`events(order="desc", limit=50)`) and costs the same on both sessions. Window '
        "and TokenBuffer read that tail too, then the head (the session's leading system "
        "messages) with an ascending `ns.events(limit=8)`, which the engine stops "
        "after 8 events (`events_in` in engine/state.py): "
        f"{ms(head_long, 50):.3f} ms at {long_n:,} messages against "
        f"{ms(head_short, 50):.3f} ms at 100. TokenBuffer's remaining time is counting "
        "the tokens of the turns it reads back.",
    ]
    lines += ["", *part_http(data, n_timed // 2, long_n)]
    return lines


def measure_loads(sessions: Sessions, n: int) -> dict[str, tuple[list[float], list[float]]]:
    """Each read on the long and the short session, alternated; ``n`` of each (fewer for the
    strategies, which count tokens)."""
    window = Window(sessions, k=50)
    tokens = TokenBuffer(sessions, max_tokens=2000, model=MODEL)
    reads: list[tuple[str, Callable[[str], Any], int]] = [
        ("`load(last=50)`", lambda sid: sessions.load(sid, last=50), n),
        ("`Window(k=50).load`", window.load, n // 4),
        ("`TokenBuffer(max_tokens=2000, gpt-4o).load`", tokens.load, n // 4),
        # what the two strategies read besides the tail: the session's head (its system
        # messages), the first events after the last clear, in ascending order
        (
            '`ns.events("session:<id>", limit=8)` (their head read)',
            lambda sid: sessions.ns.events(f"session:{sid}", limit=8),
            n // 4,
        ),
    ]
    out = {}
    for name, read, count in reads:
        long_s: list[float] = []
        short_s: list[float] = []
        for i in range(count + 50):
            for sid, into in (("long", long_s), ("short", short_s)):
                t = time.perf_counter()
                got = read(sid)
                if i >= 50:
                    into.append(time.perf_counter() - t)
                if not got:
                    raise SystemExit(f"{name} of {sid} returned nothing")
        out[name] = (long_s, short_s)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(data: Path) -> Iterator[str]:
    """``synapsedb serve`` on ``data`` (durability fsync, embedder off, auth none, loopback)."""
    port = free_port()
    env = {**os.environ, "SYNAPSEDB_EMBEDDER": "none"}
    cmd = [
        sys.executable,
        "-m",
        "synapsedb",
        "serve",
        "--data",
        str(data),
        "--port",
        str(port),
        "--auth",
        "none",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("synapsedb serve did not become ready")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def alternate(
    read: Callable[[str], Any], n: int, warm: int = 50
) -> tuple[list[float], list[float]]:
    long_s: list[float] = []
    short_s: list[float] = []
    for i in range(n + warm):
        for sid, into in (("long", long_s), ("short", short_s)):
            t = time.perf_counter()
            read(sid)
            if i >= warm:
                into.append(time.perf_counter() - t)
    return long_s, short_s


def part_http(data: Path, n: int, long_n: int) -> list[str]:
    rows: list[tuple[str, tuple[list[float], list[float]]]] = []
    with server(data) as url:
        client = synapsedb.connect(url)
        remote = client.namespace(NS)
        route = f"{url}/v1/namespaces/{NS}/sessions/{{}}/messages"
        with httpx.Client(timeout=30) as http:
            probe = http.get(route.format("long"), params={"last": 50})
            if probe.status_code == 200:
                got = probe.json()
                body = got.get("messages", got) if isinstance(got, dict) else got
                if len(body) != 50:
                    raise SystemExit(
                        f"GET .../sessions/long/messages?last=50: {len(body)} messages"
                    )
                rows.append(
                    (
                        f"`GET /v1/namespaces/{NS}/sessions/<id>/messages?last=50` (httpx, "
                        "keep-alive)",
                        alternate(
                            lambda sid: http.get(
                                route.format(sid), params={"last": 50}
                            ).raise_for_status(),
                            n,
                        ),
                    )
                )
            else:
                rows.append(
                    (
                        f"session route: GET .../sessions/<id>/messages answered "
                        f"{probe.status_code} (not in this server)",
                        ([], []),
                    )
                )
            load = getattr(remote, "session_load", None)
            if callable(load):
                rows.append(
                    (
                        "`RemoteNamespace.session_load(id, last=50)`",
                        alternate(lambda sid: load(sid, last=50), n),
                    )
                )
            over = Sessions(remote)
            how = (
                "one request, the session route"
                if callable(load)
                else "2 requests: the state fact, the events"
            )
            rows.append(
                (
                    f"`Sessions(synapsedb.connect(url).namespace(..)).load(id, last=50)` ({how})",
                    alternate(lambda sid: over.load(sid, last=50), n),
                )
            )
            appends: list[float] = []
            for i, turn in enumerate(
                turns_of(["A remote turn of a chat, for the timing."], n + 20)
            ):
                t = time.perf_counter()
                over.append("remote", turn)
                if i >= 20:
                    appends.append(time.perf_counter() - t)
        client.close()
    lines = [
        f"Over HTTP: `synapsedb serve` (durability fsync, embedder off, `--auth none`, loopback) "
        f"on the same data directory, {n:,} calls each after 50 untimed, long ({long_n:,}) and "
        "short (100) session alternated; the client in this process.",
        "",
        "| over HTTP | long session p50 / p99 ms | 100-message session p50 / p99 ms |",
        "|---|---|---|",
    ]
    for name, (long_s, short_s) in rows:
        if not long_s:
            lines.append(f"| {name} | - | - |")
        else:
            lines.append(f"| {name} | {p50_p99(long_s)} | {p50_p99(short_s)} |")
    lines += [
        "",
        f"`Sessions(remote).append` of one message ({how.split(',')[0]}), fsync, "
        f"to a third session: p50 / p99 {p50_p99(appends)} ms.",
    ]
    return lines


# -- context assembly at 8,000 tokens over a 10,000-message session ---------------------------


@dataclass
class Turn:
    """The timed parts of one new user turn."""

    append: list[float] = field(default_factory=list)
    read: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    assembly: list[float] = field(default_factory=list)
    folds: int = 0
    fold_s: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    memories: list[int] = field(default_factory=list)


def timed(fn: Callable[[], Any], into: list[float]) -> Any:
    t = time.perf_counter()
    out = fn()
    into.append(time.perf_counter() - t)
    return out


def manager() -> SmartContextManager:
    """The manager of the context part: an 8,000-token total, the tier budgets' defaults."""
    m = SmartContextManager(max_total_tokens=8000, model=MODEL)
    m.set_system(SYSTEM)
    return m


def part_context(
    root: Path, convs: Sequence[locomo.Conversation], n_msgs: int, n_turns: int
) -> list[str]:
    texts = [t.content for c in convs for t in c.turns]
    questions = [q.text for c in convs for q in c.questions]
    replies = texts[::-1]
    data = root / "context"
    sid, entity = "ctx", "session:ctx"
    db = open_db(data, "os")
    t0 = time.perf_counter()
    fill(Sessions(db.namespace(NS), searchable=True), sid, n_msgs, texts, chunk=500)
    fill_s = time.perf_counter() - t0
    db.close()
    print(f"  filled {n_msgs:,} searchable messages in {fill_s:.1f} s", flush=True)

    db = open_db(data, "fsync")
    ns = db.namespace(NS)
    sessions = Sessions(ns, searchable=True)
    ns.recall(questions[-1], entity=entity)  # loads the embedder: not part of any timing

    def turn(m: SmartContextManager, i: int, t: Turn, stateless: bool) -> None:
        q = questions[i % len(questions)]
        timed(lambda: sessions.append(sid, ("user", q)), t.append)
        if stateless:
            window = timed(
                lambda: TokenBuffer(sessions, max_tokens=4000, model=MODEL).load(sid), t.read
            )
        rec = timed(lambda: ns.recall(q, entity=entity, budget_tokens=2000), t.recall)
        start = time.perf_counter()
        if stateless:
            m = manager()
            m.extend(window)
        else:
            m.add("user", q)
        m.set_memories(rec)
        out = m.build()
        spent = time.perf_counter() - start
        t.assembly.append(spent)
        stats = m.last_build
        assert stats is not None and stats.tokens["total"] <= 8000
        assert count_message_tokens(out, MODEL) == stats.tokens["total"]
        t.tokens.append(stats.tokens["total"])
        t.memories.append(stats.kept)
        if stats.folded:
            t.folds += 1
            t.fold_s.append(spent)
        reply = replies[i % len(replies)]
        sessions.append(sid, ("assistant", reply))
        if not stateless:
            m.add("assistant", reply)

    # a long-lived manager, resumed from the whole session: its first build folds it
    load_s: list[float] = []
    history = timed(lambda: sessions.load(sid), load_s)
    live = manager()
    live.extend(history)
    first = Turn()
    turn(live, 0, first, stateless=False)
    folded_first = live.last_build.folded if live.last_build else 0
    steady = Turn()
    for i in range(1, n_turns + 1):
        turn(live, i, steady, stateless=False)
    print("  long-lived manager done", flush=True)
    stateless = Turn()
    for i in range(n_turns + 1, 2 * n_turns + 1):
        turn(live, i, stateless, stateless=True)
    db.close()
    print("  stateless builds done", flush=True)

    def row(name: str, samples: Sequence[float], target: str = "", verdict: str = "") -> str:
        return f"| {name} | {p50_p99(samples)} | {target} | {verdict} |"

    p50 = ms(steady.assembly, 50)
    unfolded = [x for x in steady.assembly if x not in steady.fold_s]
    stats = live.last_build
    assert stats is not None
    lines = [
        f"A {n_msgs:,}-message session (LoCoMo lines cycled, user and assistant alternating), "
        f"every message searchable (MiniLM; filled under durability os in {fill_s:.0f} s), then "
        "under fsync, per new user turn (a LoCoMo question; the assistant's reply, a LoCoMo line, "
        "appended after the build, untimed): append the turn to the session, `ns.recall(turn, "
        "entity=session, budget_tokens=2000)` over the session's turns, and the assembly: "
        '`SmartContextManager(max_total_tokens=8000, model="gpt-4o")` (tier budgets at their '
        "defaults: recent 4,000, retrieved 2,000, summary 1,000; exact o200k_base counts, no "
        "LLM: extractive summaries) given the turn and the recalled memories, then `build()`.",
        "",
        f"- **Long-lived manager** (an application process holding it): resumed from the whole "
        f"session (`Sessions.load`, {ms(load_s, 50) / 1e3:.2f} s for {len(history):,} messages), "
        f"its first build folded {folded_first:,} of them into the summary in "
        f"{first.assembly[0]:.2f} s; then {n_turns} turns.",
        f"- **Stateless request** (nothing kept between requests): `TokenBuffer(sessions, "
        f'max_tokens=4000, model="gpt-4o").load` of the session, recall, a new manager given '
        f"that window and the memories, `build()`; {n_turns} turns.",
        "",
        "| per new user turn | p50 / p99 ms | target | |",
        "|---|---|---|---|",
        row(
            "long-lived: assembly (`add`, `set_memories`, `build`)",
            steady.assembly,
            "p50 <= 5 ms",
            "met" if p50 <= 5 else "**missed**",
        ),
        row("long-lived: `ns.recall` (query embedding + hybrid query)", steady.recall),
        row(
            "long-lived: `Sessions.append` of the turn (searchable: MiniLM embedding, fsync)",
            steady.append,
        ),
        row(
            "long-lived: the three together",
            np.add(np.add(steady.assembly, steady.recall), steady.append).tolist(),
        ),
        row("stateless: `TokenBuffer(4000).load` of the session", stateless.read),
        row(
            "stateless: assembly (new manager, `extend`, `set_memories`, `build`)",
            stateless.assembly,
        ),
        row("stateless: `ns.recall`", stateless.recall),
        row(
            "stateless: read + recall + assembly",
            np.add(np.add(stateless.read, stateless.recall), stateless.assembly).tolist(),
        ),
        "",
        f"What a turn spends its time on (p50): the recall "
        f"{ms(steady.recall, 50):.1f} ms (embedding the turn with MiniLM, then the hybrid "
        f"query), the searchable append {ms(steady.append, 50):.1f} ms (embedding the turn "
        f"again, fsync), the assembly {ms(steady.assembly, 50):.2f} ms (token counts of the "
        f"new turn and the memories, the tier budgets). Without the folding builds the assembly "
        f"p99 is {ms(unfolded, 99):.2f} ms.",
        "",
        f"Long-lived builds that folded: {steady.folds} of {n_turns}"
        + (f" (p50 {ms(steady.fold_s, 50):.2f} ms each)" if steady.fold_s else "")
        + f"; prompt tokens per build p50 {np.percentile(steady.tokens, 50):,.0f} (last: "
        + ", ".join(f"{k} {v:,}" for k, v in stats.tokens.items())
        + f"), memories kept p50 {np.percentile(steady.memories, 50):.0f}. Stateless prompts "
        f"p50 {np.percentile(stateless.tokens, 50):,.0f} tokens (no summary tier: the window "
        "is the session's newest 4,000 tokens).",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", action="store_true", help="append and load on long sessions")
    ap.add_argument("--context", action="store_true", help="context assembly at 8,000 tokens")
    ap.add_argument("--locomo", action="store_true", help="LoCoMo prompt tokens and evidence")
    ap.add_argument("--quick", action="store_true", help="smaller sessions, every 4th question")
    ap.add_argument("--no-report", action="store_true", help="do not append the run to bench/runs/")
    args = ap.parse_args()
    everything = not (args.sessions or args.context or args.locomo)
    if not encoding_for(MODEL).exact:
        raise SystemExit("exact o200k_base counts need bpe-openai: pip install -e '.[dev]'")
    convs = locomo.load_dataset(locomo.DEFAULT_DATA)
    texts = [t.content for c in convs for t in c.turns]
    root = Path(tempfile.mkdtemp(prefix="synapsedb-conversation-"))
    lines: list[str] = []
    started, before = time.perf_counter(), os.getloadavg()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True, text=True
    ).stdout.splitlines()
    try:
        if everything or args.sessions:
            print("sessions ...", flush=True)
            n_long = 20_000 if args.quick else 100_000
            lines += [
                "### Sessions: append and load",
                "",
                *part_sessions(root, texts, n_long, 500 if args.quick else 2000),
                "",
            ]
        if everything or args.context:
            print("context ...", flush=True)
            lines += [
                "### Context assembly, 8,000 tokens",
                "",
                *part_context(
                    root, convs, 2_000 if args.quick else 10_000, 60 if args.quick else 300
                ),
                "",
            ]
        if everything or args.locomo:
            print("locomo ...", flush=True)
            lines += [
                "### LoCoMo dev: prompt tokens and evidence in the context",
                "",
                *part_locomo(root, convs, 4 if args.quick else 1),
                "",
            ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = ", ".join(f"{x:.2f}" for x in before)
    lines.append(
        f"({time.perf_counter() - started:.0f} s; load average {load} at the start: "
        "other processes on the machine share its 2 cores)"
    )
    if dirty:  # other work in progress in the checkout this ran from: say what it measured
        lines.append(
            "Uncommitted changes under src/ when this ran: "
            + ", ".join(f"`{d[3:]}`" for d in dirty)
            + "."
        )
    if args.no_report:
        print("\n".join(lines))
        return
    parts = [p for p in ("sessions", "context", "locomo") if everything or getattr(args, p)]
    cmd = (
        "make bench-conversation"
        if everything and not args.quick
        else (
            "python bench/bench_conversation.py"
            + "".join(f" --{p}" for p in parts if not everything)
            + (" --quick" if args.quick else "")
        )
    )
    append_report("Conversation memory" + (" (quick)" if args.quick else ""), cmd, lines)


if __name__ == "__main__":
    main()
