"""RowMemo (values by row for one query) and the timeline context read through it: a second
fusion after feedback sees what computing everything again gives, with each row computed once."""

from __future__ import annotations

import numpy as np
import pytest

from synapsedb.index.rowmemo import RowMemo
from synapsedb.index.timeline import Timelines, context, neighbours


def test_each_row_is_computed_once_and_answers_keep_the_asked_order() -> None:
    asked: list[list[int]] = []

    def square(rows: np.ndarray) -> np.ndarray:
        asked.append(rows.tolist())
        return rows.astype(np.float64) ** 2

    memo = RowMemo(square)
    assert memo.get(np.array([9, 3, 3, 7])).tolist() == [81, 9, 9, 49]
    assert memo.get(np.array([7, 10, 1, 9, 10])).tolist() == [49, 100, 1, 81, 100]
    assert memo.get(np.array([1, 3])).tolist() == [1, 9]
    assert asked == [[3, 7, 9], [1, 10]]  # distinct, ascending, never a row twice
    assert memo.get(np.zeros(0, np.int64)).shape == (0,)


def test_two_dimensional_values() -> None:
    memo = RowMemo(lambda rows: np.stack([rows, -rows], axis=1))
    memo.get(np.array([4, 2]))
    assert memo.get(np.array([5, 2, 4])).tolist() == [[5, -5], [2, -2], [4, -4]]


@pytest.mark.parametrize("seed", range(5))
def test_context_through_a_memo_equals_context_alone(seed: int) -> None:
    rnd = np.random.default_rng(seed)
    n = 1500
    lines, entity = Timelines(), rnd.integers(0, 12, n)
    for row in range(n):
        lines.add(int(entity[row]), row, int(rnd.integers(0, 5000)))
    allowed = rnd.random(n) < 0.6
    memo = None
    for _ in range(3):  # overlapping candidate lists, as the two fusions of one query
        cand = np.unique(rnd.integers(0, n, 80))
        memo = memo or RowMemo(lambda rows: neighbours(lines, entity, allowed, rows, 4))
        got = context(lines, entity, allowed, cand, 2, memo)
        want = context(lines, entity, allowed, cand, 2)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b)
