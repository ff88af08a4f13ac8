"""LoCoMo through the memory loop, for bench/bench_agentic.py: ingest via ``ns.remember``,
make test-llm's local model, extraction throughput and the end-to-end QA harness.

Ingest (the calibration and the QA harness): one namespace per conversation, each session's
turns through ``ns.remember(..., memories=None)`` with no LLM, so turns only (extraction of
~2,800 turns by the local model would take hours on 2 cores), content "Speaker: text [image:
caption]" as in bench_quality, speaker A as role user and B as assistant, ts = the session's
date, all about the entity "conversation". The memories recall sees are the turns themselves.

QA: recall -> context block -> answer model -> LLM judge (CORRECT/WRONG, JSON schema), against
any OpenAI-compatible endpoint through :class:`synapsedb.llm.ChatClient`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # tests.support
import locomo
from bench_quality import session_ts

import synapsedb
from synapsedb.config import LLMSettings
from synapsedb.errors import SynapseError
from synapsedb.llm import ChatClient
from synapsedb.memory_loop import DECISIONS_STREAM, LoopSettings, MemoryLoop
from synapsedb.memory_loop.acknowledge import worth_a_memory

ENTITY = "conversation"
TOP = 10  # recall's default k
THRESHOLD = LoopSettings().threshold  # the default, on the calibrated scale


def current() -> dict[str, Any]:
    """recall()'s filter: memories whose valid interval is not closed (recall.py)."""
    now = time.time()
    return {"$or": [{"valid_to": {"$exists": False}}, {"valid_to": {"$gt": now}}]}


# -- ingest: LoCoMo turns through ns.remember --------------------------------------------------


@dataclass
class Ingested:
    conv: locomo.Conversation
    ns: Any
    row_of: dict[str, int]  # memory id -> row of the turn (locomo.Conversation.turns)
    seconds: float  # the remember calls
    index_s: float  # run_pending: the turns' searchable memories, one MiniLM batch per job


def ingest(db: Any, conv: locomo.Conversation) -> Ingested:
    """Each session's turns through ``remember`` (chunks of at most max_turns), then the
    queued jobs (``run_pending``: no LLM, so no extraction); every turn worth a memory (not
    an acknowledgement, not small talk) is a searchable ``event`` memory."""
    ns = db.namespace(f"locomo-{conv.name}")
    loop = db.memory_loop
    first = conv.turns[0].speaker
    by_session: dict[int, list[int]] = {}
    for i, t in enumerate(conv.turns):
        by_session.setdefault(t.session, []).append(i)
    event_row: dict[tuple[str, str], int] = {}  # (stream, event id): ids are per stream
    t0 = time.perf_counter()
    for s, rows in by_session.items():
        for at in range(0, len(rows), loop.settings.max_turns):
            chunk = rows[at : at + loop.settings.max_turns]
            msgs = []
            for i in chunk:
                t = conv.turns[i]
                m = {
                    "role": "user" if t.speaker == first else "assistant",
                    "content": t.content,
                    "name": t.speaker,
                }
                if (ts := session_ts(t.date)) is not None:
                    m["ts"] = ts
                msgs.append(m)
            r = ns.remember(msgs, entity=ENTITY, session=f"s{s}")
            event_row.update(zip([(r.stream, e) for e in r.turns], chunk, strict=True))
    t1 = time.perf_counter()
    loop.run_pending(ns)
    t2 = time.perf_counter()
    waiting = [f for f in ns.facts("synapsedb:jobs") if not f.value.get("indexed")]
    if waiting:
        raise SystemExit(f"ingest {conv.name}: {len(waiting)} jobs not indexed ({loop.last_error})")
    row_of = {}
    for m in ns.memories(ENTITY, types=["event"], limit=10_000):
        row = event_row.get((str(m.metadata.get("stream")), str(m.metadata.get("event_id"))))
        if row is None:
            continue
        if m.content != conv.turns[row].content:  # the mapping is checked, not trusted
            raise SystemExit(f"ingest {conv.name}: memory {m.id} is not turn {row}")
        row_of[m.id] = row
    # every turn worth a memory is searchable; an acknowledgement or small talk is not (an
    # evidence turn among those counts as missed, never as found)
    worth = set()
    answered = ""
    for i, t in enumerate(conv.turns):
        role = "user" if t.speaker == first else "assistant"
        answered = t.content if role == "user" else answered
        if worth_a_memory(role, t.content, answered):
            worth.add(i)
    if set(row_of.values()) != worth:
        raise SystemExit(
            f"ingest {conv.name}: {len(row_of)} turns searchable, {len(worth)} "
            f"of {len(conv.turns)} worth a memory"
        )
    return Ingested(conv, ns, row_of, t1 - t0, t2 - t1)


