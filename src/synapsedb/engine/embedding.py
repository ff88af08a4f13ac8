"""Embedding for the engine: which texts get vectors, from which model, with what caching.

A namespace's vectors all come from one source, fixed by its first vector: the database's
embedder (by name) or ``"caller"``. Texts written without a vector are embedded in batches in
the writer's own thread, before anything is queued for commit; a namespace whose vectors come
from callers gets no automatic vectors. Query texts are embedded through an LRU cache keyed by
namespace and text: a hit only ever comes from an earlier query of the same namespace, so how
fast a query is embedded tells nothing about what other namespaces (other tenants) asked.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..config import Settings
from ..embed.base import Embedder, same_space
from ..errors import ValidationError

if TYPE_CHECKING:
    from ..validation import MemoryInput
    from .state import NamespaceState

__all__ = ["EmbeddingService"]


class EmbeddingService:
    def __init__(self, embedder: Embedder | str | None, settings: Settings | None = None) -> None:
        self._spec = embedder
        self._settings = settings or Settings()
        cache_size = self._settings.query_cache_size
        self._model: Embedder | None = embedder if not isinstance(embedder, str | None) else None
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self.cache_hits = 0  # query texts answered from the cache
        self.cache_misses = 0  # query texts the model embedded
        self.batches: list[int] = []  # sizes of recent write batches (for metrics)
        self.on_batch: Callable[[int], None] | None = None

    @property
    def enabled(self) -> bool:
        return self._spec not in (None, "none")

    @property
    def loaded(self) -> bool:
        """True when no model is needed or it is in memory (``model`` then returns at once)."""
        return not self.enabled or self._model is not None

    @property
    def model(self) -> Embedder:
        """The embedder, loaded on first use (the local model loads in ~0.2 s)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = _build(str(self._spec), self._settings)
        return self._model

    def settle(self) -> None:
        """Wait for a model load in progress in another thread (a warm-up) to finish: a process
        that exits while onnxruntime builds its session aborts ("terminate called without an
        active exception")."""
        with self._lock:
            pass

    def _usable_for(self, state: NamespaceState | None, field: str) -> bool:
        """Whether texts in this namespace get vectors from our model (raises on a mismatch)."""
        if not self.enabled:
            return False
        source = state.embedder if state is not None and state.dim is not None else None
        if source is None:
            return True
        if source == "caller":
            return False
        if not same_space(self.model, source):
            raise ValidationError(
                f"{field}: namespace {state.name!r} holds vectors from {source!r}, but this "  # type: ignore[union-attr]
                f"database embeds with {self.model.name!r}; open it with that embedder or "
                "pass vectors",
                field=field,
            )
        return True

    def source_in(self, state: NamespaceState | None) -> str:
        """The name our model's vectors are recorded under in this namespace: the namespace's
        own when it already holds vectors of the same space (e.g. this model at another
        precision), so one namespace keeps one name; else the model's."""
        model = self.model
        recorded = state.embedder if state is not None and state.dim is not None else None
        if recorded is not None and recorded != "caller" and same_space(model, recorded):
            return recorded
        return model.name

    def fill(self, state: NamespaceState | None, items: Sequence[MemoryInput]) -> None:
        """Give every item without a vector one from the model (one batch), if applicable. A
        text this namespace was just queried with takes that query's vector (the memory proxy
        writes the user's turn it recalled for: embedded once, not twice)."""
        todo = [it for it in items if it.vec is None]
        if not todo or not self._usable_for(state, "embedding"):
            return
        source = self.source_in(state)
        if state is not None and self._query_vectors_are_memory_vectors():
            with self._lock:
                known = [self._cache.get((state.name, it.content)) for it in todo]
            for it, vec in zip(todo, known, strict=True):
                if vec is not None:
                    it.vec, it.source = vec, source
            todo = [it for it in todo if it.vec is None]
            if not todo:
                return
        vecs = self.model.embed([it.content for it in todo])
        self.batches.append(len(todo))
        del self.batches[:-256]
        if self.on_batch is not None:
            self.on_batch(len(todo))
        for it, vec in zip(todo, vecs, strict=True):
            vec.setflags(write=False)
            it.vec = vec
            it.source = source

    def _query_vectors_are_memory_vectors(self) -> bool:
        """Whether a cached query vector may be written as a memory's: not when queries are
        embedded by a query-only model (OnnxMiniLM's int8 one, whose vectors depend on their
        batch and are never stored)."""
        return getattr(self.model, "query_model", "same") == "same"

    def embed_text(self, state: NamespaceState | None, text: str) -> np.ndarray | None:
        """A vector for a text about to be written (None when the namespace gets none)."""
        if not self._usable_for(state, "embedding"):
            return None
        vec = self.model.embed([text])[0]
        vec.setflags(write=False)
        return vec

    def query(self, state: NamespaceState, text: str, *, required: bool) -> np.ndarray | None:
        """The query vector for ``text``; None when vector search cannot apply here."""
        if not self.enabled:
            if required:
                raise ValidationError(
                    "embedding: no embedder is configured; pass embedding= or use mode='keyword'",
                    field="embedding",
                )
            return None
        if state.embedder == "caller" and state.dim is not None:
            if required:
                raise ValidationError(
                    f"embedding: namespace {state.name!r} holds caller-provided vectors; "
                    "pass embedding= with the query",
                    field="embedding",
                )
            return None
        if state.dim is None and not required:
            return None  # nothing to compare with
        self._usable_for(state, "embedding")
        key = (state.name, text)
        with self._lock:
            vec = self._cache.get(key)
            if vec is not None:
                self._cache.move_to_end(key)
                self.cache_hits += 1
                return vec
            self.cache_misses += 1
        model = self.model
        embed_query = getattr(model, "embed_query", None)  # a query-only model (embed/)
        vec = embed_query(text) if embed_query is not None else model.embed([text])[0]
        vec.setflags(write=False)
        with self._lock:
            self._cache[key] = vec
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vec

    def forget_texts(self, namespace: str, needle: str) -> int:
        """Drop the cached query texts of ``namespace`` that contain ``needle`` (an erased
        entity's name); returns how many went."""
        with self._lock:
            gone = [k for k in self._cache if k[0] == namespace and needle in k[1]]
            for key in gone:
                del self._cache[key]
        return len(gone)


def _build(spec: str, settings: Settings) -> Embedder:
    if spec == "minilm":
        from ..embed import OnnxMiniLM

        return OnnxMiniLM(
            precision=settings.minilm_precision,
            intra_op_num_threads=settings.embed_threads,
            spin=settings.embed_spin,
            query_model=settings.minilm_query_model,
        )
    if spec == "openai":
        from ..embed.openai_compat import OpenAIEmbedder

        return OpenAIEmbedder(settings.openai_base_url or None, settings.openai_model or None)
    if spec == "sentence-transformers":
        from ..embed.sentence_transformers import SentenceTransformerEmbedder

        if not settings.st_model:
            raise ValidationError(
                "st_model: required with embedder='sentence-transformers'", field="st_model"
            )
        return SentenceTransformerEmbedder(settings.st_model)
    raise ValidationError(f"embedder: unknown embedder {spec!r}", field="embedder")
