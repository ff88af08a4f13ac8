"""LangGraph on SynapseDB (issue 15): store put/get/search and checkpointer put/get_tuple
latency, SynapseStore/SynapseSaver (embedded) against LangGraph's InMemoryStore/InMemorySaver.

Store: ``--items`` items (default 2,000) over 20 namespaces ``("users", "uNN")``, each value
``{"text": ..., "n": i}`` indexed on ``text`` with a hashing embedder (64-d character
trigrams, the same function for both stores, so the model's cost is left out and what is
measured is the store). Timed: put (a new item), get (a random existing item), search with a
filter under one user's namespace (no query), and search by query under ``("users",)``
(vector ranking over every item).

Checkpointer: one thread, ``--checkpoints`` checkpoints (default 500) with a growing message
list (the last 20 messages, ~2 KB) and a pending write each. Timed: put (one checkpoint) and
get_tuple of the latest checkpoint (what a graph reads at every step).

LangGraph's SqliteSaver (``langgraph-checkpoint-sqlite``) is not installed in this
environment, so it is not compared; it is printed as such.

    .venv/bin/python bench/bench_langgraph.py [--items 2000] [--checkpoints 500] [--durability os]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

import synapsedb
from synapsedb.integrations.langgraph import SynapseSaver, SynapseStore

DIMS = 64


class HashEmbeddings(Embeddings):
    def one(self, text: str) -> list[float]:
        vec = [0.0] * DIMS
        padded = f"  {text.lower()}  "
        for i in range(len(padded) - 2):
            h = int.from_bytes(hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest())
            vec[h % DIMS] += 1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.one(text)


WORDS = [
    "refund",
    "order",
    "shipping",
    "invoice",
    "weather",
    "flight",
    "hotel",
    "password",
    "email",
    "billing",
]


def p50_ms(fn: Callable[[int], Any], n: int) -> tuple[float, float]:
    times = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def bench_store(store: Any, items: int, rng: random.Random) -> dict[str, tuple[float, float]]:
    def value(i: int) -> dict[str, Any]:
        return {"text": f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} note {i}", "n": i}

    for i in range(items):
        store.put(("users", f"u{i % 20:02d}"), f"k{i}", value(i))
    ns = [("users", f"u{u:02d}") for u in range(20)]

    def put(i: int) -> None:
        store.put(ns[i % 20], f"new{i}", value(i))

    def get(i: int) -> None:
        store.get(ns[rng.randrange(20)], f"k{rng.randrange(items)}")

    def filtered(i: int) -> None:
        store.search(ns[i % 20], filter={"n": {"$gte": i}}, limit=10)

    def by_query(i: int) -> None:
        store.search(("users",), query=f"{WORDS[i % 10]} refund", limit=10)

    out = {
        "put": p50_ms(put, 300),
        "get": p50_ms(get, 500),
        "search (filter, 1 namespace)": p50_ms(filtered, 100),
        "search (query, all items)": p50_ms(by_query, 100),
    }
    return out


def bench_saver(saver: Any, checkpoints: int) -> dict[str, tuple[float, float]]:
    config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    messages: list[str] = []
    state = {"config": config}

    def put(i: int) -> None:
        messages.append(f"message {i}: " + "lorem ipsum " * 8)
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": messages[-20:], "step": i}
        cp["channel_versions"] = {"messages": i + 1, "step": i + 1}
        state["config"] = saver.put(
            state["config"], cp, {"source": "loop", "step": i}, cp["channel_versions"]
        )
        saver.put_writes(state["config"], [("messages", f"reply {i}")], f"task-{i}")

    return {
        "put (checkpoint + 1 write)": p50_ms(put, checkpoints),
        "get_tuple (latest)": p50_ms(lambda i: saver.get_tuple(config), 300),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--checkpoints", type=int, default=500)
    ap.add_argument("--durability", choices=["os", "fsync"], default="os")
    args = ap.parse_args()
    index: Any = {"dims": DIMS, "embed": HashEmbeddings(), "fields": ["text"]}
    rows: list[tuple[str, str, float, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = synapsedb.open(
            tmp, embedder=None, llm=None, durability=args.durability, background_maintenance=False
        )
        try:
            ours = bench_store(
                SynapseStore(db, "bench-store", index=index), args.items, random.Random(1)
            )
            ref = bench_store(InMemoryStore(index=index), args.items, random.Random(1))
            rows += [("store", op, *ours[op], *ref[op]) for op in ours]
            ours = bench_saver(SynapseSaver(db, "bench-cp"), args.checkpoints)
            ref = bench_saver(InMemorySaver(), args.checkpoints)
            rows += [("checkpointer", op, *ours[op], *ref[op]) for op in ours]
        finally:
            db.close()
    print(f"items={args.items} checkpoints={args.checkpoints} durability={args.durability}")
    print("| part | operation | SynapseDB p50 ms | p95 ms | in-memory p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|")
    for part, op, a50, a95, b50, b95 in rows:
        print(f"| {part} | {op} | {a50:.3f} | {a95:.3f} | {b50:.3f} | {b95:.3f} |")
    print("SqliteSaver: langgraph-checkpoint-sqlite is not installed here; not compared.")


if __name__ == "__main__":
    main()
