"""The OpenAI-compatible embedder against a stand-in for the remote service (we do not run
OpenAI): a local HTTP server speaking the /v1/embeddings protocol."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import synapsedb
from synapsedb import EmbeddingError, ValidationError
from synapsedb.embed.openai_compat import OpenAIEmbedder

DIM = 12


def fake_vector(text: str) -> list[float]:
    raw = hashlib.sha256(text.encode()).digest()[:DIM]
    return [b / 255.0 - 0.5 for b in raw]


class FakeOpenAIEmbeddingsServer:
    """Answers POST /v1/embeddings like the OpenAI API; can be told to misbehave."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.mode = "ok"
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"body": body, "auth": self.headers.get("Authorization")})
                if server.mode == "error":
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b'{"error": "overloaded"}')
                    return
                data = [
                    {"index": i, "embedding": fake_vector(t)} for i, t in enumerate(body["input"])
                ]
                data.reverse()  # the client must order by index
                if server.mode == "short":
                    data = data[:-1]
                out = json.dumps({"data": data}).encode() if server.mode != "garbage" else b"{"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAIEmbeddingsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def service() -> Iterator[FakeOpenAIEmbeddingsServer]:
    with FakeOpenAIEmbeddingsServer() as srv:
        yield srv


def test_embeds_in_batches_in_order_with_the_key(service: FakeOpenAIEmbeddingsServer) -> None:
    emb = OpenAIEmbedder(service.url, "text-embedding-3-small", "sk-test", batch_size=2)
    texts = ["a", "b", "c"]
    vecs = emb.embed(texts)
    assert vecs.shape == (3, DIM) and emb.dim == DIM
    for t, v in zip(texts, vecs, strict=True):
        ref = np.array(fake_vector(t), np.float32)
        assert np.allclose(v, ref / np.linalg.norm(ref), atol=1e-6)
    assert [r["body"]["input"] for r in service.requests] == [["a", "b"], ["c"]]
    assert {r["auth"] for r in service.requests} == {"Bearer sk-test"}
    assert emb.name == "openai:text-embedding-3-small"


@pytest.mark.parametrize("mode", ["error", "short", "garbage"])
def test_service_failures_are_embedding_errors(
    service: FakeOpenAIEmbeddingsServer, mode: str
) -> None:
    service.mode = mode
    with pytest.raises(EmbeddingError):
        OpenAIEmbedder(service.url, "m").embed(["a", "b"])


def test_unreachable_service() -> None:
    with pytest.raises(EmbeddingError, match="unreachable"):
        OpenAIEmbedder("http://127.0.0.1:9/v1", "m", timeout=2).embed(["a"])


def test_configuration_from_settings_and_environment(
    service: FakeOpenAIEmbeddingsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValidationError) as err:
        OpenAIEmbedder(None, "m")
    assert err.value.field == "openai_base_url"
    monkeypatch.setenv("SYNAPSEDB_OPENAI_API_KEY", "sk-env")
    settings = synapsedb.Settings(
        embedder="openai", openai_base_url=service.url, openai_model="m", durability="os"
    )
    with synapsedb.open(tmp_path / "d", settings=settings) as db:
        mem = db.namespace("n")
        m = mem.write("u", "hello")
        assert m.embedding is not None and m.embedding.shape == (DIM,)
        assert mem.stats().embedder == "openai:m"
        assert mem.query("hello", mode="vector").hits[0].id == m.id
        service.mode = "error"
        with pytest.raises(EmbeddingError):
            mem.write("u", "fails, and writes nothing")
        assert mem.stats().memories == 1
    assert service.requests[0]["auth"] == "Bearer sk-env"


def test_sentence_transformers_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the optional package: a clear error. With it: the same model as our ONNX one."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a local model folder; never the hub
    from synapsedb.embed.export import source_dir
    from synapsedb.embed.sentence_transformers import SentenceTransformerEmbedder

    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(ValidationError, match="sentence-transformers"):
            SentenceTransformerEmbedder("all-MiniLM-L6-v2")
        return
    from synapsedb.embed import OnnxMiniLM

    st = SentenceTransformerEmbedder(str(source_dir()))
    texts = ["Refund requested for order #1458", "The parcel is stuck in customs"]
    cos = (st.embed(texts) * OnnxMiniLM().embed(texts)).sum(axis=1)
    assert st.dim == 384 and st.name.startswith("st:")
    assert float(cos.min()) >= 0.99
