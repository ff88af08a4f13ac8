"""Query execution: visibility and filters as one mask, vector and keyword candidates inside
it, fusion with recency and salience, dedup, top k.

Everything here is engine semantics (no storage or HTTP): the same result whichever backend
holds the rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np
import orjson

from ..index import dense as dense_views
from ..index.catalog import Catalog
from ..index.hnsw import HnswIndex
from ..index.rowmemo import RowMemo
from ..index.timeline import context, distinct, neighbours
from ..times import to_datetime
from ..types import Hit
from . import rerank
from .dedup import dedup
from .feedback import expansion_terms
from .filters import Node
from .masks import filter_mask

__all__ = ["Fusion", "QuerySpec", "execute"]

US_PER_DAY = 86_400_000_000


@dataclass(frozen=True, slots=True)
class Fusion:
    """Ranking weights of hybrid queries (defaults chosen on LoCoMo dev; see query/rank.py and
    docs/retrieval.md). ``context`` and ``author`` apply to text queries in hybrid mode."""

    vector: float = 0.5
    keyword: float = 0.5
    context: float = 0.5
    window: int = 2
    author: float = 0.5
    recency: float = 0.0
    salience: float = 0.0
    half_life_days: float = 30.0
    candidates: int = 100  # per list
    # pseudo-relevance feedback for hybrid text queries (query/feedback.py): expansion terms
    # from the best feedback_docs hits, each counted once against the question's terms counted
    # feedback_repeat times; feedback_terms = 0 turns it off
    feedback_docs: int = 3
    feedback_terms: int = 5
    feedback_repeat: int = 2
    # the learned re-ranking of the best rows (query/rerank.py) for hybrid text queries with
    # the context term on and no recency or salience weight
    rerank: bool = True

    def __post_init__(self) -> None:
        for name in ("feedback_docs", "feedback_terms", "feedback_repeat"):
            value = getattr(self, name)
            low = 1 if name == "feedback_repeat" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")


@dataclass(slots=True)
class QuerySpec:
    terms: list[str]
    qvec: np.ndarray | None
    mode: str
    k: int
    t_us: int
    entity: str | None = None
    filter: Node | None = None
    types: frozenset[str] | None = None
    since_us: int | None = None
    until_us: int | None = None
    min_score: float | None = None
    dedup: bool = True
    dedup_threshold: float = 0.95
    explain: bool = False
    has_text: bool = False
    named: frozenset[int] = frozenset()  # speaker labels the query names
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds (observability)
    fusion: Fusion = field(default_factory=Fusion)


MASK_CACHE = 8  # allowed-row masks kept per catalog, for filters asked again at the present
_NEVER = np.iinfo(np.int64).max


def allowed_rows(
    cat: Catalog, spec: QuerySpec, n: int, id_rows: Callable[[str], Iterable[int]]
) -> np.ndarray:
    """The mask of rows the query may return: visible at T and passing every filter (read
    only: it may be shared with later queries).

    A query at the present (T at or after the catalog's last change) with the same entity,
    types, time bounds and filter as a recent one reuses its mask while the catalog is
    unchanged (same seqlock epoch and rows) and no row in it has expired since: as time
    passes, a present mask only loses rows, when their TTL runs out.
    """
    key = present_key(cat, spec)
    if key is None:
        return _allowed_rows(cat, spec, n, id_rows)
    epoch = cat.epoch
    cached = cat.masks.get(key)
    if cached is not None and cached[0] == epoch and cached[1] == n and spec.t_us < cached[2]:
        return cached[3]
    mask = _allowed_rows(cat, spec, n, id_rows)
    if epoch & 1 or cat.epoch != epoch:  # a writer changed the catalog meanwhile: not kept
        return mask
    until = _NEVER
    if cat.n_ttl:
        expiring = cat.exp_us[:n][mask]
        until = int(expiring.min()) if expiring.shape[0] else _NEVER
    mask.setflags(write=False)
    masks = cat.masks
    masks.pop(key, None)
    try:
        while len(masks) >= MASK_CACHE:  # the oldest first
            masks.pop(next(iter(masks)), None)
    except (RuntimeError, StopIteration):  # another query changed the dict meanwhile
        pass
    masks[key] = (epoch, n, until, mask)
    return mask


def present_key(cat: Catalog, spec: QuerySpec) -> Hashable | None:
    """What the query's allowed rows depend on, for a query at the present (T at or after the
    catalog's last change); None for a query into the past."""
    if not MASK_CACHE or spec.t_us < cat.latest_us:
        return None
    return (spec.entity, spec.types, spec.since_us, spec.until_us, repr(spec.filter))


def _allowed_rows(
    cat: Catalog, spec: QuerySpec, n: int, id_rows: Callable[[str], Iterable[int]]
) -> np.ndarray:
    mask = cat.visible(spec.t_us, n)
    if spec.entity is not None:
        code = cat.entities.codes.get(spec.entity)
        if code is None:
            return np.zeros(n, bool)
        mask &= cat.entity[:n] == code
    if spec.types is not None:
        codes = [cat.types.codes[t] for t in spec.types if t in cat.types.codes]
        mask &= np.isin(cat.type[:n], codes)
    if spec.since_us is not None:
        mask &= cat.ts_us[:n] >= spec.since_us
    if spec.until_us is not None:
        mask &= cat.ts_us[:n] < spec.until_us
    if spec.filter is not None:
        mask &= filter_mask(spec.filter, cat, n, id_rows)
    return mask


def _top(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if rows.shape[0] > k:
        part = np.argpartition(-scores, k - 1)[:k]
        rows, scores = rows[part], scores[part]
    order = np.argsort(-scores, kind="stable")
    return rows[order], scores[order]


EXACT_GATHER = 4096  # up to this many allowed rows, exact search beats the graph


def unit_vector(qvec: np.ndarray) -> np.ndarray:
    """The query vector scaled to length 1, as float32 (a zero vector stays zero)."""
    return (qvec / (float(np.linalg.norm(qvec)) or 1.0)).astype(np.float32)


def _exact(cat: Catalog, q: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    assert cat.vectors is not None
    sims = (cat.vectors[rows] @ q) * cat.inv_norm[rows]
    return _top(sims, rows, k)


def _with_vectors(
    cat: Catalog, allowed: np.ndarray, n: int, h: int
) -> tuple[np.ndarray, int, np.ndarray | None]:
    """The allowed rows that have a vector, how many of them the graph's first ``h`` rows hold,
    and (when few enough to be searched exactly) their row numbers; kept with a cached
    (read-only) mask, whose rows cannot change while it is cached."""
    views = cat.vec_views
    seen = views.get(id(allowed))
    if seen is not None and seen[0] is allowed and seen[1] == h:
        return seen[2], seen[3], seen[4]
    ok = allowed & cat.has_vec[:n]
    in_graph = int(np.count_nonzero(ok[:h])) if h else 0
    rows = np.flatnonzero(ok) if in_graph <= EXACT_GATHER else None
    if not allowed.flags.writeable:
        ok.setflags(write=False)
        if rows is not None:
            rows.setflags(write=False)
        if len(views) >= MASK_CACHE:
            views.clear()
        views[id(allowed)] = (allowed, h, ok, in_graph, rows)  # holding `allowed` keeps its id
    return ok, in_graph, rows


def vector_candidates(
    cat: Catalog,
    qvec: np.ndarray,
    allowed: np.ndarray,
    k: int,
    hnsw: HnswIndex | None = None,
    need: int | None = None,
    *,
    unit: bool = False,
    present: tuple[Hashable, int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine top ``k`` among allowed rows that have a vector (``unit``: ``qvec`` is already
    :func:`unit_vector`'s result; ``present``: the query's :func:`present_key` and time, when
    it asks at the present).

    Exact while the namespace is small or the filter selective; otherwise the HNSW graph covers
    its prefix of rows and the rows after the prefix are scanned exactly. A filter over-fetches
    from the graph by the inverse of its share of the graph's rows, sized for ``need`` rows
    (default ``k``: fewer than ``k`` may come back when ``need`` is smaller): 1.3 times first,
    2.5 times if that found fewer than ``need``, then a filtered graph search. A filter asked
    again at the present whose rows are too many to gather each time, but few enough to scan in
    less time than that graph search, is searched exactly in a block of its rows' vectors
    (index/dense.py).
    """
    n = allowed.shape[0]
    if cat.vectors is None:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    q = qvec if unit else unit_vector(qvec)
    h = min(hnsw.count, n) if hnsw is not None else 0
    ok, allowed_in_graph, rows = _with_vectors(cat, allowed, n, h)
    if rows is not None:
        if rows.shape[0] == 0:
            return rows, np.zeros(0, np.float32)
        if rows.shape[0] * 4 < n:  # selective: gather the allowed rows
            return _exact(cat, q, rows, k)
        sims = ((cat.vectors[:n] @ q) * cat.inv_norm[:n])[rows]
        return _top(sims, rows, k)
    assert hnsw is not None
    if allowed_in_graph == h == n:  # nothing filtered out, no rows past the graph
        labels, sims = hnsw.search(q, k, max(hnsw.ef_search, k))
        if labels.shape[0] < 2 or bool((sims[:-1] >= sims[1:]).all()):
            return labels, sims  # the graph's order is _top's (a stable sort keeps its ties)
        return _top(sims, labels, k)
    share = allowed_in_graph / h
    need = k if need is None else min(need, k)
    # nothing filtered out of the graph: k is what we need; else about 1.3 * need allowed rows
    # are expected among the first `want`
    want = k if allowed_in_graph == h else min(h, max(k, int(need / share * 1.3) + 8))
    if present is not None and allowed_in_graph < h:
        count = allowed_in_graph + (int(np.count_nonzero(ok[h:])) if h < n else 0)
        if count <= dense_views.ROWS_PER_EF * max(hnsw.ef_search, want):
            found = cat.dense.search(cat.vectors, cat.inv_norm, *present, ok, count, q, k)
            if found is not None:
                return found
    labels, sims = hnsw.search(q, want, max(hnsw.ef_search, want))
    keep = (labels < h) & ok[np.minimum(labels, n - 1)]
    if int(np.count_nonzero(keep)) < min(need, allowed_in_graph) and want < h:
        want = min(h, int(need / share * 2.5) + 16)
        labels, sims = hnsw.search(q, want, max(hnsw.ef_search, want))
        keep = (labels < h) & ok[np.minimum(labels, n - 1)]
        if int(np.count_nonzero(keep)) < min(need, allowed_in_graph) and want < h:
            labels, sims = hnsw.search(
                q, k, max(hnsw.ef_search, k), allowed=lambda label: label < h and bool(ok[label])
            )
            keep = np.ones(labels.shape[0], bool)
    g_rows, g_sims = labels[keep], sims[keep]
    tail = np.flatnonzero(ok[h:]) + h if h < n else None
    if tail is not None and tail.shape[0]:
        t_rows, t_sims = _exact(cat, q, tail, k)
        g_rows, g_sims = np.concatenate([g_rows, t_rows]), np.concatenate([g_sims, t_sims])
    return _top(g_sims, g_rows, k)


def execute(
    cat: Catalog,
    spec: QuerySpec,
    id_rows: Callable[[str], Iterable[int]],
    hnsw: HnswIndex | None = None,
) -> list[Hit]:
    allowed = allowed_rows(cat, spec, cat.n, id_rows)
    fz = spec.fusion
    # cosine alone ranks: vector mode, or hybrid with a vector and nothing to search by keyword
    # (and no recency or salience weight), which _ranked scores exactly as vector mode
    by_cosine = spec.qvec is not None and (
        spec.mode == "vector"
        or (spec.mode == "hybrid" and not spec.terms and not fz.recency and not fz.salience)
    )
    if not by_cosine:
        return _ranked(cat, spec, allowed, hnsw, None)[0]
    # vector only: the graph is first asked for k allowed rows, not k plus the dedup slack;
    # only if dedup then leaves fewer than k hits is it asked again for the slack too
    hits, short = _ranked(cat, spec, allowed, hnsw, spec.k)
    if short:
        hits = _ranked(cat, spec, allowed, hnsw, None)[0]
    return hits


def _ranked(
    cat: Catalog, spec: QuerySpec, allowed: np.ndarray, hnsw: HnswIndex | None, need: int | None
) -> tuple[list[Hit], bool]:
    """The ranked hits among ``allowed``, and whether there may be more to find: the vector
    candidates were cut short by ``need`` and dedup left fewer than k hits."""
    fz = spec.fusion
    use_v = spec.mode != "keyword" and spec.qvec is not None
    use_k = spec.mode != "vector" and bool(spec.terms)
    if not use_v and not use_k:
        if spec.has_text:
            return [], False  # a text with nothing searchable in it (only stopwords, say)
        rows = np.flatnonzero(allowed)  # no text, no vector: filters only, newest first
        rows, _ = _top(cat.ts_us[rows].astype(np.float64), rows, spec.k * 2 + 10)
        zeros = np.zeros(rows.shape[0])
        return _finish(cat, spec, rows, zeros, {"score": zeros}), False
    hybrid = spec.mode == "hybrid"
    # two lists to fuse need deep candidate lists; one list needs k plus slack for dedup
    pool = fz.candidates if use_v and use_k else spec.k + (10 if spec.dedup else 0)
    cand_parts = []
    q = None
    if use_v:
        assert spec.qvec is not None
        q = unit_vector(spec.qvec)
        t0 = time.perf_counter()
        key = present_key(cat, spec)
        present = None if key is None else (key, spec.t_us)
        v_rows, _ = vector_candidates(cat, q, allowed, pool, hnsw, need, unit=True,
                                      present=present)  # fmt: skip
        spec.timings["vector"] = spec.timings.get("vector", 0.0) + time.perf_counter() - t0
        if not use_k and not fz.recency and not fz.salience:  # cosine alone ranks
            # (vector_candidates' rows are distinct: graph labels, then rows past the graph)
            return _by_cosine(cat, spec, v_rows, q, pool, need)
        cand_parts.append(v_rows)
    bm = k_rows = None
    if use_k:
        t0 = time.perf_counter()
        k_rows, _k_scores, bm = cat.keywords.search(spec.terms, allowed, pool, full=True)
        spec.timings["keyword"] = spec.timings.get("keyword", 0.0) + time.perf_counter() - t0
    t_fuse = time.perf_counter()
    v_part = cand_parts[0] if cand_parts else None
    again = fz.feedback_terms > 0 and use_k and hybrid and spec.has_text
    memos = _memos(cat, spec, allowed, q) if again else (None, None)
    rows, score, comp, cut, cand = _fuse(cat, spec, allowed, q, v_part, k_rows, bm, memos,
                                         rerank=not again)  # fmt: skip
    if again and rows.shape[0]:
        t0 = time.perf_counter()
        assert bm is not None
        fed = _feedback(cat, spec, allowed, pool, rows, score, bm)
        if fed is not None:
            k_rows, bm = fed
            rows, score, comp, cut, cand = _fuse(cat, spec, allowed, q, v_part, k_rows, bm, memos)
        spec.timings["feedback"] = spec.timings.get("feedback", 0.0) + time.perf_counter() - t0
    hits = _finish(cat, spec, rows, score, comp)
    spec.timings["fuse"] = spec.timings.get("fuse", 0.0) + time.perf_counter() - t_fuse
    short = need is not None and cand.shape[0] < pool and len(hits) < spec.k and not cut
    return hits, short


def _feedback(
    cat: Catalog,
    spec: QuerySpec,
    allowed: np.ndarray,
    pool: int,
    rows: np.ndarray,
    score: np.ndarray,
    bm: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The keyword list searched again with expansion terms from the best few ranked rows
    (query/feedback.py), or None when there are none to add: the question's terms counted
    ``feedback_repeat`` times and each expansion term once, the question's part taken from
    its first search's scores ``bm`` (what searching all the terms again gives: exactly for the
    default 2, see KeywordIndex.search)."""
    fz = spec.fusion
    m = fz.feedback_docs
    if spec.dedup:  # the best distinct hits, as the caller would see them
        best = [pos for pos, _ in dedup(cat, rows, m, spec.dedup_threshold)]
    else:
        best = list(range(min(m, rows.shape[0])))
    extra = expansion_terms(
        cat, rows[best].tolist(), score[best].tolist(), spec.terms, fz.feedback_terms,
        allowed.shape[0],
    )  # fmt: skip
    if not extra:
        return None
    asked = set(spec.terms)
    extra = [term for term in extra if term not in asked]  # (expansion_terms leaves them out)
    k_rows, _scores, fed = cat.keywords.search(
        extra, allowed, pool, full=True, start=bm * fz.feedback_repeat
    )
    return k_rows, fed


def _window(spec: QuerySpec) -> int:
    """How many timeline neighbours on each side a candidate reads (0: no context term)."""
    fz = spec.fusion
    return fz.window if spec.mode == "hybrid" and spec.has_text and fz.context > 0 else 0


def _memos(
    cat: Catalog, spec: QuerySpec, allowed: np.ndarray, q: np.ndarray | None
) -> tuple[RowMemo | None, RowMemo | None]:
    """For a query that fuses twice (feedback): each row's cosine, and each candidate's
    timeline neighbours, computed once for both."""
    vectors = cat.vectors
    cosines = None
    if q is not None and vectors is not None:
        cosines = RowMemo(lambda rows: (vectors[rows] @ q).astype(np.float64) * cat.inv_norm[rows])
    window = _window(spec)
    wide = None
    if window:
        wide = RowMemo(
            lambda rows: neighbours(cat.timelines, cat.entity, allowed, rows, 2 * window)
        )
    return cosines, wide


def _fuse(
    cat: Catalog,
    spec: QuerySpec,
    allowed: np.ndarray,
    q: np.ndarray | None,
    v_rows: np.ndarray | None,
    k_rows: np.ndarray | None,
    bm: np.ndarray | None,
    memos: tuple[RowMemo | None, RowMemo | None] = (None, None),
    *,
    rerank: bool = True,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], bool, np.ndarray]:
    """Fuse the vector and keyword candidate lists: the rows in rank order, their scores, the
    score components (in that order), whether ``min_score`` dropped any, and the candidates
    (``memos``: :func:`_memos`' when the query fuses more than once; ``rerank``: this is the
    query's last fusion, whose best rows the learned re-ranking may re-order)."""
    fz = spec.fusion
    use_v, use_k = v_rows is not None, k_rows is not None
    parts = [p for p in (v_rows, k_rows) if p is not None]
    cand = distinct(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    window = _window(spec)
    nb = None
    if window:  # the rows near candidates, each one's neighbours, every row whose s0 is read
        rows, nb, near = context(cat.timelines, cat.entity, allowed, cand, window, memos[1])
    else:
        rows = near = cand
    comp: dict[str, np.ndarray] = {}
    cos = np.zeros(near.shape[0])
    if q is not None and cat.vectors is not None and near.shape[0]:
        if memos[0] is not None:
            cos = memos[0].get(near)
        else:
            cos = (cat.vectors[near] @ q).astype(np.float64) * cat.inv_norm[near]
    bmn = bm[near].astype(np.float64) if bm is not None else np.zeros(near.shape[0])
    if spec.mode == "vector":
        s0 = cos
    elif spec.mode == "keyword":
        s0 = bmn
    else:
        cmax = float(cos[np.searchsorted(near, cand)].max()) if use_v and cand.shape[0] else 0.0
        bmax = float(bmn.max()) if use_k and bmn.shape[0] else 0.0
        vec_n = np.maximum(cos, 0.0) / cmax if cmax > 0 else np.zeros_like(cos)
        key_n = bmn / bmax if bmax > 0 else np.zeros_like(bmn)
        s0 = fz.vector * vec_n + fz.keyword * key_n
        at = np.searchsorted(near, rows)
        comp["vector"], comp["keyword"] = vec_n[at], key_n[at]
    at = np.searchsorted(near, rows)
    comp["cosine"], comp["bm25"], comp["base"] = cos[at], bmn[at], s0[at]
    score = s0[at].copy()
    if nb is not None:
        nb_s0 = np.where(nb >= 0, s0[np.searchsorted(near, np.maximum(nb, 0))], 0.0)
        comp["context"] = fz.context * nb_s0.max(axis=1)
        score += comp["context"]
    if spec.mode == "hybrid" and spec.has_text and spec.named and fz.author:
        comp["author"] = fz.author * np.isin(cat.label[rows], list(spec.named))
        score += comp["author"]
    if fz.recency:
        half_life = fz.half_life_days * US_PER_DAY
        age = np.maximum(0, spec.t_us - cat.ts_us[rows]).astype(np.float64)
        comp["recency"] = fz.recency * np.exp2(-age / half_life)
        score += comp["recency"]
    if fz.salience:
        comp["salience"] = fz.salience * cat.salience[rows]
        score += comp["salience"]
    cut = False  # min_score dropped a candidate: the rest of the list would score lower
    if spec.min_score is not None:
        keep = score >= spec.min_score
        cut = not keep.all()
        rows, score = rows[keep], score[keep]
        comp = {k: v[keep] for k, v in comp.items()}
    order = np.lexsort((rows, -score))
    if (rerank and fz.rerank and nb is not None and spec.mode == "hybrid" and use_v and use_k
            and not fz.recency and not fz.salience):  # fmt: skip
        named = comp["author"] > 0 if "author" in comp else np.zeros(rows.shape[0], bool)
        order = _reranked(cat, rows, score, order, near, (s0, vec_n, key_n, cos, bmn), nb,
                          named, comp)  # fmt: skip
    comp = {k: v[order] for k, v in comp.items()}
    score = np.sort(score)[::-1] if "rerank" in comp else score[order]  # k-th hit, k-th score
    comp["score"] = score
    return rows[order], score, comp, cut, cand


def _reranked(
    cat: Catalog,
    rows: np.ndarray,
    score: np.ndarray,
    order: np.ndarray,
    near: np.ndarray,
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    nb: np.ndarray,
    named: np.ndarray,
    comp: dict[str, np.ndarray],
) -> np.ndarray:
    """``order`` with its best rows re-ordered by the learned ranker (query/rerank.py) when
    they are transcript lines; its score of each re-ordered row goes to ``comp["rerank"]`` (0
    for the rest)."""
    model = rerank.forest()
    head = order[: model.rows]
    if head.shape[0] < 2:
        return order
    top = rows[head]
    if not rerank.transcript(cat.label[top]):
        return order
    cands = rerank.gather(cat, top, score[head], near, arrays, nb[head], named[head] * 1.0)
    pred = model.predict(rerank.features(cands))
    new = np.lexsort((np.arange(head.shape[0]), -pred))
    comp["rerank"] = np.zeros(rows.shape[0])
    comp["rerank"][head] = pred
    return np.concatenate([head[new], order[model.rows :]])


def _by_cosine(
    cat: Catalog, spec: QuerySpec, rows: np.ndarray, q: np.ndarray, pool: int, need: int | None
) -> tuple[list[Hit], bool]:
    """What the fusion below computes when the only list is the vector one and no recency or
    salience weight applies (the score is the cosine), without its merging steps."""
    t_fuse = time.perf_counter()
    cos = np.zeros(rows.shape[0])
    units = None  # the rows' unit vectors, in rank order (dedup reads them)
    if cat.vectors is not None and rows.shape[0]:
        vecs, inv = cat.vectors[rows], cat.inv_norm[rows]
        cos = (vecs @ q).astype(np.float64) * inv
    cut = False
    if spec.min_score is not None:
        keep = cos >= spec.min_score
        cut = not keep.all()
        rows, cos = rows[keep], cos[keep]
        if cat.vectors is not None and rows.shape[0]:
            vecs, inv = vecs[keep], inv[keep]
    order = np.lexsort((rows, -cos))
    rows, cos = rows[order], cos[order]
    if spec.dedup and cat.vectors is not None and rows.shape[0]:
        units = vecs[order] * inv[order][:, None]
    comp = {"cosine": cos, "bm25": np.zeros(rows.shape[0]), "base": cos, "score": cos}
    hits = _finish(cat, spec, rows, cos, comp, units)
    spec.timings["fuse"] = spec.timings.get("fuse", 0.0) + time.perf_counter() - t_fuse
    short = need is not None and rows.shape[0] < pool and len(hits) < spec.k and not cut
    return hits, short


def _finish(
    cat: Catalog,
    spec: QuerySpec,
    rows: np.ndarray,
    scores: np.ndarray,
    comp: dict[str, np.ndarray],
    units: np.ndarray | None = None,
) -> list[Hit]:
    """Dedup in rank order (same text, or cosine >= threshold), then build the top k hits
    (``units``: the rows' unit vectors, in order, if the caller has them)."""
    if spec.dedup:
        kept = dedup(cat, rows, spec.k, spec.dedup_threshold, units)
    else:
        kept = [(i, []) for i in range(min(spec.k, rows.shape[0]))]
    if not kept:
        return []
    recs, loads = cat.recs, orjson.loads
    at, score = rows.tolist(), scores.tolist()  # Python numbers once, not per hit
    parts = {k: v.tolist() for k, v in comp.items()} if spec.explain else None
    hits = []
    for pos, dups in kept:
        rec = recs[at[pos]]
        # positional, in Hit's field order (tests/unit/test_query_hits.py holds it): a frozen
        # dataclass's keyword call costs about twice as much, and a query builds k of them
        hits.append(
            Hit(
                rec.id,
                rec.entity,
                rec.content,
                rec.type,
                loads(rec.meta_json),
                to_datetime(rec.ts_us),
                rec.version,
                round(score[pos], 6),
                rec.agent,
                rec.salience,
                tuple(dups),
                None if parts is None else {k: round(float(v[pos]), 6) for k, v in parts.items()},
            )
        )
    return hits
