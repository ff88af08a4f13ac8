"""Token counts of synapsedb.conversation.tokens (bpe-openai) against OpenAI's tiktoken.

The reference is tiktoken 0.14 itself (OpenAI's regex, BPE and special-token handling) reading
the official ``cl100k_base``/``o200k_base`` tables: tiktoken cannot download them here, so its
cache is seeded with the copies bpe-openai ships after checking that their SHA-256 equals the
hash tiktoken pins (tests/support/tiktoken_reference.py). The two implementations then share
only that verified table.

Corpus (>= 10,000 strings, read in place, never copied): every LoCoMo dev turn (text, "Speaker:
text", image captions), its questions and answers and whole sessions; every BEAM 100K message,
probing question and ideal answer and whole batches; this repository's Python source in
40-line blocks; and generated edge cases (whitespace runs, CR/LF, emoji ZWJ sequences and
flags, combining marks, CJK/Arabic/Devanagari, digits, contractions, special-token text, lone
surrogates) from a fixed seed. Reports mismatches per encoding, both speeds (one thread, one
string at a time, as a context manager counts) and how far the chars/4 estimate is off.

    python bench/bench_tokens.py [--no-report]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import append_report  # noqa: E402
from tests.support.tiktoken_reference import reference_encoding  # noqa: E402

from synapsedb.conversation.tokens import encoding_for  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
ENCODINGS = ("cl100k_base", "o200k_base")


def locomo(data: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(data.glob("*.json")):
        raw = json.loads(path.read_text())
        for key in sorted(k for k in raw if re.fullmatch(r"session_\d+", k)):
            turns = raw[key]
            for t in turns:
                yield "locomo turn", t["text"]
                yield "locomo turn", f"{t['speaker']}: {t['text']}"
                if t.get("blip_caption"):
                    yield "locomo turn", t["blip_caption"]
            yield "locomo session", "\n".join(f"{t['speaker']}: {t['text']}" for t in turns)
        for q in raw["qa"]:
            yield "locomo qa", str(q["question"])
            for field in ("answer", "adversarial_answer"):
                if q.get(field) is not None:
                    yield "locomo qa", str(q[field])


def beam(data: Path) -> Iterator[tuple[str, str]]:
    for chat in sorted(p for p in data.iterdir() if (p / "chat.json").is_file()):
        for batch in json.loads((chat / "chat.json").read_text()):
            texts = []
            for turn in batch["turns"]:
                for m in turn:
                    yield "beam message", m["content"]
                    texts.append(f"{m['role']}: {m['content']}")
            yield "beam batch", "\n\n".join(texts)
        probes = chat / "probing_questions" / "probing_questions.json"
        if probes.is_file():
            for questions in json.loads(probes.read_text()).values():
                for q in questions:
                    for field in ("question", "ideal_response", "answer"):
                        if isinstance(q.get(field), str):
                            yield "beam probe", q[field]


def source_code() -> Iterator[tuple[str, str]]:
    for path in sorted((ROOT / "src" / "synapsedb").rglob("*.py")):
        lines = path.read_text().splitlines(keepends=True)
        for i in range(0, len(lines), 40):
            yield "python source", "".join(lines[i : i + 40])


_POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c"],
    ["👋", "👋🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "❤️‍🔥", "🏳️‍🌈", "😀", "🤖", "\u200d", "\ufe0f"],
    "日本語漢字かなカナ한국어中文字符",
    "مرحبابالعالم",
    "हिन्दीमेंलिखा",
    "ελληνικάκείμενα",
    ["e\u0301", "a\u0308", "\u0301", "\u0302\u0303", "ﬁ", "Å", "ß", "İ", "ǅ"],
    ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "n't"],
    ["<|endoftext|>", "<|fim_prefix|>", "<|im_start|>", "<|endofprompt|>", "<|", "|>"],
    ["\ud800", "\udfff", "\x00", "\x7f", "\ufffd", "\U0010ffff"],
]


def edge_cases(n: int, seed: int = 12) -> Iterator[tuple[str, str]]:
    rng = random.Random(seed)
    for _ in range(n):
        pools = rng.sample(_POOLS, rng.randint(1, 4))
        size = rng.choice([1, 2, 3, 5, 8, 20, 60, 200, 600])
        yield "edge case", "".join(rng.choice(rng.choice(pools)) for _ in range(size))
    for unit in ("a", " ", "\n", "ab", "1", "😀", "日", " a", "\r\n", "! "):
        for times in (100, 1000, 5000):
            yield "edge case", unit * times


def corpus() -> list[tuple[str, str]]:
    items = [
        *locomo(DATA / "locomo-dev"),
        *beam(DATA / "beam-100k"),
        *source_code(),
        *edge_cases(2000),
    ]
    return items


def timed(fn: Callable[[str], int], texts: list[str]) -> tuple[list[int], float]:
    start = time.perf_counter()
    counts = [fn(t) for t in texts]
    return counts, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-report", action="store_true", help="print, do not append the report")
    args = ap.parse_args()

    items = corpus()
    texts = [t for _, t in items]
    kinds: dict[str, int] = {}
    for kind, _ in items:
        kinds[kind] = kinds.get(kind, 0) + 1
    chars = sum(len(t) for t in texts)
    mb = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6
    lines = [
        f"Corpus: {len(texts):,} strings, {chars:,} characters ({mb:.1f} MB UTF-8): "
        + ", ".join(f"{k} {v:,}" for k, v in kinds.items())
        + ".",
        "Reference: tiktoken 0.14.0 with OpenAI's tables (SHA-256 checked against the hashes "
        "tiktoken pins; the copies bpe-openai ships). One thread, one string per call.",
        "",
        "| encoding | mismatches | tokens | bpe-openai | tiktoken | chars/4 estimate: total "
        "off | per string, median off | per string, 95th pct off |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    estimate = encoding_for(None)
    failures = 0
    for name in ENCODINGS:
        ours = encoding_for(name)
        assert ours.exact, "bpe-openai is not installed (pip install -e '.[dev]')"
        ref = reference_encoding(name)
        for t in texts[:50]:  # warm both up
            ours.count(t)
            ref.encode_ordinary(t)
        got, t_ours = timed(ours.count, texts)
        want, t_ref = timed(lambda t, ref=ref: len(ref.encode_ordinary(t)), texts)
        bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
        failures += len(bad)
        for i, g, w in bad[:10]:
            print(f"MISMATCH {name} [{items[i][0]}] {texts[i][:80]!r}: ours {g}, tiktoken {w}")
        est = [estimate.count(t) for t in texts]
        total_off = (sum(est) - sum(want)) / sum(want) * 100
        rel = sorted(abs(e - w) / w for e, w in zip(est, want, strict=True) if w > 0)
        lines.append(
            f"| {name} | {len(bad)} of {len(texts):,} | {sum(want):,} "
            f"| {mb / t_ours:.1f} MB/s ({t_ours:.2f} s) | {mb / t_ref:.1f} MB/s ({t_ref:.2f} s) "
            f"| {total_off:+.1f}% | {rel[len(rel) // 2] * 100:.0f}% "
            f"| {rel[int(len(rel) * 0.95)] * 100:.0f}% |"
        )
    lines += [
        "",
        "Exact counts are what budgets use when the model is an OpenAI one; for other models "
        "the chars/4 estimate is labelled as such (`TokenCounter.exact` False), and the last "
        "columns show why it cannot stand in for a count.",
    ]
    if args.no_report:
        print("\n".join(lines))
    else:
        append_report("Token counts", "python bench/bench_tokens.py", lines)
    if failures:
        raise SystemExit(f"{failures} mismatches")


if __name__ == "__main__":
    main()
