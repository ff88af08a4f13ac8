"""Query execution: visibility and filters as one mask, vector and keyword candidates inside
it, fusion with recency and salience, dedup, top k.

Everything here is engine semantics (no storage or HTTP): the same result whichever backend
holds the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from ..index.catalog import Catalog
from ..index.hnsw import HnswIndex
from ..times import to_datetime
from ..types import Hit
from .filters import Node
from .masks import filter_mask

__all__ = ["Fusion", "QuerySpec", "execute"]

US_PER_DAY = 86_400_000_000


@dataclass(frozen=True, slots=True)
class Fusion:
    """How hybrid scores combine (defaults chosen on the LoCoMo dev benchmark; docs/retrieval.md).

    score = vector * cos' + keyword * bm25' + recency * 2^(-age/half_life) + salience * salience
    where cos' and bm25' are the candidates' scores scaled to [0, 1] by the best of each list.
    """

    vector: float = 0.5
    keyword: float = 0.5
    recency: float = 0.0
    salience: float = 0.0
    half_life_days: float = 30.0
    candidates: int = 100  # per list, at least; grows with k


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
    fusion: Fusion = field(default_factory=Fusion)


def allowed_rows(
    cat: Catalog, spec: QuerySpec, n: int, id_rows: Callable[[str], Iterable[int]]
) -> np.ndarray:
    """The mask of rows the query may return: visible at T and passing every filter."""
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


def _exact(cat: Catalog, q: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    assert cat.vectors is not None
    sims = (cat.vectors[rows] @ q) * cat.inv_norm[rows]
    return _top(sims, rows, k)


def vector_candidates(
    cat: Catalog, qvec: np.ndarray, allowed: np.ndarray, k: int, hnsw: HnswIndex | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine top ``k`` among allowed rows that have a vector.

    Exact while the namespace is small or the filter selective; otherwise the HNSW graph covers
    its prefix of rows (over-fetching by the inverse of the allowed share, then a filtered graph
    search if that was not enough) and the rows after the prefix are scanned exactly.
    """
    n = allowed.shape[0]
    if cat.vectors is None:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    ok = allowed & cat.has_vec[:n]
    qn = float(np.linalg.norm(qvec)) or 1.0
    q = (qvec / qn).astype(np.float32)
    h = min(hnsw.count, n) if hnsw is not None else 0
    allowed_in_graph = int(ok[:h].sum()) if h else 0
    if allowed_in_graph <= EXACT_GATHER:
        rows = np.flatnonzero(ok)
        if rows.shape[0] == 0:
            return rows, np.zeros(0, np.float32)
        if rows.shape[0] * 4 < n:  # selective: gather the allowed rows
            return _exact(cat, q, rows, k)
        sims = ((cat.vectors[:n] @ q) * cat.inv_norm[:n])[rows]
        return _top(sims, rows, k)
    assert hnsw is not None
    share = allowed_in_graph / h
    want = min(h, int(k / share * 2) + 16)
    labels, sims = hnsw.search(q, want, max(hnsw.ef_search, want))
    keep = (labels < h) & ok[np.minimum(labels, n - 1)]
    if int(keep.sum()) < min(k, allowed_in_graph) and want < h:
        labels, sims = hnsw.search(
            q, k, max(hnsw.ef_search, k), allowed=lambda label: label < h and bool(ok[label])
        )
        keep = np.ones(labels.shape[0], bool)
    g_rows, g_sims = labels[keep], sims[keep]
    tail = np.flatnonzero(ok[h:]) + h
    if tail.shape[0]:
        t_rows, t_sims = _exact(cat, q, tail, k)
        g_rows, g_sims = np.concatenate([g_rows, t_rows]), np.concatenate([g_sims, t_sims])
    return _top(g_sims, g_rows, k)


