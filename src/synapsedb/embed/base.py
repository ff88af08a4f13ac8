"""The one interface every SynapseDB text embedder implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "same_space"]


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalized float32 vectors.

    ``name`` is a stable id of the model and its numerics (vectors from embedders with different
    names must not be mixed in one index); ``dim`` is the vector length. An embedder may also
    have ``compatible_names``: names of other embedders whose vectors live in the same space
    (the same model at another precision), which may share an index with its own.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape ``(len(texts), dim)`` whose rows have unit norm."""
        ...


def same_space(embedder: Embedder, name: str) -> bool:
    """Whether vectors recorded as coming from ``name`` may be mixed with ``embedder``'s."""
    return name == embedder.name or name in getattr(embedder, "compatible_names", ())
