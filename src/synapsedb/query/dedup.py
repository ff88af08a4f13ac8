"""Dedup of ranked rows: a row that repeats a better-ranked kept row (the same text once
normalized, or a cosine at or above the threshold) is folded into it."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..index.catalog import Catalog

__all__ = ["SHORT_TEXT", "dedup", "norm_text", "text_key"]


def norm_text(text: str) -> str:
    return " ".join(text.lower().split())


SHORT_TEXT = 512  # longer texts are compared by a digest of their normalized form


def text_key(rec: Any) -> str:
    """What dedup compares for "same text", kept on the record: a long memory (up to
    max_content_bytes) is normalized once, not on every query that meets it."""
    key: str | None = rec.norm_key
    if key is None:
        norm = norm_text(rec.content)
        key = norm if len(norm) <= SHORT_TEXT else "#" + hashlib.blake2b(norm.encode()).hexdigest()
        rec.norm_key = key
    return key


def dedup(
    cat: Catalog, rows: np.ndarray, k: int, threshold: float, units: np.ndarray | None = None
) -> list[tuple[int, list[str]]]:
    """Walk ``rows`` in rank order, keeping a row unless it repeats a kept one (same text, or
    cosine >= threshold); returns (position, duplicate ids) of up to ``k`` kept rows.

    Works in chunks: one matrix product per chunk against the kept rows and one within the
    chunk; the close pairs they find are turned into Python lists once, so the walk itself
    only looks rows up (a row that repeats one is most often close to one kept row).
    ``units``: the rows' unit vectors in the same order, when the caller gathered them already.
    """
    kept: list[tuple[int, list[str]]] = []
    kept_text: dict[str, int] = {}
    vectors, recs, has_vec = cat.vectors, cat.recs, cat.has_vec
    kept_vecs: np.ndarray | None = None
    chunk = max(2 * k, 32)
    pos = 0
    total = rows.shape[0]
    while len(kept) < k and pos < total:
        part = rows[pos : pos + chunk]
        # per chunk offset: the first earlier-chunk kept row it is close to (index in kept),
        # and the earlier offsets of this chunk it is close to (ascending)
        close_kept: list[int] | None = None
        close_self: dict[int, list[int]] = {}
        if vectors is not None:
            if units is not None:
                vecs = units[pos : pos + chunk]
            else:
                vecs = vectors[part] * cat.inv_norm[part][:, None]
            if kept_vecs is not None:
                near = (vecs @ kept_vecs.T) >= threshold
                if near.any():
                    close_kept = np.where(near.any(axis=1), near.argmax(axis=1), -1).tolist()
            ii, jj = np.nonzero((vecs @ vecs.T) >= threshold)
            below = ii > jj  # row-major order: each offset's earlier offsets come ascending
            for i, j in zip(ii[below].tolist(), jj[below].tolist(), strict=True):
                close_self.setdefault(i, []).append(j)
        local: dict[int, int] = {}  # chunk offset -> index in kept, for rows kept here
        for i, r in enumerate(part.tolist()):
            rec = recs[r]
            text = rec.norm_key
            if text is None:
                text = text_key(rec)
            j = kept_text.get(text)  # the best-ranked kept hit it repeats, by either rule
            first = close_kept[i] if close_kept is not None else -1
            if first >= 0 and has_vec[r]:  # earlier chunks' kept rows rank before this one's
                j = first if j is None else min(j, first)
            elif i in close_self and has_vec[r]:
                for o in close_self[i]:
                    at = local.get(o)
                    if at is not None:
                        j = at if j is None else min(j, at)
                        break
            if j is not None:
                kept[j][1].append(rec.id)
                continue
            kept_text[text] = local[i] = len(kept)
            kept.append((pos + i, []))
            if len(kept) == k:
                break
        pos += chunk
        if vectors is not None and local and len(kept) < k and pos < total:  # a next chunk
            new = vecs[list(local)]
            kept_vecs = new if kept_vecs is None else np.concatenate([kept_vecs, new])
    return kept