def ingest_all(db: Any, convs: Sequence[locomo.Conversation]) -> list[Ingested]:
    out = []
    for conv in convs:
        done = ingest(db, conv)
        print(
            f"  ingested {conv.name}: {len(conv.turns)} turns, remember {done.seconds:.1f} s, "
            f"indexing {done.index_s:.1f} s",
            flush=True,
        )
        out.append(done)
    return out


def open_db(root: Path, name: str) -> Any:
    """An embedded database with a memory loop and no LLM whose worker is stopped: the bench
    runs the jobs itself (``run_pending``), so ingest is over when ``ingest`` returns."""
    db = synapsedb.open(root / name, llm=None, durability="os")
    db.memory_loop.stop()
    return db


def rows_of(ing: Ingested, hit: Any) -> set[int]:
    """The turns a hit stands for: itself and the near-duplicates collapsed into it."""
    ids = [hit.id, *getattr(hit, "duplicates", ())]
    return {ing.row_of[i] for i in ids if i in ing.row_of}


# -- the local model (make test-llm) -----------------------------------------------------------


@contextlib.contextmanager
def local_model() -> Iterator[LLMSettings | None]:
    """make test-llm's SmolLM2 server (tests/support/local_llm.py), or None with the reason
    printed when it is not there."""
    with contextlib.ExitStack() as stack:
        try:
            from tests.support.local_llm import LocalLLMUnavailableError, serve
        except ImportError as exc:
            print(f"skipped: no local model harness (tests/support/local_llm.py): {exc}")
            yield None
            return
        try:
            server = stack.enter_context(serve())
        except LocalLLMUnavailableError as exc:
            print(f"skipped: {exc}")
            yield None
            return
        yield server.settings(timeout_s=600.0, max_retries=0)


