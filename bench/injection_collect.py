"""The hits behind bench/bench_injection.py: every question's top hits, collected once through
the memory loop and cached on disk, so injection rules are compared offline.

Three sources, each ingested through ``ns.remember`` on an embedded database with no LLM:

``dev``     bench/data/injection_dev.json (format in bench/data/README.md), in two modes:
            ``turns`` (each exchange remembered as it is: the turns are the only memories, what
            a user without an LLM gets) and ``extracted`` (each exchange remembered with
            ``memories=`` the hand-written memories an LLM extractor would produce: a stand-in
            for the extractor; they go through the loop's conflict resolution like any).
``locomo``  LoCoMo dev, ingested as bench/agentic_harness.py does (turns only).
``beam``    BEAM 100K, each chat one namespace, each batch one session, messages as turns
            (user/assistant), cut to remember's 32,000-byte limit when longer (counted).

Each question asks, in a new session, ``ns.query(question, entity=, k=DEPTH, filter=current(),
explain=True)``: what ``recall`` runs (a one-message request is its own query), only deeper.
The hybrid ranking's candidate lists do not depend on k (query/executor.py), so the first 10 of
these hits are what ``recall`` sees at k 10. Each hit keeps what a rule may look at (type, role,
cosine, fused score, rank, the line's token cost) and what the scoring needs (which statement or
evidence turn it stands for, its collapsed duplicates included; the turns an extracted memory
came from).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beam
import locomo
from agentic_harness import ENTITY, current, ingest_all, open_db

from synapsedb.memory_loop.extract import turn_memory_id
from synapsedb.memory_loop.recall import tokens

DEPTH = 30
DEV_DATA = Path(__file__).resolve().parent / "data" / "injection_dev.json"
MODES = ("turns", "extracted")
_WORDS = re.compile(r"[a-z0-9']+")


def line_tokens(h: Any) -> int:
    """What the hit's line costs in recall's context block (recall.render's format; a memory
    with a valid_from date adds ', since YYYY-MM-DD')."""
    when = ", since 0000-00-00" if h.metadata.get("valid_from") is not None else ""
    line = f"- [{h.id}] ({h.type}{when}, 0000-00-00) {h.content}"
    return tokens(line) + 1


def hit_record(h: Any, rank: int, covers: Sequence[Any]) -> dict[str, Any]:
    ex = h.explanation or {}
    md = h.metadata or {}
    text = h.content.strip()
    src = md.get("source_turns")
    return {
        "id": h.id,
        "type": h.type,
        "role": md.get("role"),  # events: user/assistant; extracted memories: None
        "rank": rank,
        "cos": float(ex.get("cosine", 0.0)),
        "score": float(h.score),
        "bm25": float(ex.get("bm25", 0.0)),
        "tok": line_tokens(h),
        "words": len(_WORDS.findall(text.lower())),
        "ends_q": text.endswith("?"),
        "dups": list(h.duplicates),
        # the turn memories this hit is one item with (an extracted memory and its sources)
        "turns": (
            [turn_memory_id(f"session:{md.get('session')}", t) for t in src]
            if isinstance(src, list)
            else [h.id]
        ),
        "covers": sorted(set(covers)),
    }


def _query(ns: Any, text: str, entity: str) -> list[Any]:
    return list(ns.query(text, entity=entity, k=DEPTH, filter=current(), explain=True).hits)


# -- the dev set --------------------------------------------------------------------------------


def dev_digest(path: Path = DEV_DATA) -> str:
    return hashlib.blake2s(path.read_bytes(), digest_size=6).hexdigest()


def collect_dev(root: Path, mode: str, path: Path = DEV_DATA) -> list[dict[str, Any]]:
    """Ingest the dev set in ``mode`` and collect every question's hits."""
    data = json.loads(path.read_text())
    db = open_db(root, f"dev-{mode}")
    out: list[dict[str, Any]] = []
    try:
        ns = db.namespace(f"dev-{mode}")
        covers: dict[str, set[str]] = {}  # memory id -> statements it states
        asks: dict[str, set[str]] = {}  # turn memory id -> statements an earlier question asks
        ack: set[str] = set()  # assistant turns that only acknowledge
        t0 = time.perf_counter()
        for user in data["users"]:
            entity = user["entity"]
            for s in user["sessions"]:
                for x, ex in enumerate(s["exchanges"]):
                    ts = _at(s["ts"], x)
                    msgs = [{"role": "user", "content": ex["user"], "ts": ts}]
                    if ex.get("assistant"):
                        msgs.append({"role": "assistant", "content": ex["assistant"], "ts": ts})
                    mems = None
                    if mode == "extracted":
                        mems = [
                            {"type": m["type"], "content": m["content"]}
                            for m in ex.get("memories", [])
                        ]
                    r = ns.remember(msgs, entity=entity, session=s["session"], memories=mems)
                    user_mem = turn_memory_id(r.stream, r.turns[0])
                    covers.setdefault(user_mem, set()).update(ex.get("states", []))
                    asks.setdefault(user_mem, set()).update(ex.get("asks", []))
                    if len(r.turns) > 1 and ex.get("ack"):
                        ack.add(turn_memory_id(r.stream, r.turns[1]))
                    for d, m in zip(r.decisions, ex.get("memories", []), strict=False):
                        mid = d.memory_id if d.action in ("ADD", "UPDATE") else d.target_id
                        if mid and m.get("statement"):
                            covers.setdefault(mid, set()).add(m["statement"])
        db.memory_loop.run_pending(ns)
        ingest_s = time.perf_counter() - t0
        stale = set(data.get("supersedes", {}).values())  # statements a later one replaced
        for q in data["questions"]:
            hits = []
            for rank, h in enumerate(_query(ns, q["text"], q["entity"])):
                ids = [h.id, *h.duplicates]
                cov = set().union(*(covers.get(i, set()) for i in ids))
                rec = hit_record(h, rank, cov)
                rec["ack"] = h.id in ack
                rec["asks"] = sorted(set().union(*(asks.get(i, set()) for i in ids)))
                rec["stale"] = bool(cov & stale)
                hits.append(rec)
            out.append(
                {
                    "set": f"dev-{mode}",
                    "group": q["entity"],
                    "qid": q["id"],
                    "query": q["text"],
                    "targets": [q["statement"]] if q["statement"] else [],
                    "hits": hits,
                    "ingest_s": ingest_s,
                }
            )
    finally:
        db.close()
    return out


