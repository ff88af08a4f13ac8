"""One file of named arrays, replaced whole and atomically, read whole or memory-mapped.

A namespace's checkpoint (engine/checkpoint.py) is one such file, so that a process holding
many small namespaces keeps no mapping per namespace (Linux allows about 65,530 per process)
and reads each one with a single ``read``; the one large section (the float32 vectors of a
large namespace) is mapped instead, so that its pages are read when a query touches them.

Layout::

    MAGIC (8 bytes) | header length (8, little-endian) | header (JSON) | sections

Each section starts on a 64-byte boundary; the header names each one with its dtype, shape,
offset, length and CRC-32 (and the CRC-32 of its first and last MiB), plus what the writer
adds under ``"meta"``. The last section may be
followed by a hole (the file is extended without writing): room for rows a mapping of it gains
after the open (:class:`MappedRows`). CRCs are written as 8 hex digits, so the header's length
is known before the sections are written and it is written once at the end.

Writing goes to ``<path>.tmp``, which is fsynced, renamed over ``path``, and the directory
fsynced: a crash leaves the old file or the new one, never a torn one. Reading checks the magic,
the header, every section's bounds and, for sections read whole, their CRC; a mapped section's
CRC is checked on its first and last MiB only (reading all of it would cost the open what the
mapping saves). Anything wrong gives :class:`PackError`, and the caller falls back to what the
file was a shortcut for.
"""

from __future__ import annotations

import json
import mmap
import os
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MAGIC", "MappedRows", "Pack", "PackError", "write_pack"]

MAGIC = b"SYNPACK1"
ALIGN = 64
SAMPLE = 1 << 20  # bytes at each end of a mapped section whose CRC an open checks
BLOCK = 1 << 24  # bytes written (or copied) at a time


def _dtype_spec(dtype: np.dtype[Any]) -> Any:
    """A dtype as JSON: its string, or a record's fields as [[name, string], ...]."""
    return [list(field) for field in dtype.descr] if dtype.names else dtype.str


def _dtype(spec: Any) -> np.dtype[Any]:
    return np.dtype([tuple(field) for field in spec] if isinstance(spec, list) else spec)


class PackError(Exception):
    """A pack file that is missing, torn, foreign or inconsistent with its header."""


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def _crc_hex(crc: int) -> str:
    return f"{crc & 0xFFFFFFFF:08x}"


Chunk = np.ndarray | bytes


