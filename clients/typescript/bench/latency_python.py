"""The Python sync client's side of bench/latency.mjs: the same operations against the same
server, printed as JSON ({operation: [milliseconds, ...]})."""

from __future__ import annotations

import json
import sys
import time

import synapsedb


def main(url: str, n: int) -> None:
    mem = synapsedb.connect(url).namespace("bench-python", agent="bench")
    for i in range(20):  # warm-up: connection, embedding model, caches
        mem.write(f"user:{i % 10}", f"warm-up memory {i} about order #{1000 + i}")
        mem.query(f"order {i}", k=10)
    mem.set("user:1", "order", {"id": 1458})
    out: dict[str, list[float]] = {"write": [], "query": [], "get fact": []}
    for i in range(n):
        t = time.perf_counter()
        mem.write(f"user:{i % 50}", f"Customer {i} asked about the refund of order #{2000 + i}")
        out["write"].append((time.perf_counter() - t) * 1000)
    for i in range(n):
        t = time.perf_counter()
        mem.query(f"refund status of order #{2000 + i}", k=10)
        out["query"].append((time.perf_counter() - t) * 1000)
    for _ in range(n):
        t = time.perf_counter()
        mem.get("user:1", "order")
        out["get fact"].append((time.perf_counter() - t) * 1000)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
