"""Automatic embedding with the real local model (no fakes)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

import synapsedb
from synapsedb import Namespace, ValidationError


def test_text_is_embedded_and_queried_by_meaning(mem: Namespace) -> None:
    mem.write("user:4321", "Customer refund for order #1458 initiated on 10/20")
    mem.write("user:4321", "Shipping address changed to Berlin")
    mem.write("user:4321", "Prefers to be contacted by phone in the evening")
    stats = mem.stats()
    assert (stats.dim, stats.embedder) == (384, "minilm-l6-v2-onnx-f32")
    res = mem.query("when do I get my money back for the purchase?", mode="vector")
    assert "refund" in res.hits[0].content
    res = mem.query("when is a good moment to ring them", explain=True)
    assert "phone" in res.hits[0].content
    assert res.hits[0].explanation is not None and res.hits[0].explanation["vector"] > 0


def test_update_re_embeds_the_new_content(mem: Namespace) -> None:
    m = mem.write("u", "The parcel is stuck in customs")
    m2 = mem.update(m.id, {"content": "Customer wants to change the delivery address"})
    assert m.embedding is not None and m2.embedding is not None
    assert float(m.embedding @ m2.embedding) < 0.9
    top = mem.query("new shipping address", mode="vector", k=1)
    assert top.hits[0].id == m.id and top.hits[0].version == 2


def test_write_many_embeds_in_one_batch(db: synapsedb.Database) -> None:
    mem = db.namespace("batch")
    before = len(db.embedding.batches)
    mem.write_many([("u", f"note number {i} about invoices") for i in range(20)])
    assert db.embedding.batches[before:] == [20]


def test_caller_vector_namespaces_get_no_automatic_vectors(db: synapsedb.Database) -> None:
    mem = db.namespace("own-vectors")
    mem.write("u", {"content": "carries its own embedding", "embedding": [1.0, 0.0, 0.0]})
    plain = mem.write("u", "plain text only")
    assert plain.embedding is None
    assert mem.stats().embedder == "caller"
    assert [h.content for h in mem.query("embedding", mode="keyword")] == [
        "carries its own embedding"
    ]
    res = mem.query("plain text", explain=True)  # keywords only (no automatic vectors here)
    assert res.hits[0].content == "plain text only"
    assert all(h.explanation is not None and h.explanation["cosine"] == 0 for h in res)
    with pytest.raises(ValidationError, match="caller-provided"):
        mem.query("anything", mode="vector")
    assert mem.query(embedding=[1.0, 0.0, 0.0], mode="vector").hits[0].content.startswith("carr")


def test_a_namespace_embedded_by_another_model_is_refused(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", durability="os") as db:
        db.namespace("n").write("u", "embedded by MiniLM")
    conn = sqlite3.connect(tmp_path / "d" / "synapse.db")
    conn.execute("UPDATE namespaces SET embedder = 'some-other-model' WHERE name = 'n'")
    conn.commit()
    conn.close()
    with synapsedb.open(tmp_path / "d", durability="os") as db:
        mem = db.namespace("n")
        with pytest.raises(ValidationError, match="some-other-model"):
            mem.write("u", "more text")
        with pytest.raises(ValidationError, match="some-other-model"):
            mem.query("text", mode="vector")
        assert mem.stats().memories == 1


def test_a_namespace_written_at_the_other_precision_keeps_working(tmp_path: Path) -> None:
    """Namespaces embedded with uint8 weights (the default before float32) take float32 vectors
    under their recorded name, and the other way round; one namespace keeps one name."""
    with synapsedb.open(tmp_path / "d", durability="os", minilm_precision="uint8") as db:
        old = db.namespace("old").write("u", "Customer refund for order #1458 initiated")
        assert db.namespace("old").stats().embedder == "minilm-l6-v2-onnx-uint8"
    with synapsedb.open(tmp_path / "d", durability="os") as db:
        mem = db.namespace("old")
        new = mem.write("u", "Shipping address changed to Berlin")
        changed = mem.update(old.id, {"content": "Customer refund for order #1458 was paid out"})
        mem.write_many([("u", "Prefers the phone in the evening")])
        assert mem.stats().embedder == "minilm-l6-v2-onnx-uint8"
        assert mem.query("money back for the purchase", mode="vector", k=1).hits[0].id == old.id
        assert mem.query("new delivery city", mode="vector", k=1).hits[0].id == new.id
        assert changed.embedding is not None and old.embedding is not None
        fresh = db.namespace("fresh")
        fresh.write("u", "written at float32")
        assert fresh.stats().embedder == "minilm-l6-v2-onnx-f32"
    with synapsedb.open(tmp_path / "d", durability="os", minilm_precision="uint8") as db:
        fresh = db.namespace("fresh")
        fresh.write("u", "and extended at uint8")
        assert fresh.stats().embedder == "minilm-l6-v2-onnx-f32"
        assert fresh.stats().memories == 2


def test_an_unknown_precision_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as e:
        synapsedb.open(tmp_path / "d", minilm_precision="fp16")
    assert e.value.details["field"] == "minilm_precision"


def test_no_embedder(tmp_path: Path) -> None:
    with synapsedb.open(tmp_path / "d", durability="os", embedder=None) as db:
        mem = db.namespace("n")
        assert mem.write("u", "plain").embedding is None
        assert len(mem.query("plain")) == 1
        with pytest.raises(ValidationError, match="no embedder"):
            mem.query("plain", mode="vector")


def test_query_embeddings_are_cached(db: synapsedb.Database) -> None:
    mem = db.namespace("cache")
    mem.write("u", "something to compare with")
    first = db.embedding.query(db._state("cache"), "a question", required=True)  # type: ignore[arg-type]
    again = db.embedding.query(db._state("cache"), "a question", required=True)  # type: ignore[arg-type]
    assert first is again
    assert np.isclose(float(np.linalg.norm(first)), 1.0, atol=1e-3)


def test_an_automatic_vector_overtaken_by_caller_vectors_is_dropped(db: synapsedb.Database) -> None:
    """Regression: a write embedded automatically while the namespace was empty must still
    land (without the automatic vector) when another writer's caller vectors got there first."""
    from synapsedb.engine.ops import WriteMemories
    from synapsedb.validation import memory_input

    mem = db.namespace("race")
    item = memory_input("u", "embedded while the namespace was still empty", db.settings)
    db.embedding.fill(None, [item])
    assert item.vec is not None and item.source != "caller"
    mem.write("u", {"content": "caller vector", "embedding": [1.0, 0.0, 0.0]})
    (rec,) = db._submit(WriteMemories("race", [item], [""]))
    assert rec.vector() is None
    assert mem.stats().embedder == "caller" and mem.stats().memories == 2


def test_close_waits_for_a_model_load_in_another_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server stopped while its warm-up thread builds the onnxruntime session must not exit
    under it (the process aborted: "terminate called without an active exception")."""
    import threading
    import time

    from synapsedb.engine import embedding

    real_build = embedding._build
    started = threading.Event()

    def slow_build(spec: str, settings: object) -> object:
        started.set()
        time.sleep(0.3)
        return real_build(spec, settings)  # type: ignore[arg-type]

    monkeypatch.setattr(embedding, "_build", slow_build)
    db = synapsedb.open(tmp_path / "d")
    loader = threading.Thread(target=lambda: db.embedding.model, daemon=True)
    loader.start()
    assert started.wait(5)
    db.close()
    assert db.embedding.loaded  # close returned only after the load finished
    loader.join(5)
