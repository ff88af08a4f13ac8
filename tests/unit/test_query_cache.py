"""The query-embedding cache is per namespace: a cached text in one namespace is never a hit in
another, so the time a query takes tells nothing about what other tenants asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import synapsedb
from synapsedb import Database


def test_a_text_cached_in_one_namespace_is_not_a_hit_in_another(db: Database) -> None:
    a, b = db.namespace("tenant-a..notes"), db.namespace("tenant-b..notes")
    a.write("u", "the quarterly figures are in the shared drive")
    b.write("u", "lunch is at noon")
    cache = db.embedding
    hits, misses = cache.cache_hits, cache.cache_misses
    a.query("where are the quarterly figures", mode="vector")
    a.query("where are the quarterly figures", mode="vector")
    assert (cache.cache_hits - hits, cache.cache_misses - misses) == (1, 1)  # A: miss, then hit
    b.query("where are the quarterly figures", mode="vector")
    assert (cache.cache_hits - hits, cache.cache_misses - misses) == (1, 2)  # B: a miss
    b.query("where are the quarterly figures", mode="vector")
    assert cache.cache_hits - hits == 2  # B's own earlier query is a hit for B


@pytest.fixture
def same_model_db(tmp_path: Path) -> Iterator[Database]:
    """Queries embedded by the memories' model (not the int8 query model)."""
    database = synapsedb.open(
        tmp_path / "same", durability="os", minilm_query_model="same", background_maintenance=False
    )
    yield database
    database.close()


def test_a_text_just_queried_is_written_with_that_querys_vector(same_model_db: Database) -> None:
    """The memory proxy recalls for the user's turn, then stores that turn: embedded once."""
    db = same_model_db
    a, b = db.namespace("tenant-a..notes"), db.namespace("tenant-b..notes")
    a.write("u", "warm up")
    b.write("u", "warm up")
    said = "my name is Ada and I live in Lisbon"
    a.query(said, mode="vector")
    batches = len(db.embedding.batches)
    mine = a.write("u", said)
    assert len(db.embedding.batches) == batches  # no model call: the query's vector
    theirs = b.write("u", said)  # another namespace's query is never used
    assert len(db.embedding.batches) == batches + 1
    assert mine.embedding is not None and theirs.embedding is not None
    assert float(mine.embedding @ theirs.embedding) > 0.999  # the same model, the same text


def test_a_query_only_models_vector_is_never_written(tmp_path: Path) -> None:
    """With the int8 query model, a text just queried is embedded again by the memories' model
    (an int8 vector depends on its batch and is never stored)."""
    with synapsedb.open(
        tmp_path / "int8", durability="os", minilm_query_model="int8", background_maintenance=False
    ) as db:
        db.embedding.model.load_query_model()  # type: ignore[attr-defined]
        ns = db.namespace("n")
        ns.write("u", "warm up")
        said = "my name is Ada and I live in Lisbon"
        ns.query(said, mode="vector")
        batches = len(db.embedding.batches)
        mine = ns.write("u", said)
        assert len(db.embedding.batches) == batches + 1  # the memories' model embedded it
        want = db.embedding.model.embed([said])[0]
        assert mine.embedding is not None and np.array_equal(mine.embedding, want)
