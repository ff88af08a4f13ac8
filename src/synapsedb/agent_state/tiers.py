"""Tier maintenance: STM (full detail) -> IM (compressed) -> LTM (abstract).

For each agent, over its STM and IM memories:

* a memory's **retention score** is ``importance x decay ** (age / decay_steps)``, where
  ``age`` is the agent's newest step minus the memory's step and ``decay`` is
  ``memory_priority_decay``;
* a tier with a ``ttl`` sends down what was stored more than ``ttl`` seconds ago;
* a tier over its ``memory_limit`` sends down its lowest retention scores (older steps first
  among equals) until it is within the limit.

Moving down writes a new version of the memory (one ``write_many`` transaction per 1,000
moves): the data compressed (records.compress), its text re-rendered and so re-embedded by the
database, its engine salience and pin set for the hot/cold lifecycle. Earlier versions keep the
full detail (``AgentMemoryAPI.expand_memory``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .config import MemoryConfig
from .records import LEVEL, compress, moved_payload

__all__ = ["TierReport", "plan_tiers", "retention"]

CHUNK = 1000


def retention(importance: float, step: int, newest: int, decay: float, decay_steps: int) -> float:
    return float(importance) * decay ** (max(0, newest - step) / decay_steps)


@dataclass(slots=True)
class TierReport:
    """What a maintenance pass did: memories moved to IM and to LTM, per agent."""

    agents: int = 0
    to_im: int = 0
    to_ltm: int = 0
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # (memory id, from, to)

    def as_dict(self) -> dict[str, Any]:
        return {"agents": self.agents, "to_im": self.to_im, "to_ltm": self.to_ltm}


def _down(
    hits: list[Any], cfg: Any, now_s: float, score: dict[str, float]
) -> tuple[list[Any], list[Any]]:
    """Split one tier's hits into (stay, go down)."""
    stay, go = [], []
    for h in hits:
        if cfg.ttl is not None and now_s - h.ts.timestamp() > cfg.ttl:
            go.append(h)
        else:
            stay.append(h)
    if cfg.memory_limit is not None and len(stay) > cfg.memory_limit:
        stay.sort(key=lambda h: (score[h.id], h.metadata["step"], h.ts), reverse=True)
        go.extend(stay[cfg.memory_limit :])
        stay = stay[: cfg.memory_limit]
    return stay, go


def plan_tiers(
    hits: Sequence[Any], config: MemoryConfig, now_s: float
) -> list[tuple[Any, str, float]]:
    """The moves for one agent's STM and IM memories: (hit, new tier, retention score)."""
    if not hits:
        return []
    newest = max(h.metadata["step"] for h in hits)
    decay, unit = config.memory_priority_decay, config.decay_steps
    score = {
        h.id: retention(h.metadata["importance"], h.metadata["step"], newest, decay, unit)
        for h in hits
    }
    stm = [h for h in hits if h.metadata["tier"] == "stm"]
    im = [h for h in hits if h.metadata["tier"] == "im"]
    _, stm_go = _down(stm, config.stm_config, now_s, score)
    _, im_go = _down(im + stm_go, config.im_config, now_s, score)
    to_ltm = {h.id for h in im_go}
    moves = [(h, "ltm", score[h.id]) for h in im_go]
    moves += [(h, "im", score[h.id]) for h in stm_go if h.id not in to_ltm]
    return moves


def apply_moves(ns: Any, moves: list[tuple[Any, str, float]], report: TierReport) -> None:
    """Write the moves as new versions, 1,000 per transaction."""
    payloads = []
    for hit, tier, score in moves:
        data = compress(hit.metadata["data"], LEVEL[tier])
        payloads.append(moved_payload(hit, tier, score, data))
        report.moved.append((hit.id, hit.metadata["tier"], tier))
        if tier == "im":
            report.to_im += 1
        else:
            report.to_ltm += 1
    for i in range(0, len(payloads), CHUNK):
        ns.write_many(payloads[i : i + CHUNK])
