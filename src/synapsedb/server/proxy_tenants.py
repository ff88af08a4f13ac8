"""Each tenant's part of the memory proxy's upstream: its own circuit breaker and its share of
the calls in flight, so one tenant's failing or flooding requests cost the others nothing.

One upstream client (one connection pool, ``max_connections``) serves every tenant. Before a
call, :meth:`Tenants.enter` hands the tenant a :class:`Slot`: the tenant's breaker, which only
its own failures open (tenant B's timeouts never refuse tenant A), and one of its
``proxy_tenant_calls`` places; with every place taken the request is refused at once with a
429 (``Retry-After: 1``) instead of queueing behind its own tenant's calls or taking
connections from the others. The place is given back when the upstream's connection is done
with: an answer read, a stream closed, a failure. Tenants are the server's (``ApiKey.tenant``);
with auth off there is one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import LLMSettings
from ..errors import QuotaExceededError
from ..llm.breaker import BreakerState, CircuitBreaker

__all__ = ["Slot", "Tenants"]


@dataclass(slots=True)
class _Share:
    breaker: CircuitBreaker
    in_flight: int = 0


@dataclass(slots=True)
class Slot:
    """One upstream call of a tenant: the breaker it counts in, and :meth:`release` (once;
    later calls do nothing) to give its place back."""

    breaker: CircuitBreaker
    _release: Callable[[], None] | None = field(default=None, repr=False)

    def release(self) -> None:
        done, self._release = self._release, None
        if done is not None:
            done()


class Tenants:
    """The tenants' breakers and in-flight counts (thread-safe)."""

    def __init__(self, settings: LLMSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._shares: dict[str, _Share] = {}

    def enter(self, tenant: str) -> Slot:
        """A place for one upstream call of ``tenant``, or QuotaExceededError (429) when it
        has ``proxy_tenant_calls`` in flight already."""
        cap = self.settings.proxy_tenant_calls
        with self._lock:
            share = self._shares.get(tenant)
            if share is None:
                breaker = CircuitBreaker(
                    self.settings.breaker_failures, self.settings.breaker_cooldown_s, self._clock
                )
                share = self._shares[tenant] = _Share(breaker)
            if share.in_flight >= cap:
                raise QuotaExceededError(
                    f"this tenant has {share.in_flight} calls to the upstream model in flight, "
                    f"its share (proxy_tenant_calls={cap}); retry when one has finished",
                    limit=cap,
                    retry_after=1.0,
                )
            share.in_flight += 1

        def release() -> None:
            with self._lock:
                share.in_flight -= 1

        return Slot(share.breaker, release)

    def in_flight(self, tenant: str) -> int:
        with self._lock:
            share = self._shares.get(tenant)
            return 0 if share is None else share.in_flight

    def breaker_state(self, tenant: str) -> BreakerState:
        """``tenant``'s breaker (closed for a tenant that never called)."""
        with self._lock:
            share = self._shares.get(tenant)
        return BreakerState.CLOSED if share is None else share.breaker.state

    def states(self) -> list[BreakerState]:
        """The state of every tenant's breaker (tenants that have called)."""
        with self._lock:
            shares = list(self._shares.values())
        return [s.breaker.state for s in shares]

    def calls(self) -> int:
        """Upstream calls in flight, every tenant's."""
        with self._lock:
            return sum(s.in_flight for s in self._shares.values())
