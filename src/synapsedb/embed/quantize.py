"""Weight-only uint8 quantization of the float32 encoder graph, written in numpy.

Why weight-only and not ``onnxruntime.quantization.quantize_dynamic``: dynamic quantization
also quantizes every activation tensor to uint8 with ONE scale per tensor, computed at run time
over the whole batch (padding included). On all-MiniLM-L6-v2 (per-channel uint8 weights) that
gave a cosine against the float32 reference as low as 0.978 (mean 0.991) on the golden texts, and
made a text's vector depend on which other texts share its batch (cosine between the same text
embedded alone and in a batch as low as 0.966). Here only the weights are quantized: min cosine
0.9987, mean 0.9995, and a text's vector does not depend on its batch mates.

* Every ``MatMul`` whose right-hand side is a constant ``(K, N)`` matrix becomes ONNX Runtime's
  ``com.microsoft.MatMulNBits`` with ``bits=8``: asymmetric uint8, one scale and zero point per
  output channel and block of ``block_size`` rows of K (needs onnxruntime >= 1.22). With
  ``accuracy_level=4`` ORT computes it with int8 kernels, quantizing each activation ROW per block
  on the fly (so rows stay independent); level 0 would be exact float32 math but 7x slower.
* The word-embedding table (a ``Gather`` on a constant ``(V, H)`` matrix) is stored as uint8
  with one scale and offset per row (per token), and dequantized after the lookup with standard
  ONNX ops: ``Gather -> Cast -> Mul(scale) -> Add(offset)``.

Everything is plain arithmetic on the weights, so the output is bit-for-bit deterministic.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "MS_DOMAIN",
    "quantize_blockwise_u8",
    "quantize_dynamic_int8",
    "quantize_rows_u8",
    "quantize_weight_only",
]

MS_DOMAIN = "com.microsoft"


def quantize_rows_u8(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Asymmetric uint8 per row: ``table ~= q * scale + offset`` with shapes (V,H),(V,1),(V,1)."""
    t = np.asarray(table, np.float32)
    lo = t.min(axis=1, keepdims=True)
    hi = t.max(axis=1, keepdims=True)
    scale = ((hi - lo) / np.float32(255.0)).astype(np.float32)
    scale[scale == 0] = np.float32(1.0)
    q = np.clip(np.rint((t - lo) / scale), 0, 255).astype(np.uint8)
    return q, scale, lo.astype(np.float32)


