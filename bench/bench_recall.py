"""The engine's default query with and without the learned re-ranking (query/rerank.py), on
LoCoMo dev and BEAM 100K, against its own vector-only and keyword-only modes.

Protocol: bench_quality.py's and bench_beam.py's (one namespace per conversation, one memory per
turn or message, entity "conversation", the session's time as ts; each scorable question asks
``query(text, k=10)``). Vectors come from the recall study's cache (bench/recall_data.py; a miss
runs the model), so a run takes minutes, not the hour BEAM's ingest costs with the model.

``--folds DIR``: leave-one-conversation-out in the engine itself. Each conversation is queried
with the model table trained without it (``bench/recall_train.py --export-folds DIR``) in place
of the shipped one. Without it the shipped model (trained on every conversation) is used: an
in-sample figure, to check that the engine computes what the study did.

Usage: nice -n 10 python bench/bench_recall.py [--folds /tmp/recall-cache/folds] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall_eval as ev
from bench_quality import session_ts
from common import git_rev, machine
from recall_data import Conv, Vectors, load_beam, load_locomo

import synapsedb
from synapsedb.query import rerank
from synapsedb.query.executor import Fusion
from synapsedb.query.rank import named_labels, strip_words

K = 10


class CachedEmbedder:
    """MiniLM behind the study's vector cache: memories and query texts embedded before."""

    def __init__(self, vec: Vectors) -> None:
        self.vec = vec
        self.known: dict[str, np.ndarray] = {}
        self.name = "minilm-l6-v2-onnx-f32"  # OnnxMiniLM's float32 vectors
        self.dim = 384
        self.compatible_names = frozenset({self.name, "minilm-l6-v2-onnx-uint8"})
        self.misses = 0

    def add(self, texts: Sequence[str], vecs: np.ndarray) -> None:
        self.known.update(zip(texts, vecs, strict=True))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = [t for t in texts if t not in self.known]
        if todo:
            self.misses += len(todo)
            self.add(todo, self.vec.model.embed(todo))
        return np.stack([self.known[t] for t in texts]).astype(np.float32)


def items(c: Conv) -> list[dict[str, Any]]:
    out = []
    for text, date in zip(c.texts, c.dates, strict=True):
        item: dict[str, Any] = {"entity": "conversation", "content": text, "type": "interaction"}
        ts = session_ts(date) if c.dataset == "LoCoMo" and date else date
        if ts:
            item["ts"] = ts
        out.append(item)
    return out


