"""The command line's shared arguments: where a command works (``--url`` and ``--api-key`` of
a server, or ``--data`` of a data directory), in which namespace and as which agent, and the
parsing of JSON, ``key=value`` and JSON-lines arguments."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

from .errors import ValidationError

__all__ = ["assignments", "data_parent", "json_arg", "lines_file", "open_target", "remote_parent"]


def remote_parent() -> argparse.ArgumentParser:
    """``--url``, ``--api-key``, ``-n/--namespace``, ``--agent`` (also for chat and mcp)."""
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument(
        "--url",
        default=os.environ.get("SYNAPSEDB_URL", "http://127.0.0.1:7379"),
        help="server URL (env SYNAPSEDB_URL)",
    )
    remote.add_argument(
        "--api-key",
        default=os.environ.get("SYNAPSEDB_API_KEY"),
        help="API key (env SYNAPSEDB_API_KEY)",
    )
    remote.add_argument(
        "-n",
        "--namespace",
        default=os.environ.get("SYNAPSEDB_NAMESPACE", "default"),
        help="namespace (env SYNAPSEDB_NAMESPACE)",
    )
    remote.add_argument(
        "--agent",
        default=os.environ.get("SYNAPSEDB_AGENT"),
        help="agent recorded as writer or asker (env SYNAPSEDB_AGENT)",
    )
    return remote


def data_parent(remote: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False, parents=[remote])
    p.add_argument("--data", help="a data directory to open in this process instead of a server")
    p.add_argument("--json", action="store_true", help="the whole answer as JSON")
    p.add_argument(
        "--include",
        choices=["embedding"],
        action="append",
        default=[],
        help="embedding: memories' vectors too (left out by default)",
    )
    return p


@contextlib.contextmanager
def open_target(args: argparse.Namespace) -> Iterator[Any]:
    """The database the command works on: ``--data`` opened here, else the server."""
    import synapsedb

    if getattr(args, "data", None):
        from .config import Settings

        db: Any = synapsedb.open(args.data, settings=Settings.from_env())
    else:
        from .client import RemoteDatabase

        db = RemoteDatabase(args.url, api_key=args.api_key, include=args.include or None)
    try:
        yield db
    finally:
        db.close()


def json_arg(text: str | None, field: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{field}: not valid JSON ({exc})", field=field) from None


def assignments(pairs: list[str]) -> dict[str, Any]:
    """``name=value`` pairs: each value JSON when it parses (``100``, ``null``), else text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, eq, raw = pair.partition("=")
        if not eq or not name:
            raise ValidationError(f"setting: expected name=value, got {pair!r}", field="setting")
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError:
            out[name] = raw
    return out


def lines_file(path: str, field: str) -> list[Any]:
    out = []
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                out.append(json_arg(line.decode(), f"{field} line {number}"))
    return out
