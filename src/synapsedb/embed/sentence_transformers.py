"""Optional provider: any sentence-transformers model (needs ``sentence-transformers`` and
torch; install torch as ``pip install torch==2.13.0`` here to get the CPU build). The default
MiniLM embedder does not need it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ValidationError

__all__ = ["SentenceTransformerEmbedder"]


class SentenceTransformerEmbedder:
    def __init__(self, model: str, *, device: str = "cpu", batch_size: int = 64) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ValidationError(
                "embedder: sentence-transformers is not installed; pip install "
                "sentence-transformers torch==2.13.0 (CPU build), or use embedder='minilm'",
                field="embedder",
            ) from None
        self._model = SentenceTransformer(model, device=device)
        self.batch_size = batch_size
        # renamed get_embedding_dimension in sentence-transformers 6
        getter = getattr(self._model, "get_embedding_dimension", None)
        if getter is None:
            getter = self._model.get_sentence_embedding_dimension
        dim = getter()
        if not dim:
            raise ValidationError(
                f"embedder: model {model!r} reports no dimension", field="embedder"
            )
        self.dim = int(dim)
        self.name = f"st:{model}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise ValidationError("texts: expected a list of strings", field="texts")
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        vecs = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)
