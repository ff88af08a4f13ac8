"""Recall's injection rule, chosen on evidence: which of a question's hits go into the context
block.

For every question of the dev set (bench/data/injection_dev.json, in two modes: turns only, and
turns + the memories an LLM extractor would write), of LoCoMo dev and of BEAM 100K, the top 30
hybrid hits with their cosines are collected once through ``ns.remember`` / ``ns.query`` and
cached (bench/injection_collect.py). Rules are then compared offline, each applied as recall
will apply it:

1. candidates: the first ``pool`` hits of the hybrid ranking, less what the request already
   holds and what is no memory: an assistant turn that only acknowledges (the dev set marks
   them), and a hit that repeats the question (cosine to it >= ``REPEAT_COSINE``);
2. the rule keeps some of them (the calibrated similarity of each is
   ``1 / (1 + exp(-(7.97 * cosine - 2.56)))``, recall's);
3. an extracted memory and its own source turn are one item: a kept turn is dropped when a
   memory extracted from it is kept;
4. a cap on the items, then recall's context block (``render``: 1,000 tokens by default, 4 bytes
   a token).

Measured per rule: dev set "statement injected" (the block holds the turn that states the
asked statement, or a memory extracted from it for that statement) and memories injected per
question (mean, p90), both modes; LoCoMo and BEAM: the share of a question's evidence turns in
the block (mean per question) and the tokens injected per question. Each rule family's
parameters are chosen on the dev set (most statements injected with at most ``MAX_MEAN``
memories per question on average in both modes), and the choice is checked leave-one-user-out:
the numbers reported as held out are those of each user under the parameters chosen on the
other seven. Nothing is fitted on LoCoMo or BEAM.

Usage: python bench/bench_injection.py [--refresh] [--beam-chats N] [--cache DIR]
       [--plot docs/img/injection_curve.png]

The run is appended to bench/runs/injection-policy-of-the-memory-loop.jsonl.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import injection_collect as collect
from common import append_report

CALIB_A, CALIB_B = 7.97, -2.56  # LoopSettings' calibration (bench_agentic.py --calibrate)
REPEAT_COSINE = 0.95  # a hit this close to the question repeats it (the lead's rule (c))
BUDGET = 1000  # recall's default budget_tokens
MAX_MEAN = 5.0  # the target: at most 5 memories injected per question on average
HEADER_TOKENS = 12  # "Memories about user:xxxx (cite by id):" and its newline
EXTRACTED = frozenset(["fact", "preference", "procedure", "episode"])
ROOT = Path(__file__).resolve().parent.parent


def sim(cos: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, CALIB_A * cos + CALIB_B))))


# -- rules --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """What recall keeps of the candidates (the first ``pool`` hybrid hits, in ranking order).

    A candidate is kept when its calibrated similarity reaches the threshold of its kind
    (``t``: extracted memories and turns alike; ``t_turn``/``t_question`` when set: a user or
    assistant turn, a user turn that is a question) and, with ``rel``, is within ``rel`` of the
    best candidate's similarity; or when it is among the first ``min_k`` candidates and reaches
    ``floor``. ``cap`` bounds the items kept; ``order`` is the order the cap and the block take
    them in (``rank``: the hybrid ranking; ``cosine``)."""

    t: float = 0.6
    pool: int = 10
    t_turn: float | None = None
    t_question: float | None = None
    rel: float | None = None
    min_k: int = 0
    floor: float = 0.0
    cap: int | None = None
    order: str = "rank"

    def label(self) -> str:
        parts = [f"t {self.t:g}"]
        if self.t_turn is not None:
            parts.append(f"turns {self.t_turn:g}")
        if self.t_question is not None:
            parts.append(f"question turns {self.t_question:g}")
        if self.rel is not None:
            parts.append(f"within {self.rel:g} of the best")
        if self.min_k:
            parts.append(f"top {self.min_k} if >= {self.floor:g}")
        if self.cap is not None:
            parts.append(f"cap {self.cap}")
        if self.pool != 10:
            parts.append(f"pool {self.pool}")
        if self.order != "rank":
            parts.append(f"by {self.order}")
        return ", ".join(parts)


def candidates(q: dict[str, Any], pool: int) -> list[dict[str, Any]]:
    """The first ``pool`` hits that are memories and do not repeat the request."""
    out = [h for h in q["hits"][:pool] if not h["ack"] and h["cos"] < REPEAT_COSINE]
    for h in out:
        h.setdefault("sim", sim(h["cos"]))
    return out


def is_turn(h: dict[str, Any]) -> bool:
    return h["type"] not in EXTRACTED


def is_question(h: dict[str, Any]) -> bool:
    return h["role"] == "user" and h["ends_q"]


def select(q: dict[str, Any], r: Rule) -> list[dict[str, Any]]:
    """The items of the block, in order."""
    cands = candidates(q, r.pool)
    if not cands:
        return []
    best = max(h["sim"] for h in cands)
    kept = []
    for i, h in enumerate(cands):
        t = r.t
        if is_turn(h) and r.t_turn is not None:
            t = r.t_turn
        if is_question(h) and r.t_question is not None:
            t = r.t_question
        ok = h["sim"] >= t and (r.rel is None or h["sim"] >= best - r.rel)
        if ok or (i < r.min_k and h["sim"] >= r.floor):
            kept.append(h)
    sources = {t for h in kept if not is_turn(h) for t in h["turns"]}
    kept = [h for h in kept if not (is_turn(h) and h["id"] in sources)]
    if r.order == "cosine":
        kept.sort(key=lambda h: -h["cos"])
    block, used = [], HEADER_TOKENS
    for h in kept:  # recall.render: a line that does not fit is left out, the next tried
        if r.cap is not None and len(block) >= r.cap:
            break  # the cap counts the lines in the block, not the lines left out
        if used + h["tok"] <= BUDGET:
            block.append(h)
            used += h["tok"]
    return block


@dataclass
class Score:
    """One rule on one set of questions: per question, answered (dev: statement injected;
    LoCoMo/BEAM: share of evidence turns injected), items and tokens injected."""

    answered: np.ndarray
    items: np.ndarray
    tokens: np.ndarray
    group: np.ndarray
    stale: np.ndarray

    def where(self, mask: np.ndarray) -> Score:
        return Score(
            self.answered[mask],
            self.items[mask],
            self.tokens[mask],
            self.group[mask],
            self.stale[mask],
        )

    @property
    def asked(self) -> np.ndarray:
        """The questions with something to find (the dev set also asks about nothing)."""
        return ~np.isnan(self.answered)

    @property
    def rate(self) -> float:
        a = self.answered[self.asked]
        return float(a.mean()) if a.size else 0.0

    @property
    def mean(self) -> float:
        n = self.items[self.asked]
        return float(n.mean()) if n.size else 0.0

    @property
    def p90(self) -> float:
        n = self.items[self.asked]
        return float(np.percentile(n, 90)) if n.size else 0.0

    @property
    def stale_rate(self) -> float:
        """Share of questions whose block holds a statement a later one replaced."""
        st = self.stale[self.asked]
        return float(st.mean()) if st.size else 0.0

    @property
    def unasked(self) -> float:
        """Memories injected per question about nothing the user said (mean)."""
        n = self.items[~self.asked]
        return float(n.mean()) if n.size else 0.0


def score(qs: Sequence[dict[str, Any]], r: Rule) -> Score:
    answered, items, toks, stale = [], [], [], []
    for q in qs:
        block = select(q, r)
        got = set().union(*(h["covers"] for h in block)) if block else set()
        targets = set(q["targets"])  # none: a question about nothing the user said
        answered.append(len(got & targets) / len(targets) if targets else math.nan)
        items.append(len(block))
        toks.append(HEADER_TOKENS + sum(h["tok"] for h in block) if block else 0)
        stale.append(any(h["stale"] for h in block))
    return Score(
        np.array(answered, dtype=float),
        np.array(items, dtype=float),
        np.array(toks, dtype=float),
        np.array([q["group"] for q in qs]),
        np.array(stale),
    )


# -- choosing a family's parameters, and checking the choice leave-one-user-out -------------------


OLD = Rule(t=0.6)  # seed 001's default: threshold 0.6 over the top 10
RECOMMENDED = Rule(t=0.25, cap=7)


def families() -> dict[str, list[Rule]]:
    ts = [round(x, 3) for x in np.arange(0.0, 1.0001, 0.025)]
    coarse = [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7]
    caps = [1, 2, 3, 4, 5, 6, 7, 8]
    fam: dict[str, list[Rule]] = {
        "threshold": [Rule(t=t) for t in ts],
        "threshold + cap": [Rule(t=t, cap=c) for t in coarse for c in caps],
        "threshold + minimum k": [
            Rule(t=t, min_k=m, floor=f, cap=c)
            for t in [0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6]
            for m in [1, 2, 3]
            for f in [0.0, 0.05, 0.1, 0.2]
            for c in [None, 5, 6, 7, 8]
        ],
        "relative to the best": [
            Rule(t=f, rel=d, cap=c)
            for f in [0.0, 0.1, 0.2, 0.3, 0.4]
            for d in [0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5]
            for c in [None, 5, 8]
        ],
        "minimum k": [
            Rule(t=t, min_k=m, floor=f, cap=c)
            for m in [1, 2, 3, 4, 5]
            for f in [0.0, 0.05, 0.1, 0.2, 0.3]
            for t in [0.5, 0.6, 0.7, 0.8, 1.01]
            for c in [None, 5, 8]
        ],
        "per type": [
            Rule(t=t, t_turn=tt, t_question=tq, cap=c)
            for t in [0.2, 0.25, 0.3, 0.4]
            for tt in [0.25, 0.3, 0.4, 0.5]
            for tq in [0.5, 0.7, 0.9, 1.01]
            for c in [None, 5, 6, 7]
        ],
        "per type + minimum k": [
            Rule(t=t, t_turn=tt, t_question=tq, min_k=m, floor=f, cap=c)
            for t in [0.25, 0.3, 0.4]
            for tt in [0.25, 0.3, 0.4]
            for tq in [0.5, 0.7, 1.01]
            for m in [1, 2]
            for f in [0.0, 0.1]
            for c in [5, 6, 7]
        ],
        "deeper pool": [
            Rule(t=t, pool=p, cap=c, order=o)
            for t in [0.2, 0.3, 0.4, 0.5]
            for p in [20, 30]
            for c in [3, 4, 5, 6]
            for o in ["rank", "cosine"]
        ],
    }
    return fam


def objective(by_mode: Sequence[Score]) -> tuple[float, float]:
    """Higher is better: statements injected (mean over the modes) if every mode stays within
    MAX_MEAN memories per question on average, else -inf; ties go to fewer memories."""
    if any(s.mean > MAX_MEAN for s in by_mode):
        return (-math.inf, 0.0)
    return (float(np.mean([s.rate for s in by_mode])), -float(np.mean([s.mean for s in by_mode])))


def choose(rules: Sequence[Rule], scores: dict[Rule, list[Score]], mask: np.ndarray) -> Rule:
    return max(rules, key=lambda r: objective([s.where(mask) for s in scores[r]]))


def held_out(
    rules: Sequence[Rule], scores: dict[Rule, list[Score]], groups: np.ndarray
) -> tuple[list[Score], list[tuple[str, Rule]]]:
    """Leave one user out: each user's questions scored with the rule chosen on the others."""
    picks = []
    parts: list[list[Score]] = [[] for _ in scores[rules[0]]]
    for g in sorted(set(groups)):
        r = choose(rules, scores, groups != g)
        picks.append((g, r))
        for i, s in enumerate(scores[r]):
            parts[i].append(s.where(groups == g))
    merged = [
        Score(
            *(
                np.concatenate([getattr(p, f) for p in ps])
                for f in ("answered", "items", "tokens", "group", "stale")
            )
        )
        for ps in parts
    ]
    return merged, picks