class Meter(httpx.BaseTransport):
    """Counts requests, seconds and completion tokens of a ChatClient (its transport)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.requests = self.failed = self.completion = self.prompt = 0
        self.seconds = 0.0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        t0 = time.perf_counter()
        self.requests += 1
        try:
            response = self.inner.handle_request(request)
            response.read()
        except httpx.HTTPError:
            self.failed += 1
            raise
        finally:
            self.seconds += time.perf_counter() - t0
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            usage = response.json().get("usage") or {}
            self.completion += int(usage.get("completion_tokens") or 0)
            self.prompt += int(usage.get("prompt_tokens") or 0)
        return response

    def close(self) -> None:
        self.inner.close()


def extraction(root: Path, convs: list[locomo.Conversation], jobs: int) -> list[str]:
    with local_model() as settings:
        if settings is None:
            return [
                "Extraction throughput: **skipped**, no local model here (`make test-llm` "
                "creates .venv-llm with llama-cpp-python and SmolLM2)."
            ]
        meter = Meter()
        client = ChatClient(settings, transport=meter)
        db = synapsedb.open(root / "extraction", llm=None, durability="os")
        db.memory_loop.stop()
        loop = MemoryLoop(client)
        db.memory_loop = loop  # worker not started: run_pending runs the jobs below
        ns = db.namespace("extraction")
        conv = convs[0]
        first = conv.turns[0].speaker
        entity = f"user:{first.lower()}"
        # pairs (speaker A as the user, then B) spread over the conversation
        pairs = [
            i
            for i in range(len(conv.turns) - 1)
            if conv.turns[i].speaker == first != conv.turns[i + 1].speaker
        ]
        for i in pairs[:: max(1, len(pairs) // jobs)][:jobs]:
            a, b = conv.turns[i], conv.turns[i + 1]
            msgs = [
                {
                    "role": "user" if t.speaker == first else "assistant",
                    "content": t.content.split(": ", 1)[-1],
                    "ts": session_ts(t.date),
                }
                for t in (a, b)
            ]
            ns.remember(msgs, entity=entity, session=f"s{a.session}")
        t0 = time.perf_counter()
        done = 0
        while done < jobs:
            n = loop.run_pending(ns)
            if n == 0:
                break
            done += n
        secs = time.perf_counter() - t0
        actions = Counter(
            str((e.data or {}).get("action")) for e in ns.events(DECISIONS_STREAM, limit=10_000)
        )
        stored = ns.stats().memories_by_type
        typed = {t: stored.get(t, 0) for t in ("fact", "preference", "procedure", "episode")}
        examples = [f"{m.type}: {m.content!r}" for m in ns.memories(entity, types=list(typed))]
        left = len(ns.facts("synapsedb:jobs")) if done < jobs else 0
        db.close()
        client.close()
    return [
        f"`loop.run_pending(ns)` over {jobs} queued jobs (each 2 turns of LoCoMo conversation "
        f"{conv.name}, the entity {entity}) with SmolLM2-135M-Instruct Q4_1 under llama.cpp "
        f"(make test-llm's server, 2 threads, JSON-schema constrained output), worker not "
        "started. A plumbing-model figure: the 135M model proves the path, not the quality.",
        "",
        f"- {done} jobs done in {secs:.1f} s: **{done / secs:.2f} jobs/s** "
        f"({secs / max(done, 1):.1f} s per job); {left} left queued or parked "
        f"(last error: {loop.last_error or 'none'})",
        f"- **{sum(typed.values()) / max(done, 1):.2f} memories stored per job** "
        f"({', '.join(f'{k} {v}' for k, v in typed.items())}); decisions: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(actions.items())) or 'none'}",
        f"- what it extracted (first 3): {'; '.join(examples[:3]) or 'nothing'}",
        f"- model requests {meter.requests} ({meter.failed} failed, {meter.seconds:.1f} s), prompt tokens "
        f"{meter.prompt:,}, completion tokens {meter.completion:,} "
        f"({meter.completion / max(meter.seconds, 1e-9):.1f} tok/s over the requests)",
    ]


# -- LoCoMo QA: recall -> answer -> judge -------------------------------------------------------

ANSWER_SYSTEM = """You answer questions about a long conversation between two people, using only \
the memories below: lines of the conversation, each with the date it was said. Answer in a few \
words. Resolve relative dates ("last week") against the line's date. If the memories do not \
say, answer "I don't know".

{context}"""
JUDGE_PROMPT = """Label a generated answer to a question as CORRECT or WRONG, given the gold \
answer. Be generous: an answer that refers to the same thing as the gold answer is CORRECT, even \
if it is longer or worded differently; for a time, the same date or period in another format is \
CORRECT. An answer that misses the gold answer's content, or says it does not know, is WRONG.

Question: {question}
Gold answer: {gold}
Generated answer: {answer}

Answer with JSON: one sentence of reasoning, then the label."""
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "label": {"type": "string", "enum": ["CORRECT", "WRONG"]},
    },
    "required": ["reasoning", "label"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class QA:
    conv: str
    index: int  # in locomo.Conversation.questions
    text: str
    gold: str
    category: int


def qa_questions(data: Path, convs: list[locomo.Conversation], n: int, seed: int) -> list[QA]:
    """A fixed-seed sample of the questions of categories 1-4 (those with a gold answer)."""
    pool = []
    for conv in convs:
        raw = json.loads((data / f"{conv.name}.json").read_text())
        gold = {}
        for q in raw["qa"]:
            if q.get("category") in locomo.CATEGORIES and "answer" in q:
                gold.setdefault((q["question"], q["category"]), str(q["answer"]))
        for j, q in enumerate(conv.questions):
            if (q.text, q.category) in gold:
                pool.append(QA(conv.name, j, q.text, gold[(q.text, q.category)], q.category))
    return random.Random(seed).sample(pool, min(n, len(pool)))


def grade(judge: ChatClient, question: str, gold: str, answer: str) -> str:
    """The judge's label: CORRECT, WRONG or ERROR (no valid answer; counted as not correct)."""
    try:
        return str(
            judge.chat_json(
                [
                    {
                        "role": "user",
                        "content": JUDGE_PROMPT.format(question=question, gold=gold, answer=answer),
                    }
                ],
                JUDGE_SCHEMA,
                name="verdict",
                max_tokens=128,
            )["label"]
        )
    except SynapseError as exc:
        return f"ERROR ({exc.message[:80]})"


