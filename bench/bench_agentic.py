"""Benchmarks of the memory loop (issue 11; synapsedb.memory_loop, docs/memory-loop.md).

Parts (each flag runs one; no flag runs them all, the QA harness with ``--local``):

``--calibrate``   Fit recall's similarity calibration p = sigmoid(a * cosine + b) on LoCoMo dev:
                  (cosine of each top-50 hybrid hit to the question, is it an evidence turn),
                  logistic regression with balanced class weights (Newton's method), checked
                  leave-one-conversation-out, then fitted on all five conversations.
``--latency``     ``ns.remember`` of 2-turn messages with extraction deferred (a MemoryLoop
                  whose LLM is a ChatClient on ScriptedUpstream, worker not started) on an
                  embedded database, p50/p99; then ``recall`` (heuristic rewrite) at ~10k memories.
``--extraction``  ``run_pending`` over N queued jobs with the local model of ``make test-llm``
                  (SmolLM2-135M-Instruct under llama.cpp, tests/support/local_llm.py): jobs/s and
                  memories per job, a plumbing-model figure.
``--qa``          LoCoMo QA: for a fixed-seed subset of questions (categories 1-4, which have
                  gold answers), recall -> context block -> answer model -> LLM judge
                  (CORRECT/WRONG, JSON schema); accuracy and retrieval recall. Any
                  OpenAI-compatible endpoint (``--base-url``/``--model``, key in
                  ``SYNAPSEDB_LLM_API_KEY``; judge: ``--judge-base-url``/``--judge-model``, default
                  the same) or ``--local`` (the SmolLM2 server).

LoCoMo dev is read in place from ../shared/data/locomo-dev (never copied); how it is ingested
(turns through ``ns.remember``, no extraction) is in bench/agentic_harness.py.

Usage: python bench/bench_agentic.py [--calibrate] [--latency] [--extraction] [--qa]
       [--local | --base-url URL --model NAME] [--questions 30] [--seed 11] [--no-report]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # tests.support
import locomo
from agentic_harness import (
    ENTITY,
    THRESHOLD,
    TOP,
    Ingested,
    current,
    extraction,
    ingest_all,
    open_db,
    qa,
    rows_of,
)
from common import append_report, pct

import synapsedb
from synapsedb.config import LLMSettings
from synapsedb.embed import OnnxMiniLM
from synapsedb.llm import ChatClient
from synapsedb.memory_loop import LoopSettings, MemoryLoop

DEPTH = 50  # hits per question collected for the calibration
WARMUP = 20  # calls not timed


# -- calibration -------------------------------------------------------------------------------


@dataclass
class Sample:
    """One conversation's (question, hit) pairs: cosine, label, the hit's rank (0-based)."""

    cos: np.ndarray
    label: np.ndarray
    rank: np.ndarray
    question: np.ndarray  # index of the question in the conversation
    evidence: np.ndarray  # per question: its number of evidence turns


def collect(ing: Ingested) -> Sample:
    cos, label, rank, qi = [], [], [], []
    for j, q in enumerate(ing.conv.questions):
        res = ing.ns.query(q.text, entity=ENTITY, k=DEPTH, filter=current(), explain=True)
        for r, h in enumerate(res.hits):
            cos.append(float((h.explanation or {}).get("cosine", 0.0)))
            label.append(bool(rows_of(ing, h) & set(q.evidence)))
            rank.append(r)
            qi.append(j)
    ev = np.array([len(q.evidence) for q in ing.conv.questions])
    return Sample(np.array(cos), np.array(label), np.array(rank), np.array(qi), ev)


def fit(cos: np.ndarray, y: np.ndarray, l2: float = 1e-6) -> tuple[float, float]:
    """Logistic regression of y on cosine, balanced class weights (each class weighs half),
    by Newton's method; a tiny ridge on the slope keeps it finite on separable data."""
    x = np.stack([cos, np.ones_like(cos)], axis=1)
    pos = float(y.mean())
    w = np.where(y, 0.5 / pos, 0.5 / (1.0 - pos)) / y.shape[0]
    theta = np.zeros(2)
    ridge = np.diag([l2, 0.0])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ theta, -60, 60)))
        grad = x.T @ (w * (p - y)) + ridge @ theta
        hess = (x.T * (w * p * (1.0 - p))) @ x + ridge
        step = np.linalg.solve(hess, grad)
        theta -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    return float(theta[0]), float(theta[1])


