"""One workload on one system, in its own process; prints one JSON line (prefixed RESULT).

    python bench/peers/child.py WORKLOAD SYSTEM --data DIR [--n N] [--budget S] ...

Workloads: vector (ingest N rows, then query latency and recall with and without a filter),
namespaces (many small namespaces), mixed (reads and writes interleaved), kvloop (single-client
KV get/set loop), locomo (retrieval quality). Progress goes to stderr. Every loop is bounded by
a row count and by ``--budget`` seconds; running out of budget ends the run early and says so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from report import recall_at_k, summary_ms  # noqa: E402
from systems import BUCKETS, DIM, SYSTEMS, System, bucket  # noqa: E402

K = 10


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rss_mib(pids: list[int]) -> float:
    import psutil

    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_info().rss
    return total / 2**20


def where_of(j: int, n: int, filtered: bool) -> int | None:
    """The bucket filter of query j over n rows (only buckets that hold rows)."""
    return j % min(BUCKETS, max(1, math.ceil(n / 100))) if filtered else None


def exact_truth(x: np.ndarray, qs: np.ndarray, where: list[int | None]) -> list[list[int]]:
    out = []
    buckets = (np.arange(x.shape[0]) // 100) % BUCKETS
    scores = np.asarray(x) @ qs.T  # (n, nq)
    for j, w in enumerate(where):
        s = scores[:, j].copy()
        if w is not None:
            s[buckets != w] = -np.inf
        top = np.argpartition(-s, K - 1)[:K]
        top = top[np.argsort(-s[top])]
        out.append(top[np.isfinite(s[top])].tolist())
    return out


def truth_cached(data: Path, x: np.ndarray, qs: np.ndarray, filtered: bool) -> list[list[int]]:
    path = data / f"truth-{x.shape[0]}-{qs.shape[0]}-{int(filtered)}.json"
    if path.exists():
        return json.loads(path.read_text())
    where = [where_of(j, x.shape[0], filtered) for j in range(qs.shape[0])]
    t = []
    for i in range(0, qs.shape[0], 50):
        t += exact_truth(x, qs[i : i + 50], where[i : i + 50])
    path.write_text(json.dumps(t))
    return t


def ingest(sys_: System, x: np.ndarray, n: int, batch: int, budget: float, tag: str) -> dict:
    t0 = time.perf_counter()
    last = t0
    done = 0
    while done < n:
        end = min(n, done + batch)
        sys_.ingest(range(done, end), x[done:end])
        done = end
        now = time.perf_counter()
        if now - last > 5:
            el = now - t0
            log(f"  [{tag}] ingest {done:,}/{n:,} ({done / el:,.0f}/s, {el:.0f} s)")
            last = now
        if now - t0 > budget and done < n:
            return {"rows": done, "seconds": now - t0, "complete": False}
    return {"rows": done, "seconds": time.perf_counter() - t0, "complete": True}


def timed_queries(sys_: System, qs: np.ndarray, n: int, filtered: bool, budget: float) -> tuple:
    lat, found = [], []
    t_end = time.perf_counter() + budget
    for j in range(min(5, qs.shape[0])):  # warm-up, not timed
        sys_.query(qs[j], K, where_of(j, n, filtered))
    for j in range(qs.shape[0]):
        w = where_of(j, n, filtered)
        t0 = time.perf_counter()
        got = sys_.query(qs[j], K, w)
        lat.append(time.perf_counter() - t0)
        found.append(got)
        if time.perf_counter() > t_end:
            break
    return lat, found


def w_vector(sys_: System, a: argparse.Namespace, x: np.ndarray, qs: np.ndarray) -> dict:
    tag = f"{a.system} {a.n:,}"
    pids = sys_.pids()
    rss0 = rss_mib(pids)
    batch = 100 if a.system == "mem0" else 1000
    res: dict[str, Any] = {"ingest": ingest(sys_, x, a.n, batch, a.budget, tag)}
    if not res["ingest"]["complete"]:
        log(f"  [{tag}] out of budget after {res['ingest']['rows']:,} rows")
        return res
    t0 = time.perf_counter()
    sys_.ready()
    res["ingest"]["index_wait_s"] = time.perf_counter() - t0
    res["rss_mib"] = rss_mib(sys_.pids())
    res["rss_delta_mib"] = res["rss_mib"] - rss0
    log(
        f"  [{tag}] ingest {res['ingest']['seconds']:.1f} s, index wait "
        f"{res['ingest']['index_wait_s']:.1f} s; querying"
    )
    qbudget = max(20.0, a.budget / 8)  # per phase (unfiltered, filtered)
    for filtered in (False, True):
        lat, found = timed_queries(sys_, qs, a.n, filtered, qbudget)
        truth = truth_cached(Path(a.data), x[: a.n], qs[: len(found)], filtered)
        key = "query_filter" if filtered else "query"
        res[key] = {**summary_ms(lat), "recall": recall_at_k(found, truth, K)}
        log(f"  [{tag}] {key} p50 {res[key]['p50']:.2f} ms, recall {res[key]['recall']:.3f}")
    reopen = sys_.reopen(qs[0])
    if reopen is not None:
        res["reopen"] = reopen
        log(
            f"  [{tag}] close {reopen['close_s']:.1f} s, open {reopen['open_s']:.2f} s, first "
            f"query {reopen['first_query_s']:.2f} s, rows left to index {reopen['pending_rows']:,.0f}"
        )
    return res


def w_namespaces(sys_: System, a: argparse.Namespace, x: np.ndarray, qs: np.ndarray) -> dict:
    per = 100
    tag = f"{a.system} namespaces"
    pids = sys_.pids()
    rss0 = rss_mib(pids)
    t0 = last = time.perf_counter()
    made = 0
    stopped = "budget"
    while made < a.n:
        rows = range(made * per, made * per + per)
        sys_.ingest(rows, x[rows.start : rows.stop], ns=f"ns{made:05d}")
        made += 1
        now = time.perf_counter()
        if now - last > 5:
            log(f"  [{tag}] {made:,}/{a.n:,} namespaces ({made / (now - t0):,.0f}/s)")
            last = now
        if now - t0 > a.budget:
            break
        if made % 25 == 0 and rss_mib(sys_.pids()) - rss0 > a.mem_cap:
            log(f"  [{tag}] stopped at the memory cap ({a.mem_cap:,.0f} MiB) after {made:,}")
            stopped = "memory cap"
            break
    build = time.perf_counter() - t0
    sys_.ready()
    rss = rss_mib(sys_.pids())
    rng = np.random.default_rng(7)
    picks = rng.integers(0, made, qs.shape[0])
    lat, recalls = [], []
    for j in range(min(5, len(picks))):
        sys_.query(qs[j], K, ns=f"ns{picks[j]:05d}")
    t_end = time.perf_counter() + max(20.0, a.budget / 4)
    for j, ns_i in enumerate(picks):
        t1 = time.perf_counter()
        got = sys_.query(qs[j], K, ns=f"ns{ns_i:05d}")
        lat.append(time.perf_counter() - t1)
        block = x[ns_i * per : ns_i * per + per] @ qs[j]
        want = (np.argsort(-block)[:K] + ns_i * per).tolist()
        recalls.append(recall_at_k([got], [want], K))
        if time.perf_counter() > t_end:
            break
    return {
        "namespaces": made,
        "target": a.n,
        "per": per,
        "seconds": build,
        "complete": made >= a.n,
        "stopped": None if made >= a.n else stopped,
        "rss_mib": rss,
        "rss_delta_mib": rss - rss0,
        "query": {**summary_ms(lat), "recall": float(np.mean(recalls))},
    }


def w_mixed(sys_: System, a: argparse.Namespace, x: np.ndarray, qs: np.ndarray) -> dict:
    """A preloaded namespace of a.n rows, then one client: 4 queries then 1 single write,
    repeated for --seconds."""
    tag = f"{a.system} mixed"
    batch = 100 if a.system == "mem0" else 1000
    ing = ingest(sys_, x, a.n, batch, a.budget, tag)
    if not ing["complete"]:
        return {"ingest": ing}
    sys_.ready()
    log(f"  [{tag}] {a.seconds:.0f} s of 80% queries / 20% single writes")
    q_lat, w_lat = [], []
    nxt = a.n
    i = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < a.seconds and nxt < x.shape[0]:
        t1 = time.perf_counter()
        if i % 5 == 4:
            sys_.ingest(range(nxt, nxt + 1), x[nxt : nxt + 1])
            nxt += 1
            w_lat.append(time.perf_counter() - t1)
        else:
            j = i % qs.shape[0]
            sys_.query(qs[j], K, where_of(j, a.n, j % 2 == 1))
            q_lat.append(time.perf_counter() - t1)
        i += 1
    el = time.perf_counter() - t0
    return {
        "ops_per_s": i / el,
        "seconds": el,
        "query": summary_ms(q_lat),
        "write": summary_ms(w_lat),
        "writes": len(w_lat),
    }


def w_kvloop(sys_: System | None, a: argparse.Namespace) -> dict:
    """One client, a.n sets then a.n gets (bounded by --seconds each)."""
    if a.system == "redis":
        import redis

        r = redis.Redis(host="127.0.0.1", port=a.port)

        def kv_set(i: int) -> None:
            r.set(f"user:{i % 1000}:plan", f'{{"tier": {i % 3}}}')

        def kv_get(i: int) -> None:
            r.get(f"user:{i % 1000}:plan")
    else:
        assert sys_ is not None
        kv_set, kv_get = sys_.kv_set, sys_.kv_get  # type: ignore[attr-defined]
    out = {}
    for label, fn in (("set", kv_set), ("get", kv_get)):
        lat = []
        t0 = time.perf_counter()
        for i in range(a.n):
            t1 = time.perf_counter()
            fn(i)
            lat.append(time.perf_counter() - t1)
            if t1 - t0 > a.seconds:
                break
        el = time.perf_counter() - t0
        out[label] = {"ops_per_s": len(lat) / el, **summary_ms(lat)}
        log(f"  [{a.system} kv loop] {label} {len(lat) / el:,.0f}/s")
    return out


def w_locomo(a: argparse.Namespace) -> dict:
    """LoCoMo dev evidence recall of one peer: chroma, mem0, or SynapseDB's default query."""
    import locomo

    locomo.EMB = locomo.Embeddings(None, Path(tempfile.gettempdir()) / "synapsedb-locomo-cache")
    convs = locomo.load_dataset(locomo.DEFAULT_DATA)
    root = Path(tempfile.mkdtemp(prefix="peers-locomo-", dir=a.tmp))
    if a.system == "synapsedb":
        import bench_quality

        r = bench_quality.EngineRetriever(root)
        res = locomo.evaluate(r, convs, a.stride)
        r.close()
    elif a.system == "numpy":
        res = locomo.evaluate(locomo.DenseRetriever(), convs, a.stride)
    elif a.system == "chroma":
        res = locomo.evaluate(ChromaLocomo(root), convs, a.stride)
    elif a.system == "mem0":
        res = locomo.evaluate(Mem0Locomo(root), convs, a.stride)
    else:
        raise SystemExit(f"no locomo retriever for {a.system}")
    conv_tok = np.array([res.conv_tokens[c] for c in res.conv], float)
    cats = np.asarray(res.category)
    return {
        "questions": len(res.conv),
        "ms_per_query": 1e3 * res.seconds / max(len(res.conv), 1),
        **{m: res.mean(m) for m in ("r@5", "r@10", "r@20", "hit@10", "mrr")},
        "share": float(np.mean(np.asarray(res.values["tok@10"]) / conv_tok)),
        "by_category": {int(c): res.mean("r@10", cats == c) for c in sorted(set(res.category))},
    }