# -- report ------------------------------------------------------------------------------------


def fmt_dev(s: Score) -> str:
    return f"{s.rate:.1%} | {s.mean:.2f} / {s.p90:.0f}"


def fmt_ev(s: Score) -> str:
    return f"{s.rate:.3f} | {s.tokens.mean():.0f}"


def load(cache: Path, refresh: bool, beam_chats: int | None) -> dict[str, list[dict[str, Any]]]:
    cache.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="synapsedb-injection-"))
    out: dict[str, list[dict[str, Any]]] = {}
    try:
        for mode in collect.MODES:
            f = cache / f"dev-{mode}-{collect.dev_digest()}.json"
            if refresh or not f.exists():
                f.write_text(json.dumps(collect.collect_dev(root, mode)))
            out[f"dev-{mode}"] = json.loads(f.read_text())
        f = cache / "locomo.json"
        if refresh or not f.exists():
            f.write_text(json.dumps(collect.collect_locomo(root)))
        out["locomo"] = json.loads(f.read_text())
        if refresh:
            for old in cache.glob("beam-*.json"):
                old.unlink()
        out["beam"] = collect.collect_beam(root, beam_chats, cache=cache)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "synapsedb-injection"
    )
    ap.add_argument("--refresh", action="store_true", help="collect the hits again")
    ap.add_argument("--beam-chats", type=int, default=None, help="the first N BEAM chats only")
    ap.add_argument("--plot", type=Path, default=ROOT / "docs" / "img" / "injection_curve.png")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    data = load(args.cache, args.refresh, args.beam_chats)
    print(
        f"hits loaded in {time.perf_counter() - t0:.0f} s: "
        + ", ".join(f"{k} {len(v)} questions" for k, v in data.items()),
        flush=True,
    )
    report(data, args)


