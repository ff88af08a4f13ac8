"""What this machine's CPU offers the embedding model: whether it has int8 dot-product
instructions, which decide whether an int8 model is the faster one.

onnxruntime's int8 matrix kernels pay off with VNNI (x86: AVX512-VNNI, AVX-VNNI, or AMX) or the
dot-product instructions of ARM (``asimddp``); without them, int8 arithmetic is emulated with
wider instructions and saves little or nothing over float32. Read from ``/proc/cpuinfo`` (Linux);
elsewhere the answer is "no", the safe default (the float32 model is never slower there).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

__all__ = ["INT8_DOT_FLAGS", "cpu_flags", "has_int8_dot"]

#: /proc/cpuinfo flags that mean fast int8 dot products
INT8_DOT_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8", "asimddp"})


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The feature flags of a /proc/cpuinfo text (x86 ``flags``, ARM ``Features``)."""
    out: set[str] = set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            out.update(value.split())
    return frozenset(out)


@lru_cache(maxsize=1)
def has_int8_dot(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has int8 dot-product instructions (False when it cannot tell)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return False
    return bool(cpu_flags(text) & INT8_DOT_FLAGS)
