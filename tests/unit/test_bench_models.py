"""The pure helpers of bench/bench_models.py: rank fusion, paired bootstrap, ONNX weight naming."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

_PATH = Path(__file__).resolve().parents[2] / "bench" / "bench_models.py"
_spec = importlib.util.spec_from_file_location("bench_models", _PATH)
assert _spec is not None and _spec.loader is not None
bm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bm)


def test_fused_weight_zero_keeps_the_hybrid_order() -> None:
    hybrid = [7, 3, 9, 1, 4]
    scores = np.array([0.1, 0.9, 0.5, 0.8, 0.0])
    assert bm._fused(hybrid, scores, 3, 0.0) == hybrid


def test_fused_weight_one_sorts_the_head_by_reranker_score_and_keeps_the_tail() -> None:
    hybrid = [7, 3, 9, 1, 4]
    scores = np.array([0.1, 0.9, 0.5, 0.8, 0.0])  # only the first 3 are reranked
    assert bm._fused(hybrid, scores, 3, 1.0) == [3, 9, 7, 1, 4]


def test_fused_in_between_moves_a_strong_rerank_up_by_one() -> None:
    # w=0.7: the reranker's first (hybrid second) overtakes the hybrid's first (reranker last)
    out = bm._fused([1, 2, 3], np.array([0.0, 1.0, 0.5]), 3, 0.7)
    assert out[0] == 2 and sorted(out) == [1, 2, 3]


def test_delta_ci_of_identical_and_shifted_samples() -> None:
    a = np.linspace(0, 1, 50)
    assert bm.delta_ci(a, a) == "+0.000 (+0.000, +0.000)"
    assert bm.delta_ci(a + 1.0, a) == "+1.000 (+1.000, +1.000)"
    lo_hi = bm.delta_ci(np.r_[np.ones(25), np.zeros(25)], np.zeros(50))
    assert lo_hi.startswith("+0.500 (+0.3") and lo_hi.endswith(")")


def test_l3_weights_names_anonymous_matmuls_after_their_bias(tmp_path: Path) -> None:
    prefix = "model.0.auto_model."
    w = np.arange(6, dtype=np.float32).reshape(2, 3)  # stored (in, out)
    bias = f"{prefix}encoder.layer.0.attention.self.query.bias"
    ln = f"{prefix}embeddings.LayerNorm.weight"
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "onnx::MatMul_9"], ["mm"]),
            helper.make_node("Add", ["mm", bias], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [
            numpy_helper.from_array(w, "onnx::MatMul_9"),
            numpy_helper.from_array(np.ones(3, np.float32), bias),
            numpy_helper.from_array(np.ones(2, np.float32), ln),
        ],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    got = bm._l3_weights(path)
    assert set(got) == {
        "encoder.layer.0.attention.self.query.weight",
        "encoder.layer.0.attention.self.query.bias",
        "embeddings.LayerNorm.weight",
    }
    np.testing.assert_array_equal(got["encoder.layer.0.attention.self.query.weight"], w.T)
