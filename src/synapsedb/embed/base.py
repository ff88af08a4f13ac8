"""The one interface every SynapseDB text embedder implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalized float32 vectors.

    ``name`` is a stable id of the model and its numerics (vectors from embedders with different
    names must not be mixed in one index); ``dim`` is the vector length.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape ``(len(texts), dim)`` whose rows have unit norm."""
        ...