def load_fold(path: Path) -> rerank.Forest:
    table: dict[str, Any] = {}
    exec(compile(path.read_text(), str(path), "exec"), table)
    assert tuple(table["FEATURES"]) == rerank.FEATURES
    return rerank.Forest.from_table(table["TREES"], table["DEPTH"], table["ROWS"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folds", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="2 LoCoMo conversations, 4 BEAM chats")
    args = ap.parse_args()
    vec = Vectors()
    convs = load_locomo() + load_beam()
    fold_of = {c.key: i for i, c in enumerate(convs)}  # the study's conversation order
    if args.quick:
        convs = convs[:2] + [c for c in convs if c.dataset == "BEAM"][:4]
    emb = CachedEmbedder(vec)
    root = Path(tempfile.mkdtemp(prefix="synapsedb-recall-"))
    db = synapsedb.open(root / "d", durability="os", embedder=emb, llm=None)
    shipped = rerank.forest
    variants = ("on", "off", "vector", "keyword")
    res: dict[str, list[dict[str, np.ndarray]]] = {v: [] for v in variants}
    lat: dict[str, list[float]] = defaultdict(list)
    preps: list[Any] = []
    t0 = time.perf_counter()
    try:
        for c in convs:
            emb.add(c.texts, vec.memories(c))
            ns = db.namespace(c.key)
            written = []
            for i in range(0, len(c.texts), 256):
                written += ns.write_many(items(c)[i : i + 256])
            row = {w.id: r for r, w in enumerate(written)}
            dense = _dense(c)
            emb.add(dense, vec.get(f"{c.key}-q-dense", dense))
            emb.add(
                [q.text for q in c.questions],
                vec.get(f"{c.key}-q-raw", [q.text for q in c.questions]),
            )
            model = load_fold(args.folds / f"fold-{fold_of[c.key]}.py") if args.folds else None
            rerank.forest = (lambda m=model: m) if model is not None else shipped  # type: ignore[misc]
            per: dict[str, dict[str, list[float]]] = {v: defaultdict(list) for v in variants}
            for q in c.questions:
                for v in variants:
                    db.fusion = Fusion(rerank=v != "off")
                    t1 = time.perf_counter()
                    if v in ("on", "off"):
                        hits = list(ns.query(q.text, k=K))
                    else:
                        hits = list(ns.query(q.text, k=K, mode=v))  # type: ignore[arg-type]
                    lat[v].append(time.perf_counter() - t1)
                    got = []
                    for h in hits:
                        got.append(row[h.id])
                        got.extend(row[d] for d in h.duplicates)
                    if v in ("vector", "keyword"):
                        got = got[:K]
                    for k, x in _metrics(c, q.evidence, got).items():
                        per[v][k].append(x)
            for v in variants:
                res[v].append({k: np.array(x) for k, x in per[v].items()})
            preps.append(_Prep(c))
            print(
                f"{c.key}: on {res['on'][-1]['r10'].mean():.3f} off "
                f"{res['off'][-1]['r10'].mean():.3f}",
                flush=True,
            )
    finally:
        rerank.forest = shipped  # type: ignore[misc]
        db.close()
        shutil.rmtree(root, ignore_errors=True)
    head = [
        "| dataset | category | questions | a | b | b - a (95% CI, by conversation) |",
        "|---|---|---:|---:|---:|---|",
    ]
    which = f"fold models from {args.folds} (LOCO)" if args.folds else "the shipped model"
    print(
        f"\nMachine: {machine()}. Commit {git_rev()}. `nice -n 10 python bench/bench_recall.py"
        f"{' --folds ' + str(args.folds) if args.folds else ''}`: {which}; "
        f"{time.perf_counter() - t0:.0f} s, {emb.misses} texts embedded.\n"
    )
    for metric in ("r10", "all10"):
        print(f"**{metric}: a = re-ranking off, b = on (the default)**\n")
        print("\n".join([*head, *ev.compare(preps, res["off"], res["on"], metric, True)]))
        print()
    for mode in ("vector", "keyword"):
        print(f"**r10: a = {mode}-only mode, b = the default**\n")
        print("\n".join([*head, *ev.compare(preps, res[mode], res["on"], "r10", True)]))
        print()
    print("| query (vectors cached) | p50 ms | p99 ms |\n|---|---:|---:|")
    for v, xs in lat.items():
        ms = np.array(xs) * 1e3
        print(f"| {v} | {np.percentile(ms, 50):.2f} | {np.percentile(ms, 99):.2f} |")


class _Prep:
    """What recall_eval.compare reads of a conversation."""

    def __init__(self, c: Conv) -> None:
        self.conv = c
        self.scored = [_Q(i) for i in range(len(c.questions))]


class _Q:
    def __init__(self, q: int) -> None:
        self.q = q


def _dense(c: Conv) -> list[str]:
    """The question texts the engine embeds (recall_lab's, the speakers' names stripped)."""
    import recall_lab as lab

    ix_words: dict[str, set[int]] = {}
    for text in c.texts:
        m = lab._LABEL.match(text)
        if m:
            for w in lab._WORD.findall(m.group(1).strip().lower()):
                if len(w) > 1 and w not in lab.STOPWORDS:
                    ix_words.setdefault(w, set()).add(0)
    return [strip_words(q.text, named_labels(q.text, ix_words)[0]) for q in c.questions]


def _metrics(c: Conv, ev_rows: frozenset[int], got: list[int]) -> dict[str, float]:
    s = set(got)
    return {"r10": len(ev_rows & s) / len(ev_rows), "all10": float(ev_rows <= s)}


if __name__ == "__main__":
    main()
