"""Every memory that passes a filter, through the public ``query`` API (embedded or HTTP).

A query without text or vector returns the memories passing its filters newest event time
first, at most 1,000 at a time. :func:`collect` pages through them by event time: the next
page asks for what is older than the oldest seen, or as old and not yet seen. Hot and cold
tiers are paged apart (a hot query's cold fallback does not keep time order); the cold tier is
read only when it holds matches (the hot query's fallback shows them) or ``cold=True``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import MemoryRetrievalError

__all__ = ["PAGE", "collect"]

PAGE = 1000  # the engine's largest k
MAX_TIES = 500  # memories of one event-time microsecond a page can step over (filter size)


def _page_filter(base: Mapping[str, Any] | None, bound: str | None, ties: list[str]) -> Any:
    if bound is None:
        return base
    older: dict[str, Any] = {"ts": {"$lt": bound}}
    same: dict[str, Any] = {"ts": bound, "id": {"$nin": ties}} if ties else {"ts": bound}
    page = {"$or": [older, same]}
    return page if not base else {"$and": [dict(base), page]}


def _pages(
    ns: Any,
    entity: str,
    base: Mapping[str, Any] | None,
    types: Sequence[str] | None,
    tier: str,
) -> tuple[list[Any], bool]:
    """All hits of one engine tier, newest first; and whether cold hits showed up."""
    out: list[Any] = []
    bound: str | None = None
    ties: list[str] = []
    saw_cold = False
    while True:
        res = ns.query(
            None,
            entity=entity,
            filter=_page_filter(base, bound, ties),
            types=types,
            k=PAGE,
            dedup=False,
            tiers=(tier,),
        )
        hits = [h for h in res.hits if h.tier == tier]
        saw_cold = saw_cold or len(hits) < len(res.hits)
        out.extend(hits)
        if len(hits) < PAGE:
            return out, saw_cold
        oldest = hits[-1].ts
        if bound != oldest.isoformat():
            ties = []
        bound = oldest.isoformat()
        ties.extend(h.id for h in hits if h.ts == oldest)
        if len(ties) > MAX_TIES:
            raise MemoryRetrievalError(
                f"more than {MAX_TIES} memories of {entity!r} share the event time "
                f"{bound}; a scan cannot page past them",
                limit=MAX_TIES,
            )


def collect(
    ns: Any,
    entity: str,
    filter: Mapping[str, Any] | None = None,
    *,
    types: Sequence[str] | None = None,
    cold: bool = False,
) -> list[Any]:
    """Every memory of ``entity`` passing ``filter`` (and of ``types``), hot then cold."""
    hot, saw_cold = _pages(ns, entity, filter, types, "hot")
    if not (cold or saw_cold):
        return hot
    seen = {h.id for h in hot}
    cold_hits, _ = _pages(ns, entity, filter, types, "cold")
    return hot + [h for h in cold_hits if h.id not in seen]
