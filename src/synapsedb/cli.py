"""The ``synapsedb`` command line: a thin shell over the library."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
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


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _serve(args: argparse.Namespace) -> int:
    if args.host not in LOOPBACK and not args.host.startswith("127."):
        print(
            f"error: refusing to listen on {args.host}: a non-loopback address needs API keys, "
            "which this version does not have yet; bind 127.0.0.1",
            file=sys.stderr,
        )
        return 2
    import uvicorn

    from .config import Settings
    from .server import create_app

    settings = Settings.from_env()
    db = open_db(args.data, settings=settings)
    try:
        print(f"synapsedb {__version__}: serving {args.data} on http://{args.host}:{args.port}")
        uvicorn.run(
            create_app(db), host=args.host, port=args.port, log_level=args.log_level,
            access_log=False, loop="auto", http="auto",
        )  # fmt: skip
    finally:
        db.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="synapsedb", description="SynapseDB: memory for agents")
    parser.add_argument("--version", action="version", version=f"synapsedb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("stats", help="print namespace statistics of a data directory")
    p.add_argument("--data", default="./synapse-data", help="data directory")
    p.add_argument("--namespace", help="one namespace (default: all)")
    p.set_defaults(func=_stats)
    p = sub.add_parser("serve", help="run the HTTP server on a data directory")
    p.add_argument("--data", default=os.environ.get("SYNAPSEDB_DATA", "./synapse-data"),
                   help="data directory (env SYNAPSEDB_DATA)")  # fmt: skip
    p.add_argument("--host", default=os.environ.get("SYNAPSEDB_HOST", "127.0.0.1"),
                   help="address to bind (env SYNAPSEDB_HOST; loopback only for now)")  # fmt: skip
    p.add_argument("--port", type=int, default=int(os.environ.get("SYNAPSEDB_PORT", "7379")),
                   help="port (env SYNAPSEDB_PORT)")  # fmt: skip
    p.add_argument("--log-level", default="warning", help="uvicorn log level")
    p.set_defaults(func=_serve)
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
