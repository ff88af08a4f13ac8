"""Memory lifecycle: salience, hot and cold tiers, quotas, write rates.

* **Salience** of a memory = recency x 2^(-age/half_life) + frequency x (1 - e^(-accesses/5))
  + importance x its ``salience`` + impact x (1 - e^(-answers/2)); age counts from the later of
  its event time and its last access. Weights are per namespace (``NamespaceConfig``).
* **Tiers.** Hot memories live in the in-memory indexes and are searched by default. Cold ones
  are on disk only (the engine keeps their id and entity); reads of a cold memory go to storage,
  and a query falls back to the cold tier when the hot one returns fewer than k hits. Nothing is
  destroyed by eviction. Every move is logged durably with its score and reason.
* **Quotas.** Over ``max_hot`` memories or ``max_bytes``, policy ``evict`` demotes the
  lowest-salience unpinned memories at the next maintenance pass; ``reject`` refuses the write.
  ``max_writes_per_s`` limits writes with a token bucket (QuotaExceededError with
  ``retry_after``).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Iterable
from typing import Any

import orjson

from ..errors import QuotaExceededError, ValidationError
from ..types import NamespaceConfig
from .state import NamespaceState
from .writer import Op, Tx

__all__ = [
    "ConfigureNamespace",
    "MoveTiers",
    "RateLimiter",
    "parse_config",
    "plan_moves",
    "salience",
    "touch",
]

US_PER_DAY = 86_400_000_000
MAX_SETTING = 2**63 - 1


def parse_config(raw: str | None) -> NamespaceConfig:
    """A stored configuration (JSON text), held to the same rules as ``configure``: raises
    ValidationError (or orjson.JSONDecodeError, TypeError for what is not JSON text)."""
    if not raw:
        return NamespaceConfig()
    value = orjson.loads(raw)
    if not isinstance(value, dict):
        raise ValidationError(
            f"config: expected an object, got {type(value).__name__}", field="config"
        )
    return check_config(NamespaceConfig(), value)


def check_config(base: NamespaceConfig, changes: dict[str, Any]) -> NamespaceConfig:
    names = {f.name for f in dataclasses.fields(NamespaceConfig)}
    for key, value in changes.items():
        if key not in names:
            raise ValidationError(
                f"{key}: unknown namespace setting; allowed: {', '.join(sorted(names))}", field=key
            )
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SETTING:
            raise ValidationError(  # the stored JSON holds 64-bit integers
                f"{key}: {value} is over the limit of {MAX_SETTING}", field=key, limit=MAX_SETTING
            )
        if key in ("max_hot", "max_bytes", "promote_after"):
            ok = value is None if key != "promote_after" else False
            ok = ok or (isinstance(value, int) and not isinstance(value, bool) and value > 0)
            if not ok:
                raise ValidationError(f"{key}: expected a positive integer or null", field=key)
        elif key == "max_writes_per_s":
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
            ):
                raise ValidationError(f"{key}: expected a positive number or null", field=key)
        elif key == "policy":
            if value not in ("evict", "reject"):
                raise ValidationError(
                    f"policy: expected 'evict' or 'reject', got {value!r}", field=key
                )
        elif key == "cold_fallback":
            if not isinstance(value, bool):
                raise ValidationError(f"{key}: expected true or false", field=key)
        elif (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (math.isfinite(value) and value >= 0 and (key != "half_life_days" or value > 0))
        ):
            raise ValidationError(f"{key}: expected a non-negative number", field=key)
    return dataclasses.replace(base, **changes)


class ConfigureNamespace(Op):
    __slots__ = ("config", "ns")

    def __init__(self, ns: str, config: NamespaceConfig) -> None:
        super().__init__()
        self.ns, self.config = ns, config

    def plan(self, tx: Tx) -> NamespaceConfig:
        tx.ensure_namespace(self.ns)
        raw = orjson.dumps(dataclasses.asdict(self.config)).decode()
        tx.batch.configs.append((raw, self.ns))
        tx.configs.append((self.ns, self.config))
        return self.config


class MoveTiers(Op):
    """Demote (to ``cold``) or promote (to ``hot``) memories; the namespace is rebuilt from
    storage after the commit, so the in-memory indexes hold exactly the hot tier."""

    __slots__ = ("access", "moves", "ns")

    def __init__(
        self,
        ns: str,
        moves: list[tuple[str, str, float | None, str]],
        access: list[tuple[str, str, int, int]] | None = None,
    ) -> None:
        super().__init__(len(moves) + 1)
        self.ns, self.moves, self.access = ns, moves, access or []

    def plan(self, tx: Tx) -> int:
        tx.batch.access.extend(self.access)  # persisted with the moves: a reload reads them back
        if not self.moves:
            return 0
        tx.batch.tiers.extend(
            (self.ns, mid, tx.now_us, tier, score, reason)
            for mid, tier, score, reason in self.moves
        )
        tx.reloads.append(self.ns)
        return len(self.moves)


def touch(state: NamespaceState | None, mids: Iterable[str], now_us: int) -> None:
    """Count an access (salience frequency and recency; promotion of cold memories)."""
    if state is None:
        return
    for mid in mids:
        count, _ = state.access.get(mid, (0, 0))
        state.access[mid] = (count + 1, now_us)
        state.access_dirty = True
        if mid in state.cold:
            state.cold_access[mid] = state.cold_access.get(mid, 0) + 1


def salience(state: NamespaceState, cfg: NamespaceConfig, now_us: int) -> dict[str, float]:
    """Salience of every live hot memory."""
    half = cfg.half_life_days * US_PER_DAY
    out: dict[str, float] = {}
    access, impact = state.access, state.impact
    for mid, chain in list(state.mems.items()):
        rec = chain[-1]
        if not rec.visible_at(now_us):
            continue
        count, last = access.get(mid, (0, 0))
        age = max(0, now_us - max(rec.ts_us, last))
        out[mid] = (
            cfg.recency * 2.0 ** (-age / half)
            + cfg.frequency * (1.0 - math.exp(-count / 5.0))
            + cfg.importance * rec.salience
            + cfg.impact * (1.0 - math.exp(-impact.get(mid, 0) / 2.0))
        )
    return out


def plan_moves(
    state: NamespaceState, cfg: NamespaceConfig, now_us: int
) -> list[tuple[str, str, float | None, str]]:
    """The demotions that bring the hot tier within quota (lowest salience first, pinned never)
    and the promotions of cold memories accessed ``promote_after`` times since demotion."""
    moves: list[tuple[str, str, float | None, str]] = []
    for mid, since in list(state.cold_access.items()):
        if since >= cfg.promote_after:
            moves.append((mid, "hot", None, f"accessed {since} times while cold"))
    if cfg.policy != "evict" or (cfg.max_hot is None and cfg.max_bytes is None):
        return moves
    scores = salience(state, cfg, now_us)
    live = len(scores) + sum(1 for m in moves if m[1] == "hot")
    nbytes = sum(state.mems[m][-1].nbytes for m in scores) if cfg.max_bytes else 0
    over_n = max(0, live - cfg.max_hot) if cfg.max_hot is not None else 0
    if over_n == 0 and (cfg.max_bytes is None or nbytes <= cfg.max_bytes):
        return moves
    candidates = sorted((s, mid) for mid, s in scores.items() if not state.mems[mid][-1].pinned)
    for score, mid in candidates:
        if over_n <= 0 and (cfg.max_bytes is None or nbytes <= cfg.max_bytes):
            break
        reason = []
        if over_n > 0:
            reason.append(f"over max_hot={cfg.max_hot}")
        if cfg.max_bytes is not None and nbytes > cfg.max_bytes:
            reason.append(f"over max_bytes={cfg.max_bytes}")
        moves.append((mid, "cold", round(score, 6), "; ".join(reason) + ", lowest salience"))
        over_n -= 1
        nbytes -= state.mems[mid][-1].nbytes
    return moves


class RateLimiter:
    """A token bucket per namespace: ``rate`` writes per second, bursts up to one second."""

    def __init__(self) -> None:
        self._buckets: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def take(self, ns: str, rate: float | None, n: int = 1, *, what: str | None = None) -> None:
        """Take ``n`` tokens from bucket ``ns`` or raise QuotaExceededError naming ``what``
        (default: the namespace's max_writes_per_s) and when to retry."""
        if rate is None:
            return
        now = time.monotonic()
        with self._lock:
            bucket = self._buckets.setdefault(ns, [rate, now])
            bucket[0] = min(rate, bucket[0] + (now - bucket[1]) * rate)
            bucket[1] = now
            if bucket[0] < n:
                wait = (n - bucket[0]) / rate
                raise QuotaExceededError(
                    f"{what or f'namespace {ns!r}: over max_writes_per_s={rate}'}; "
                    f"retry in {wait:.3f} s",
                    limit=rate,
                    retry_after=round(wait, 3),
                )
            bucket[0] -= n
