"""Retrieval quality of SynapseDB's default query on LoCoMo dev, with baselines, in one run.

Protocol (the retrieval issue): one namespace per conversation, one memory per dialog turn
(content "Speaker: text", plus " [image: caption]" if any; all turns of a conversation about the
entity "conversation"), the session's date as ts; each question of categories 1-4 queries the
top k with the default `query(text)` (hybrid mode, the shipped defaults, no LLM). The data is
read in place from ../shared/data/locomo-dev (never copied into the repo).

Usage: python bench/bench_quality.py [--data DIR] [--quick] [--no-report]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo
from common import append_report

import synapsedb

ENTITY = "conversation"


def session_ts(date: str) -> str | None:
    """'1:56 pm on 8 May, 2023' -> ISO-8601 (UTC); None if the format is unknown."""
    try:
        return dt.datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y").isoformat() + "Z"
    except ValueError:
        return None


def turn_items(conv: locomo.Conversation) -> list[dict[str, str]]:
    """The protocol's memories of a conversation: one per turn, in order, with its session's
    time when the date parses."""
    items = []
    for t in conv.turns:
        item = {"entity": ENTITY, "content": t.content, "type": "interaction"}
        ts = session_ts(t.date)
        if ts is not None:
            item["ts"] = ts
        items.append(item)
    return items


class EngineRetriever:
    """The default SynapseDB query over one embedded database, one namespace per conversation."""

    def __init__(self, root: Path) -> None:
        self.db = synapsedb.open(root / "locomo", durability="os")
        self.ids: dict[str, dict[str, str]] = {}  # conversation -> memory id -> dia_id
        self.ingest_s = 0.0

    def prepare(self, conv: locomo.Conversation, questions: list[str]) -> None:
        if conv.name in self.ids:
            return
        mem = self.db.namespace(f"locomo-{conv.name}")
        t0 = time.perf_counter()
        written = mem.write_many(turn_items(conv))
        self.ingest_s += time.perf_counter() - t0
        self.ids[conv.name] = {m.id: t.dia_id for m, t in zip(written, conv.turns, strict=True)}

    def __call__(self, conv: locomo.Conversation, question: str, k: int) -> list[str]:
        res = self.db.namespace(f"locomo-{conv.name}").query(question, k=k)
        ids = self.ids[conv.name]
        out = []
        for h in res:  # a collapsed duplicate sits at its representative's rank
            out.append(ids[h.id])
            out.extend(ids[d] for d in h.duplicates)
        return out

    def close(self) -> None:
        self.db.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    ap.add_argument("--quick", action="store_true", help="every 4th question")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    locomo.EMB = locomo.Embeddings(None, Path(tempfile.gettempdir()) / "synapsedb-locomo-cache")
    convs = locomo.load_dataset(args.data)
    stride = 4 if args.quick else 1
    root = Path(tempfile.mkdtemp(prefix="synapsedb-quality-"))
    engine = EngineRetriever(root)
    try:
        results = {
            "BM25 (plain)": locomo.evaluate(locomo.BM25Retriever(), convs, stride),
            "dense MiniLM (plain)": locomo.evaluate(locomo.DenseRetriever(), convs, stride),
            "naive RRF k=60": locomo.evaluate(locomo.RRFRetriever(), convs, stride),
            "**SynapseDB query (default)**": locomo.evaluate(engine, convs, stride),
        }
    finally:
        engine.close()
        shutil.rmtree(root, ignore_errors=True)
    n = len(results["BM25 (plain)"].conv)
    skipped = sum(c.skipped for c in convs)
    r10 = results["**SynapseDB query (default)**"].mean("r@10")
    lines = [
        f"{len(convs)} conversations, {sum(len(c.turns) for c in convs):,} memories, {n} questions "
        f"(categories 1-4; {skipped} skipped: no evidence id maps to a turn). Engine ingest "
        f"(embedding included) {engine.ingest_s:.1f} s. Tokens are whitespace tokens; ms/query "
        "excludes the baselines' query embedding (prepared in advance) but includes the engine's.",
        "",
        *locomo.report(results, "Evidence recall (LoCoMo dev)")[2:],
        f"Target: default query recall@10 >= 0.70: **{r10:.3f}, "
        f"{'met' if r10 >= 0.70 else 'missed'}**.",
    ]
    if args.no_report:
        print("\n".join(lines))
    else:
        append_report(
            "Retrieval quality" + (" (quick)" if args.quick else ""),
            "python bench/bench_quality.py"
            + (" --quick" if args.quick else "")
            + " (part of make bench)",
            lines,
        )


if __name__ == "__main__":
    main()
