"""Append-only compact integer lists shared between the writer and concurrent readers.

Postings, document lengths and timelines are ``array`` objects: compact, and grown in place by
the commit leader while queries read them. A reader that converts one with numpy
(``np.array(post)``) exports its buffer for the length of the copy, and numpy may release the
GIL meanwhile; an ``array`` cannot be resized while exported (``BufferError``). So the writer
never resizes a list a reader is looking at: :func:`grow` appends in place when it can and
otherwise appends to a fresh copy that the caller stores in place of the old list (the reader
keeps a consistent snapshot of the old one). Readers need no lock and never see a torn list.
"""

from __future__ import annotations

from array import array

__all__ = ["extend", "grow"]


def grow(values: array[int], value: int) -> array[int]:
    """``values`` with ``value`` appended: ``values`` itself, or a copy when a reader holds its
    buffer. Store the result where ``values`` was."""
    try:
        values.append(value)
    except BufferError:  # exported to a reader right now: copy on write
        values = values[:]
        values.append(value)
    return values


def extend(values: array[int], more: list[int]) -> array[int]:
    """``values`` with ``more`` appended (see :func:`grow`)."""
    try:
        values.extend(more)
    except BufferError:  # exported to a reader right now: copy on write
        values = values[:]
        values.extend(more)
    return values
