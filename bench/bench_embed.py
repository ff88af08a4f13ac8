"""Embedding throughput on BEAM-like texts: ``OnnxMiniLM.embed()`` against onnxruntime's own
ceiling for the same model, batches and lengths (issue 13).

Workloads, from BEAM 100K chats (../shared/data/beam-100k, read in place): ``short turns`` (the
user messages: median 219 characters), ``long replies`` (the assistant messages: median 3,800
characters, so nearly all fill the model's 256 word-pieces), and ``chat`` (every message in chat
order, as an ingest sees them). Each text is "role: content", as bench_beam writes it.

Measured per workload, in messages/s:

- ``tokenize whole``: the tokenizer on the whole texts, truncated after (what embed() did before
  it tokenized prefixes);
- ``tokenize``: ``OnnxMiniLM.tokenize`` (prefixes, checked to give the same ids);
- ``raw ceiling``: onnxruntime ``session.run`` alone, on the same pre-tokenized, pre-padded
  mini-batches (:func:`plan_batches`) with the embedder's session options, in the same threading
  layout (one session and 2 intra-op threads, or one session per worker);
- ``embed() whole-text``: the embedder with tokenization of whole texts (``prefix_chars`` past
  the longest text: the code path before);
- ``embed()``: the embedder as shipped.

The machine is shared: each variant runs ``--rounds`` times, interleaved with the others, and
the best round counts (the one least disturbed by other processes); ratios are within one run.

Usage: python bench/bench_embed.py [--data DIR] [--messages N] [--rounds R] [--sweep]
(``--sweep`` also times the raw ceiling for other thread and batch layouts)
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beam
from common import git_rev, machine

from synapsedb.embed import OnnxMiniLM
from synapsedb.embed.onnx_minilm import plan_batches

Batch = tuple[np.ndarray, np.ndarray]


def workloads(data: Path, n: int) -> dict[str, list[str]]:
    """``n`` texts each, spread evenly over the 20 chats (the chat workload: consecutive)."""
    chats = beam.load_dataset(data)
    msgs = [m for c in chats for m in c.messages]

    def spread(role: str) -> list[str]:
        pool = [f"{m.role}: {m.content}" for m in msgs if m.role == role]
        return [pool[int(i)] for i in np.linspace(0, len(pool) - 1, min(n, len(pool)))]

    return {
        "short turns": spread("user"),
        "long replies": spread("assistant"),
        "chat": [f"{m.role}: {m.content}" for m in msgs[:n]],
    }


def session(emb: OnnxMiniLM, threads: int) -> ort.InferenceSession:
    """A session on ``emb``'s model with its options (threads aside)."""
    opts = emb.session_options(threads)
    return ort.InferenceSession(
        str(emb.model_path), sess_options=opts, providers=["CPUExecutionProvider"]
    )


def batches(tokens: list[list[int]], batch_size: int, max_tokens: int) -> list[Batch]:
    lengths = np.array([len(t) for t in tokens])
    order = np.argsort(lengths, kind="stable")
    out = []
    for idx in plan_batches(lengths[order], batch_size, max_tokens):
        rows = order[idx]
        width = int(lengths[rows].max())
        ids = np.zeros((len(rows), width), np.int64)
        mask = np.zeros((len(rows), width), np.int64)
        for r, i in enumerate(rows):
            ids[r, : lengths[i]] = tokens[i]
            mask[r, : lengths[i]] = 1
        out.append((ids, mask))
    return out