def write_pack(
    path: Path,
    meta: Mapping[str, Any],
    sections: Mapping[str, np.ndarray | tuple[str, tuple[int, ...], Iterable[Chunk]]],
    *,
    spare_bytes: int = 0,
    mode: int = 0o600,
) -> None:
    """Write ``sections`` (name -> array, or name -> (dtype, shape, chunks) for a section
    produced a block at a time) and ``meta`` to ``path`` atomically. ``spare_bytes``: a hole
    left after the last section (room a mapping of it may use)."""
    layout: dict[str, dict[str, Any]] = {}
    sources: list[tuple[str, Iterable[Chunk]]] = []
    for name, value in sections.items():
        chunks: Iterable[Chunk]
        dtype: Any
        if isinstance(value, np.ndarray):
            arr = np.ascontiguousarray(value)
            dtype, shape, chunks = _dtype_spec(arr.dtype), tuple(arr.shape), [arr]
        else:
            dtype, shape, chunks = value[0], tuple(value[1]), value[2]
        nbytes = int(_dtype(dtype).itemsize * int(np.prod(shape, dtype=np.int64)))
        layout[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "offset": 0,
            "nbytes": nbytes,
            "crc32": _crc_hex(0),
            "ends": _crc_hex(0) + _crc_hex(0),
        }
        sources.append((name, chunks))
    header = {"meta": dict(meta), "sections": layout}
    size = len(json.dumps(header).encode())
    while True:  # offsets change the header's length, which moves the offsets
        offset = _aligned(len(MAGIC) + 8 + size)
        for spec in layout.values():
            spec["offset"] = offset
            offset = _aligned(offset + spec["nbytes"])
        again = len(json.dumps(header).encode())
        if again == size:
            break
        size = again
    end = offset
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        for name, chunks in sources:
            spec = layout[name]
            at, nbytes = spec["offset"], spec["nbytes"]
            crc, head, tail, written = 0, 0, 0, 0
            tail_from = max(0, nbytes - SAMPLE)
            for chunk in chunks:
                data = (
                    np.ascontiguousarray(chunk).reshape(-1).view(np.uint8).data
                    if isinstance(chunk, np.ndarray)
                    else memoryview(chunk)
                )
                for i in range(0, len(data), BLOCK):
                    part = data[i : i + BLOCK]
                    crc = zlib.crc32(part, crc)
                    lo, hi = written, written + len(part)
                    if lo < SAMPLE:
                        head = zlib.crc32(part[: SAMPLE - lo], head)
                    if hi > tail_from:
                        tail = zlib.crc32(part[max(0, tail_from - lo) :], tail)
                    os.pwrite(fd, part, at + written)
                    written = hi
            if written != nbytes:
                raise ValueError(f"section {name}: {written} bytes written, {nbytes} declared")
            spec["crc32"], spec["ends"] = _crc_hex(crc), _crc_hex(head) + _crc_hex(tail)
        text = json.dumps(header).encode()
        assert len(text) == size
        os.pwrite(fd, MAGIC + size.to_bytes(8, "little") + text, 0)
        os.ftruncate(fd, end + max(0, spare_bytes))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Pack:
    """An open pack file: its header, and its sections on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise PackError(f"{path}: {exc.strerror or exc}") from None
        try:
            self.size = os.fstat(self._fd).st_size
            head = os.pread(self._fd, len(MAGIC) + 8, 0)
            if len(head) < len(MAGIC) + 8 or head[: len(MAGIC)] != MAGIC:
                raise PackError(f"{path}: not a pack file")
            length = int.from_bytes(head[len(MAGIC) :], "little")
            if length > self.size:
                raise PackError(f"{path}: torn header")
            text = os.pread(self._fd, length, len(MAGIC) + 8)
            header = json.loads(text)
            self.meta: dict[str, Any] = header["meta"]
            self.sections: dict[str, dict[str, Any]] = header["sections"]
            for name, spec in self.sections.items():
                if int(spec["offset"]) + int(spec["nbytes"]) > self.size:
                    raise PackError(f"{path}: section {name} is past the end of the file")
        except (ValueError, KeyError, TypeError, OSError) as exc:
            self.close()
            raise PackError(f"{path}: unreadable header ({exc})") from None
        except PackError:
            self.close()
            raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Pack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spec(self, name: str) -> tuple[dict[str, Any], np.dtype[Any], tuple[int, ...]]:
        spec = self.sections.get(name)
        if spec is None:
            raise PackError(f"{self.path}: no section {name}")
        return spec, _dtype(spec["dtype"]), tuple(int(d) for d in spec["shape"])

    def array(self, name: str) -> np.ndarray:
        """Section ``name`` read whole into memory (a fresh, writable array), CRC checked."""
        spec, dtype, shape = self._spec(name)
        nbytes = int(spec["nbytes"])
        buf = bytearray(nbytes)
        view, got = memoryview(buf), 0
        while got < nbytes:
            n = os.preadv(self._fd, [view[got:]], int(spec["offset"]) + got)
            if n <= 0:
                raise PackError(f"{self.path}: section {name} is short")
            got += n
        if _crc_hex(zlib.crc32(buf)) != spec["crc32"]:
            raise PackError(f"{self.path}: section {name} fails its checksum")
        return np.frombuffer(buf, dtype=dtype).reshape(shape)

    def blob(self, name: str) -> bytes:
        """Section ``name`` (bytes) read whole, CRC checked."""
        return self.array(name).tobytes()

    def view(self, name: str) -> np.ndarray:
        """Section ``name`` mapped read-only (its pages are read when touched); the CRC of
        its first and last MiB is checked."""
        spec, dtype, shape = self._spec(name)
        self._check_ends(name, spec)
        if int(spec["nbytes"]) == 0:
            return np.zeros(shape, dtype)
        return np.memmap(self.path, dtype=dtype, mode="r", offset=int(spec["offset"]), shape=shape)

    def _check_ends(self, name: str, spec: dict[str, Any]) -> None:
        offset, nbytes = int(spec["offset"]), int(spec["nbytes"])
        head = os.pread(self._fd, min(SAMPLE, nbytes), offset)
        tail = os.pread(self._fd, min(SAMPLE, nbytes), offset + max(0, nbytes - SAMPLE))
        if _crc_hex(zlib.crc32(head)) + _crc_hex(zlib.crc32(tail)) != spec["ends"]:
            raise PackError(f"{self.path}: section {name} fails its checksum")

    def mapped(self, name: str, capacity: int | None = None) -> MappedRows:
        """Section ``name`` mapped copy-on-write (see :class:`MappedRows`), with room for
        ``capacity`` rows (at least its own); the CRC of its first and last MiB is checked."""
        spec, dtype, shape = self._spec(name)
        self._check_ends(name, spec)
        offset = int(spec["offset"])
        try:  # the same file, opened to extend it (a hole) when the mapping grows
            fd = os.open(self.path, os.O_RDWR)
        except OSError as exc:
            raise PackError(f"{self.path}: {exc.strerror or exc}") from None
        mine, again = os.fstat(self._fd), os.fstat(fd)
        if (mine.st_dev, mine.st_ino) != (again.st_dev, again.st_ino):
            os.close(fd)
            raise PackError(f"{self.path}: replaced while it was read")
        return MappedRows(fd, offset, dtype, shape, capacity)


class MappedRows:
    """Rows ``[0, n)`` of a 2-d section mapped privately (``MAP_PRIVATE``): reading a row
    reads the file's page; writing one (rows past the section, added after the open) makes a
    private copy of its page and never changes the file. :meth:`grow` makes room for more rows
    by extending the file with a hole (its written bytes stay as they are) and mapping it
    again; rows written into the old mapping are copied over."""

    def __init__(
        self,
        fd: int,
        offset: int,
        dtype: np.dtype[Any],
        shape: tuple[int, ...],
        capacity: int | None,
    ) -> None:
        self._fd = fd
        self._offset = offset
        self.dtype = dtype
        self.rows = shape[0]  # rows the file holds
        self.row_shape = shape[1:]
        self.row_bytes = int(dtype.itemsize * int(np.prod(self.row_shape, dtype=np.int64)))
        self.array = self._map(max(self.rows, capacity or 0))

    def _map(self, rows: int) -> np.ndarray:
        start = self._offset - self._offset % mmap.ALLOCATIONGRANULARITY
        lead = self._offset - start
        length = lead + max(1, rows) * self.row_bytes
        if os.fstat(self._fd).st_size < start + length:
            os.ftruncate(self._fd, start + length)  # a hole: nothing written
        mm = mmap.mmap(
            self._fd,
            length,
            flags=mmap.MAP_PRIVATE,
            prot=mmap.PROT_READ | mmap.PROT_WRITE,
            offset=start,
        )
        return np.frombuffer(
            mm,
            dtype=self.dtype,
            count=rows * int(np.prod(self.row_shape, dtype=np.int64)),
            offset=lead,
        ).reshape((rows, *self.row_shape))

    @property
    def capacity(self) -> int:
        return int(self.array.shape[0])

    def grow(self, rows: int, used: int) -> np.ndarray:
        """A mapping with room for ``rows`` rows holding the first ``used`` rows of the current
        one (rows past the file's own are copied: they live in private pages)."""
        if rows <= self.capacity:
            return self.array
        old = self.array
        new = self._map(rows)
        if used > self.rows:
            new[self.rows : used] = old[self.rows : used]
        self.array = new
        return new

    def read(self, start: int, stop: int) -> bytes:
        """The bytes of rows ``[start, stop)`` as the file holds them (``stop`` at most
        :attr:`rows`), read without touching the mapping."""
        want = (stop - start) * self.row_bytes
        data = os.pread(self._fd, want, self._offset + start * self.row_bytes)
        if len(data) != want:
            raise PackError(f"rows {start}-{stop} are past the end of the file")
        return data

    def close(self) -> None:
        """Let go of the file (the current mapping stays valid while arrays refer to it)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()
