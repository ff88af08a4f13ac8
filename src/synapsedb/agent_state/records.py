"""How an agent's memory is a SynapseDB memory, and back (docs/agent-state.md).

One agent memory (a state, an action or an interaction at a step) is one SynapseDB memory in
the API's namespace:

* ``entity`` = the agent id; ``type`` = ``state`` / ``action`` / ``interaction``;
* ``metadata`` = ``{"step", "importance", "tier", "level", "data"}`` where
  ``data`` is the agent's JSON object (exactly as given in STM; compressed in IM, abstract in
  LTM), so the filter language reaches every field (``data.inventory.wood``) and the step;
* ``content`` = a text rendering of ``data`` (what keyword and vector search see);
* ``ts`` = the database's clock at the store (clock-time ranges are ``since``/``until``); ``salience`` and ``pinned`` carry the tier to the
  engine's hot/cold lifecycle (STM pinned; IM above LTM).

Moving down a tier writes a new version: the full detail stays in the memory's history.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..errors import ValidationError
from ..validation import dump_json

__all__ = [
    "MEMORY_TYPES",
    "TIERS",
    "check_priority",
    "check_state",
    "check_step",
    "compress",
    "memory_payload",
    "moved_payload",
    "render",
    "to_record",
]

TIERS = ("stm", "im", "ltm")
LEVEL = {"stm": 0, "im": 1, "ltm": 2}
MEMORY_TYPES = ("state", "action", "interaction")
MAX_STEP = 2**53  # exact in every JSON reader
MAX_RENDER = 4000  # characters of the searchable text (the data itself is kept whole)
IM_STRING, IM_LIST, IM_DEPTH = 120, 10, 3
LTM_STRING = 40


def check_state(value: Any, field: str) -> dict[str, Any]:
    """A state (action, interaction) must be a JSON object that round-trips exactly."""
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"{field}: expected a JSON object, got {type(value).__name__}", field=field
        )
    dump_json(value, field, 1 << 30)  # NaN, odd types, non-string keys, depth, 64-bit ints
    return _plain(value)


def _plain(value: Any) -> Any:
    """Tuples become lists (what JSON gives back), mappings dicts: the stored object equals
    what a retrieval returns."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def check_step(value: Any, field: str = "step_number") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -MAX_STEP <= value <= MAX_STEP:
        raise ValidationError(
            f"{field}: expected an integer of at most {MAX_STEP} in magnitude, got {value!r}",
            field=field,
            limit=MAX_STEP,
        )
    return value


def check_priority(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise ValidationError(
            f"priority: expected a number from 0 to 1, got {value!r}", field="priority", limit=1
        )
    return float(value)


def _scalar_text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _lines(value: Any, path: str, out: list[str]) -> None:
    if isinstance(value, Mapping):
        if not value and path:
            out.append(f"{path}: none")
        for k, v in value.items():
            _lines(v, f"{path} {k}".strip() if path else str(k).replace("_", " "), out)
    elif isinstance(value, list):
        if value and all(not isinstance(v, Mapping | list) for v in value):
            out.append(f"{path}: {' '.join(_scalar_text(v) for v in value)}")
        else:
            for v in value:
                _lines(v, path, out)
    else:
        out.append(f"{path}: {_scalar_text(value)}")


def render(memory_type: str, step: int, data: Mapping[str, Any], level: int = 0) -> str:
    """The searchable text of an agent memory: ``state at step 7: health: 0.85; ...``."""
    out: list[str] = []
    _lines(data, "", out)
    head = f"{memory_type} at step {step}" + (" (abstract)" if level == 2 else "")
    text = f"{head}: " + "; ".join(line.replace("_", " ") for line in out)
    return text if len(text) <= MAX_RENDER else text[: MAX_RENDER - 1] + "…"


def _round(v: float, digits: int) -> float:
    if v == 0 or not math.isfinite(v):
        return v
    return round(v, digits - 1 - math.floor(math.log10(abs(v))))


def compress(data: Mapping[str, Any], level: int) -> dict[str, Any]:
    """A lower-resolution copy of ``data``: level 1 (IM) rounds floats to 3 significant
    digits, cuts strings to 120 characters and lists to 10 items, and summarises objects
    nested deeper than 3; level 2 (LTM) keeps only top-level scalars (floats to 2 digits,
    strings to 40 characters), short numeric lists (positions) and a count for the rest."""
    if level == 1:
        return _im(data, 0)  # type: ignore[no-any-return]
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, bool) or v is None or isinstance(v, int):
            out[k] = v
        elif isinstance(v, float):
            out[k] = _round(v, 2)
        elif isinstance(v, str):
            out[k] = v if len(v) <= LTM_STRING else v[: LTM_STRING - 1] + "…"
        elif isinstance(v, list) and len(v) <= 3 and all(_num(x) for x in v):
            out[k] = [_round(x, 2) if isinstance(x, float) else x for x in v]
        elif isinstance(v, list):
            out[k] = f"<{len(v)} items>"
        else:
            out[k] = f"<{len(v)} fields>"
    return out


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _im(v: Any, depth: int) -> Any:
    if isinstance(v, float):
        return _round(v, 3)
    if isinstance(v, str):
        return v if len(v) <= IM_STRING else v[: IM_STRING - 1] + "…"
    if isinstance(v, Mapping):
        if depth >= IM_DEPTH:
            return f"<{len(v)} fields>"
        return {k: _im(x, depth + 1) for k, x in v.items()}
    if isinstance(v, list):
        if depth >= IM_DEPTH:
            return f"<{len(v)} items>"
        return [_im(x, depth + 1) for x in v[:IM_LIST]]
    return v