def _at(ts: str, minutes: int) -> str:
    """The session's time plus ``minutes`` (ISO-8601 'YYYY-MM-DDTHH:MM:SSZ')."""
    import datetime as dt

    t = dt.datetime.fromisoformat(ts.replace("Z", "+00:00")) + dt.timedelta(minutes=minutes)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- LoCoMo dev ---------------------------------------------------------------------------------


def collect_locomo(root: Path, data: Path = locomo.DEFAULT_DATA) -> list[dict[str, Any]]:
    convs = locomo.load_dataset(data)
    db = open_db(root, "locomo")
    out: list[dict[str, Any]] = []
    try:
        for ing in ingest_all(db, convs):
            for j, q in enumerate(ing.conv.questions):
                hits = []
                for rank, h in enumerate(_query(ing.ns, q.text, ENTITY)):
                    rows = {ing.row_of[i] for i in [h.id, *h.duplicates] if i in ing.row_of}
                    rec = hit_record(h, rank, rows)
                    rec["ack"] = False
                    rec["asks"] = []
                    rec["stale"] = False
                    hits.append(rec)
                out.append(
                    {
                        "set": "locomo",
                        "group": ing.conv.name,
                        "qid": f"{ing.conv.name}:{j}",
                        "query": q.text,
                        "targets": sorted(set(q.evidence)),
                        "category": q.category,
                        "hits": hits,
                    }
                )
    finally:
        db.close()
    return out


# -- BEAM 100K -----------------------------------------------------------------------------------


def collect_beam(
    root: Path, chats: int | None = None, data: Path = beam.DEFAULT_DATA, cache: Path | None = None
) -> list[dict[str, Any]]:
    """BEAM through remember; one file per chat in ``cache`` (a chat's ingest is minutes)."""
    loaded = beam.load_dataset(data)
    if chats is not None:
        loaded = loaded[:chats]
    out: list[dict[str, Any]] = []
    for chat in loaded:
        done = cache / f"beam-{chat.name}.json" if cache else None
        if done is not None and done.exists():
            out += json.loads(done.read_text())
            continue
        db = open_db(root, f"beam-{chat.name}")
        rows: list[dict[str, Any]] = []
        try:
            ns = db.namespace(f"beam-{chat.name}")
            loop = db.memory_loop
            t0 = time.perf_counter()
            cut = 0
            msg_of: dict[str, int] = {}
            by_batch: dict[int, list[beam.Message]] = {}
            for m in chat.messages:
                by_batch.setdefault(m.batch, []).append(m)
            for b, msgs in by_batch.items():
                for at in range(0, len(msgs), loop.settings.max_turns):
                    chunk = msgs[at : at + loop.settings.max_turns]
                    turns = []
                    for m in chunk:
                        raw = m.content.encode()
                        text = m.content
                        if len(raw) > 32_000:
                            text = raw[:32_000].decode(errors="ignore")
                            cut += 1
                        t = {
                            "role": m.role if m.role in ("user", "assistant") else "user",
                            "content": text or "(empty)",
                        }
                        if m.ts is not None:
                            t["ts"] = m.ts
                        turns.append(t)
                    r = ns.remember(turns, entity=ENTITY, session=f"b{b}")
                    for e, m in zip(r.turns, chunk, strict=True):
                        msg_of[turn_memory_id(r.stream, e)] = m.id
            loop.run_pending(ns)
            ingest_s = time.perf_counter() - t0
            for j, q in enumerate(chat.questions):
                hits = []
                for rank, h in enumerate(_query(ns, q.text, ENTITY)):
                    ids = {msg_of[i] for i in [h.id, *h.duplicates] if i in msg_of}
                    rec = hit_record(h, rank, ids)
                    rec["ack"] = False
                    rec["asks"] = []
                    rec["stale"] = False
                    hits.append(rec)
                rows.append(
                    {
                        "set": "beam",
                        "group": chat.name,
                        "qid": f"{chat.name}:{j}",
                        "query": q.text,
                        "targets": sorted(q.evidence),
                        "ability": q.ability,
                        "hits": hits,
                        "cut": cut,
                        "ingest_s": ingest_s,
                    }
                )
            print(
                f"  beam chat {chat.name}: {len(chat.messages)} messages ({cut} cut to 32,000 "
                f"bytes), {len(chat.questions)} questions, ingest+index {ingest_s:.0f} s",
                flush=True,
            )
        finally:
            db.close()
        if done is not None:
            done.write_text(json.dumps(rows))
        out += rows
    return out
