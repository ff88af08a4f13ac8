"""Request ids, JSON logs and OpenTelemetry traces: in-process and from a real server."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.testclient import TestClient

import synapsedb
from synapsedb.server import create_app
from synapsedb.server.observe import JsonFormatter, Tracing, parse_traceparent

NS = "/v1/namespaces/acme"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"


class _Lines(logging.Handler):
    """Keeps what the JSON formatter makes of each record."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def lines() -> Any:
    handler = _Lines()
    for name in ("synapsedb.access", "synapsedb.server"):
        logging.getLogger(name).addHandler(handler)
    logging.getLogger("synapsedb.access").setLevel(logging.INFO)
    yield handler.lines
    for name in ("synapsedb.access", "synapsedb.server"):
        logging.getLogger(name).removeHandler(handler)
    logging.getLogger("synapsedb.access").setLevel(logging.NOTSET)


def test_traceparent_parsing() -> None:
    assert parse_traceparent(TRACEPARENT) == (TRACE, PARENT)
    assert parse_traceparent(f"00-{'0' * 32}-{PARENT}-01") is None  # all-zero ids are invalid
    assert parse_traceparent("00-xyz-abc-01") is None
    assert parse_traceparent(None) is None


def test_request_ids_and_json_logs_without_tracing(tmp_path: Path, lines: Any) -> None:
    with (
        synapsedb.open(tmp_path / "d", durability="os", embedder="none") as db,
        TestClient(create_app(db)) as c,
    ):
        r = c.get(f"{NS}/stats", headers={"X-Request-ID": "req-42", "traceparent": TRACEPARENT})
        assert r.headers["x-request-id"] == "req-42"
        fresh = c.get(f"{NS}/stats", headers={"X-Request-ID": "bad id with spaces"})
        rid = fresh.headers["x-request-id"]
        assert rid != "bad id with spaces" and len(rid) == 16
        assert c.get("/nowhere").headers["x-request-id"]  # errors carry one too
    first, second = lines[0], lines[1]
    assert first["request_id"] == "req-42" and first["trace_id"] == TRACE
    assert first["route"] == "/v1/namespaces/{ns}/stats" and first["status"] == 200
    assert first["logger"] == "synapsedb.access" and first["duration_ms"] >= 0
    assert second["request_id"] == rid and "trace_id" not in second


def test_an_unexpected_error_is_logged_with_its_request_id(
    tmp_path: Path, lines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapsedb.engine import Namespace

    def broken(self: Namespace) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Namespace, "stats", broken)
    with (
        synapsedb.open(tmp_path / "d", durability="os", embedder="none") as db,
        TestClient(create_app(db)) as c,
    ):
        r = c.get(f"{NS}/stats", headers={"X-Request-ID": "req-bug"})
    assert r.status_code == 500
    (err,) = [line for line in lines if line["logger"] == "synapsedb.server"]
    assert err["request_id"] == "req-bug" and "RuntimeError: a bug" in err["error"]


def test_spans_per_request_and_per_query_stage(tmp_path: Path, lines: Any) -> None:
    exporter = InMemorySpanExporter()
    with synapsedb.open(tmp_path / "d", durability="os") as db:
        with TestClient(create_app(db, tracing=Tracing(exporter))) as c:
            c.post(f"{NS}/memories", json={"entity": "u", "content": "refund for order 1458"})
            # text: embedded in a worker thread; the stage spans still find their parent
            r = c.post(f"{NS}/query", json={"text": "refund"}, headers={"traceparent": TRACEPARENT})
            assert r.status_code == 200
            vec = db.embedding.model.embed(["refund"])[0].tolist()
            # a caller vector: searched on the event loop
            assert c.post(f"{NS}/query", json={"embedding": vec, "mode": "vector"}).is_success
            assert c.get(f"{NS}/memories/nope").status_code == 404
        assert not db.observers.query  # the app's hooks leave with it
    spans = exporter.get_finished_spans()  # the lifespan's shutdown flushed them
    servers = [s for s in spans if s.kind.name == "SERVER"]
    assert [s.name for s in servers] == [
        "POST /v1/namespaces/{ns}/memories",
        "POST /v1/namespaces/{ns}/query",
        "POST /v1/namespaces/{ns}/query",
        "GET /v1/namespaces/{ns}/memories/{id}",
    ]
    write, text_q, vec_q, missing = servers
    assert f"{text_q.context.trace_id:032x}" == TRACE  # continues the caller's trace
    assert f"{text_q.parent.span_id:016x}" == PARENT
    assert write.context.trace_id != text_q.context.trace_id
    assert text_q.attributes["http.response.status_code"] == 200
    assert missing.attributes["http.response.status_code"] == 404
    for server, stages in ((text_q, {"embed", "vector", "keyword", "fuse"}), (vec_q, {"vector"})):
        children = [s for s in spans if s.parent and s.parent.span_id == server.context.span_id]
        names = {s.name.removeprefix("query.") for s in children}
        assert stages <= names, names
        for child in children:
            assert server.start_time <= child.start_time <= child.end_time <= server.end_time
    # log lines written during a traced request carry the server span's ids
    traced = next(line for line in lines if line.get("route") == "/v1/namespaces/{ns}/query")
    assert traced["trace_id"] == TRACE
    assert traced["span_id"] == f"{text_q.context.span_id:016x}"


def test_unknown_exporter_is_a_named_error() -> None:
    with pytest.raises(synapsedb.ValidationError, match="otel_exporter"):
        Tracing("zipkin")


class _Collector(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        type(self).bodies.append(self.rfile.read(length))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_exports_otlp_and_logs_json(tmp_path: Path) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.bodies = []
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    port = _port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "synapsedb",
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--port",
            str(port),
            "--log-level",
            "info",
            "--otel-exporter",
            "otlp",
            "--otel-endpoint",
            f"http://127.0.0.1:{collector.server_port}/v1/traces",
        ],
        env={**os.environ, "SYNAPSEDB_EMBEDDER": "none"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, server.stderr
            time.sleep(0.1)
        httpx.post(
            f"{url}{NS}/memories",
            json={"entity": "u", "content": "x", "embedding": [0.1, 0.2, 0.3]},
        )
        r = httpx.post(
            f"{url}{NS}/query",
            json={"embedding": [0.1, 0.2, 0.3], "mode": "vector"},
            headers={"traceparent": TRACEPARENT, "X-Request-ID": "cli-1"},
        )
        assert r.status_code == 200 and r.headers["x-request-id"] == "cli-1"
    finally:
        server.terminate()
        _, err = server.communicate(timeout=60)  # shutdown flushes the spans
        collector.shutdown()
        collector.server_close()
    names, traces = set(), set()
    for body in _Collector.bodies:
        req = ExportTraceServiceRequest.FromString(body)
        for rs in req.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}
            assert service["service.name"] == "synapsedb"
            for ss in rs.scope_spans:
                for span in ss.spans:
                    names.add(span.name)
                    traces.add(span.trace_id.hex())
    assert {"POST /v1/namespaces/{ns}/query", "query.vector"} <= names
    assert TRACE in traces
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    access = [r for r in records if r.get("request_id") == "cli-1"]
    assert access and access[0]["trace_id"] == TRACE and access[0]["status"] == 200