class ChromaLocomo:
    """A Chroma collection per conversation holding the MiniLM vectors of its turns; the
    question's MiniLM vector (prepared beforehand, like the baselines') queries it."""

    def __init__(self, root: Path) -> None:
        from systems import Chroma

        self.c = Chroma()
        self.c.open(root)
        self.done: set[str] = set()

    def prepare(self, conv: Any, questions: list[str]) -> None:
        import locomo

        locomo.query_vectors(conv, questions)
        if conv.name in self.done:
            return
        d = locomo.doc_vectors(conv)
        col = self.c.col(f"locomo-{conv.name}")
        col.add(
            ids=[t.dia_id for t in conv.turns],
            embeddings=d,
            documents=[t.content for t in conv.turns],
        )
        self.done.add(conv.name)

    def __call__(self, conv: Any, question: str, k: int) -> list[str]:
        import locomo

        q = locomo.query_vector(conv, question)
        col = self.c.col(f"locomo-{conv.name}")
        res = col.query(
            query_embeddings=q[None, :], n_results=min(k, len(conv.turns)), include=["distances"]
        )
        return list(res["ids"][0])


class Mem0Locomo:
    """mem0 with one user_id per conversation; every turn added raw (infer=False), its MiniLM
    vector supplied by the lookup embedder; search(question, top_k=k) with mem0's defaults."""

    def __init__(self, root: Path) -> None:
        from systems import LookupEmbedder, mem0_memory

        self.emb = LookupEmbedder()
        self.m = mem0_memory(root, self.emb)
        self.ids: dict[str, dict[str, str]] = {}

    def prepare(self, conv: Any, questions: list[str]) -> None:
        import locomo

        locomo.query_vectors(conv, questions)
        for qt in questions:
            self.emb.put(qt, locomo.query_vector(conv, qt))
        if conv.name in self.ids:
            return
        d = locomo.doc_vectors(conv)
        mapping: dict[str, str] = {}
        for t, v in zip(conv.turns, d, strict=True):
            self.emb.put(t.content, v)
            out = self.m.add(
                [{"role": "user", "content": t.content}], user_id=f"c{conv.name}", infer=False
            )
            for r in out["results"]:
                mapping[r["id"]] = t.dia_id
        self.ids[conv.name] = mapping

    def __call__(self, conv: Any, question: str, k: int) -> list[str]:
        res = self.m.search(question, top_k=k, filters={"user_id": f"c{conv.name}"})
        ids = self.ids[conv.name]
        return [ids[r["id"]] for r in res["results"] if r["id"] in ids]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["vector", "namespaces", "mixed", "kvloop", "locomo"])
    ap.add_argument("system")
    ap.add_argument("--data", default="")
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--nq", type=int, default=200)
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--mem-cap", type=float, default=6144, help="MiB, namespaces workload")
    a = ap.parse_args()
    t_start = time.perf_counter()
    if a.workload == "locomo":
        out = w_locomo(a)
    elif a.workload == "kvloop" and a.system == "redis":
        out = w_kvloop(None, a)
    else:
        x = qs = np.zeros((0, DIM), np.float32)
        if a.workload != "kvloop":
            x = np.load(Path(a.data) / "vectors.npy", mmap_mode="r")
            qs = np.load(Path(a.data) / "queries.npy")[: a.nq]
        root = Path(tempfile.mkdtemp(prefix=f"peers-{a.system}-", dir=a.tmp))
        sys_ = SYSTEMS[a.system]()
        sys_.open(root)
        try:
            if a.workload == "vector":
                out = w_vector(sys_, a, x, qs)
            elif a.workload == "namespaces":
                out = w_namespaces(sys_, a, x, qs)
            elif a.workload == "mixed":
                out = w_mixed(sys_, a, x, qs)
            else:
                out = w_kvloop(sys_, a)
        finally:
            sys_.close()
    out["wall_s"] = time.perf_counter() - t_start
    print("RESULT " + json.dumps(out, default=lambda v: None if v != v else v), flush=True)


if __name__ == "__main__":
    assert DIM == 384 and bucket(250) == 2 and not math.isnan(0.0)
    main()
