"""The ``synapsedb`` command line: a thin shell over the library."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence

from . import __version__
from . import open as open_db
from .errors import SynapseError


def _stats(args: argparse.Namespace) -> int:
    with open_db(args.data) as db:
        names = [args.namespace] if args.namespace else db.namespaces()
        out = {n: dataclasses.asdict(db.namespace(n).stats()) for n in names}
    print(json.dumps(out, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="synapsedb", description="SynapseDB: memory for agents")
    parser.add_argument("--version", action="version", version=f"synapsedb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("stats", help="print namespace statistics of a data directory")
    p.add_argument("--data", default="./synapse-data", help="data directory")
    p.add_argument("--namespace", help="one namespace (default: all)")
    p.set_defaults(func=_stats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SynapseError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