def run_all(sessions: list[ort.InferenceSession], work: list[Batch]) -> None:
    """Every batch through ``sessions``: one session runs them in order; several share them out,
    one thread each, longest first (as a pool would)."""
    if len(sessions) == 1:
        for ids, mask in work:
            sessions[0].run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})
        return
    queue = sorted(work, key=lambda b: -b[0].size)
    lock = threading.Lock()

    def worker(s: ort.InferenceSession) -> None:
        while True:
            with lock:
                if not queue:
                    return
                ids, mask = queue.pop(0)
            s.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})

    threads = [threading.Thread(target=worker, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def best_of(variants: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Seconds of the best round of each variant, rounds interleaved."""
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(rounds):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=beam.DEFAULT_DATA)
    ap.add_argument("--messages", type=int, default=128, help="texts per workload")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--precision", choices=("float32", "uint8"), default="float32")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    emb = OnnxMiniLM(precision=args.precision)
    whole = OnnxMiniLM(emb.model_dir, precision=args.precision, prefix_chars=1 << 30)
    ref_tok = Tokenizer.from_file(str(emb.tokenizer_path))
    ref_tok.no_padding()
    ref_tok.enable_truncation(emb.max_seq_length)
    layout = [session(emb, emb.intra_op_num_threads)]
    rows = []
    for name, texts in workloads(args.data, args.messages).items():
        tokens = emb.tokenize(texts)
        assert tokens == [e.ids for e in ref_tok.encode_batch(texts)], "prefix ids differ"
        np.testing.assert_array_equal(emb.embed(texts), whole.embed(texts))  # also warms up
        work = batches(tokens, emb.batch_size, emb.max_batch_tokens)
        t = best_of(
            {
                "tokenize whole": lambda texts=texts: ref_tok.encode_batch(texts),
                "tokenize": lambda texts=texts: emb.tokenize(texts),
                "raw ceiling": lambda work=work: run_all(layout, work),
                "embed() whole-text": lambda texts=texts: whole.embed(texts),
                "embed()": lambda texts=texts: emb.embed(texts),
            },
            args.rounds,
        )
        n = len(texts)
        mean_tokens = np.mean([len(x) for x in tokens])
        rows.append(
            f"| {name} | {n} | {mean_tokens:.0f} | {n / t['tokenize whole']:,.0f} | "
            f"{n / t['tokenize']:,.0f} | {n / t['raw ceiling']:.1f} | "
            f"{n / t['embed() whole-text']:.1f} ({t['raw ceiling'] / t['embed() whole-text']:.2f})"
            f" | {n / t['embed()']:.1f} ({t['raw ceiling'] / t['embed()']:.2f}) |"
        )
        print(rows[-1], flush=True)
        if args.sweep:
            sweep(emb, tokens, name, args.rounds)
    print(
        f"\nMachine: {machine()}. Commit {git_rev()}. Precision {emb.precision} ({emb.name}). "
        f"Load average {load0:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end. Best of {args.rounds} interleaved rounds."
    )
    print("Command: `python bench/bench_embed.py " + " ".join(sys.argv[1:]) + "`\n")
    print(
        "| workload | messages | mean word-pieces | tokenize whole (msg/s) | tokenize (msg/s) "
        "| raw ceiling (msg/s) | embed() whole-text (msg/s, ratio to ceiling) "
        "| embed() (msg/s, ratio) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


def sweep(emb: OnnxMiniLM, tokens: list[list[int]], name: str, rounds: int) -> None:
    """The raw ceiling under other layouts: sessions x intra-op threads, batch token budgets."""
    layouts = {
        "1 session x 2 threads": [session(emb, 2)],
        "2 sessions x 1 thread": [session(emb, 1), session(emb, 1)],
    }
    variants: dict[str, Callable[[], object]] = {}
    for lname, sessions in layouts.items():
        for max_tokens in (1024, 2048, 4096):
            work = batches(tokens, 32, max_tokens)
            run_all(sessions, work[:1])  # warm up
            variants[f"{lname}, max_batch_tokens {max_tokens}"] = lambda s=sessions, w=work: (
                run_all(s, w)
            )
    for vname, secs in best_of(variants, rounds).items():
        print(f"  sweep {name}: {vname}: {len(tokens) / secs:.1f} msg/s", flush=True)


if __name__ == "__main__":
    main()
