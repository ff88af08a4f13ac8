"""The catalog: a columnar view of every memory version of one namespace.

Row ``r`` is one version that has content (tombstones add no row; they close the previous one).
Each row carries its system-time visibility interval ``[from_us, to_us)`` and its expiry, so the
rows visible at any moment T are one vectorized expression::

    (from_us <= T) & (T < to_us) & (T < exp_us)

plus columns for the built-in filter fields, the vectors (one float32 matrix; the only copy the
engine keeps) and inverted postings of metadata values. Queries turn visibility and filters into
boolean masks over rows and hand them to the vector and keyword indexes.

Concurrency: only the commit leader writes. It fills row ``n`` in spare capacity and only then
bumps ``n``; growth allocates new arrays, copies, and swaps them in. Readers take ``n`` first and
slice every array to it, so they see a consistent prefix. Postings are never resized while a
reader copies them (:func:`synapsedb.index.postings.grow`).
"""

from __future__ import annotations

import math
import re
import time
from array import array
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, overload

import numpy as np
import orjson

from .dense import DenseViews
from .keyword import STOPWORDS, KeywordIndex
from .postings import grow
from .timeline import Timelines

if TYPE_CHECKING:
    from ..engine.records import MemRec
    from .packfile import MappedRows

__all__ = ["INF", "MAX_LABELS", "Catalog", "Records", "meta_key"]

INF = np.iinfo(np.int64).max
_NO_AGENT = -1
# A speaker label: content written as a transcript line, "Name: text". A name has no digits
# ("Ticket 4521: refunded" names a ticket, not a speaker: its number must stay in the text that
# is embedded and searched), and a namespace has at most MAX_LABELS of them: past that, a
# "Word:" prefix is a field of the content ("note 17:", "Order status:"), not a voice in a
# conversation, and each new one would make every query's speaker lookup longer.
_LABEL = re.compile(r"^([^:\n\d]{1,40}):\s")
_WORD = re.compile(r"\w+")
MAX_LABELS = 1024


def meta_key(value: Any) -> tuple[str, Any] | None:
    """The postings key of a scalar metadata value. Numbers keep their Python value: equal
    numbers share a key (``1`` and ``1.0`` hash alike) and integers past 2**53 stay exact."""
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("num", value)
    if isinstance(value, str):
        return ("str", value)
    return None


def _flatten(
    obj: Mapping[str, Any], prefix: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], str, Any]]:
    """Yield (path, role, key) postings: role "x" = path exists, "v" = scalar value,
    "e" = element of an array value."""
    for k, v in obj.items():
        path = (*prefix, k)
        yield path, "x", None
        if isinstance(v, Mapping):
            yield from _flatten(v, path)
        elif isinstance(v, list):
            for item in v:
                key = meta_key(item)
                if key is not None:
                    yield path, "e", key
        else:
            key = meta_key(v)
            if key is not None:
                yield path, "v", key


class Records(Protocol):
    """The record of each catalog row: a list, or a view that builds them on demand."""

    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, row: int) -> MemRec: ...
    @overload
    def __getitem__(self, row: slice) -> list[MemRec]: ...
    def append(self, rec: MemRec, /) -> None: ...
    def clear(self) -> None: ...


class Codes:
    """String <-> small int dictionary for a categorical column."""

    __slots__ = ("codes", "names")

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.names: list[str] = []

    def code(self, name: str) -> int:
        c = self.codes.get(name)
        if c is None:
            c = self.codes[name] = len(self.names)
            self.names.append(name)
        return c

    def codes_of(self, names: list[str]) -> list[int]:
        """``code`` of each name (one dictionary lookup each when all are known)."""
        get = self.codes.get
        out = [get(name) for name in names]
        if None in out:  # new names get their codes in order of appearance, then look up again
            for name in dict.fromkeys(n for n, c in zip(names, out, strict=True) if c is None):
                self.code(name)
            out = [get(name) for name in names]
        return out  # type: ignore[return-value]


_INT32_MAX = 2**31 - 1


