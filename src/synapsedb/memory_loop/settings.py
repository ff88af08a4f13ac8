"""The memory loop's settings: thresholds, budgets and what runs where."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError

__all__ = ["LoopSettings"]

MEMORY_TYPES = ("fact", "preference", "procedure", "episode")
REWRITES = ("llm", "heuristic")


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """Settings of :class:`~synapsedb.memory_loop.MemoryLoop` (``SYNAPSEDB_LOOP_<NAME>``).

    ``threshold`` applies to the calibrated similarity (0..1): ``similarity = 1 / (1 +
    exp(-(calib_a * cosine + calib_b)))``, the embedding cosine (all-MiniLM-L6-v2) of a hit to
    the query mapped by a logistic regression fitted on LoCoMo dev with balanced class weights:
    among the top 50 hybrid hits of each question, is the hit an evidence turn. Balanced, so
    0.5 is where a cosine is as typical of evidence as of the other hits (cosine 0.32), not a
    posterior probability (evidence is 2.5% of those hits). The default 0.25 (cosine 0.18)
    with at most ``max_memories`` (7) in the block was chosen on a dev set of what users tell
    an assistant and ask later (bench/data/injection_dev.json): 91% of statements injected
    from the turns alone, 97% with extracted memories, at about 4.5 memories per question;
    0.6 (the earlier default) injected 54%, with a fact phrased unlike its question ("The
    user lives in Lisbon" for "Where do I live?") under it. docs/benchmarks.md has the curve.
    Another embedder needs its own fit.
    """

    threshold: float = 0.25
    # fitted by `python bench/bench_agentic.py --calibrate` (make bench-agentic) on LoCoMo dev
    calib_a: float = 7.97
    calib_b: float = -2.56
    budget_tokens: int = 1000
    max_memories: int = 7  # memories in one context block at most (the hybrid rank's best)
    k: int = 10
    rewrite: str = "llm"  # "llm": the LLM rewrites when configured, else the heuristic
    proxy_rewrite: str = "heuristic"  # the memory proxy's: an LLM call would delay every answer
    history_turns: int = 2  # earlier user turns a short or elliptic question borrows
    noop_similarity: float = 0.92  # cosine at which a candidate is already known
    update_similarity: float = 0.75  # cosine at which a changed value updates a memory
    delete_similarity: float = 0.6  # cosine at which a negation deletes a memory
    neighbours: int = 5  # existing memories each candidate is compared with
    max_candidates: int = 20  # memories taken from one extraction
    min_confidence: float = 0.3  # extracted memories under this are dropped
    max_turns: int = 64  # turns one remember call may carry
    max_tokens: int = 800  # the longest extraction or decision answer asked of the model
    max_attempts: int = 8  # extraction tries before a job is parked (kept, marked failed)
    retry_base_s: float = 5.0  # first retry delay; doubles each attempt, capped at an hour
    poll_s: float = 1.0  # how often the background worker looks for due jobs
    stop_wait_s: float = 5.0  # how long stopping waits for a running job before giving it back

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in ("rewrite", "proxy_rewrite"):
                if v not in REWRITES:
                    raise ValidationError(
                        f"{f.name}: expected one of {', '.join(REWRITES)}, got {v!r}", field=f.name
                    )
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValidationError(f"{f.name}: expected a number, got {v!r}", field=f.name)
            if f.name in ("calib_b",):
                continue
            if (f.name == "calib_a" and v <= 0) or (f.name != "calib_a" and v < 0):
                raise ValidationError(f"{f.name}: must be positive, got {v!r}", field=f.name)
        for name in (
            "threshold",
            "noop_similarity",
            "update_similarity",
            "delete_similarity",
            "min_confidence",
        ):
            if getattr(self, name) > 1:
                raise ValidationError(
                    f"{name}: expected 0..1, got {getattr(self, name)!r}", field=name
                )
        for name in (
            "budget_tokens",
            "max_memories",
            "k",
            "max_turns",
            "max_tokens",
            "max_attempts",
            "neighbours",
            "max_candidates",
            "history_turns",
        ):
            if not isinstance(getattr(self, name), int):
                raise ValidationError(f"{name}: expected an integer", field=name)
        if not 1 <= self.k <= 100:
            raise ValidationError(f"k: expected 1 to 100, got {self.k}", field="k", limit=100)
        if not 1 <= self.max_memories <= 100:
            raise ValidationError(
                f"max_memories: expected 1 to 100, got {self.max_memories}",
                field="max_memories",
                limit=100,
            )

    def replace(self, **changes: Any) -> LoopSettings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> LoopSettings:
        """Settings from ``SYNAPSEDB_LOOP_<NAME>`` variables (the defaults for the others)."""
        env = dict(os.environ) if env is None else env
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(f"SYNAPSEDB_LOOP_{f.name.upper()}")
            if raw is None:
                continue
            if f.name in ("rewrite", "proxy_rewrite"):
                changes[f.name] = raw
                continue
            try:
                changes[f.name] = int(raw) if f.type == "int" else float(raw)
            except ValueError:
                raise ValidationError(
                    f"SYNAPSEDB_LOOP_{f.name.upper()}: expected a number, got {raw!r}", field=f.name
                ) from None
        return cls(**changes)
