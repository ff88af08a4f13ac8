"""The writer never resizes a compact list a reader is copying (issue 10, item 4).

A query converting a posting list with numpy holds its buffer for the length of the copy; the
commit leader appending to that list at that moment used to raise ``BufferError`` after the
SQLite commit. Holding a buffer export (``memoryview``) reproduces that moment exactly.
"""

from __future__ import annotations

from array import array

import numpy as np

from synapsedb.engine.records import MemRec
from synapsedb.index.catalog import Catalog
from synapsedb.index.keyword import KeywordIndex, analyze
from synapsedb.index.postings import grow
from synapsedb.index.timeline import Timelines


def test_grow_appends_in_place_unless_a_reader_holds_the_buffer() -> None:
    values = array("i", [1, 2])
    assert grow(values, 3) is values and list(values) == [1, 2, 3]
    with memoryview(values) as held:  # a reader mid-copy
        grown = grow(values, 4)
        assert grown is not values
        assert list(held) == [1, 2, 3]  # the reader's snapshot is untouched
    assert list(grown) == [1, 2, 3, 4]


def test_keyword_index_grows_while_a_reader_copies_a_posting() -> None:
    index = KeywordIndex()
    index.add(0, analyze("parcel delayed in Hamburg"))
    rows, tfs = index.postings["parcel"]
    with memoryview(rows), memoryview(tfs), memoryview(index.doclen):
        index.add(1, analyze("parcel parcel arrived"))
    assert list(index.postings["parcel"][0]) == [0, 1]
    assert list(index.postings["parcel"][1]) == [1, 2]
    hits, _scores = index.search(analyze("parcel"), np.ones(2, bool), 5)
    assert sorted(hits.tolist()) == [0, 1]


def test_keyword_reader_keeps_a_whole_pair_when_only_the_frequencies_were_held() -> None:
    index = KeywordIndex()
    index.add(0, ["a"])
    old = index.postings["a"]
    with memoryview(old[1]):  # tfs held: the pair is replaced, the old one stays consistent
        index.add(1, ["a"])
    assert list(old[0]) == [0] and list(old[1]) == [1]
    assert list(index.postings["a"][0]) == [0, 1]


def test_timelines_grow_while_a_reader_copies_one() -> None:
    lines = Timelines()
    lines.add(7, 0, 100)
    line = lines.lines[7]
    with memoryview(line.rows), memoryview(line.ts):
        lines.add(7, 1, 50)
    assert lines.ordered(7).tolist() == [1, 0]


def test_catalog_metadata_postings_grow_while_a_reader_copies_one() -> None:
    cat = Catalog()

    def rec(i: int) -> MemRec:
        return MemRec(
            f"m{i}",
            1,
            10 + i,
            10 + i,
            "u",
            "fact",
            f"note {i}",
            '{"tag": "x"}',
            None,
            0.5,
            10 + i,
            None,
            False,
            None,
            None,
            False,
        )

    cat.add(rec(0), None)
    posting = cat.postings(("tag",), "v")[("str", "x")]
    with memoryview(posting):
        cat.add(rec(1), None)
    assert list(cat.postings(("tag",), "v")[("str", "x")]) == [0, 1]
    assert cat.rows_mask(cat.postings(("tag",), "v")[("str", "x")], cat.n).tolist() == [True] * 2
