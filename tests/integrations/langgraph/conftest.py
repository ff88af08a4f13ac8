"""LangGraph tests run twice: on an embedded database and through a real HTTP server.

``TrigramEmbeddings`` is a deterministic embedding function (hashed character trigrams,
unit length) standing in for a real model, so scores are exact and the same in
``InMemoryStore`` and ``SynapseStore``."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

import synapsedb
from synapsedb import ManualClock
from tests.support.live_server import serve

DIMS = 64


class TrigramEmbeddings(Embeddings):
    """Hashed character trigrams of the lowercased text, normalized; ``jitter`` adds a small
    pseudo-random component seeded by the text, so distinct texts never tie."""

    def __init__(self, dims: int = DIMS, jitter: float = 0.0) -> None:
        self.dims = dims
        self.jitter = jitter

    def one(self, text: str) -> list[float]:
        vec = [0.0] * self.dims
        padded = f"  {text.lower()}  "
        for i in range(len(padded) - 2):
            h = int.from_bytes(hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest())
            vec[h % self.dims] += 1.0
        if self.jitter:
            rng = random.Random(text)
            vec = [x + self.jitter * rng.random() for x in vec]
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.one(text)


@dataclass
class Backend:
    db: Any  # synapsedb.open(...) or synapsedb.connect(...)
    clock: ManualClock
    kind: str


def _backend(kind: str, path: Path, embedder: Any) -> Iterator[Backend]:
    clock = ManualClock()
    db = synapsedb.open(
        path,
        clock=clock,
        durability="os",
        llm=None,
        background_maintenance=False,
        embedder=embedder,
    )
    try:
        if kind == "embedded":
            yield Backend(db, clock, kind)
        else:
            from synapsedb.server import create_app

            with serve(create_app(db)) as url:
                client = synapsedb.connect(url)
                try:
                    yield Backend(client, clock, kind)
                finally:
                    client.close()
    finally:
        db.close()


@pytest.fixture(params=["embedded", "http"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A database without an embedder (vectors come from the caller), embedded or remote."""
    yield from _backend(request.param, tmp_path / "d", None)


@pytest.fixture(params=["embedded", "http"])
def minilm_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The same with SynapseDB's own embedder (all-MiniLM-L6-v2)."""
    yield from _backend(request.param, tmp_path / "d", "settings")


@pytest.fixture
def embeddings() -> TrigramEmbeddings:
    return TrigramEmbeddings()