def execute(
    cat: Catalog,
    spec: QuerySpec,
    id_rows: Callable[[str], Iterable[int]],
    hnsw: HnswIndex | None = None,
) -> list[Hit]:
    n = cat.n
    allowed = allowed_rows(cat, spec, n, id_rows)
    fz = spec.fusion
    pool = max(fz.candidates, spec.k * 5)
    v_rows = v_scores = k_rows = k_scores = None
    if spec.mode in ("hybrid", "vector") and spec.qvec is not None:
        v_rows, v_scores = vector_candidates(cat, spec.qvec, allowed, pool, hnsw)
    if spec.mode in ("hybrid", "keyword") and spec.terms:
        k_rows, k_scores = cat.keywords.search(spec.terms, allowed, pool)
    if v_rows is None and k_rows is None and spec.has_text:
        return []  # a text with nothing searchable in it (only stopwords, say) matches nothing
    if v_rows is None and k_rows is None:  # no text, no vector: filters only, newest first
        rows = np.flatnonzero(allowed)
        rows, _ = _top(cat.ts_us[rows].astype(np.float64), rows, pool)
        cand = {int(r): {"vector": 0.0, "keyword": 0.0} for r in rows}
    else:
        cand = {}
        if v_rows is not None and v_rows.shape[0]:
            for r, s in zip(v_rows.tolist(), v_scores.tolist(), strict=True):  # type: ignore[union-attr]
                cand.setdefault(r, {"vector": 0.0, "keyword": 0.0})["cosine"] = s
        if k_rows is not None and k_rows.shape[0]:
            top = float(k_scores[0]) or 1.0  # type: ignore[index]
            for r, s in zip(k_rows.tolist(), k_scores.tolist(), strict=True):  # type: ignore[union-attr]
                c = cand.setdefault(r, {"vector": 0.0, "keyword": 0.0})
                c["bm25"] = s
                c["keyword"] = s / top
        if v_rows is not None and v_rows.shape[0]:
            best = float(v_scores[0]) or 1.0  # type: ignore[index]
            for c in cand.values():
                if "cosine" in c:
                    c["vector"] = max(0.0, c["cosine"]) / best if best > 0 else 0.0
    scored = []
    half_life = fz.half_life_days * US_PER_DAY
    weights_v = fz.vector if spec.mode != "keyword" else 0.0
    weights_k = fz.keyword if spec.mode != "vector" else 0.0
    for r, c in cand.items():
        rec = cat.recs[r]
        recency = 2.0 ** (-max(0, spec.t_us - rec.ts_us) / half_life) if half_life > 0 else 0.0
        c["recency"] = recency
        c["salience"] = rec.salience
        score = (
            weights_v * c["vector"]
            + weights_k * c["keyword"]
            + fz.recency * recency
            + fz.salience * rec.salience
        )
        if spec.mode == "vector" and "cosine" in c:
            score = c["cosine"] + fz.recency * recency + fz.salience * rec.salience
        c["score"] = score
        if spec.min_score is None or score >= spec.min_score:
            scored.append((score, r))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return _finish(cat, spec, scored, cand)


def _same(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def _finish(
    cat: Catalog, spec: QuerySpec, scored: list[tuple[float, int]], cand: dict[int, dict[str, Any]]
) -> list[Hit]:
    kept: list[tuple[int, list[str]]] = []
    for _score, r in scored:
        if spec.dedup:
            rec = cat.recs[r]
            vec = cat.vector(r)
            dup_of = None
            for kr, dups in kept:
                krec = cat.recs[kr]
                if _same(rec.content, krec.content):
                    dup_of = dups
                    break
                kvec = cat.vector(kr)
                if vec is not None and kvec is not None:
                    cos = float(vec @ kvec) * float(cat.inv_norm[r]) * float(cat.inv_norm[kr])
                    if cos >= spec.dedup_threshold:
                        dup_of = dups
                        break
            if dup_of is not None:
                dup_of.append(rec.id)
                continue
        kept.append((r, []))
        if len(kept) == spec.k:
            break
    hits = []
    for r, dups in kept:
        rec = cat.recs[r]
        c = cand[r]
        hits.append(
            Hit(
                id=rec.id,
                entity=rec.entity,
                content=rec.content,
                type=rec.type,
                metadata=orjson.loads(rec.meta_json),
                ts=to_datetime(rec.ts_us),
                version=rec.version,
                score=round(float(c["score"]), 6),
                agent=rec.agent,
                salience=rec.salience,
                duplicates=tuple(dups),
                explanation=dict(c) if spec.explain else None,
            )
        )
    return hits
