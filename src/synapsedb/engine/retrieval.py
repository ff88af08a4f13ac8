"""Running a query for a namespace: argument checks, entity scoping, speaker names, the query
embedding, then the executor. Kept apart from the Namespace handle so each stays small."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import ValidationError
from ..ids import new_memory_id
from ..index.keyword import analyze
from ..query.executor import QuerySpec, execute
from ..query.filters import And, parse_filter
from ..query.rank import named_labels, strip_words
from ..times import TimeLike, format_us, to_us
from ..types import Hit, QueryResult
from ..validation import (
    check_entity,
    check_filter_size,
    check_query_text,
    check_types,
    check_vector,
)
from ..validtime import not_ended_filter, valid_at_filter
from .lifecycle import touch
from .records import MemRec
from .state import NamespaceState

if TYPE_CHECKING:
    from .core import EngineCore

__all__ = ["run_query"]

MAX_K = 1000
_VALID_TO = ("valid_to",)
MODES = ("hybrid", "vector", "keyword")
_TRIM = ".,;:!?\"'()[]{}"


def run_query(
    core: EngineCore,
    ns: str,
    t: int,
    *,
    text: str | None,
    embedding: Sequence[float] | None,
    entity: str | None,
    filter: Mapping[str, Any] | None,
    k: int,
    mode: str,
    min_score: float | None,
    types: Iterable[str] | None,
    since: TimeLike | None,
    until: TimeLike | None,
    dedup: bool,
    explain: bool,
    agent: str | None = None,
    tiers: Sequence[str] | None = None,
    valid_at: TimeLike | None = None,
    include_ended: bool = False,
) -> QueryResult:
    settings = core.settings
    text = check_query_text(text, settings.max_query_chars)
    asked = text  # logged as the agent asked it (entity scoping may strip a token below)
    wanted_tiers = _tiers(tiers)
    if mode not in MODES:
        raise ValidationError(
            f"mode: expected one of {', '.join(MODES)}, got {mode!r}", field="mode"
        )
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError(
            f"k: expected an integer from 1 to {MAX_K}, got {k!r}", field="k", limit=MAX_K
        )
    if min_score is not None and (
        isinstance(min_score, bool)
        or not isinstance(min_score, int | float)
        or not math.isfinite(min_score)
    ):
        raise ValidationError(
            f"min_score: expected a finite number, got {min_score!r}", field="min_score"
        )
    for name, flag in (("dedup", dedup), ("explain", explain), ("include_ended", include_ended)):
        if not isinstance(flag, bool):
            raise ValidationError(f"{name}: expected true or false", field=name)
    qvec = (
        None if embedding is None else check_vector(embedding, "embedding", core.settings.max_dim)
    )
    check_filter_size(filter, settings.max_filter_bytes)
    node = parse_filter(filter)
    valid_us = None if valid_at is None else to_us(valid_at, "valid_at")
    if valid_us is not None:  # valid time is a filter over metadata.valid_from/valid_to
        valid = valid_at_filter(valid_us / 1_000_000)
        node = valid if node is None else And((node, valid))
    wanted = check_types(types)
    since_us = None if since is None else to_us(since, "since")
    until_us = None if until is None else to_us(until, "until")
    if entity is not None:
        entity = check_entity(entity)
    state = core.state(ns)
    qid = new_memory_id(core.now_us())
    if state is None:  # nothing to find, nothing logged (namespaces come from writes only)
        return QueryResult(qid, [], entity)
    cat = state.catalog
    if valid_us is None and not include_ended and (cat.postings(_VALID_TO, "x") or state.cold):
        # what is no longer true (closed by an update, or past its valid_to) is left out,
        # unless asked for; a namespace where no memory has a valid_to pays nothing
        ended = not_ended_filter(t / 1_000_000)
        node = ended if node is None else And((node, ended))
    if qvec is not None and cat.dim is not None and qvec.shape[0] != cat.dim:
        raise ValidationError(
            f"embedding: namespace {ns!r} holds {cat.dim}-dimensional embeddings, "
            f"got {qvec.shape[0]}",
            field="embedding",
            limit=cat.dim,
        )
    if text is not None and entity is None:
        text, entity = _scope_entity(text, cat.entities.codes)
    names, named = named_labels(text, cat.label_words) if text else ([], set())
    dense_text = strip_words(text, names) if text and mode == "hybrid" else text
    t_embed = time.perf_counter()
    if mode == "vector" and qvec is None and dense_text is not None:
        qvec = core.embedding.query(state, dense_text, required=True)
    elif mode == "hybrid" and qvec is None and dense_text:
        qvec = core.embedding.query(state, dense_text, required=False)
    embed_s = time.perf_counter() - t_embed
    if mode == "vector" and qvec is None:
        raise ValidationError(
            "embedding: mode='vector' needs an embedding or an embedder for the text",
            field="embedding",
        )
    spec = QuerySpec(
        terms=analyze(text) if text and mode != "vector" else [],
        qvec=qvec,
        mode=mode,
        k=k,
        t_us=t,
        entity=entity,
        filter=node,
        types=wanted,
        since_us=since_us,
        until_us=until_us,
        min_score=None if min_score is None else float(min_score),
        dedup=dedup,
        explain=explain,
        has_text=bool(text and text.strip()),
        named=frozenset(named),
        fusion=core.fusion,
    )
    spec.timings["embed"] = embed_s
    hits: list[Hit] = []
    if "hot" in wanted_tiers:
        hits = execute(
            cat,
            spec,
            lambda mid: [r.row for r in state.mems.get(mid, ()) if r.row >= 0],
            state.hnsw,
        )
    fallback = "hot" in wanted_tiers and state.config.cold_fallback and len(hits) < k
    if state.cold and ("cold" in wanted_tiers or fallback):
        cold = _search_cold(core, ns, state, spec, entity)
        if "hot" in wanted_tiers and "cold" in wanted_tiers:  # both asked for: merge by score
            hits = sorted(hits + cold, key=lambda h: -h.score)[:k]
        elif "hot" in wanted_tiers:  # fallback: cold hits fill the remaining slots
            hits = hits + cold[: k - len(hits)]
        else:
            hits = cold
    now = core.now_us()
    touch(state, [h.id for h in hits], now)
    if core.observers.query:
        core.observers.emit(core.observers.query, mode, spec.timings)
    _log(
        core, ns, qid, t, now, agent, asked, filter, entity, k, mode, hits, valid_us, include_ended
    )
    return QueryResult(qid, hits, entity)


_HOT = frozenset(("hot",))


def _tiers(value: Sequence[str] | None) -> frozenset[str]:
    if value is None:
        return _HOT
    if isinstance(value, str):
        value = (value,)
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise ValidationError(f"tiers: expected 'hot' and/or 'cold', got {value!r}", field="tiers")
    out = frozenset(v if isinstance(v, str) else None for v in value)  # unhashables: None
    if not out or not out <= {"hot", "cold"}:
        raise ValidationError(
            f"tiers: expected 'hot' and/or 'cold', got {list(value)!r}", field="tiers"
        )
    return out


def _search_cold(
    core: EngineCore, ns: str, state: NamespaceState, spec: QuerySpec, entity: str | None
) -> list[Hit]:
    """Search the cold tier: its rows are read from storage into a temporary index and the
    same executor runs on it, so filters, as_of and ranking mean exactly what they mean hot."""
    ids = list(state.cold if entity is None else state.cold_by_entity.get(entity, ()))
    if not ids:
        return []
    recs = [MemRec.from_row(r) for r in core.storage.read_memory_chains(ns, ids)]
    recs.sort(key=lambda r: (r.sys_us, r.version))
    temp = NamespaceState(ns, state.created_us, state.dim, state.embedder)
    temp.add_memories(recs)
    hits = execute(
        temp.catalog, spec, lambda mid: [r.row for r in temp.mems.get(mid, ()) if r.row >= 0]
    )
    return [dataclasses.replace(h, tier="cold") for h in hits]


def _scope_entity(text: str, entities: Mapping[str, int]) -> tuple[str, str | None]:
    """Find a token naming an existing entity; return the text without it and the entity."""
    words = text.split()
    for i, word in enumerate(words):
        token = word.strip(_TRIM)
        if token in entities:
            rest = " ".join(words[:i] + words[i + 1 :])
            return rest, token
    return text, None


def _log(
    core: EngineCore,
    ns: str,
    qid: str,
    t: int,
    now: int,
    agent: str | None,
    text: str | None,
    flt: Mapping[str, Any] | None,
    entity: str | None,
    k: int,
    mode: str,
    hits: list[Hit],
    valid_us: int | None = None,
    include_ended: bool = False,
) -> None:
    """Record the query in the query log (committed with the next group commit). What one
    row holds is bounded: the text and filter by their limits, the hits to the best
    ``query_log_max_hits``."""
    request = {"as_of": format_us(t), "entity": entity, "filter": flt, "k": k, "mode": mode}
    if valid_us is not None:
        request["valid_at"] = format_us(valid_us)
    if include_ended:
        request["include_ended"] = True
    logged = hits[: core.settings.query_log_max_hits]
    core.log_query(
        (
            ns,
            qid,
            now,
            agent,
            text,
            orjson.dumps(request, default=str).decode(),
            orjson.dumps([[h.id, h.version, h.score] for h in logged]).decode(),
        )
    )