def report(data: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    dev = [data["dev-turns"], data["dev-extracted"]]
    groups = np.array([q["group"] for q in dev[0]])
    fam = families()
    extra = {OLD, RECOMMENDED, replace(RECOMMENDED, t=0.4)}
    every = sorted({r for rules in fam.values() for r in rules} | extra, key=repr)
    t0 = time.perf_counter()
    scores = {r: [score(qs, r) for qs in dev] for r in every}
    print(
        f"{len(every)} rules scored on the dev set in {time.perf_counter() - t0:.0f} s", flush=True
    )
    chosen: dict[str, Rule] = {}
    body = dev_lines(data, fam, scores, groups, chosen)
    body += corpus_lines(data, fam, scores, chosen)
    body += curve_lines(data, scores, args.plot)
    lines = [*summary(data, scores, groups), *body]
    append_report("Injection policy of the memory loop", "python bench/bench_injection.py", lines)


def summary(
    data: dict[str, list[dict[str, Any]]], scores: dict[Rule, list[Score]], groups: np.ndarray
) -> list[str]:
    """The recommendation and its numbers, next to seed 001's default."""
    rec, old = scores[RECOMMENDED], scores[OLD]
    lo = [score(data["locomo"], r) for r in (OLD, RECOMMENDED)]
    be = [score(data["beam"], r) for r in (OLD, RECOMMENDED)]
    per_user = [rec[0].where(groups == g).rate for g in sorted(set(groups))]
    met = all(s.rate >= 0.9 and s.mean <= MAX_MEAN for s in rec)
    return [
        f"Recommended default: **keep a hit when its calibrated similarity is at least "
        f"{RECOMMENDED.t:g} (cosine {(math.log(RECOMMENDED.t / (1 - RECOMMENDED.t)) - CALIB_B) / CALIB_A:.3f}), "
        f"over the top {RECOMMENDED.pool} hybrid hits, in their order, and inject at most "
        f"{RECOMMENDED.cap} memories** (after leaving out acknowledgements and repeats of the "
        "request, and counting an extracted memory and its source turn once), within the "
        f"1,000-token budget. Seed 001's default was a threshold of {OLD.t:g} and no cap.",
        "",
        "| | seed 001's default | recommended |",
        "|---|---|---|",
        f"| dev, turns only: statements injected | {old[0].rate:.1%} | **{rec[0].rate:.1%}** |",
        f"| dev, turns + extracted: statements injected | {old[1].rate:.1%} | "
        f"**{rec[1].rate:.1%}** |",
        f"| dev: memories per question, mean / p90 (turns only; + extracted) | "
        f"{old[0].mean:.2f} / {old[0].p90:.0f}; {old[1].mean:.2f} / {old[1].p90:.0f} | "
        f"{rec[0].mean:.2f} / {rec[0].p90:.0f}; {rec[1].mean:.2f} / {rec[1].p90:.0f} |",
        f"| dev: memories for a question about nothing the user said (mean) | "
        f"{old[0].unasked:.2f}; {old[1].unasked:.2f} | {rec[0].unasked:.2f}; {rec[1].unasked:.2f} |",
        f"| LoCoMo dev: evidence in the block / tokens / memories per question | "
        f"{lo[0].rate:.3f} / {lo[0].tokens.mean():.0f} / {lo[0].mean:.1f} | "
        f"{lo[1].rate:.3f} / {lo[1].tokens.mean():.0f} / {lo[1].mean:.1f} |",
        f"| BEAM 100K: evidence in the block / tokens / memories per question | "
        f"{be[0].rate:.3f} / {be[0].tokens.mean():.0f} / {be[0].mean:.1f} | "
        f"{be[1].rate:.3f} / {be[1].tokens.mean():.0f} / {be[1].mean:.1f} |",
        "",
        f"Target (at least 90% of statements injected, at most {MAX_MEAN:g} memories per "
        f"question on average, on the dev set at the defaults, both modes): "
        f"**{'met' if met else 'missed'}**. Per user (turns only) the share injected ranges "
        f"{min(per_user):.0%} to {max(per_user):.0%}.",
        "",
        "The trade-off, for docs/proxy.md: the low threshold lets a fact phrased unlike the "
        f'question through ("The user lives in Lisbon" for "Where do I live?", cosine '
        f"0.29), so {rec[0].rate:.0%} of what users said comes back at the defaults instead of "
        f"{old[0].rate:.0%}; the price is about {rec[0].mean - old[0].mean:.0f} more memories "
        f"per question ({lo[1].tokens.mean() - lo[0].tokens.mean():.0f} more tokens on LoCoMo), "
        f"and {rec[0].unasked:.1f} loosely related memories even for a question that needs none. "
        f"A higher `SYNAPSEDB_LOOP_THRESHOLD` (0.4: {scores[replace(RECOMMENDED, t=0.4)][0].rate:.0%}"
        f" injected, {scores[replace(RECOMMENDED, t=0.4)][0].mean:.1f} memories) trades recall "
        "for a shorter prompt; the cap bounds the block however many memories a user has.",
        "",
    ]


def dev_lines(
    data: dict[str, list[dict[str, Any]]],
    fam: dict[str, list[Rule]],
    scores: dict[Rule, list[Score]],
    groups: np.ndarray,
    chosen: dict[str, Rule],
) -> list[str]:
    n = len(data["dev-turns"])
    lines = [
        f"Dev set: {n} questions of {len(set(groups))} users (bench/data/injection_dev.json), "
        "each asked alone in a new conversation. Statement injected: the block holds the turn "
        "that states it or a memory extracted from it; memories: items in the block per "
        "question, mean / p90. Each family's parameters are chosen for the most statements "
        f"injected (mean of both modes) with at most {MAX_MEAN:g} memories per question on "
        "average in both modes; held out: each user scored with the parameters chosen on the "
        "other seven.",
        "",
        "| rule family | chosen on all users | turns only: injected | memories mean / p90 | "
        "turns + extracted: injected | memories mean / p90 | held out, turns only | "
        "memories | held out, turns + extracted | memories | stale statement injected "
        "(turns / + extracted) | memories for a question about nothing |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    old = scores[OLD]
    lines.append(
        f"| seed 001's default | {OLD.label()} | {fmt_dev(old[0])} | {fmt_dev(old[1])} "
        f"| - | - | - | - | {old[0].stale_rate:.1%} / {old[1].stale_rate:.1%} | "
        f"{old[0].unasked:.2f} / {old[1].unasked:.2f} |"
    )
    for name, rules in fam.items():
        best = choose(rules, scores, np.ones(n, dtype=bool))
        chosen[name] = best
        ho, picks = held_out(rules, scores, groups)
        s = scores[best]
        lines.append(
            f"| {name} | {best.label()} | {fmt_dev(s[0])} | {fmt_dev(s[1])} | "
            f"{fmt_dev(ho[0])} | {fmt_dev(ho[1])} | "
            f"{s[0].stale_rate:.1%} / {s[1].stale_rate:.1%} | "
            f"{s[0].unasked:.2f} / {s[1].unasked:.2f} |"
        )
        distinct = sorted({r.label() for _, r in picks})
        print(
            f"  {name}: held-out folds chose {len(distinct)} distinct rules: {'; '.join(distinct)}",
            flush=True,
        )
    return [*lines, ""]


def corpus_lines(
    data: dict[str, list[dict[str, Any]]],
    fam: dict[str, list[Rule]],
    scores: dict[Rule, list[Score]],
    chosen: dict[str, Rule],
) -> list[str]:
    lo, be = data["locomo"], data["beam"]
    lines = [
        f"LoCoMo dev ({len(lo)} questions, turns through remember) and BEAM 100K ({len(be)} "
        f"questions of {len({q['group'] for q in be})} chats, messages through remember): "
        "evidence in the block (share of a question's evidence turns, mean per question) and "
        "tokens injected per question (recall's estimate, 1,000-token budget), for the same "
        "rules.",
        "",
        "| rule | LoCoMo evidence | LoCoMo tokens | BEAM evidence | BEAM tokens |",
        "|---|---|---|---|---|",
    ]
    for name, r in [("seed 001's default", OLD), *chosen.items()]:
        lines.append(f"| {name}: {r.label()} | {fmt_ev(score(lo, r))} | {fmt_ev(score(be, r))} |")
    return [*lines, ""]


CURVE = [round(x, 2) for x in np.arange(0.05, 0.951, 0.05)]


def curve_lines(
    data: dict[str, list[dict[str, Any]]], scores: dict[Rule, list[Score]], plot: Path
) -> list[str]:
    """The threshold's whole curve, alone and with the recommended cap, on all four sets; and
    the plot."""
    lo, be = data["locomo"], data["beam"]
    rows: dict[tuple[float, int | None], list[Score]] = {}
    for cap in (None, RECOMMENDED.cap):
        for t in CURVE:
            r = replace(RECOMMENDED, t=t, cap=cap)
            dev = scores.get(r) or [
                score(qs, r) for qs in (data["dev-turns"], data["dev-extracted"])
            ]
            rows[(t, cap)] = [*dev, score(lo, r), score(be, r)]
    lines = [
        f"The curve: a threshold on the calibrated similarity over the top 10, alone and with "
        f"the cap of {RECOMMENDED.cap} memories (dev: statements injected, memories per question "
        "mean; LoCoMo and BEAM: evidence in the block, tokens per question).",
        "",
        "| threshold | cosine | cap | dev turns only | dev turns + extracted | LoCoMo | BEAM |",
        "|---|---|---|---|---|---|---|",
    ]
    for (t, cap), (st, sx, sl, sb) in rows.items():
        cos = (math.log(t / (1 - t)) - CALIB_B) / CALIB_A
        lines.append(
            f"| {t:.2f} | {cos:.3f} | {cap or '-'} | {st.rate:.1%}, {st.mean:.2f} | "
            f"{sx.rate:.1%}, {sx.mean:.2f} | {sl.rate:.3f}, {sl.tokens.mean():.0f} | "
            f"{sb.rate:.3f}, {sb.tokens.mean():.0f} |"
        )
    if draw(rows, scores, data, plot):
        lines += ["", f"![injection curve](img/{plot.name})"]
    return [*lines, ""]


def draw(
    rows: dict[tuple[float, int | None], list[Score]],
    scores: dict[Rule, list[Score]],
    data: dict[str, list[dict[str, Any]]],
    plot: Path,
) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib in this environment: the curve is the table only")
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    old = [*scores[OLD], score(data["locomo"], OLD), score(data["beam"], OLD)]
    rec = [
        *scores[RECOMMENDED],
        score(data["locomo"], RECOMMENDED),
        score(data["beam"], RECOMMENDED),
    ]
    for cap, style in ((None, "-"), (RECOMMENDED.cap, "--")):
        tag = "threshold" if cap is None else f"threshold, cap {cap}"
        pts = [(t, v) for (t, c), v in rows.items() if c == cap]
        for i, (mode, color) in enumerate((("turns only", "C0"), ("turns + extracted", "C1"))):
            ax1.plot(
                [v[i].mean for _, v in pts],
                [v[i].rate for _, v in pts],
                style,
                color=color,
                marker=".",
                label=f"dev, {mode}: {tag}",
            )
        for i, (name, color) in ((2, ("LoCoMo dev", "C2")), (3, ("BEAM 100K", "C3"))):
            ax2.plot(
                [v[i].tokens.mean() for _, v in pts],
                [v[i].rate for _, v in pts],
                style,
                color=color,
                marker=".",
                label=f"{name}: {tag}",
            )
    for ax, idx, x in ((ax1, (0, 1), "mean"), (ax2, (2, 3), "tokens")):
        for marks, label, m in (
            (old, "seed 001's default (0.6)", "x"),
            (rec, f"recommended ({RECOMMENDED.label()})", "*"),
        ):
            xs = [marks[i].mean if x == "mean" else marks[i].tokens.mean() for i in idx]
            ax.scatter(
                xs, [marks[i].rate for i in idx], marker=m, s=120, color="k", zorder=5, label=label
            )
    ax1.axhline(0.9, color="grey", lw=0.8, ls=":")
    ax1.axvline(MAX_MEAN, color="grey", lw=0.8, ls=":")
    ax1.set_xlabel("memories injected per question (mean)")
    ax1.set_ylabel("statements injected")
    ax1.set_title("Dev set (153 questions, 8 users)")
    ax2.set_xlabel("tokens injected per question (mean)")
    ax2.set_ylabel("evidence turns in the block (mean per question)")
    ax2.set_title("LoCoMo dev and BEAM 100K")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(plot, dpi=110)
    plt.close(fig)
    return True


if __name__ == "__main__":
    main()
