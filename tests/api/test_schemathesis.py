"""Generated requests from the OpenAPI document (schemathesis): bad input never yields a 5xx."""

from __future__ import annotations

import atexit
import shutil
import tempfile

import schemathesis
from hypothesis import HealthCheck, settings

import synapsedb
from synapsedb.server import create_app

_DIR = tempfile.mkdtemp(prefix="synapsedb-fuzz-")
_DB = synapsedb.open(_DIR, durability="os", embedder=None, background_maintenance=False)
atexit.register(lambda: (_DB.close(), shutil.rmtree(_DIR, ignore_errors=True)))
_DB.namespace("fuzz").write("user:1", {"id": "m1", "content": "seed memory"})


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx: object, value: object) -> bytes:  # the import body: JSON lines, as a string
    return value.encode() if isinstance(value, str) else str(value).encode()


schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(_DB)).exclude(
    path_regex="/events/follow|/changes"  # endless live feeds; they have their own tests
)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: schemathesis.Case) -> None:
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
