"""Embeddings from any OpenAI-compatible ``POST /v1/embeddings`` endpoint (OpenAI, vLLM, Ollama,
LiteLLM, text-embeddings-inference...). Standard library only (urllib), so the engine needs no
HTTP client package.

Configuration: ``base_url`` (e.g. ``https://api.openai.com/v1``), ``model`` and ``api_key``;
each defaults to ``SYNAPSEDB_OPENAI_BASE_URL``, ``SYNAPSEDB_OPENAI_MODEL`` and
``SYNAPSEDB_OPENAI_API_KEY`` (else ``OPENAI_API_KEY``), read when the embedder is created.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence

import numpy as np

from ..errors import EmbeddingError, ValidationError

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder:
    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        dimensions: int | None = None,
        batch_size: int = 256,
        timeout: float = 30.0,
    ) -> None:
        base = base_url or os.environ.get("SYNAPSEDB_OPENAI_BASE_URL")
        self.model = model or os.environ.get("SYNAPSEDB_OPENAI_MODEL") or ""
        if not base:
            raise ValidationError(
                "openai_base_url: required (e.g. https://api.openai.com/v1); set it or "
                "SYNAPSEDB_OPENAI_BASE_URL",
                field="openai_base_url",
            )
        if not self.model:
            raise ValidationError(
                "openai_model: required; set it or SYNAPSEDB_OPENAI_MODEL", field="openai_model"
            )
        self.url = base.rstrip("/") + "/embeddings"
        self._key = (
            api_key
            or os.environ.get("SYNAPSEDB_OPENAI_API_KEY")
            or os.environ.get("OPENAI_API_KEY")
        )
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.timeout = timeout
        self.name = f"openai:{self.model}" + (f":{dimensions}" if dimensions else "")
        self._dim = dimensions

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def _post(self, texts: list[str]) -> list[list[float]]:
        body: dict[str, object] = {"model": self.model, "input": texts}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        if self._key:
            req.add_header("Authorization", f"Bearer {self._key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                payload = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace")
            raise EmbeddingError(
                f"embedding service {self.url} answered {exc.code}: {detail}", status=exc.code
            ) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise EmbeddingError(f"embedding service {self.url} unreachable: {exc}") from None
        except ValueError:
            raise EmbeddingError(f"embedding service {self.url} sent invalid JSON") from None
        try:
            data = sorted(payload["data"], key=lambda d: d["index"])
            vecs = [d["embedding"] for d in data]
        except (KeyError, TypeError):
            raise EmbeddingError(
                f"embedding service {self.url} answered without data[].embedding"
            ) from None
        if len(vecs) != len(texts):
            raise EmbeddingError(
                f"embedding service {self.url} returned {len(vecs)} vectors for {len(texts)} texts"
            )
        return vecs

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise ValidationError("texts: expected a list of strings", field="texts")
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            out.extend(self._post(list(texts[i : i + self.batch_size])))
        if not out:
            return np.zeros((0, self._dim or 0), np.float32)
        arr = np.asarray(out, dtype=np.float32)
        if arr.ndim != 2 or not np.isfinite(arr).all():
            raise EmbeddingError(f"embedding service {self.url} sent malformed vectors")
        if self._dim is None:
            self._dim = int(arr.shape[1])  # learnt from the first answer, then enforced
        elif arr.shape[1] != self._dim:
            raise EmbeddingError(
                f"embedding service {self.url} sent {arr.shape[1]}-d vectors, expected {self._dim}"
            )
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return arr / np.where(norms > 0, norms, 1.0)
