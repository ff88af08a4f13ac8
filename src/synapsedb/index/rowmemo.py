"""Per-row values a query computes more than once (a second fusion after feedback): kept by
row, each row computed once."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["RowMemo", "distinct"]


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array, ascending (``np.unique``, by sorting: numpy's
    hash-based unique costs several times more on the few thousand rows a query handles)."""
    ordered = np.sort(values)
    if ordered.shape[0] < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


class RowMemo:
    """Values by catalog row, for the life of one query: :meth:`get` computes only the rows
    not seen before. ``compute(rows)`` must give each row's value independently of the other
    rows asked with it (one value per row along the first axis)."""

    __slots__ = ("_compute", "_rows", "_values")

    def __init__(self, compute: Callable[[np.ndarray], np.ndarray]) -> None:
        self._compute = compute
        self._rows: np.ndarray | None = None  # ascending, distinct
        self._values: np.ndarray | None = None

    def get(self, rows: np.ndarray) -> np.ndarray:
        """The values of ``rows`` (any order, distinct or not), in that order."""
        if self._rows is None or self._values is None:
            todo = distinct(rows)
            self._rows, self._values = todo, self._compute(todo)
            return self._values[np.searchsorted(todo, rows)]
        known_rows, known = self._rows, self._values
        at = np.minimum(np.searchsorted(known_rows, rows), known_rows.shape[0] - 1)
        seen = known_rows[at] == rows
        if not seen.all():
            todo = distinct(rows[~seen])
            merged = np.concatenate([known_rows, todo])
            order = np.argsort(merged, kind="stable")
            known_rows = self._rows = merged[order]
            known = self._values = np.concatenate([known, self._compute(todo)])[order]
            at = np.searchsorted(known_rows, rows)
        return known[at]
