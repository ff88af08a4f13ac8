from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import synapsedb
from synapsedb import errors

TREE = [getattr(errors, name) for name in errors.__all__ if name.endswith("Error")]


def test_every_error_has_a_stable_code_and_status() -> None:
    seen = {}
    for cls in TREE:
        assert issubclass(cls, errors.SynapseError)
        assert cls.code not in seen
        seen[cls.code] = cls
        assert 400 <= cls.http_status < 600 or cls is errors.SynapseError
        assert f"{cls.__name__} " in (errors.__doc__ or ""), f"{cls.__name__} not in the diagram"
    assert set(seen) == {
        "internal", "validation", "not_found", "version_conflict", "quota_exceeded", "storage",
        "embedding", "closed", "unauthorized", "forbidden", "payload_too_large",
        "method_not_allowed", "unsupported_media_type", "request_timeout", "host_not_allowed",
        "upstream", "model_missing", "memory_api", "memory_store", "memory_retrieval",
        "memory_maintenance", "memory_config", "not_owner",
    }  # fmt: skip


@pytest.mark.parametrize("cls", TREE, ids=lambda c: c.__name__)
def test_the_remote_client_rebuilds_every_class(cls: type[errors.SynapseError]) -> None:
    import msgspec

    from synapsedb.client.calls import error_of

    sent = cls("what went wrong", field="body", limit=7)
    back = error_of(cls.http_status, msgspec.json.encode({"error": sent.to_dict()}))
    assert type(back) is cls
    assert (back.message, back.details) == ("what went wrong", {"field": "body", "limit": 7})
    assert type(pickle.loads(pickle.dumps(sent))) is cls


def test_errors_round_trip_through_their_wire_form() -> None:
    err = errors.ValidationError("content: too big", field="content", limit=32768)
    wire = err.to_dict()
    assert wire == {
        "code": "validation",
        "message": "content: too big",
        "details": {"field": "content", "limit": 32768},
    }
    back = errors.error_from_code(wire["code"], wire["message"], wire["details"])
    assert type(back) is errors.ValidationError and back.field == "content"
    assert isinstance(pickle.loads(pickle.dumps(err)), errors.ValidationError)
    assert type(errors.error_from_code("nonsense", "m")) is errors.SynapseError


def test_closed_database(tmp_path: Path) -> None:
    db = synapsedb.open(tmp_path / "d", durability="os")
    mem = db.namespace("n")
    db.close()
    db.close()  # idempotent
    with pytest.raises(errors.ClosedError):
        mem.write("e", "x")
    with pytest.raises(errors.ClosedError):
        mem.memories()
    with pytest.raises(errors.ClosedError):
        db.namespace("n")


def test_one_process_per_data_directory(tmp_path: Path) -> None:
    with (
        synapsedb.open(tmp_path / "d", durability="os"),
        pytest.raises(errors.StorageError, match="in use"),
    ):
        synapsedb.open(tmp_path / "d")
    synapsedb.open(tmp_path / "d").close()  # released on close


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    import sqlite3

    synapsedb.open(tmp_path / "d", durability="os").close()
    conn = sqlite3.connect(tmp_path / "d" / "synapse.db")
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    with pytest.raises(errors.StorageError, match="newer"):
        synapsedb.open(tmp_path / "d")


def test_engine_imports_no_web_or_cli_libraries() -> None:
    import subprocess
    import sys

    code = (
        "import sys, synapsedb, synapsedb.engine; "
        "bad = [m for m in ('fastapi', 'starlette', 'httpx', 'click', 'prometheus_client') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_api_is_exported() -> None:
    for name in synapsedb.__all__:
        assert hasattr(synapsedb, name), name
