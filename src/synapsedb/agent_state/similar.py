"""Similar agent states by their values: a state featuriser and its distance.

Embedding a state's JSON as English text puts ``{"health": 0.9}`` and ``{"health": 0.1}`` close
together (they read alike) and separates equal states whose keys come in another order. This
module compares states field by field instead.

**Flattening.** A state (a JSON object) becomes a set of *blocks*, one per path. Nested objects
are walked (``{"inventory": {"wood": 5}}`` gives the path ``inventory.wood``); a list of numbers
is one vector block (``position: [10, 20]``); a list of strings is one set block (``tags``); a
list of objects or lists is walked by index (``goals.0.kind``, at most :data:`MAX_LIST_ITEMS`
items); a number is a one-component vector; a string is *categorical* (a status, a name) unless
the values of its path read as prose (half of them or more have three words or more), then it is
*text*; a boolean is categorical. ``null``, NaN and infinities count as missing. Below
:data:`MAX_DEPTH` levels a subtree is one categorical value (its canonical JSON). A query of more
than :data:`MAX_LEAVES` blocks is refused; a candidate keeps its first :data:`MAX_LEAVES`.

**Block distances** (query ``q``, candidate ``c``):

- vector (numbers): ``||q - c|| / (s * sqrt(dim))``, where ``s`` is the block's robust scale
  from the candidate set (the root mean square over components of ``1.4826 * MAD``; the
  standard deviation when the MAD is 0; 1 when every candidate holds the same value), so one
  scale serves all components and positions keep their geometry. A vector of another length
  counts as missing.
- categorical: one-hot, 0 when equal and 1 otherwise.
- set (a list of strings): ``sqrt(1 - |q & c| / |q | c|)`` (two empty sets: 0).
- text: the database embedder's unit vectors, ``sqrt(1 - cos)``.

Every block distance is then divided by the block's *typical disagreement*: the median (the mean
if the median is 0) of the same distance between pairs of candidates (a fixed pseudo-random
sample of :data:`PAIR_SAMPLE` pairs). So each field counts in units of how much candidates
usually differ in it, whatever its kind or unit.

**Missing fields.** The distance is taken over the query's paths: a field the query does not
mention does not constrain the result (``{"position": [12, 22]}`` ranks by position alone). A
path the query has and a candidate lacks (or holds with another kind or length) costs that
block's median distance over the candidates that have it: an unknown value is as good as a
typical one, neither a match nor the worst mismatch. A path no candidate has is dropped.

**Weights.** Each top-level field has weight 1 (or ``weights[path]``, the longest matching path
prefix), shared evenly by the blocks under it, so an inventory of twenty items counts as much
as a position. The distance is the weighted root mean square
``sqrt(sum_b w_b * d_b**2 / sum_b w_b)``: 0 for an identical state, about 1 for a typical
different one. Ties keep the candidates' order.

**Cost.** Every call flattens every candidate (pure Python; it dominates the time, see
bench/bench_state_similarity.py) and embeds the texts it has not seen: pass an
:class:`EmbeddingCache` that lives as long as the memory API, so each distinct text is embedded
once.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import orjson

from ..errors import ValidationError

__all__ = [
    "MAX_CANDIDATES",
    "MAX_DEPTH",
    "MAX_K",
    "MAX_LEAVES",
    "MAX_LIST_ITEMS",
    "PAIR_SAMPLE",
    "EmbedFn",
    "EmbeddingCache",
    "StateFeaturizer",
    "flatten_state",
    "rank_similar",
]

EmbedFn = Callable[[list[str]], Sequence[Sequence[float]] | np.ndarray]

MAX_DEPTH = 16
MAX_LEAVES = 1024  # blocks of one state (a query over it is refused; a candidate is cut)
MAX_LIST_ITEMS = 64  # items of a list of objects walked by index
MAX_VECTOR = 4096  # components of one list of numbers
MAX_CANDIDATES = 1_000_000
MAX_K = 10_000
PAIR_SAMPLE = 512
_MAD_TO_SIGMA = 1.4826
_TEXT_WORDS = 3
_INF = float("inf")

Leaf = tuple[str, Any]  # (kind, value): ("vec", tuple[float]) ("set", frozenset) ("str", str)


def _canonical(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(value)


def _walk(obj: Any, path: str, depth: int, out: dict[str, Leaf]) -> None:
    t = type(obj)  # exact-type fast paths first: states are plain JSON
    if t is float or t is int:
        f = float(obj)
        if f == f and f not in (_INF, -_INF):
            out[path] = ("vec", (f,))
        return
    if t is str:
        out[path] = ("str", obj)
        return
    if obj is None:
        return
    if t is bool:
        out[path] = ("str", "true" if obj else "false")
        return
    if isinstance(obj, int | float):  # subclasses (numpy scalars are not: canonical below)
        f = float(obj)
        if math.isfinite(f):
            out[path] = ("vec", (f,))
        return
    if isinstance(obj, str):
        out[path] = ("str", str(obj))
        return
    if depth >= MAX_DEPTH:
        out[path] = ("str", _canonical(obj))
        return
    if t is dict or isinstance(obj, Mapping):
        for key, value in obj.items():
            _walk(value, f"{path}.{key}" if path else str(key), depth + 1, out)
        return
    if t is list or isinstance(obj, list | tuple):
        if not obj:
            out[path] = ("set", frozenset())
            return
        kinds = {type(v) for v in obj}
        if kinds <= {int, float}:
            if len(obj) <= MAX_VECTOR:
                nums = tuple(map(float, obj))
                if all(math.isfinite(v) for v in nums):
                    out[path] = ("vec", nums)
            return
        if all(v is None or isinstance(v, str | int | float | bool) for v in obj):
            out[path] = (
                "set",
                frozenset(_canonical(v) if not isinstance(v, str) else v for v in obj),
            )
            return
        for i, item in enumerate(obj[:MAX_LIST_ITEMS]):
            _walk(item, f"{path}.{i}", depth + 1, out)
        return
    out[path] = ("str", _canonical(obj))


def flatten_state(state: Mapping[str, Any]) -> dict[str, Leaf]:
    """The blocks of one state: path -> (kind, value), kind one of "vec", "set", "str"."""
    out: dict[str, Leaf] = {}
    _walk(state, "", 0, out)
    return out


class EmbeddingCache:
    """An embed callable that remembers up to ``max_entries`` texts (least recently used out).

    States repeat their texts (a mood, a goal), so one cache per memory API makes similarity
    over thousands of stored states cost one embedding per new text.
    """

    def __init__(self, embed: EmbedFn, max_entries: int = 50_000) -> None:
        if max_entries < 1:
            raise ValidationError("max_entries must be at least 1", field="max_entries", limit=1)
        self._embed = embed
        self._max = max_entries
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._cache)

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            fresh = _as_unit_rows(self._embed(missing), len(missing))
            for text, vec in zip(missing, fresh, strict=True):
                self._cache[text] = vec
        rows = []
        for text in texts:
            self._cache.move_to_end(text)
            rows.append(self._cache[text])
        while len(self._cache) > self._max:
            self._cache.popitem(last=False)
        if not rows:
            return np.zeros((0, 0), np.float32)
        return np.stack(rows)


def _as_unit_rows(vectors: Sequence[Sequence[float]] | np.ndarray, n: int) -> np.ndarray:
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise ValidationError(
            f"embed returned shape {arr.shape} for {n} texts; expected ({n}, dim)", field="embed"
        )
    if not np.isfinite(arr).all():
        raise ValidationError("embed returned NaN or infinity", field="embed")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.where(norms > 0, norms, 1.0)


@lru_cache(maxsize=1)
def _default_embed() -> EmbeddingCache:
    from ..embed.onnx_minilm import OnnxMiniLM

    model = OnnxMiniLM()
    return EmbeddingCache(lambda texts: model.embed(texts))


def _robust_scale(col: np.ndarray) -> float:
    """1.4826 * MAD of a column; its standard deviation when the MAD is 0; else 1."""
    if col.shape[0] == 0:
        return 1.0
    mad = float(np.median(np.abs(col - np.median(col)))) * _MAD_TO_SIGMA
    if mad > 0:
        return mad
    sd = float(col.std())
    return sd if sd > 0 else 1.0


def _pairs(n: int, seed: int = 20251) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    a = rng.integers(0, n, PAIR_SAMPLE)
    b = (a + rng.integers(1, n, PAIR_SAMPLE)) % n  # never the same candidate
    return a, b


def _typical(pair_d: np.ndarray) -> float:
    if pair_d.shape[0] == 0:
        return 1.0
    med = float(np.median(pair_d))
    if med > 0:
        return med
    mean = float(pair_d.mean())
    return mean if mean > 0 else 1.0


@dataclass
class _Block:
    path: str
    kind: str  # "vec", "cat", "set", "text"
    group: str
    dist: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per candidate, nan = missing


@dataclass
class StateFeaturizer:
    """Field-by-field distance between agent states (see the module docstring).

    ``weights`` maps a path prefix (``"position"``, ``"inventory.wood"``) to the weight of the
    group of blocks under it; ``text_fields`` and ``categorical_fields`` force a string path's
    kind instead of the prose test; ``embed`` maps texts to vectors (the default embedder,
    all-MiniLM-L6-v2, when None; loaded only if a text field is compared).
    """

    weights: Mapping[str, float] = field(default_factory=dict)
    text_fields: frozenset[str] = frozenset()
    categorical_fields: frozenset[str] = frozenset()
    embed: EmbedFn | None = None

    def __post_init__(self) -> None:
        for path, w in self.weights.items():
            if not isinstance(path, str) or not path:
                raise ValidationError("weights keys must be non-empty paths", field="weights")
            if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w):
                raise ValidationError(f"weights[{path!r}] must be a finite number", field="weights")
            if w < 0:
                raise ValidationError(
                    f"weights[{path!r}] is negative; weights are >= 0", field="weights", limit=0
                )
        self.text_fields = frozenset(self.text_fields)
        self.categorical_fields = frozenset(self.categorical_fields)

    # -- weights ---------------------------------------------------------------------------

    def _group(self, path: str) -> tuple[str, float]:
        best = None
        for prefix in self.weights:
            if (path == prefix or path.startswith(prefix + ".")) and (
                best is None or len(prefix) > len(best)
            ):
                best = prefix
        if best is not None:
            return best, float(self.weights[best])
        return path.split(".", 1)[0], 1.0

    # -- distances ---------------------------------------------------------------------------

    def distances(
        self, query_state: Mapping[str, Any], states: Sequence[Mapping[str, Any]]
    ) -> np.ndarray:
        """The distance from ``query_state`` to each of ``states`` (same order)."""
        if not isinstance(query_state, Mapping):
            raise ValidationError(
                f"query_state must be an object, got {type(query_state).__name__}",
                field="query_state",
            )
        query = flatten_state(query_state)
        if len(query) > MAX_LEAVES:
            raise ValidationError(
                f"query_state has {len(query)} fields, over the limit of {MAX_LEAVES}",
                field="query_state",
                limit=MAX_LEAVES,
            )
        n = len(states)
        if n == 0:
            return np.zeros(0)
        flat = []
        for state in states:
            leaves = flatten_state(state)
            if len(leaves) > MAX_LEAVES:
                leaves = dict(list(leaves.items())[:MAX_LEAVES])
            flat.append(leaves)
        pa, pb = _pairs(n)
        blocks: list[_Block] = []
        for path, (kind, qv) in query.items():
            values = [leaves.get(path) for leaves in flat]
            block = self._block(path, kind, qv, values, pa, pb)
            if block is not None:
                blocks.append(block)
        if not blocks:
            return np.zeros(n)
        group_size: dict[str, int] = {}
        for b in blocks:
            group_size[b.group] = group_size.get(b.group, 0) + 1
        total = np.zeros(n)
        weight_sum = 0.0
        for b in blocks:
            w = self._group(b.path)[1] / group_size[b.group]
            if w == 0:
                continue
            d = b.dist
            present = ~np.isnan(d)
            fill = float(np.median(d[present]))
            d = np.where(present, d, fill)
            total += w * d * d
            weight_sum += w
        if weight_sum == 0:
            return np.zeros(n)
        return np.sqrt(total / weight_sum)

    def _block(
        self,
        path: str,
        kind: str,
        qv: Any,
        values: list[Leaf | None],
        pa: np.ndarray,
        pb: np.ndarray,
    ) -> _Block | None:
        group = self._group(path)[0]
        if kind == "vec":
            return self._vec_block(path, group, qv, values, pa, pb)
        if kind == "set":
            return self._set_block(path, group, qv, values, pa, pb)
        strings = [v[1] if v is not None and v[0] == "str" else None for v in values]
        if self._is_text(path, qv, strings):
            return self._text_block(path, group, qv, strings, pa, pb)
        return self._cat_block(path, group, qv, strings, pa, pb)

    def _is_text(self, path: str, qv: str, strings: list[str | None]) -> bool:
        if path in self.text_fields:
            return True
        if path in self.categorical_fields:
            return False
        seen = [s for s in strings if s is not None]
        seen.append(qv)
        prose = sum(1 for s in seen if len(s.split()) >= _TEXT_WORDS)
        return 2 * prose >= len(seen)

    def _vec_block(
        self,
        path: str,
        group: str,
        qv: tuple[float, ...],
        values: list[Leaf | None],
        pa: np.ndarray,
        pb: np.ndarray,
    ) -> _Block | None:
        dim = len(qv)
        n = len(values)
        zero = (0.0,) * dim
        rows = [
            v[1] if v is not None and v[0] == "vec" and len(v[1]) == dim else None for v in values
        ]
        present = np.fromiter((r is not None for r in rows), dtype=bool, count=n)
        if not present.any():
            return None
        mat = np.array([zero if r is None else r for r in rows], dtype=np.float64).reshape(n, dim)
        have = mat[present]
        scales = np.array([_robust_scale(have[:, j]) for j in range(dim)])
        s = float(np.sqrt(np.mean(scales**2))) * math.sqrt(dim)
        raw = np.linalg.norm(mat - np.asarray(qv), axis=1) / s
        both = present[pa] & present[pb]
        pair = np.linalg.norm(mat[pa[both]] - mat[pb[both]], axis=1) / s
        dist = np.where(present, raw / _typical(pair), np.nan)
        return _Block(path, "vec", group, dist)

    def _set_block(
        self,
        path: str,
        group: str,
        qv: frozenset[str],
        values: list[Leaf | None],
        pa: np.ndarray,
        pb: np.ndarray,
    ) -> _Block | None:
        sets = [v[1] if v is not None and v[0] == "set" else None for v in values]
        if all(s is None for s in sets):
            return None

        def jd(x: frozenset[str], y: frozenset[str]) -> float:
            union = len(x | y)
            return math.sqrt(1.0 - len(x & y) / union) if union else 0.0

        raw = np.array([np.nan if s is None else jd(qv, s) for s in sets])
        pair = np.array(
            [
                jd(sa, sb)
                for a, b in zip(pa.tolist(), pb.tolist(), strict=True)
                if (sa := sets[a]) is not None and (sb := sets[b]) is not None
            ]
        )
        return _Block(path, "set", group, raw / _typical(pair))

    def _cat_block(
        self,
        path: str,
        group: str,
        qv: str,
        strings: list[str | None],
        pa: np.ndarray,
        pb: np.ndarray,
    ) -> _Block | None:
        if all(s is None for s in strings):
            return None
        codes: dict[str, int] = {qv: 0}
        col = np.array([-1 if s is None else codes.setdefault(s, len(codes)) for s in strings])
        present = col >= 0
        raw = np.where(present, (col != 0).astype(np.float64), np.nan)
        both = present[pa] & present[pb]
        pair = (col[pa[both]] != col[pb[both]]).astype(np.float64)
        return _Block(path, "cat", group, raw / _typical(pair))

    def _text_block(
        self,
        path: str,
        group: str,
        qv: str,
        strings: list[str | None],
        pa: np.ndarray,
        pb: np.ndarray,
    ) -> _Block | None:
        if all(s is None for s in strings):
            return None
        distinct = list(dict.fromkeys([qv, *(s for s in strings if s is not None)]))
        embed = self.embed if self.embed is not None else _default_embed()
        vecs = _as_unit_rows(embed(distinct), len(distinct))
        index = {t: i for i, t in enumerate(distinct)}
        col = np.array([-1 if s is None else index[s] for s in strings])
        present = col >= 0
        cos_q = vecs[np.maximum(col, 0)] @ vecs[0]
        raw = np.sqrt(np.clip(1.0 - cos_q.astype(np.float64), 0.0, 2.0))
        both = present[pa] & present[pb]
        ia, ib = col[pa[both]], col[pb[both]]
        pair_cos = np.einsum("ij,ij->i", vecs[ia], vecs[ib]).astype(np.float64)
        pair = np.sqrt(np.clip(1.0 - pair_cos, 0.0, 2.0))
        dist = np.where(present, raw / _typical(pair), np.nan)
        return _Block(path, "text", group, dist)

    def rank(
        self,
        query_state: Mapping[str, Any],
        candidates: Sequence[tuple[str, Mapping[str, Any]]],
        k: int,
    ) -> list[tuple[str, float]]:
        """The ``k`` candidates nearest to ``query_state``: (id, distance), nearest first."""
        _check_k(k)
        if isinstance(candidates, str | bytes) or not isinstance(candidates, Sequence):
            raise ValidationError(
                f"candidates must be a list of (id, state) pairs, got {type(candidates).__name__}",
                field="candidates",
            )
        if len(candidates) > MAX_CANDIDATES:
            raise ValidationError(
                f"{len(candidates)} candidates, over the limit of {MAX_CANDIDATES}",
                field="candidates",
                limit=MAX_CANDIDATES,
            )
        ids: list[str] = []
        states: list[Mapping[str, Any]] = []
        for i, pair in enumerate(candidates):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise ValidationError("expected an (id, state) pair", field=f"candidates[{i}]")
            cid, state = pair
            if not isinstance(cid, str):
                raise ValidationError("the id must be a string", field=f"candidates[{i}][0]")
            if not isinstance(state, Mapping):
                raise ValidationError(
                    f"the state must be an object, got {type(state).__name__}",
                    field=f"candidates[{i}][1]",
                )
            ids.append(cid)
            states.append(state)
        dist = self.distances(query_state, states)
        if dist.shape[0] == 0:
            return []
        top = min(k, dist.shape[0])
        order = np.lexsort((np.arange(dist.shape[0]), dist))[:top]
        return [(ids[i], float(dist[i])) for i in order.tolist()]


def _check_k(k: Any) -> None:
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValidationError(f"k must be an integer, got {type(k).__name__}", field="k")
    if k < 1 or k > MAX_K:
        raise ValidationError(f"k must be between 1 and {MAX_K}, got {k}", field="k", limit=MAX_K)


def rank_similar(
    query_state: Mapping[str, Any],
    candidates: Sequence[tuple[str, Mapping[str, Any]]],
    k: int,
    *,
    embed: EmbedFn | None = None,
) -> list[tuple[str, float]]:
    """The ``k`` states among ``candidates`` nearest to ``query_state`` by value.

    ``candidates`` are ``(id, state)`` pairs; the result is ``(id, distance)`` pairs, nearest
    first (ties in the candidates' order). ``embed`` embeds text fields (default: the
    database's default embedder, all-MiniLM-L6-v2, cached per text). The distance is
    :class:`StateFeaturizer`'s, documented in this module's docstring.
    """
    return StateFeaturizer(embed=embed).rank(query_state, candidates, k)
