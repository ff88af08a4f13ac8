"""Build the MiniLM / BERT encoder as an ONNX graph straight from numpy weights (no torch).

The graph mirrors Hugging Face ``BertModel`` in inference mode (dropout off)::

    x = LayerNorm(word_emb[input_ids] + (pos_emb + type_emb[0])[:seq_len])
    repeat num_layers times:
        a = SelfAttention(x, mask)           # multi-head, scaled dot product, additive mask
        x = LayerNorm(x + Dense(a))
        f = Dense(GELU_erf(Dense(x)))        # FFN, exact GELU
        x = LayerNorm(x + f)
    last_hidden_state = x                    # (batch, seq, hidden) float32

Inputs are ``input_ids`` and ``attention_mask`` (int64, ``(batch, seq)``). Single-sentence
encoding always uses token type 0, so that row of the token-type table is folded into the position
table, which saves an input and a Gather. The pooler is not used by sentence-transformers and is
left out. Linear weights are stored transposed (``(in, out)``) so that every projection is a
``MatMul`` with a constant right-hand side, the form ``quantize_dynamic`` turns into
``MatMulInteger``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["OPSET", "BertConfig", "build_bert_graph"]

OPSET = 17  # first opset with LayerNormalization; Gelu needs 20, so GELU is spelled with Erf.


@dataclass(frozen=True)
class BertConfig:
    """The few hyper-parameters of a BERT encoder that shape the graph."""

    hidden_size: int = 384
    num_layers: int = 6
    num_heads: int = 12
    intermediate_size: int = 1536
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_hf(cls, cfg: Mapping[str, Any]) -> BertConfig:
        """Read a Hugging Face ``config.json`` dict; reject anything this builder can't mirror."""
        if cfg.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported hidden_act {cfg.get('hidden_act')!r}")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        return cls(
            hidden_size=int(cfg["hidden_size"]),
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=int(cfg["num_attention_heads"]),
            intermediate_size=int(cfg["intermediate_size"]),
            layer_norm_eps=float(cfg["layer_norm_eps"]),
        )