def balanced_logloss(cos: np.ndarray, y: np.ndarray, a: float, b: float) -> float:
    p = np.clip(1.0 / (1.0 + np.exp(-(a * cos + b))), 1e-12, 1 - 1e-12)
    return float(0.5 * -np.log(p[y]).mean() + 0.5 * -np.log(1 - p[~y]).mean())


def auc(score: np.ndarray, y: np.ndarray) -> float:
    """Probability that an evidence hit has a higher cosine than a non-evidence hit."""
    order = np.argsort(score, kind="stable")
    ranks = np.empty(score.shape[0])
    ranks[order] = np.arange(1, score.shape[0] + 1)
    npos, nneg = int(y.sum()), int((~y).sum())
    return float((ranks[y].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def at_threshold(s: Sample, a: float, b: float, threshold: float = THRESHOLD) -> dict[str, float]:
    """What the threshold keeps of each question's top 10 hits."""
    top = s.rank < TOP
    kept = top & (1.0 / (1.0 + np.exp(-(a * s.cos + b))) >= threshold)
    nq = s.evidence.shape[0]
    per_q_ev = np.bincount(s.question[kept & s.label], minlength=nq)
    return {
        "precision": float((kept & s.label).sum() / max(1, kept.sum())),
        "retained": float((kept & s.label).sum() / max(1, (top & s.label).sum())),
        "recall@10": float(np.mean(per_q_ev / s.evidence)),
        "any": float(np.mean(per_q_ev > 0)),
        "kept": float(kept.sum() / nq),
        "empty": float(np.mean(np.bincount(s.question[kept], minlength=nq) == 0)),
    }


def _merge(samples: Sequence[Sample]) -> Sample:
    """One sample of several conversations (question indices made distinct)."""
    offsets = np.cumsum([0, *[s.evidence.shape[0] for s in samples[:-1]]])
    return Sample(
        np.concatenate([s.cos for s in samples]),
        np.concatenate([s.label for s in samples]),
        np.concatenate([s.rank for s in samples]),
        np.concatenate([s.question + o for s, o in zip(samples, offsets, strict=True)]),
        np.concatenate([s.evidence for s in samples]),
    )


def _pool(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([s.cos for s in samples]), np.concatenate([s.label for s in samples])


def _cos_at(p: float, a: float, b: float) -> float:
    return (math.log(p / (1 - p)) - b) / a


def calibrate(
    root: Path, convs: list[locomo.Conversation]
) -> tuple[list[str], tuple[float, float]]:
    db = open_db(root, "calibrate")
    try:
        ings = ingest_all(db, convs)
        samples = [collect(i) for i in ings]
        lines = [
            f"{len(convs)} conversations, {sum(len(c.turns) for c in convs):,} turns ingested "
            f"through `remember` ({sum(i.seconds for i in ings):.1f} s) and made searchable by "
            f"the queued jobs (`run_pending`, no LLM: {sum(i.index_s for i in ings):.0f} s), "
            f"{sum(len(c.questions) for c in convs)} questions (categories 1-4), the "
            f"top {DEPTH} hits of each (hybrid, recall's filter), "
            f"{sum(int(s.label.sum()) for s in samples):,} of "
            f"{sum(s.cos.shape[0] for s in samples):,} hits evidence. Fit: logistic regression "
            "of is-evidence on the hit's cosine, balanced class weights (evidence and other "
            "hits weigh half each, so p = 0.5 where a cosine is as typical of evidence as of "
            "other hits), Newton's method. Threshold columns: of each held-out question's top "
            f"{TOP}, what calibrated similarity >= {THRESHOLD} keeps: precision (evidence among "
            f"kept hits), retained (kept evidence / evidence in the top {TOP}), recall@10 (kept "
            "evidence / all evidence, mean per question), any (questions keeping >= 1 evidence "
            "turn), kept and empty (questions keeping nothing).",
            "",
            "| held out | a | b | cos at p=0.5 / 0.6 | held-out log-loss | precision | "
            "retained | recall@10 | any | kept/question | empty |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for k, held in enumerate(samples):
            cos, y = _pool([s for j, s in enumerate(samples) if j != k])
            a, b = fit(cos, y)
            m = at_threshold(held, a, b)
            lines.append(
                f"| {convs[k].name} | {a:.2f} | {b:.2f} | {_cos_at(0.5, a, b):.3f} / "
                f"{_cos_at(0.6, a, b):.3f} | {balanced_logloss(held.cos, held.label, a, b):.3f}"
                f" | {m['precision']:.3f} | {m['retained']:.3f} | {m['recall@10']:.3f} | "
                f"{m['any']:.3f} | {m['kept']:.1f} | {m['empty']:.3f} |"
            )
        cos, y = _pool(samples)
        a, b = fit(cos, y)
        shipped = LoopSettings()
        everything = _merge(samples)
        rows = [
            (f"**all five (final), in sample: a={a:.2f}, b={b:.2f}**", a, b, THRESHOLD),
            (
                f"LoopSettings() at this commit: a={shipped.calib_a:g}, b={shipped.calib_b:g}",
                shipped.calib_a,
                shipped.calib_b,
                THRESHOLD,
            ),
            (f"no threshold (the top {TOP} as ranked)", a, b, 0.0),
        ]
        for label, ca, cb, threshold in rows:
            m = at_threshold(everything, ca, cb, threshold)
            fitted = (
                f"{ca:.2f} | {cb:.2f} | {_cos_at(0.5, ca, cb):.3f} / "
                f"{_cos_at(0.6, ca, cb):.3f} | {balanced_logloss(cos, y, ca, cb):.3f}"
                if threshold
                else "- | - | - | -"
            )
            lines.append(
                f"| {label} | {fitted} | {m['precision']:.3f} | {m['retained']:.3f} | {m['recall@10']:.3f} | "
                f"{m['any']:.3f} | {m['kept']:.1f} | {m['empty']:.3f} |"
            )
        lines += [
            "",
            f"Cosine separates evidence from the other top-{DEPTH} hits with AUC "
            f"{auc(cos, y):.3f} (pooled). Other thresholds on the final scale (all five "
            f"conversations, the top {TOP}):",
            "",
            "| threshold | cosine | precision | retained | recall@10 | any | kept/question "
            "| empty |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
            m = at_threshold(everything, a, b, t)
            lines.append(
                f"| {t:.1f} | {_cos_at(t, a, b):.3f} | {m['precision']:.3f} | "
                f"{m['retained']:.3f} | {m['recall@10']:.3f} | {m['any']:.3f} | "
                f"{m['kept']:.1f} | {m['empty']:.3f} |"
            )
        lines += ["", *through_recall(ings, a, b)]
    finally:
        db.close()
    return lines, (a, b)


def through_recall(ings: Sequence[Ingested], a: float, b: float) -> list[str]:
    """The real ``recall()`` (k 10, 1,000-token budget, threshold 0.6) with the fitted constants."""
    loop = MemoryLoop(None, LoopSettings(calib_a=a, calib_b=b))
    nq = anyev = empty = 0
    kept, recall_ev = [], []
    for ing in ings:
        for q in ing.conv.questions:
            rec = loop.recall(ing.ns, q.text, entity=ENTITY, threshold=THRESHOLD)
            got: set[int] = set()
            for m in rec.memories:
                if m.id in ing.row_of:
                    got.add(ing.row_of[m.id])
            nq += 1
            hit = len(got & set(q.evidence))
            anyev += hit > 0
            empty += not rec.memories
            kept.append(len(rec.memories))
            recall_ev.append(hit / len(q.evidence))
    return [
        f"`recall()` itself (k {TOP}, budget 1,000 tokens, threshold {THRESHOLD}, the final "
        f"constants), over all {nq} questions: **{anyev / nq:.1%} of questions get at least one "
        f"evidence memory**; evidence recall {np.mean(recall_ev):.3f} (mean per question); "
        f"{np.mean(kept):.1f} memories per question; {empty / nq:.1%} of questions get none.",
    ]


# -- latency: remember (extraction deferred) and recall -----------------------------------------


def _pairs(convs: Sequence[locomo.Conversation], n: int) -> Iterator[tuple[str, str]]:
    texts = [t.content.split(": ", 1)[-1] for c in convs for t in c.turns]
    for i in range(n):
        j = (2 * i) % (len(texts) - 1)
        tag = "" if 2 * i < len(texts) else f" ({2 * i // len(texts)})"  # distinct texts
        yield texts[j] + tag, texts[j + 1] + tag


def latency(root: Path, convs: list[locomo.Conversation], calls: int, total: int) -> list[str]:
    from tests.support.scripted_upstream import ScriptedUpstream

    lines = [
        f"`ns.remember(messages, entity=, session=)` of {calls:,} 2-turn messages (LoCoMo "
        "lines, user then assistant) on an embedded database (MiniLM embedder), one entity, "
        f"{WARMUP} warm-up calls not timed. The loop's LLM is a ChatClient on ScriptedUpstream "
        "(a stand-in for a hosted model on a real socket) and its worker is not started, so "
        "each call appends both turns to the session stream, makes those worth a memory "
        "searchable (one MiniLM batch: indexing included) and queues one extraction job (a KV "
        "fact). The memory proxy's path stores the same without embedding "
        "(`remember(defer_index=True)`, before the answer ends) and indexes in the background "
        "(`index_now`). The embedder alone on the same pairs is the floor, in the same run.",
        "",
        "| remember, 2 turns | p50 | p99 | recallable at once | upstream requests | target |",
        "|---|---|---|---|---|---|",
    ]
    runs = [
        ("durability fsync (default)", "fsync", False),
        ("durability os", "os", False),
        ("proxy path: stored, not embedded (fsync)", "fsync", True),
    ]
    kept = None
    pairs = list(_pairs(convs, calls + WARMUP))
    with ScriptedUpstream() as up, ChatClient(LLMSettings(base_url=up.base_url, model="x")) as llm:
        for label, durability, deferred in runs:
            db = synapsedb.open(
                root / f"latency-{durability}-{deferred}", llm=None, durability=durability
            )
            db.memory_loop.stop()
            loop = MemoryLoop(llm)  # an LLM configured, its worker never started
            db.memory_loop = loop
            ns = db.namespace("bench")
            samples, later = [], []
            found = asked = 0
            for i, (u, a) in enumerate(pairs):
                msgs = [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
                t0 = time.perf_counter()
                r = loop.remember(
                    ns, msgs, entity="user:bench", session=f"s{i // 50}", defer_index=deferred
                )
                took = time.perf_counter() - t0
                if r.status != "queued":
                    raise SystemExit(f"remember: status {r.status!r}, expected 'queued'")
                if deferred:
                    t1 = time.perf_counter()
                    loop.index_now(ns, str(r.job))
                    later.append(time.perf_counter() - t1)
                if i >= WARMUP:
                    samples.append(took)
                if i % 97 == 0 and not deferred:  # recall at once, no wait: is the turn there?
                    asked += 1
                    hits = ns.query(u, entity="user:bench", k=3, mode="keyword").hits
                    found += any(h.content == u for h in hits)
            p50 = pct(samples, 50) / 1000
            at_once = f"{found}/{asked}" if asked else "(after index_now)"
            target = "p50 <= 5 ms" if not deferred else "proxy overhead"
            lines.append(
                f"| {label} | {p50:.2f} ms | {pct(samples, 99) / 1000:.2f} ms | "
                f"{at_once} | {len(up.requests)} | {target}: "
                f"{'met' if p50 <= 5 else '**missed**'} |"
            )
            if deferred:
                lines.append(
                    f"| then `index_now`, in the background | {pct(later, 50) / 1000:.2f} "
                    f"ms | {pct(later, 99) / 1000:.2f} ms | | | |"
                )
            if durability == "os":
                kept = db
            else:
                db.close()
    model = OnnxMiniLM()
    model.embed(["warm up"])
    floor = []
    for u, a in pairs[WARMUP:]:
        t0 = time.perf_counter()
        model.embed([u, a])
        floor.append(time.perf_counter() - t0)
    lines += [
        "",
        f"Floor, the embedder alone on the same 2-turn batches: p50 "
        f"{pct(floor, 50) / 1000:.2f} ms, p99 {pct(floor, 99) / 1000:.2f} ms.",
    ]
    assert kept is not None
    try:
        lines += ["", *recall_latency(kept, convs, total)]
    finally:
        kept.close()
    return lines


def recall_latency(db: Any, convs: list[locomo.Conversation], total: int) -> list[str]:
    ns = db.namespace("bench")
    have = ns.stats().memories
    texts = [t.content for c in convs for t in c.turns]
    todo = max(0, total - have)
    t0 = time.perf_counter()
    for at in range(0, todo, 500):
        n = min(500, todo - at)
        ns.write_many(
            [
                {
                    "entity": "user:bench",
                    "content": f"{texts[(at + i) % len(texts)]} [{(at + i) // len(texts)}]",
                }
                for i in range(n)
            ]
        )
    filled = time.perf_counter() - t0
    qs = [q.text for c in convs for q in c.questions][:320]
    loop = MemoryLoop(None)  # recall with the heuristic rewrite needs no LLM
    rec_s, query_s, kept = [], [], []
    for i, q in enumerate(qs):
        msgs = [
            {"role": "user", "content": qs[i - 1]},
            {"role": "assistant", "content": "OK."},
            {"role": "user", "content": q},
        ]
        t0 = time.perf_counter()
        r = loop.recall(ns, msgs, entity="user:bench", rewrite="heuristic")
        t1 = time.perf_counter()
        ns.query(r.query or q, entity="user:bench", k=10, filter=current(), explain=True)
        t2 = time.perf_counter()
        if i >= WARMUP:
            rec_s.append(t1 - t0)
            query_s.append(t2 - t1)
            kept.append(len(r.memories))
    n = ns.stats().memories
    return [
        f"`recall(messages, entity=, rewrite='heuristic')` at {n:,} memories of one entity "
        f"(the {have:,} turns remembered above, plus {todo:,} written by write_many in "
        f"{filled:.0f} s), MiniLM, durability os; {len(rec_s)} LoCoMo questions, each after the "
        f"previous one (a short or elliptic question borrows it), {WARMUP} warm-up calls not "
        "timed.",
        "",
        "| measure | p50 | p99 |",
        "|---|---|---|",
        f"| recall (rewrite, query embedding, hybrid top 10, threshold, context block) | "
        f"{pct(rec_s, 50) / 1000:.2f} ms | {pct(rec_s, 99) / 1000:.2f} ms |",
        f"| the same query again (`ns.query`, its embedding now in the LRU cache) | "
        f"{pct(query_s, 50) / 1000:.2f} ms | "
        f"{pct(query_s, 99) / 1000:.2f} ms |",
        "",
        f"Memories per context block: {np.mean(kept):.1f} (mean).",
    ]


# -- main ----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--extraction", action="store_true")
    ap.add_argument("--qa", action="store_true")
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    ap.add_argument("--calls", type=int, default=2000, help="remember calls timed")
    ap.add_argument("--memories", type=int, default=10_000, help="namespace size for recall")
    ap.add_argument("--jobs", type=int, default=5, help="extraction jobs (local model)")
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--local", action="store_true", help="QA with make test-llm's SmolLM2")
    ap.add_argument("--base-url", default="", help="QA answer endpoint (OpenAI-compatible)")
    ap.add_argument("--model", default="")
    ap.add_argument("--judge-base-url", default="")
    ap.add_argument("--judge-model", default="")
    ap.add_argument(
        "--no-controls",
        dest="controls",
        action="store_false",
        help="QA: skip judging the gold and a wrong answer per question",
    )
    ap.add_argument("--out", type=Path, help="QA: one JSON line per question")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args(argv)
    parts = [p for p in ("calibrate", "latency", "extraction", "qa") if getattr(args, p)]
    args.skip_missing = not parts  # all parts: a missing local model skips the QA run
    if not parts:
        parts, args.local = ["calibrate", "latency", "extraction", "qa"], True
    convs = locomo.load_dataset(args.data)
    root = Path(tempfile.mkdtemp(prefix="synapsedb-agentic-"))
    command = "python bench/bench_agentic.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-report"
    )
    sections: list[str] = []
    load = os.getloadavg()[0]
    try:
        for part in parts:
            print(f"== {part}", flush=True)
            t0 = time.perf_counter()
            if part == "calibrate":
                lines, (a, b) = calibrate(root, convs)
                print(f"fitted: calib_a = {a:.2f}, calib_b = {b:.2f}")
                title = "Recall calibration (LoCoMo dev)"
            elif part == "latency":
                lines = latency(root, convs, args.calls, args.memories)
                title = "remember and recall latency"
            elif part == "extraction":
                lines = extraction(root, convs, args.jobs)
                title = "Extraction throughput, local model"
            else:
                lines = qa(args, root, convs)
                title = "LoCoMo QA, LLM judge"
            sections += [f"### {title}", "", *lines, "", f"({time.perf_counter() - t0:.0f} s)", ""]
            print("\n".join(lines), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sections.append(
        f"Load average (1 min) at the start {load:.1f}, at the end "
        f"{os.getloadavg()[0]:.1f}: the machine is shared, timings are noisy."
    )
    if not args.no_report:
        append_report("Memory loop", command.strip(), sections)


if __name__ == "__main__":
    main()
