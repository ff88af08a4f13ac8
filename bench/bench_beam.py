"""Retrieval on BEAM 100K: the default query against its own vector-only and keyword-only modes,
message- and session-level recall@10 by ability (issue 13).

Protocol (as for LoCoMo in bench_quality.py): one namespace per chat, one memory per message,
whole (content "user: ..." / "assistant: ...", up to 349 KB: all of it keyword-indexed, the
vector of its first 256 word-pieces; entity "conversation", ts the batch's time anchor), each
scorable question (355 of 400: abstention and evidence-less ones are left out) queries the top 10
with ``query(text, k=10)`` in the default hybrid mode and in ``mode="vector"`` and
``mode="keyword"``. Message-level recall@10: the share of a question's evidence messages in the
top 10 (a collapsed duplicate counts at its representative's rank), mean over questions.
Session-level recall@10: the same over BEAM's batches (a batch holding an evidence message counts
as found when any top-10 hit is in it). "Within noise": the 95% interval of a paired bootstrap
(2,000 resamples of the questions) of the difference between the default and the better of its
two modes contains 0.

Usage: python bench/bench_beam.py [--data DIR] [--quick] [--no-report]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beam
from common import append_report

import synapsedb

ENTITY = "conversation"
K = 10
MODES = ("hybrid", "vector", "keyword")


def ingest(
    db: synapsedb.Database, chat: beam.Chat, max_bytes: int | None = None
) -> tuple[dict[str, int], int]:
    """Write the chat's messages; map memory id -> message id. Whole by default; with
    ``max_bytes`` longer ones are cut to that many UTF-8 bytes (the count is returned)."""
    items, cut = [], 0
    for m in chat.messages:
        text = f"{m.role}: {m.content}"
        if max_bytes is not None and len(raw := text.encode()) > max_bytes:
            text = raw[:max_bytes].decode(errors="ignore")
            cut += 1
        item = {"entity": ENTITY, "content": text, "type": "interaction"}
        if m.ts is not None:
            item["ts"] = m.ts
        items.append(item)
    written = []
    for i in range(0, len(items), 256):
        written += db.namespace(f"beam-{chat.name}").write_many(items[i : i + 256])
    return {w.id: m.id for w, m in zip(written, chat.messages, strict=True)}, cut


def top_ids(ns: synapsedb.Namespace, text: str, mode: str, ids: dict[str, int]) -> list[int]:
    res = ns.query(text, k=K) if mode == "hybrid" else ns.query(text, k=K, mode=mode)  # type: ignore[arg-type]
    out: list[int] = []
    for h in res:
        out.append(ids[h.id])
        out.extend(ids[d] for d in h.duplicates)
    return out[:K] if mode != "hybrid" else out  # duplicates sit at their representative's rank


def bootstrap(diff: np.ndarray, rng: np.random.Generator, n: int = 2000) -> tuple[float, float]:
    if diff.size == 0:
        return 0.0, 0.0
    means = diff[rng.integers(0, diff.size, size=(n, diff.size))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=beam.DEFAULT_DATA)
    ap.add_argument("--quick", action="store_true", help="the first 5 chats")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    chats = beam.load_dataset(args.data)
    if args.quick:
        chats = chats[:5]
    root = Path(tempfile.mkdtemp(prefix="synapsedb-beam-"))
    db = synapsedb.open(root / "beam", durability="os", llm=None)
    rows: list[dict] = []  # one per question: ability, recall per mode and level
    ingest_s: dict[str, float] = {}
    query_ms: list[float] = []
    try:
        for chat in chats:
            t0 = time.perf_counter()
            ids, _ = ingest(db, chat)
            ingest_s[chat.name] = time.perf_counter() - t0
            ns = db.namespace(f"beam-{chat.name}")
            batch = chat.batch_of()
            for q in chat.questions:
                row: dict = {"ability": q.ability}
                ev_sessions = {batch[e] for e in q.evidence}
                for mode in MODES:
                    t1 = time.perf_counter()
                    got = top_ids(ns, q.text, mode, ids)
                    if mode == "hybrid":
                        query_ms.append((time.perf_counter() - t1) * 1e3)
                    row[mode] = len(q.evidence & set(got)) / len(q.evidence)
                    hit_sessions = {batch[g] for g in got}
                    row[f"{mode}/session"] = len(ev_sessions & hit_sessions) / len(ev_sessions)
                rows.append(row)
            print(
                f"chat {chat.name}: {len(chat.messages)} messages, {len(chat.questions)} "
                f"questions, ingest {ingest_s[chat.name]:.1f} s",
                flush=True,
            )
    finally:
        db.close()
        shutil.rmtree(root, ignore_errors=True)
    lines = report(chats, rows, ingest_s, query_ms)
    if args.no_report:
        print("\n".join(lines))
    else:
        append_report(
            "Retrieval on BEAM 100K" + (" (quick)" if args.quick else ""),
            "python bench/bench_beam.py"
            + (" --quick" if args.quick else "")
            + " (part of make bench)",
            lines,
        )


def report(
    chats: list[beam.Chat], rows: list[dict], ingest_s: dict[str, float], query_ms: list[float]
) -> list[str]:
    rng = np.random.default_rng(13)
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by[r["ability"]].append(r)
    groups = [*sorted(by.items()), ("**all**", rows)]
    skipped: dict[str, int] = defaultdict(int)
    for c in chats:
        for k, v in c.skipped.items():
            skipped[k] += v
    n_msgs = sum(len(c.messages) for c in chats)
    total_s = sum(ingest_s.values())
    longest = max(len(m.content.encode()) + len(m.role) + 2 for c in chats for m in c.messages)
    per_chat = sorted(ingest_s.values())
    lines = [
        f"{len(chats)} chats, {n_msgs:,} messages (one memory each, whole: the longest "
        f"{longest:,} bytes), {len(rows)} scorable questions (left out: "
        + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items()))
        + f"). Ingest (MiniLM embedding included, durability os) {total_s:.0f} s, "
        f"{n_msgs / max(total_s, 1e-9):.1f} messages/s; per chat min "
        f"{per_chat[0]:.1f} s, median {per_chat[len(per_chat) // 2]:.1f} s, max "
        f"{per_chat[-1]:.1f} s ("
        + ", ".join(f"{c.name}: {len(c.messages)} in {ingest_s[c.name]:.1f} s" for c in chats)
        + "). Default query p50 "
        f"{np.percentile(query_ms, 50):.2f} ms, p99 {np.percentile(query_ms, 99):.2f} ms "
        "(query embedding included).",
        "",
        "| ability | questions | R@10 default | vector | keyword | default - better mode (95% CI) "
        "| session R@10 default | vector | keyword |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for name, rs in groups:
        d = np.array([r["hybrid"] for r in rs])
        v = np.array([r["vector"] for r in rs])
        kw = np.array([r["keyword"] for r in rs])
        better = v if v.mean() >= kw.mean() else kw
        lo, hi = bootstrap(d - better, rng)
        verdict = "within noise" if lo <= 0 <= hi else ("better" if lo > 0 else "**worse**")
        s = {m: np.mean([r[f"{m}/session"] for r in rs]) for m in MODES}
        lines.append(
            f"| {name} | {len(rs)} | {d.mean():.3f} | {v.mean():.3f} | {kw.mean():.3f} | "
            f"{(d - better).mean():+.3f} ({lo:+.3f}, {hi:+.3f}) {verdict} | "
            f"{s['hybrid']:.3f} | {s['vector']:.3f} | {s['keyword']:.3f} |"
        )
    r10 = np.mean([r["hybrid"] for r in rows])
    lines += [
        "",
        f"Target (issue 13): BEAM 100K R@10 >= 0.65: **{r10:.3f}, "
        f"{'met' if r10 >= 0.65 else 'missed'}**.",
    ]
    return lines


if __name__ == "__main__":
    main()
