"""``synapsedb export`` and ``synapsedb import``: a namespace as JSON lines, with progress.

Progress is one line on standard error, redrawn at most ten times a second, and only when
standard error is a terminal (a pipe or a log file gets no carriage returns); the final counts
are printed either way. No progress library is needed for one line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import IO, Any

__all__ = ["Progress", "export_namespace", "import_namespace"]


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GB"  # pragma: no cover - the loop returns


class Progress:
    """A progress line on ``stream`` (standard error) while work goes on: what, a count, the
    bytes so far (of ``total`` bytes when known) and the rate. Drawn only on a terminal."""

    def __init__(
        self,
        what: str,
        *,
        total_bytes: int | None = None,
        stream: IO[str] | None = None,
        every: float = 0.1,
    ) -> None:
        self.what, self.total_bytes = what, total_bytes
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty())
        self.every = every
        self.count = self.nbytes = 0
        self.started = time.monotonic()
        self.drawn = 0.0
        self.width = 0

    def update(self, count: int = 1, nbytes: int = 0) -> None:
        self.count += count
        self.nbytes += nbytes
        now = time.monotonic()
        if self.enabled and now - self.drawn >= self.every:
            self.drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.count / max(now - self.started, 1e-6)
        text = f"{self.what} {self.count:,} records, {_size(self.nbytes)}"
        if self.total_bytes:
            text += f" of {_size(self.total_bytes)} ({100 * self.nbytes / self.total_bytes:.0f}%)"
        text += f", {rate:,.0f}/s"
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def note(self, text: str) -> None:
        """Say what happens now (a long step with no count), on a terminal only."""
        if self.enabled:
            self.stream.write("\r" + text.ljust(self.width))
            self.stream.flush()
            self.width = len(text)

    def done(self, message: str) -> None:
        """Clear the line and print ``message`` (always: the counts are the answer)."""
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
        print(message, file=self.stream, flush=True)


def _private_file(path: str) -> Any:
    """``path`` opened for writing, readable by its owner only (also when it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")


def export_namespace(mem: Any, args: argparse.Namespace) -> int:
    """Every stored row of the namespace as JSON lines to ``--out`` (owner-only) or stdout."""
    import msgspec

    # an export holds every memory: readable by its owner only, like the data directory
    out = _private_file(args.out) if args.out else sys.stdout.buffer
    enc = msgspec.json.Encoder()
    progress = Progress(f"exporting {mem.name}:")
    try:
        for record in mem.export():
            line = enc.encode(record) + b"\n"
            out.write(line)
            progress.update(1, len(line))
    finally:
        if args.out:
            out.close()
        else:
            out.flush()
    progress.done(f"exported {progress.count:,} records ({_size(progress.nbytes)}) from {mem.name}")
    return 0


def import_namespace(mem: Any, args: argparse.Namespace) -> int:
    """JSON lines from an export into the (empty) namespace, in one transaction."""
    import msgspec

    from .errors import ValidationError

    total = os.path.getsize(args.file)
    progress = Progress(f"reading {args.file}:", total_bytes=total)
    records: list[Any] = []
    decode = msgspec.json.Decoder().decode
    with open(args.file, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    records.append(decode(line))
                except msgspec.DecodeError as exc:
                    raise ValidationError(
                        f"{args.file}: line {number} is not JSON ({exc})", field="file"
                    ) from None
                progress.update(1, len(line))
            else:
                progress.update(0, len(line))
    progress.note(f"importing {len(records):,} records into {mem.name} (one transaction)...")
    started = time.monotonic()
    n = mem.import_records(records)
    progress.done(
        f"imported {n:,} memory versions ({len(records):,} records) into {mem.name} "
        f"in {time.monotonic() - started:.1f} s"
    )
    return 0