def quantize_blockwise_u8(
    weight: np.ndarray, block_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quantize a ``(K, N)`` matrix in MatMulNBits' 8-bit layout.

    Returns ``packed`` (N, k_blocks, block_size) uint8, ``scales`` (N, k_blocks) float32 and
    ``zero_points`` (N, k_blocks) uint8, with ``W[k, n] ~= (q - zp) * scale`` per block. The range
    of each block is widened to include 0 so that zero weights stay exact.
    """
    w = np.asarray(weight, np.float32)
    k, n = w.shape
    k_blocks = -(-k // block_size)
    padded = np.zeros((k_blocks * block_size, n), np.float32)
    padded[:k] = w
    blocks = padded.T.reshape(n, k_blocks, block_size)
    lo = np.minimum(blocks.min(axis=2), 0.0)
    hi = np.maximum(blocks.max(axis=2), 0.0)
    scale = ((hi - lo) / np.float32(255.0)).astype(np.float32)
    scale[scale == 0] = np.float32(1.0)
    zp = np.clip(np.rint(-lo / scale), 0, 255).astype(np.float32)
    q = np.clip(np.rint(blocks / scale[..., None]) + zp[..., None], 0, 255).astype(np.uint8)
    return q, scale, zp.astype(np.uint8)


def _matmul_nbits(
    node: onnx.NodeProto, weight: np.ndarray, block_size: int, accuracy_level: int
) -> tuple[list[onnx.NodeProto], list[TensorProto]]:
    k, n = weight.shape
    packed, scales, zps = quantize_blockwise_u8(weight, block_size)
    base = node.input[1]
    inits = [
        numpy_helper.from_array(packed, f"{base}.q8"),
        numpy_helper.from_array(scales, f"{base}.scales"),
        numpy_helper.from_array(zps, f"{base}.zero_points"),
    ]
    new = helper.make_node(
        "MatMulNBits",
        [node.input[0], *(t.name for t in inits)],
        list(node.output),
        name=node.name,
        domain=MS_DOMAIN,
        K=k,
        N=n,
        bits=8,
        block_size=block_size,
        accuracy_level=accuracy_level,
    )
    return [new], inits


def _gather_rows(
    node: onnx.NodeProto, table: np.ndarray
) -> tuple[list[onnx.NodeProto], list[TensorProto]]:
    q, scale, offset = quantize_rows_u8(table)
    base, out = node.input[0], node.output[0]
    inits = [
        numpy_helper.from_array(q, f"{base}.q8"),
        numpy_helper.from_array(scale, f"{base}.row_scale"),
        numpy_helper.from_array(offset, f"{base}.row_offset"),
    ]
    ids = node.input[1]
    nodes = [
        helper.make_node("Gather", [inits[0].name, ids], [f"{out}.q8"], name=f"{out}.q8", axis=0),
        helper.make_node(
            "Cast", [f"{out}.q8"], [f"{out}.f"], name=f"{out}.f", to=TensorProto.FLOAT
        ),
        helper.make_node("Gather", [inits[1].name, ids], [f"{out}.s"], name=f"{out}.s", axis=0),
        helper.make_node("Gather", [inits[2].name, ids], [f"{out}.o"], name=f"{out}.o", axis=0),
        helper.make_node("Mul", [f"{out}.f", f"{out}.s"], [f"{out}.fs"], name=f"{out}.fs"),
        helper.make_node("Add", [f"{out}.fs", f"{out}.o"], [out], name=out),
    ]
    return nodes, inits


def quantize_weight_only(
    model: onnx.ModelProto, *, block_size: int = 32, accuracy_level: int = 4
) -> onnx.ModelProto:
    """Return a copy of ``model`` with constant-weight MatMuls and Gathers stored as uint8.

    ``block_size`` (a power of two >= 16) is the number of K rows sharing one scale in a
    MatMulNBits block. ``accuracy_level`` is passed to MatMulNBits: 0 keeps float32 math.
    """
    if block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two >= 16, got {block_size}")
    graph = model.graph
    consts = {t.name: t for t in graph.initializer}
    used: set[str] = set()
    nodes: list[onnx.NodeProto] = []
    inits: list[TensorProto] = []
    for node in graph.node:
        src = node.input[1] if node.op_type == "MatMul" else node.input[0] if node.input else ""
        tensor = consts.get(src)
        if tensor is None or tensor.data_type != TensorProto.FLOAT or len(tensor.dims) != 2:
            nodes.append(node)
            continue
        if node.op_type == "MatMul":
            new_nodes, new_inits = _matmul_nbits(
                node, numpy_helper.to_array(tensor), block_size, accuracy_level
            )
        elif node.op_type == "Gather" and helper.get_node_attr_value(node, "axis") == 0:
            new_nodes, new_inits = _gather_rows(node, numpy_helper.to_array(tensor))
        else:
            nodes.append(node)
            continue
        used.add(src)
        nodes.extend(new_nodes)
        inits.extend(new_inits)
    kept = [t for t in graph.initializer if t.name not in used]
    new_graph = helper.make_graph(
        nodes, graph.name, graph.input, graph.output, kept + inits, doc_string=graph.doc_string
    )
    opsets = [o for o in model.opset_import if o.domain != MS_DOMAIN]
    out = helper.make_model(
        new_graph,
        opset_imports=[*opsets, helper.make_opsetid(MS_DOMAIN, 1)],
        producer_name=model.producer_name,
        doc_string=model.doc_string,
    )
    out.ir_version = model.ir_version
    return out


def quantize_dynamic_int8(model: onnx.ModelProto) -> onnx.ModelProto:
    """Dynamic int8 quantization of the float32 encoder, for query embedding only.

    onnxruntime's ``quantize_dynamic`` with signed int8 weights, one scale per output channel:
    each ``MatMul`` becomes ``DynamicQuantizeLinear`` + ``MatMulInteger``, the activations
    quantized per call with one scale per tensor. That makes a text's vector depend on the
    batch it runs in (see the module docstring), so this model embeds one query at a time and
    never a memory; at batch 1 its vectors have cosine 0.991 or more to float32's (LoCoMo and
    BEAM questions), and it runs in about half the time on CPUs with VNNI int8 instructions.
    The metadata of ``model`` is kept.
    """
    import tempfile
    from pathlib import Path

    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="synapsedb-quantize-") as tmp:
        src, dst = Path(tmp) / "f32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(src))
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True)
        out = onnx.load(str(dst))
    del out.metadata_props[:]
    out.metadata_props.extend(model.metadata_props)
    return out
