"""Bad input raises ValidationError naming the field (and the limit), and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

import synapsedb
from synapsedb import Database, Namespace, ValidationError


def _assert_nothing_written(mem: Namespace) -> None:
    stats = mem.stats()
    assert (stats.memory_versions, stats.fact_versions, stats.events) == (0, 0, 0)


@pytest.mark.parametrize(
    ("payload", "field", "limit"),
    [
        ({"content": "x" * (1024 * 1024 + 1)}, "content", 1024 * 1024),
        ({"content": "é" * (512 * 1024 + 1)}, "content", 1024 * 1024),  # bytes, not characters
        ({"content": "x", "metadata": {"blob": "y" * 17_000}}, "metadata", 16 * 1024),
        ({"content": "x", "metadata": {"n": float("nan")}}, "metadata.n", None),
        ({"content": "x", "metadata": ["not", "an", "object"]}, "metadata", None),
        ({"content": "x", "ts": "next tuesday"}, "ts", None),
        ({"content": "x", "ts": True}, "ts", None),
        ({"content": "x", "ts": 1e20}, "ts", None),
        ({"content": "x", "salience": 1.5}, "salience", 1),
        ({"content": "x", "salience": "high"}, "salience", 1),
        ({"content": "x", "type": "Not A Type"}, "type", 32),
        ({"content": "x", "ttl": -1}, "ttl", None),
        ({"content": "x", "pinned": "yes"}, "pinned", None),
        ({"content": "x", "embedding": [1.0, float("nan")]}, "embedding", None),
        ({"content": "x", "embedding": "not a vector"}, "embedding", None),
        ({"content": "x", "embedding": [[1.0], [2.0]]}, "embedding[0]", None),
        ({"content": "x", "embedding": [0.0] * 5000}, "embedding", 4096),
        ({"content": "x", "id": "has spaces"}, "id", 128),
        ({"content": "x", "agent": "a" * 200}, "agent", 128),
        ({"content": "x", "colour": "red"}, "colour", None),
        ({"content": ""}, "content", None),
        ({"content": 42}, "content", None),
        ({"metadata": {}}, "content", None),
    ],
)
def test_bad_memory_fields(
    mem: Namespace, payload: dict[str, Any], field: str, limit: int | None
) -> None:
    with pytest.raises(ValidationError) as err:
        mem.write("user:1", payload)
    assert err.value.field == field
    assert field in str(err.value)
    if limit is not None:
        assert err.value.details["limit"] == limit
        assert str(limit) in str(err.value)
    _assert_nothing_written(mem)


@pytest.mark.parametrize(
    ("entity", "limit"), [("", None), ("x" * 257, 256), (None, None), ("a\x00b", None)]
)
def test_bad_entities(mem: Namespace, entity: Any, limit: int | None) -> None:
    with pytest.raises(ValidationError) as err:
        mem.write(entity, "content")
    assert err.value.field == "entity"
    assert err.value.details.get("limit") == limit
    _assert_nothing_written(mem)


@pytest.mark.parametrize("name", ["", "UPPER", "-leading", "a" * 65, "sp ace", "ü", None])
def test_bad_namespace_names(db: Database, name: Any) -> None:
    with pytest.raises(ValidationError) as err:
        db.namespace(name)
    assert err.value.field == "namespace"


@pytest.mark.parametrize("name", ["a", "acme-support", "user.42_x", "0" * 64])
def test_good_namespace_names(db: Database, name: str) -> None:
    db.namespace(name).write("e", "x")
    assert name in db.namespaces()


def test_update_validation(mem: Namespace) -> None:
    m = mem.write("u", "x")
    for changes, field in [
        ({}, "changes"),
        ({"id": "new"}, "id"),
        ({"content": ""}, "content"),
        ({"salience": 2}, "salience"),
    ]:
        with pytest.raises(ValidationError) as err:
            mem.update(m.id, changes)
        assert err.value.field == field
    assert len(mem.history(m.id)) == 1


def test_batch_limit(tmp_path: Any) -> None:
    with synapsedb.open(tmp_path / "d", max_batch_items=3, durability="os") as db:
        mem = db.namespace("n")
        with pytest.raises(ValidationError) as err:
            mem.write_many([("e", "x")] * 4)
        assert err.value.details["limit"] == 3


def test_bad_settings() -> None:
    with pytest.raises(ValidationError) as err:
        synapsedb.Settings(durability="sometimes")  # type: ignore[arg-type]
    assert err.value.field == "durability"
    with pytest.raises(ValidationError) as err:
        synapsedb.Settings().replace(max_content_bytes=0)
    assert err.value.field == "max_content_bytes"
    with pytest.raises(ValidationError) as err:
        synapsedb.Settings().replace(colour="red")
    assert err.value.field == "colour"


def test_settings_from_env() -> None:
    s = synapsedb.Settings.from_env({"SYNAPSEDB_DURABILITY": "os", "SYNAPSEDB_MAX_DIM": "512"})
    assert (s.durability, s.max_dim) == ("os", 512)
    with pytest.raises(ValidationError):
        synapsedb.Settings.from_env({"SYNAPSEDB_MAX_DIM": "many"})