class _Builder:
    """Accumulates nodes and initializers with deterministic, readable names."""

    def __init__(self, weights: Mapping[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self._names: set[str] = set()

    def const(self, name: str, value: np.ndarray) -> str:
        """Add an initializer once; later calls with the same name reuse it."""
        if name not in self._names:
            self._names.add(name)
            self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, key: str, *, transpose: bool = False) -> str:
        arr = np.asarray(self.weights[key], dtype=np.float32)
        return self.const(key, arr.T if transpose else arr)

    def op(self, op_type: str, inputs: list[str], name: str, **attrs: Any) -> str:
        """Append one node named after its single output tensor ``name``."""
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    def linear(self, x: str, prefix: str) -> str:
        w = self.weight(f"{prefix}.weight", transpose=True)
        b = self.weight(f"{prefix}.bias")
        return self.op("Add", [self.op("MatMul", [x, w], f"{prefix}.mm"), b], f"{prefix}.out")

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        g, b = self.weight(f"{prefix}.weight"), self.weight(f"{prefix}.bias")
        return self.op("LayerNormalization", [x, g, b], f"{prefix}.out", axis=-1, epsilon=eps)


def _embeddings(bld: _Builder, cfg: BertConfig) -> str:
    w = bld.weights
    pos_plus_type = (
        np.asarray(w["embeddings.position_embeddings.weight"], np.float32)
        + np.asarray(w["embeddings.token_type_embeddings.weight"], np.float32)[0:1]
    )
    table = bld.weight("embeddings.word_embeddings.weight")
    pos = bld.const("embeddings.position_plus_type0", pos_plus_type)
    words = bld.op("Gather", [table, "input_ids"], "emb.words", axis=0)
    shape = bld.op("Shape", ["input_ids"], "emb.ids_shape")
    seq_len = bld.op(
        "Slice",
        [
            shape,
            bld.const("c.one", np.array([1], np.int64)),
            bld.const("c.two", np.array([2], np.int64)),
        ],
        "emb.seq_len",
    )
    positions = bld.op(
        "Slice",
        [pos, bld.const("c.zero", np.array([0], np.int64)), seq_len, "c.zero"],
        "emb.positions",
    )
    summed = bld.op("Add", [words, positions], "emb.sum")
    return bld.layer_norm(summed, "embeddings.LayerNorm", cfg.layer_norm_eps)


def _attention_bias(bld: _Builder) -> str:
    """``(batch, 1, 1, seq)`` additive mask: 0 where attended, float32 min where padded."""
    m = bld.op("Cast", ["attention_mask"], "mask.float", to=TensorProto.FLOAT)
    inv = bld.op("Sub", [bld.const("c.onef", np.array(1.0, np.float32)), m], "mask.inv")
    neg = bld.const("c.neg_big", np.array(np.finfo(np.float32).min, np.float32))
    bias = bld.op("Mul", [inv, neg], "mask.bias")
    return bld.op("Unsqueeze", [bias, bld.const("c.axes12", np.array([1, 2], np.int64))], "mask.4d")


def _self_attention(bld: _Builder, x: str, bias: str, p: str, cfg: BertConfig) -> str:
    head_dim = cfg.hidden_size // cfg.num_heads
    split = bld.const("c.split_heads", np.array([0, 0, cfg.num_heads, head_dim], np.int64))

    def heads(name: str, perm: list[int]) -> str:
        y = bld.linear(x, f"{p}.attention.self.{name}")
        y = bld.op("Reshape", [y, split], f"{p}.{name}.split")
        return bld.op("Transpose", [y], f"{p}.{name}.heads", perm=perm)

    q = heads("query", [0, 2, 1, 3])  # (b, h, s, d)
    k = heads("key", [0, 2, 3, 1])  # (b, h, d, s)
    v = heads("value", [0, 2, 1, 3])  # (b, h, s, d)
    scores = bld.op("MatMul", [q, k], f"{p}.scores")
    scale = bld.const(f"{p}.scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    scores = bld.op("Mul", [scores, scale], f"{p}.scores_scaled")
    scores = bld.op("Add", [scores, bias], f"{p}.scores_masked")
    probs = bld.op("Softmax", [scores], f"{p}.probs", axis=-1)
    ctx = bld.op("MatMul", [probs, v], f"{p}.context")
    ctx = bld.op("Transpose", [ctx], f"{p}.context_t", perm=[0, 2, 1, 3])
    merge = bld.const("c.merge_heads", np.array([0, 0, cfg.hidden_size], np.int64))
    return bld.op("Reshape", [ctx, merge], f"{p}.context_merged")


def _gelu(bld: _Builder, x: str, p: str) -> str:
    """Exact GELU: ``0.5 * x * (1 + erf(x / sqrt(2)))``."""
    inv_sqrt2 = bld.const("c.inv_sqrt2", np.array(1.0 / math.sqrt(2.0), np.float32))
    half = bld.const("c.half", np.array(0.5, np.float32))
    e = bld.op("Erf", [bld.op("Mul", [x, inv_sqrt2], f"{p}.gelu_div")], f"{p}.gelu_erf")
    one = bld.const("c.onef", np.array(1.0, np.float32))
    e1 = bld.op("Add", [e, one], f"{p}.gelu_plus1")
    return bld.op("Mul", [bld.op("Mul", [x, half], f"{p}.gelu_half"), e1], f"{p}.gelu")


def _layer(bld: _Builder, x: str, bias: str, i: int, cfg: BertConfig) -> str:
    p = f"encoder.layer.{i}"
    attn = bld.linear(_self_attention(bld, x, bias, p, cfg), f"{p}.attention.output.dense")
    res = bld.op("Add", [attn, x], f"{p}.attention.residual")
    x = bld.layer_norm(res, f"{p}.attention.output.LayerNorm", cfg.layer_norm_eps)
    h = _gelu(bld, bld.linear(x, f"{p}.intermediate.dense"), p)
    out = bld.linear(h, f"{p}.output.dense")
    res = bld.op("Add", [out, x], f"{p}.output.residual")
    return bld.layer_norm(res, f"{p}.output.LayerNorm", cfg.layer_norm_eps)


def build_bert_graph(
    weights: Mapping[str, np.ndarray], cfg: BertConfig, *, doc: str = ""
) -> onnx.ModelProto:
    """Return a checked float32 ONNX model computing ``last_hidden_state``."""
    bld = _Builder(weights)
    x = _embeddings(bld, cfg)
    bias = _attention_bias(bld)
    for i in range(cfg.num_layers):
        x = _layer(bld, x, bias, i, cfg)
    bld.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "seq", cfg.hidden_size]
    )
    graph = helper.make_graph(bld.nodes, "bert_encoder", [ids, mask], [out], bld.inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="synapsedb.embed",
        doc_string=doc,
    )
    model.ir_version = 8  # readable by any onnxruntime >= 1.10
    onnx.checker.check_model(model)
    return model
