"""The chunked, vectorized dedup keeps exactly what the plain pairwise walk keeps."""

from __future__ import annotations

import tempfile

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import synapsedb
from synapsedb.query.dedup import dedup, norm_text


def reference(cat, rows, k, threshold):  # type: ignore[no-untyped-def]
    kept: list[tuple[int, list[str]]] = []
    for pos, r in enumerate(rows.tolist()):
        rec = cat.recs[r]
        dup = None
        for kpos, dups in kept:
            kr = int(rows[kpos])
            if norm_text(rec.content) == norm_text(cat.recs[kr].content):
                dup = dups
                break
            a, b = cat.vector(r), cat.vector(kr)
            if a is not None and b is not None:
                cos = float(a @ b) * float(cat.inv_norm[r]) * float(cat.inv_norm[kr])
                if cos >= threshold:
                    dup = dups
                    break
        if dup is not None:
            dup.append(rec.id)
            continue
        kept.append((pos, []))
        if len(kept) == k:
            break
    return kept


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(5, 120),
    st.integers(1, 40),
    st.sampled_from([0.8, 0.9, 0.95]),
)
def test_dedup_matches_reference(seed: int, n: int, k: int, threshold: float) -> None:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((max(2, n // 4), 8))
    vecs = base[rng.integers(0, base.shape[0], n)] + 0.15 * rng.standard_normal((n, 8))
    texts = [f"text {rng.integers(0, n // 2 + 1)}" for _ in range(n)]
    with (
        tempfile.TemporaryDirectory() as d,
        synapsedb.open(d, durability="os", embedder=None) as db,
    ):
        db.namespace("p").write_many(
            [
                {"entity": "e", "content": t, "embedding": v}
                for t, v in zip(texts, vecs, strict=True)
            ]
        )
        state = db._state("p")
        assert state is not None
        cat = state.catalog
        rows = rng.permutation(cat.n).astype(np.int64)
        assert dedup(cat, rows, k, threshold) == reference(cat, rows, k, threshold)
