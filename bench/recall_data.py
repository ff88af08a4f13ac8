"""The dev conversations of the recall study (LoCoMo dev, BEAM 100K) in one shape, with every
vector cached on disk, so ranking experiments iterate in seconds without the model.

A :class:`Conv` is one namespace: its memories' contents as the benchmarks write them (LoCoMo
``"Speaker: text [image: caption]"``, BEAM ``"role: content"``), each memory's session (LoCoMo's
session, BEAM's batch) and speaker, and its scorable questions with their evidence rows. The data
is read in place (../shared/data; never copied into the repo).

Vectors are float32 MiniLM (the engine's default embedder, :class:`synapsedb.embed.OnnxMiniLM`)
of a list of texts, cached as ``<cache>/<label>-<sha1 of model name and texts>.npy``.

Usage: nice -n 10 python bench/recall_data.py [--variants plain,prev] [--datasets locomo,beam]
(fills the cache and prints what it cost).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beam
import locomo

CACHE = Path("/tmp/recall-cache")


@dataclass(frozen=True, slots=True)
class Q:
    text: str
    evidence: frozenset[int]  # rows
    category: str  # LoCoMo category or BEAM ability


@dataclass
class Conv:
    dataset: str  # "LoCoMo" or "BEAM"
    name: str
    texts: list[str]  # memory contents, in write (timeline) order
    session: np.ndarray  # session number per row
    speaker: list[str]  # the "Name" of "Name: text"
    dates: list[str | None]  # the session's date (ISO or LoCoMo's own form), per row
    questions: list[Q]

    @property
    def key(self) -> str:
        return f"{self.dataset.lower()}-{self.name}"


def load_locomo(data: Path = locomo.DEFAULT_DATA) -> list[Conv]:
    out = []
    for c in locomo.load_dataset(data):
        qs = [Q(q.text, frozenset(q.evidence), locomo.CATEGORIES[q.category]) for q in c.questions]
        out.append(
            Conv(
                "LoCoMo",
                c.name,
                [t.content for t in c.turns],
                np.array([t.session for t in c.turns]),
                [t.speaker for t in c.turns],
                [t.date for t in c.turns],
                qs,
            )
        )
    return out


def load_beam(data: Path = beam.DEFAULT_DATA, names: Sequence[str] | None = None) -> list[Conv]:
    out = []
    for chat in beam.load_dataset(data, names):
        row = {m.id: i for i, m in enumerate(chat.messages)}
        qs = [Q(q.text, frozenset(row[e] for e in q.evidence), q.ability) for q in chat.questions]
        out.append(
            Conv(
                "BEAM",
                chat.name,
                [f"{m.role}: {m.content}" for m in chat.messages],
                np.array([m.batch for m in chat.messages]),
                [m.role for m in chat.messages],
                [m.ts for m in chat.messages],
                qs,
            )
        )
    return out


def load_all(beam_names: Sequence[str] | None = None) -> list[Conv]:
    return load_locomo() + load_beam(names=beam_names)


# -- texts embedded with their context ---------------------------------------------------------


def body(text: str) -> str:
    """A memory's text without its "Name: " prefix."""
    head, sep, rest = text.partition(": ")
    return rest if sep and len(head) <= 40 else text


def with_prev(conv: Conv, chars: int = 300) -> list[str]:
    """Each memory's text after the opening of the memory before it in the same session (the
    question a reply answers), cut to ``chars`` characters at a word break."""
    out = []
    for i, t in enumerate(conv.texts):
        if i and conv.session[i - 1] == conv.session[i]:
            prev = conv.texts[i - 1]
            if len(prev) > chars:
                prev = prev[:chars].rsplit(" ", 1)[0] + " ..."
            out.append(f"{prev}\n{t}")
        else:
            out.append(t)
    return out


VARIANTS: dict[str, Callable[[Conv], list[str]]] = {
    "plain": lambda c: c.texts,
    "prev": with_prev,
}


# -- the vector cache ----------------------------------------------------------------------------


class Vectors:
    """MiniLM vectors of text lists, cached on disk (the model is loaded on first miss)."""

    def __init__(self, cache: Path = CACHE, precision: str = "float32") -> None:
        self.cache = cache
        self.precision = precision
        self._model: Any = None
        self.model_s = 0.0  # seconds spent in the model (misses)

    @property
    def model(self) -> Any:
        if self._model is None:
            from synapsedb.embed import OnnxMiniLM

            self._model = OnnxMiniLM(precision=self.precision)
        return self._model

    def path(self, label: str, texts: Sequence[str]) -> Path:
        digest = hashlib.sha1("\x1f".join([self.precision, *texts]).encode()).hexdigest()[:16]
        return self.cache / f"{label}-{digest}.npy"

    def get(self, label: str, texts: Sequence[str]) -> np.ndarray:
        path = self.path(label, texts)
        if path.exists():
            vecs = np.load(path)
            if vecs.shape == (len(texts), 384):
                return vecs
        t0 = time.perf_counter()
        parts = [
            np.asarray(self.model.embed(list(texts[i : i + 64])), np.float32)
            for i in range(0, len(texts), 64)
        ]
        vecs = np.concatenate(parts) if parts else np.zeros((0, 384), np.float32)
        self.model_s += time.perf_counter() - t0
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vecs)
        return vecs

    def memories(self, conv: Conv, variant: str = "plain") -> np.ndarray:
        return self.get(f"{conv.key}-{variant}", VARIANTS[variant](conv))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="plain")
    ap.add_argument("--datasets", default="locomo,beam")
    ap.add_argument("--beam-chats", default="")
    args = ap.parse_args()
    vec = Vectors()
    convs: list[Conv] = []
    if "locomo" in args.datasets:
        convs += load_locomo()
    if "beam" in args.datasets:
        convs += load_beam(names=[c for c in args.beam_chats.split(",") if c] or None)
    for variant in args.variants.split(","):
        for c in convs:
            t0, m0 = time.perf_counter(), vec.model_s
            v = vec.memories(c, variant)
            chars = sum(len(t) for t in VARIANTS[variant](c))
            print(
                f"{variant} {c.key}: {v.shape[0]} vectors, {chars:,} chars, model "
                f"{vec.model_s - m0:.1f} s, total {time.perf_counter() - t0:.1f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