_ARTICLES = frozenset(["a", "an", "the", "and"])


def token_f1(answer: str, gold: str) -> float:
    """F1 of the lower-cased word tokens (articles dropped), as LoCoMo's paper scores answers."""
    a = [w for w in locomo.words(answer) if w not in _ARTICLES]
    g = [w for w in locomo.words(gold) if w not in _ARTICLES]
    common = sum((Counter(a) & Counter(g)).values())
    if not a or not g or not common:
        return 0.0
    precision, recall = common / len(a), common / len(g)
    return 2 * precision * recall / (precision + recall)


def controls(rows: Sequence[dict[str, Any]]) -> list[str]:
    right = [r["control_gold"] for r in rows]
    wrong = [r["control_wrong"] for r in rows if r.get("control_wrong") is not None]
    ok, fooled = sum(x == "CORRECT" for x in right), sum(x == "CORRECT" for x in wrong)
    blind = fooled >= len(wrong) / 2 or ok < 0.8 * len(right)
    return [
        f"- the judge checked: it labels the gold answer itself CORRECT for {ok}/{len(right)} "
        f"questions, and another question's gold answer (known wrong) CORRECT for "
        f"{fooled}/{len(wrong)}"
        + (
            "; **this judge cannot tell right from wrong, so the accuracy above says nothing**"
            if blind
            else ""
        )
    ]


def endpoint(url: str, model: str) -> LLMSettings:
    return LLMSettings(
        base_url=url,
        model=model,
        api_key=os.environ.get("SYNAPSEDB_LLM_API_KEY", ""),
        timeout_s=300.0,
        max_retries=1,
    )


def reachable(client: ChatClient, what: str) -> None:
    try:
        client.chat([{"role": "user", "content": "Say OK."}], max_tokens=2)
    except SynapseError as exc:
        raise SystemExit(
            f"--qa: the {what} endpoint does not answer ({exc.message}); "
            "give --base-url/--model of a running OpenAI-compatible server, "
            "or --local for make test-llm's SmolLM2"
        ) from None