class Catalog:
    __slots__ = (
        "agent",
        "agents",
        "dense",
        "dim",
        "entities",
        "entity",
        "epoch",
        "exp_us",
        "from_us",
        "has_vec",
        "inv_norm",
        "keywords",
        "label",
        "label_words",
        "labels",
        "latest_us",
        "live",
        "masks",
        "meta_order",
        "meta_post",
        "n",
        "n_ttl",
        "num_cols",
        "pinned",
        "recs",
        "salience",
        "timelines",
        "to_us",
        "ts_us",
        "type",
        "types",
        "vec_bits",
        "vec_rows",
        "vec_views",
        "vectors",
    )

    def __init__(self, dim: int | None = None) -> None:
        self.n = 0
        self.dim = dim
        # one record per row (a list, or engine/stored.py's RowRecords over a checkpoint)
        self.recs: Records = []
        self.entities, self.types, self.agents = Codes(), Codes(), Codes()
        self.from_us = np.zeros(0, np.int64)
        self.to_us = np.zeros(0, np.int64)
        self.exp_us = np.zeros(0, np.int64)
        self.ts_us = np.zeros(0, np.int64)
        self.salience = np.zeros(0, np.float64)
        self.entity = np.zeros(0, np.int32)
        self.type = np.zeros(0, np.int32)
        self.agent = np.zeros(0, np.int32)
        self.pinned = np.zeros(0, bool)
        self.has_vec = np.zeros(0, bool)
        self.inv_norm = np.zeros(0, np.float32)
        self.vectors: np.ndarray | None = None
        # the file the vectors are mapped from (a checkpoint's), which grows them in place
        self.vec_rows: MappedRows | None = None
        # (path, role) -> {key: rows}
        self.meta_post: dict[tuple[tuple[str, ...], str], dict[Any, array[int]]] = {}
        # (path, role, kind) -> (distinct keys seen, their values sorted, the keys in that
        # order): built on first range use, rebuilt when the path gained a distinct value
        self.meta_order: dict[
            tuple[tuple[str, ...], str, str], tuple[int, list[Any], list[Any]]
        ] = {}
        # repeated queries' allowed-row masks at the present (query/executor.py allowed_rows):
        # key -> (epoch, rows, valid until, mask)
        self.masks: dict[Any, tuple[int, int, int, np.ndarray]] = {}
        # a cached mask's rows with a vector, its share of the graph and, when few, their row
        # numbers (executor)
        self.vec_views: dict[int, tuple[np.ndarray, int, np.ndarray, int, np.ndarray | None]] = {}
        # such a view's bitmap of the graph's allowed rows, as faiss reads it (executor)
        self.vec_bits: dict[int, tuple[np.ndarray, int, np.ndarray]] = {}
        # repeated selective filters' rows' vectors side by side (index/dense.py)
        self.dense = DenseViews()
        # path -> (rows covered, float64 column or None): see index/numcol.py
        self.num_cols: dict[tuple[str, ...], tuple[int, np.ndarray | None]] = {}
        self.n_ttl = 0
        self.keywords = KeywordIndex()
        self.timelines = Timelines()
        # speaker labels ("Name: text"): a label id per row (-1: none), label word -> label ids
        self.label = np.zeros(0, np.int32)
        self.labels = Codes()
        self.label_words: dict[str, set[int]] = {}
        # live[r]: row r is the current version (ignoring expiry) as of latest_us, the newest
        # system time of any change; for T >= latest_us visibility is live & (exp_us > T).
        self.live = np.zeros(0, bool)
        self.latest_us = 0
        # seqlock: odd while add() changes visibility, so readers retry instead of seeing a
        # memory's old row closed before its new row is published
        self.epoch = 0

    @property
    def capacity(self) -> int:
        return int(self.from_us.shape[0])

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` more rows (exactly, when growing from empty)."""
        need = self.n + rows
        cap = self.capacity
        if need <= cap:
            return
        new_cap = max(need, int(cap * 1.5))
        for name in (
            "from_us",
            "to_us",
            "exp_us",
            "ts_us",
            "salience",
            "entity",
            "type",
            "agent",
            "pinned",
            "has_vec",
            "inv_norm",
            "live",
            "label",
        ):
            old = getattr(self, name)
            grown = np.zeros(new_cap, old.dtype)
            grown[: self.n] = old[: self.n]
            setattr(self, name, grown)
        if self.vec_rows is not None:
            self.vectors = self.vec_rows.grow(new_cap, self.n)
        elif self.vectors is not None:
            grown_v = np.zeros((new_cap, self.vectors.shape[1]), np.float32)
            grown_v[: self.n] = self.vectors[: self.n]
            self.vectors = grown_v

    def trim(self) -> None:
        """Drop spare capacity (after a bulk load, when no more rows are expected soon)."""
        if self.capacity == self.n:
            return
        for name in (
            "from_us",
            "to_us",
            "exp_us",
            "ts_us",
            "salience",
            "entity",
            "type",
            "agent",
            "pinned",
            "has_vec",
            "inv_norm",
            "live",
            "label",
        ):
            setattr(self, name, getattr(self, name)[: self.n].copy())
        if self.vectors is not None and self.vec_rows is None:  # a mapping costs no memory
            self.vectors = self.vectors[: self.n].copy()

    def defer_keywords(self) -> None:
        """Build the keyword index on first need instead of row by row (a namespace loaded at
        open: see :meth:`KeywordIndex.defer`)."""
        recs = self.recs  # only ever appended to; rows below n have their record
        contents = getattr(recs, "contents", None)  # rows read without building records
        if contents is not None:
            self.keywords.defer(contents)
        else:
            self.keywords.defer(lambda start, stop: [rec.content for rec in recs[start:stop]])

    def _ensure_vectors(self, dim: int) -> None:
        if self.vectors is None:
            self.dim = dim
            self.vectors = np.zeros((self.capacity, dim), np.float32)

    def add(self, rec: MemRec, prev: MemRec | None) -> None:
        """Record one committed version (see :meth:`add_many`)."""
        self.add_many([(rec, prev)])

    def add_many(self, items: list[tuple[MemRec, MemRec | None]]) -> None:
        """Record committed versions in commit order, each with the version it supersedes:
        close the superseded rows and add a row per version that is not a tombstone.

        Columns and vectors are written in slices (one norm computation for the batch); only
        the postings, labels and timelines are per row. Rows become visible together.
        """
        self.epoch += 1
        try:
            self._add_many(items)
        finally:
            self.epoch += 1

    def _add_many(self, items: list[tuple[MemRec, MemRec | None]]) -> None:
        new = [rec for rec, _ in items if not rec.deleted and not rec.erased]
        self.reserve(len(new))
        r0 = self.n
        r1 = r0 + len(new)
        if len(new) == 1:  # the common single write: scalar stores beat building arrays
            self._columns_one(new[0], r0)
        elif new:
            self._columns_many(new, r0, r1)
        r = r0
        for rec, prev in items:  # in commit order: a version's predecessor has its row already
            if rec.sys_us > self.latest_us:
                self.latest_us = rec.sys_us
            if prev is not None and prev.row >= 0 and self.to_us[prev.row] == INF:
                self.to_us[prev.row] = rec.sys_us
                self.live[prev.row] = False
            if rec.erased:  # nothing left to search
                rec.row, rec.vec = -1, None
                continue
            if rec.deleted:
                rec.row = prev.row if prev is not None else -1
                rec.vec = None
                continue
            if rec.meta_json != "{}":
                for path, role, key in _flatten(orjson.loads(rec.meta_json), ()):
                    bucket = self.meta_post.setdefault((path, role), {})
                    posting = bucket.get(key)
                    if posting is None:
                        bucket[key] = array("i", (r,))
                    elif (grown := grow(posting, r)) is not posting:  # a reader holds it
                        bucket[key] = grown
            self.recs.append(rec)
            rec.row = r
            rec.cat = self
            rec.vec = None
            r += 1
        if new:
            self.keywords.add_texts(r0, [rec.content for rec in new])
            self.timelines.add_many(
                self.entity[r0:r1].tolist(), range(r0, r1), [rec.ts_us for rec in new]
            )
        self.n = r1  # publish last

    def _columns_one(self, rec: MemRec, r: int) -> None:
        self.from_us[r] = rec.sys_us
        self.to_us[r] = INF
        if rec.expires_us is None:
            self.exp_us[r] = INF
        else:
            self.exp_us[r] = rec.expires_us
            self.n_ttl += 1
        self.ts_us[r] = rec.ts_us
        self.salience[r] = rec.salience
        self.entity[r] = self.entities.code(rec.entity)
        self.type[r] = self.types.code(rec.type)
        self.agent[r] = _NO_AGENT if rec.agent is None else self.agents.code(rec.agent)
        self.pinned[r] = rec.pinned
        self.live[r] = True
        self.label[r] = self._label(rec.content)
        vec = rec.vec
        if vec is not None:
            self._ensure_vectors(int(vec.shape[0]))
            assert self.vectors is not None
            self.vectors[r] = vec
            sq = float(vec @ vec)
            self.inv_norm[r] = 1.0 / math.sqrt(sq) if sq > 0 else 0.0
            self.has_vec[r] = True

    def _columns_many(self, new: list[MemRec], r0: int, r1: int) -> None:
        sl = slice(r0, r1)
        self.from_us[sl] = [rec.sys_us for rec in new]
        self.to_us[sl] = INF
        exp = [INF if rec.expires_us is None else rec.expires_us for rec in new]
        self.exp_us[sl] = exp
        self.n_ttl += sum(1 for e in exp if e != INF)
        self.ts_us[sl] = [rec.ts_us for rec in new]
        self.salience[sl] = [rec.salience for rec in new]
        self.entity[sl] = self.entities.codes_of([rec.entity for rec in new])
        self.type[sl] = self.types.codes_of([rec.type for rec in new])
        self.agent[sl] = [
            _NO_AGENT if rec.agent is None else self.agents.code(rec.agent) for rec in new
        ]
        self.pinned[sl] = [rec.pinned for rec in new]
        self.live[sl] = True
        self.label[sl] = [self._label(rec.content) for rec in new]
        with_vec = [i for i, rec in enumerate(new) if rec.vec is not None]
        if with_vec:
            first = new[with_vec[0]].vec
            assert first is not None
            self._ensure_vectors(int(first.shape[0]))
            assert self.vectors is not None
            rows: slice | np.ndarray = (
                sl if len(with_vec) == len(new) else np.asarray(with_vec, dtype=np.int64) + r0
            )
            block = np.stack([new[i].vec for i in with_vec])  # type: ignore[misc]
            self.vectors[rows] = block
            sq = np.einsum("ij,ij->i", block, block)
            self.inv_norm[rows] = np.where(sq > 0, 1.0 / np.sqrt(np.maximum(sq, 1e-30)), 0.0)
            self.has_vec[rows] = True

    def _label(self, content: str) -> int:
        if content.find(":", 1, 41) < 0:  # no "Name:" prefix can match (a cheap test first)
            return -1
        m = _LABEL.match(content)
        if m is None:
            return -1
        name = m.group(1).strip()
        code = self.labels.codes.get(name)
        if code is not None:
            return code
        if len(self.labels.codes) >= MAX_LABELS:
            return -1
        code = self.labels.code(name)
        self.index_label(code, name)
        return code

    def index_label(self, code: int, name: str) -> None:
        """Make speaker label ``code`` (``name``) found by the words of its name."""
        for word in _WORD.findall(name.lower()):
            if len(word) > 1 and word not in STOPWORDS:
                self.label_words.setdefault(word, set()).add(code)

    # -- reads -----------------------------------------------------------------------------------

    def vector(self, row: int) -> np.ndarray | None:
        if row < 0 or not self.has_vec[row] or self.vectors is None:
            return None
        return self.vectors[row]

    def visible(self, t_us: int, n: int | None = None) -> np.ndarray:
        """Boolean mask of the rows visible at ``t_us`` (a consistent snapshot)."""
        while True:
            epoch = self.epoch
            if epoch & 1:
                time.sleep(0)
                continue
            mask = self._visible(t_us, self.n if n is None else n)
            if self.epoch == epoch:
                return mask

    def _visible(self, t_us: int, n: int) -> np.ndarray:
        if t_us >= self.latest_us:  # the present (or later): the maintained live mask
            if not self.n_ttl:
                return self.live[:n].copy()
            mask = self.exp_us[:n] > t_us  # one new array, not a copy and then a second one
            mask &= self.live[:n]
            return mask
        mask = (self.from_us[:n] <= t_us) & (self.to_us[:n] > t_us)
        if self.n_ttl:
            mask &= self.exp_us[:n] > t_us
        return mask

    def rows_mask(self, rows: np.ndarray | array[int], n: int) -> np.ndarray:
        """The mask of ``rows`` below ``n``. A posting list (an ``array``) is ascending, since
        rows are appended in order: it is read in place and cut at ``n`` by bisection."""
        mask = np.zeros(n, bool)
        if len(rows):
            if isinstance(rows, np.ndarray):
                mask[rows[rows < n]] = True
            else:  # the view holds the buffer: a writer appends to a copy meanwhile (grow)
                idx = np.frombuffer(rows, dtype=np.int32)
                # n as an int32: a Python int would make numpy convert the whole list to int64
                cut = int(idx.searchsorted(np.int32(min(n, _INT32_MAX))))
                if cut and int(idx[cut - 1]) - int(idx[0]) + 1 == cut:  # one run of rows
                    mask[int(idx[0]) : int(idx[cut - 1]) + 1] = True
                else:
                    mask[idx[:cut]] = True
        return mask

    def postings(self, path: tuple[str, ...], role: str) -> dict[Any, array[int]]:
        return self.meta_post.get((path, role), {})

    def ordered_keys(
        self, path: tuple[str, ...], role: str, kind: str
    ) -> tuple[list[Any], list[Any]]:
        """The distinct ``kind`` ("num" or "str") keys of a path's postings, sorted by value:
        (values, keys). Keys are only ever added, so the order is kept until their count
        changes (a new distinct value), then sorted again once."""
        bucket = self.postings(path, role)
        cached = self.meta_order.get((path, role, kind))
        if cached is not None and cached[0] == len(bucket):
            return cached[1], cached[2]
        seen = list(bucket)  # a writer may add keys meanwhile: counted from this copy
        keys = sorted((k for k in seen if k[0] == kind), key=lambda k: k[1])
        values = [k[1] for k in keys]
        self.meta_order[(path, role, kind)] = (len(seen), values, keys)
        return values, keys
