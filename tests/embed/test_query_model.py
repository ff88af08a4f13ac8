"""The query-only model of OnnxMiniLM (embed_query): dynamic int8 close to float32 on the golden
texts, "same" identical to embed(), chosen from the CPU's flags by "auto"; the flag parser."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from synapsedb.config import Settings
from synapsedb.embed import OnnxMiniLM
from synapsedb.embed.cpu import cpu_flags, has_int8_dot
from synapsedb.errors import ValidationError

GOLDEN = Path(__file__).with_name("reference_vectors.json")
# per text at batch 1: measured min 0.9815 and mean 0.9919 on these 32 texts (0.991 or more on
# the LoCoMo and BEAM questions, which are shorter)
INT8_MIN_COSINE = 0.975
INT8_MIN_MEAN_COSINE = 0.988


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [item["text"] for item in json.loads(GOLDEN.read_text("utf-8"))["items"]]


def test_int8_query_vectors_are_close_to_float32(texts: list[str]) -> None:
    f32 = OnnxMiniLM(query_model="same")
    int8 = OnnxMiniLM(query_model="int8")
    int8.load_query_model()  # exported here if missing (else queries use float32 meanwhile)
    want = f32.embed(texts)
    got = np.stack([int8.embed_query(t) for t in texts])
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got.astype(np.float64) * want).sum(axis=1)
    assert cos.min() >= INT8_MIN_COSINE, cos.min()
    assert cos.mean() >= INT8_MIN_MEAN_COSINE, cos.mean()
    assert not np.array_equal(got, want)  # it is another model
    # batch 1 each time: the same text gives the same vector
    assert np.array_equal(int8.embed_query(texts[0]), got[0])
    # "same" is embed() itself
    assert np.array_equal(f32.embed_query(texts[3]), want[3])


def test_auto_follows_the_cpu_and_bad_values_are_refused() -> None:
    auto = OnnxMiniLM()
    assert auto.query_model == ("int8" if has_int8_dot() else "same")
    with pytest.raises(ValidationError, match="query_model"):
        OnnxMiniLM(query_model="fp16")
    with pytest.raises(ValidationError, match="minilm_query_model"):
        Settings(minilm_query_model="fast")
    with pytest.raises(ValidationError):
        OnnxMiniLM(query_model="same").embed_query(b"bytes")  # type: ignore[arg-type]


def test_cpu_flags(tmp_path: Path) -> None:
    x86 = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\nbugs\t\t: spectre\n"
    arm = "processor\t: 0\nFeatures\t: fp asimd asimddp\n"
    assert "avx512_vnni" in cpu_flags(x86) and "spectre" not in cpu_flags(x86)
    assert "asimddp" in cpu_flags(arm)
    old = tmp_path / "old"
    old.write_text("flags\t\t: fpu sse avx2\n")
    new = tmp_path / "new"
    new.write_text(x86)
    assert not has_int8_dot(old) and has_int8_dot(new)
    assert not has_int8_dot(tmp_path / "missing")