def qa(args: argparse.Namespace, root: Path, convs: list[locomo.Conversation]) -> list[str]:
    with contextlib.ExitStack() as stack:
        if args.local:
            settings = stack.enter_context(local_model())
            if settings is None and args.skip_missing:
                return [
                    "LoCoMo QA: **skipped**, no local model here (`make test-llm` creates "
                    ".venv-llm); `--qa --base-url URL --model NAME` runs it on any "
                    "OpenAI-compatible endpoint."
                ]
            if settings is None:
                raise SystemExit(
                    "--qa --local: no local model here; run `make test-llm` first "
                    "(it creates .venv-llm) or give --base-url/--model"
                )
            name = "SmolLM2-135M-Instruct Q4_1 (llama.cpp, make test-llm's server)"
        else:
            url = args.base_url or os.environ.get("SYNAPSEDB_LLM_BASE_URL", "")
            if not url:
                raise SystemExit(
                    "--qa needs an endpoint: --base-url URL --model NAME (or "
                    "SYNAPSEDB_LLM_BASE_URL), or --local"
                )
            settings = endpoint(url, args.model or os.environ.get("SYNAPSEDB_LLM_MODEL", ""))
            name = f"{settings.model or '(default model)'} at {url}"
        answer_m, judge_m = Meter(), Meter()
        answerer = stack.enter_context(ChatClient(settings, transport=answer_m))
        judge_settings = (
            endpoint(args.judge_base_url, args.judge_model or settings.model)
            if args.judge_base_url
            else settings
        )
        judge = stack.enter_context(ChatClient(judge_settings, transport=judge_m))
        judge_name = (
            f"{judge_settings.model} at {args.judge_base_url}"
            if args.judge_base_url
            else "the same model"
        )
        reachable(answerer, "answer")
        reachable(judge, "judge")
        answer_m.__init__()  # the probes are not part of the run
        judge_m.__init__()
        questions = qa_questions(args.data, convs, args.questions, args.seed)
        needed = [c for c in convs if any(q.conv == c.name for q in questions)]
        db = stack.enter_context(contextlib.closing(open_db(root, "qa")))
        ings = {i.conv.name: i for i in ingest_all(db, needed)}
        rows = []
        for q in questions:
            ing = ings[q.conv]
            evidence = set(ing.conv.questions[q.index].evidence)
            rec = ing.ns.recall(q.text, entity=ENTITY)
            got = {ing.row_of[m.id] for m in rec.memories if m.id in ing.row_of}
            ctx = rec.context or "(no memories found)"
            try:
                answer = answerer.chat(
                    [
                        {"role": "system", "content": ANSWER_SYSTEM.format(context=ctx)},
                        {"role": "user", "content": q.text},
                    ],
                    max_tokens=64,
                ).content.strip()
            except SynapseError as exc:
                answer = f"(no answer: {exc.message})"
            verdict = grade(judge, q.text, q.gold, answer)
            row = {
                "conv": q.conv,
                "category": q.category,
                "question": q.text,
                "gold": q.gold,
                "answer": answer,
                "label": verdict,
                "f1": token_f1(answer, q.gold),
                "memories": len(rec.memories),
                "tokens": rec.tokens,
                "evidence_recall": len(got & evidence) / len(evidence),
            }
            if args.controls:  # the judge on a known-right and a known-wrong answer
                other = questions[(len(rows) + 1) % len(questions)].gold
                row["control_gold"] = grade(judge, q.text, q.gold, q.gold)
                row["control_wrong"] = (
                    grade(judge, q.text, q.gold, other) if other.lower() != q.gold.lower() else None
                )
            rows.append(row)
            print(
                f"  [{len(rows)}/{len(questions)}] {verdict:<8} {q.text[:60]!r} -> "
                f"{answer[:60]!r} (gold {q.gold[:40]!r})",
                flush=True,
            )
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    n = len(rows)
    correct = sum(r["label"] == "CORRECT" for r in rows)
    errors = sum(r["label"].startswith("ERROR") for r in rows)
    by_cat = []
    for c, label in locomo.CATEGORIES.items():
        sub = [r for r in rows if r["category"] == c]
        if sub:
            ok = sum(r["label"] == "CORRECT" for r in sub)
            by_cat.append(f"{label} {ok}/{len(sub)}")
    return [
        f"{n} LoCoMo dev questions (categories 1-4, random.Random({args.seed}).sample over all "
        f"{sum(len(c.questions) for c in convs)}), conversations {', '.join(ings)} ingested as "
        "turns only (no extraction). Each question: `ns.recall(question, entity=)` (heuristic "
        f"rewrite, k {TOP}, threshold {THRESHOLD}, budget 1,000 tokens) -> context block in the "
        f"system prompt -> answer by {name} (max 64 tokens) -> judged CORRECT/WRONG against the "
        f"gold answer by {judge_name} (JSON schema, a generous mem0-style judge prompt).",
        "",
        f"- **LLM-judge accuracy {correct}/{n} = {correct / max(n, 1):.1%}** "
        f"({'; '.join(by_cat)}); judge errors (counted WRONG): {errors}",
        f"- retrieval: evidence recall of the recalled memories "
        f"{np.mean([r['evidence_recall'] for r in rows]):.3f} (mean per question), "
        f"{np.mean([r['evidence_recall'] > 0 for r in rows]):.1%} of questions with at least "
        f"one evidence turn in context; {np.mean([r['memories'] for r in rows]):.1f} memories "
        f"and {np.mean([r['tokens'] for r in rows]):.0f} tokens of context per question",
        f"- token F1 of the answers against the gold answers (LoCoMo's own metric, no judge): "
        f"{np.mean([r['f1'] for r in rows]):.3f}",
        *(controls(rows) if args.controls else []),
        f"- model time: answers {answer_m.seconds:.0f} s ({answer_m.requests} requests), "
        f"judging {judge_m.seconds:.0f} s ({judge_m.requests} requests)",
    ]
