"""Local text embedders (no torch, no network at run time).

``from synapsedb.embed import OnnxMiniLM`` loads onnxruntime and tokenizers on first use only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Embedder

if TYPE_CHECKING:
    from .onnx_minilm import OnnxMiniLM

__all__ = ["Embedder", "OnnxMiniLM"]


def __getattr__(name: str) -> Any:
    if name == "OnnxMiniLM":
        from .onnx_minilm import OnnxMiniLM

        return OnnxMiniLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
