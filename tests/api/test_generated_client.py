"""The published OpenAPI document generates a working client: openapi-python-client (a dev
dependency) makes a Python package from ``/openapi.json`` as served, with no patch and no
generator configuration, and the core story runs through it against the server: write,
query, facts with and without a key, append and events, an answer and its lineage, a
snapshot, the audit trail, a session, export and import."""

from __future__ import annotations

import importlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from starlette.testclient import TestClient

import synapsedb
from synapsedb.server import create_app
from synapsedb.surface import OPERATIONS

PACKAGE = "synapse_db_client"  # what the generator names a client of the title "SynapseDB"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = synapsedb.open(
        tmp_path_factory.mktemp("data"), embedder=None, llm=None, background_maintenance=False
    )
    try:
        with TestClient(create_app(db)) as http:
            yield http
    finally:
        db.close()


@pytest.fixture(scope="module")
def generated(served: TestClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The generated package, imported (its ``api`` and ``models``)."""
    out = tmp_path_factory.mktemp("generated")
    doc = out / "openapi.json"
    doc.write_bytes(served.get("/openapi.json").content)
    tool = shutil.which("openapi-python-client", path=str(Path(sys.executable).parent))
    assert tool is not None, "openapi-python-client is a dev dependency: make install"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [
            tool,
            "generate",
            "--path",
            str(doc),
            "--output-path",
            str(out / "client"),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("client")
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == "client" or m.startswith("client.")]:
            del sys.modules[name]


def api(generated: ModuleType, name: str) -> Any:
    """The module of operation ``name`` (the generator adds ``_`` to a builtin's name)."""
    package = f"{generated.__name__}.api.default"
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError:
        return importlib.import_module(f"{package}.{name}_")


def test_every_operation_is_generated(generated: ModuleType) -> None:
    for op in OPERATIONS:
        assert callable(api(generated, op.operation_id).sync_detailed), op.name


def test_the_core_story_through_the_generated_client(
    generated: ModuleType, served: TestClient
) -> None:
    models = importlib.import_module(f"{generated.__name__}.models")
    types = importlib.import_module(f"{generated.__name__}.types")
    client = generated.Client(base_url="http://testserver")
    client.set_httpx_client(served)
    ns = "story"

    def call(name: str, *path: str, **kwargs: Any) -> Any:
        out = api(generated, name).sync_detailed(ns, *path, client=client, **kwargs)
        assert out.status_code < 300, (name, out.status_code, out.content)
        assert not isinstance(out.parsed, models.Error), (name, out.parsed)
        return out.parsed

    memory = call(
        "write",
        body=models.WriteBody(entity="user:1", content="Refund for order 1458", salience=0.9),
    )
    assert isinstance(memory, models.Memory) and memory.content == "Refund for order 1458"
    result = call("query", body=models.QueryBody(text="refund order", mode="keyword", k=5))
    assert [h.id for h in result.hits] == [memory.id]
    call("set", body=models.SetBody(entity="user:1", key="tier", value="gold"))
    one = call("facts", entity="user:1", key="tier")
    assert isinstance(one, models.Fact) and one.value == "gold"
    every = call("facts", entity="user:1")
    assert isinstance(every, list) and [f.key for f in every] == ["tier"]
    event = call(
        "append",
        body=models.AppendBody(
            entity="user:1", event="Called back", stream="calls", searchable=False
        ),
    )
    assert [e.id for e in call("events", stream="calls")] == [event.id]
    lineage = call(
        "record_answer",
        body=models.RecordAnswerBody(
            answer_id="a1", query_ids=[result.query_id], text="Refunded", cited=[memory.id]
        ),
    )
    assert [r.id for r in lineage.cited] == [memory.id]
    again = call("lineage", "a1")
    assert isinstance(again, models.Lineage) and [q.query_id for q in again.queries] == [
        result.query_id
    ]
    snap = call("snapshot", entity="user:1")
    assert [f.key for f in snap.facts] == ["tier"] and [m.id for m in snap.memories] == [memory.id]
    actions = [e.action for e in call("audit", entity="user:1")]
    assert {"write", "set", "append"} <= set(actions)
    message = models.Message(role=models.MessageRole.USER, content="Where is my parcel?")
    stored = call("sessions_append", "chat", body=models.SessionsAppendBody(message=message))
    assert isinstance(stored, models.Message) and stored.id
    loaded = call("sessions_load", "chat")
    assert [m.content for m in loaded.messages] == ["Where is my parcel?"]
    exported = api(generated, "export").sync_detailed(ns, client=client)
    assert exported.status_code == 200 and b'"kind"' in exported.content
    ns = "story-copy"
    imported = call("import_records", body=types.File(payload=io.BytesIO(exported.content)))
    assert imported.additional_properties["imported"] >= 1
    assert [f.value for f in call("facts", entity="user:1")] == ["gold"]
    assert [m.content for m in call("sessions_load", "chat").messages] == ["Where is my parcel?"]


def test_the_document_has_no_boolean_schemas(served: TestClient) -> None:
    """msgspec writes tuples with ``"items": false``, which generators refuse."""
    assert '"items":false' not in json.dumps(
        served.get("/openapi.json").json(), separators=(",", ":")
    )