def _salience(tier: str, priority: float, retention: float) -> float:
    """What the engine's lifecycle sees: STM the writer's priority (and pinned), IM in
    [0.5, 1], LTM in [0, 0.5), so over a hot quota LTM leaves the hot tier first."""
    if tier == "stm":
        return priority
    r = min(1.0, max(0.0, retention))
    return round(0.5 + 0.5 * r, 6) if tier == "im" else round(0.5 * r * 0.999, 6)


def memory_payload(
    memory_type: str, data: dict[str, Any], step: int, priority: float
) -> dict[str, Any]:
    """The ``write`` payload of a new (STM, full detail) agent memory; its event time is the
    database's clock at the write."""
    meta = {"step": step, "importance": priority, "tier": "stm", "level": 0, "data": data}
    return {
        "content": render(memory_type, step, data),
        "type": memory_type,
        "metadata": meta,
        "salience": priority,
        "pinned": True,
    }


def moved_payload(hit: Any, tier: str, retention: float, data: dict[str, Any]) -> dict[str, Any]:
    """A new version of memory ``hit`` in ``tier`` holding ``data`` (its id, entity, type and
    event time kept): for ``write_many``."""
    meta = dict(hit.metadata)
    level = LEVEL[tier]
    meta.update(tier=tier, level=level, data=data)
    return {
        "id": hit.id,
        "entity": hit.entity,
        "type": hit.type,
        "ts": hit.ts.isoformat(),
        "content": render(hit.type, meta["step"], data, level),
        "metadata": meta,
        "salience": _salience(tier, float(meta["importance"]), retention),
        "pinned": tier == "stm",
    }


ACCESS_BATCH = 1000  # ids per accesses() call


def _epoch(ts: Any) -> float | None:
    return ts.timestamp() if isinstance(ts, datetime) else None


def to_record(m: Any, score: float | None = None) -> dict[str, Any]:
    """A memory (or query hit) as the Agent Memory API's memory entry."""
    meta = m.metadata
    rec: dict[str, Any] = {
        "memory_id": m.id,
        "agent_id": m.entity,
        "step_number": meta.get("step"),
        "timestamp": _epoch(m.ts),
        "memory_type": m.type,
        "tier": meta.get("tier"),
        "contents": meta.get("data"),
        "metadata": {
            "creation_time": _epoch(m.ts),
            "compression_level": meta.get("level"),
            "importance_score": meta.get("importance"),
            "memory_type": m.type,
            "current_tier": meta.get("tier"),
            "version": m.version,
            "engine_tier": getattr(m, "tier", None),
            "last_access_time": None,  # filled by with_accesses
            "retrieval_count": 0,
        },
        "content": m.content,
    }
    if score is not None:
        rec["score"] = score
    return rec


def with_accesses(ns: Any, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` (copies: a cached list is never changed) with each memory's
    ``retrieval_count`` and ``last_access_time`` (epoch seconds, None if never read): the
    engine's count of reads by id and appearances as a search hit (``ns.accesses``), this
    retrieval's included; a retrieval answered from the result cache counts no read."""
    if not records:
        return records
    seen: dict[str, Any] = {}
    ids = list(dict.fromkeys(str(r["memory_id"]) for r in records))
    for start in range(0, len(ids), ACCESS_BATCH):
        for a in ns.accesses(ids[start : start + ACCESS_BATCH]):
            seen[a.id] = a
    out = []
    for rec in records:
        a = seen.get(rec["memory_id"])
        meta = {**rec["metadata"]}
        if a is not None:
            meta["retrieval_count"] = a.count
            meta["last_access_time"] = _epoch(a.last_access)
        out.append({**rec, "metadata": meta})
    return out
