"""Prometheus metrics: request latency per route and status, query stage timings, commit
latency, embedding batch sizes, tier moves, and memories per namespace and tier and the
semantic cache's lookups (hit, miss), stores and invalidations per namespace (read at
scrape time). One registry per app (no process-global state).

Who sees what (:meth:`Metrics.render`): an operator everything; a tenant only the memories of
its own namespaces, by the names it uses, since the server-wide families count every tenant's
requests, queries and commits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..cache.counters import counters_for
from ..engine import Database

__all__ = ["Metrics", "PlacementMetrics"]

_FAST = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class _Tiers(Collector):
    """``synapsedb_memories{namespace,tier}``: every namespace under its engine name, or (with
    ``names``: engine name -> shown name) only those, under the names shown."""

    def __init__(self, db: Database, names: Callable[[list[str]], dict[str, str]] | None = None):
        self.db, self.names = db, names

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "synapsedb_memories", "Memories per namespace and tier", labels=["namespace", "tier"]
        )
        if not self.db.closed:  # the namespaces loaded so far (a scrape never waits for more)
            counts = self.db.tier_counts(load=False)
            shown = {n: n for n in counts} if self.names is None else self.names(list(counts))
            for name, public in sorted(shown.items(), key=lambda item: item[1]):
                hot, cold = counts[name]
                family.add_metric([public, "hot"], hot)
                family.add_metric([public, "cold"], cold)
        yield family


class _Cache(Collector):
    """The semantic cache's counts since the server started (synapsedb.cache.counters), per
    namespace, shown like ``synapsedb_memories``: every namespace, or only those ``names``
    keeps, under the names shown."""

    def __init__(self, db: Database, names: Callable[[list[str]], dict[str, str]] | None = None):
        self.db, self.names = db, names

    def collect(self) -> Iterator[CounterMetricFamily]:
        lookups = CounterMetricFamily("synapsedb_cache_lookups",
                                      "Semantic cache lookups per namespace: hit or miss",
                                      labels=["namespace", "result"])  # fmt: skip
        stores = CounterMetricFamily("synapsedb_cache_stores", "Semantic cache entries stored",
                                     labels=["namespace"])  # fmt: skip
        removed = CounterMetricFamily("synapsedb_cache_invalidated",
                                      "Semantic cache entries invalidated",
                                      labels=["namespace"])  # fmt: skip
        totals = counters_for(self.db).totals() if not self.db.closed else {}
        shown = {n: n for n in totals} if self.names is None else self.names(list(totals))
        for name, public in sorted(shown.items(), key=lambda item: item[1]):
            hits, misses, stored, invalidated = totals[name]
            lookups.add_metric([public, "hit"], hits)
            lookups.add_metric([public, "miss"], misses)
            stores.add_metric([public], stored)
            removed.add_metric([public], invalidated)
        yield lookups
        yield stores
        yield removed


class _Loop(Collector):
    """The memory loop's state (server-wide): whether its LLM is up, its queue's depth."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[GaugeMetricFamily]:
        loop = self.db.memory_loop
        status = getattr(loop, "status", None)
        if status is None:
            return
        st = status()
        up = GaugeMetricFamily("synapsedb_llm_state",
                               "The memory loop's LLM: 1 for the state it is in",
                               labels=["state"])  # fmt: skip
        for state in ("absent", "ok", "unavailable"):
            up.add_metric([state], 1.0 if st["llm"] == state else 0.0)
        yield up
        jobs = GaugeMetricFamily("synapsedb_extraction_jobs",
                                 "Extraction jobs waiting (queued) or parked (failed)",
                                 labels=["state"])  # fmt: skip
        jobs.add_metric(["queued"], st["extraction_queued"])
        jobs.add_metric(["failed"], st["extraction_failed"])
        yield jobs
        done = GaugeMetricFamily("synapsedb_extractions_done",
                                 "Extraction jobs finished by this process")  # fmt: skip
        done.add_metric([], st["extracted"])
        yield done


class _Loading(Collector):
    """``synapsedb_namespaces_loading`` (server-wide): stored namespaces not loaded yet; and
    the namespaces in memory against the memory budget (engine/residency.py)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        family = GaugeMetricFamily(
            "synapsedb_namespaces_loading",
            "Stored namespaces not loaded yet (each loads at its first request; a background "
            "thread loads the rest after the open)",
        )
        family.add_metric([], 0 if self.db.closed else self.db.loading_pending)
        yield family
        res = self.db.core.residency
        if res is None:
            return
        for name, doc, value in (
            ("synapsedb_memory_budget_bytes", "The namespaces' memory budget (memory_budget_mb)",
             res.budget),
            ("synapsedb_resident_bytes", "Estimated memory of the namespaces in memory",
             res.total),
            ("synapsedb_resident_namespaces", "Namespaces in memory", res.resident),
        ):  # fmt: skip
            gauge = GaugeMetricFamily(name, doc)
            gauge.add_metric([], value)
            yield gauge
        unloads = CounterMetricFamily(
            "synapsedb_namespace_unloads",
            "Namespaces unloaded to stay within the memory budget (each loads again at its next "
            "request)",
        )
        unloads.add_metric([], res.unloads)
        yield unloads


class PlacementMetrics(Collector):
    """Sharded placement: the shares this process owns, the moves and forwarded requests."""

    def __init__(self, db: Database, state: Any) -> None:
        self.db, self.state = db, state

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        placement = self.db.core.placement
        if placement is None:
            return
        owned = GaugeMetricFamily("synapsedb_owned_shares",
                                  "Shares of the namespaces this process owns (of 256)")  # fmt: skip
        owned.add_metric([], len(placement.owned))
        yield owned
        moves = CounterMetricFamily("synapsedb_share_moves",
                                    "Shares this process took over or handed over")  # fmt: skip
        moves.add_metric([], placement.moves)
        yield moves
        forwarder = getattr(self.state, "forwarder", None)
        forwarded = CounterMetricFamily(
            "synapsedb_forwarded_requests", "Requests sent on to the process owning their namespace"
        )
        forwarded.add_metric([], 0 if forwarder is None else forwarder.forwarded)
        yield forwarded


class Metrics:
    CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

    def __init__(self, db: Database) -> None:
        self.db = db
        self.registry = r = CollectorRegistry()
        self.requests = Histogram(
            "synapsedb_http_request_seconds", "HTTP request latency",
            ["route", "method", "status"], registry=r, buckets=_FAST,
        )  # fmt: skip
        self.stages = Histogram(
            "synapsedb_query_stage_seconds", "Query stage timings (embed, vector, keyword, fuse)",
            ["mode", "stage"], registry=r, buckets=_FAST,
        )  # fmt: skip
        self._timers: dict[tuple[str, str, int], Any] = {}
        self.commits = Histogram(
            "synapsedb_commit_seconds", "Storage commit latency (one group commit)",
            registry=r, buckets=_FAST,
        )  # fmt: skip
        self.commit_rows = Counter("synapsedb_committed_rows", "Rows committed", registry=r)
        self.embed_batch = Histogram(
            "synapsedb_embedding_batch_size", "Texts per embedding batch",
            registry=r, buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096),
        )  # fmt: skip
        r.register(_Loop(db))
        r.register(_Loading(db))
        self.moves = Counter(
            "synapsedb_tier_moves", "Memories demoted (evicted) or promoted", ["direction"],
            registry=r,
        )  # fmt: skip
        obs = db.observers
        self._hooks: list[tuple[list[Any], Callable[..., None]]] = [
            (obs.commit, self._commit), (obs.query, self._query),
            (obs.embed, self.embed_batch.observe), (obs.maintain, self._maintain),
        ]  # fmt: skip
        for hooks, hook in self._hooks:
            hooks.append(hook)

    def detach(self) -> None:
        """Stop observing the database (the app is shutting down)."""
        for hooks, hook in self._hooks:
            if hook in hooks:
                hooks.remove(hook)

    def request_timer(self, route: str, method: str, status: int) -> Any:
        """The latency histogram of one (route, method, status), looked up once."""
        child = self._timers.get((route, method, status))
        if child is None:
            child = self._timers[(route, method, status)] = self.requests.labels(
                route, method, str(status)
            )
        return child

    def _commit(self, rows: int, seconds: float) -> None:
        self.commits.observe(seconds)
        self.commit_rows.inc(rows)

    def _query(self, mode: str, timings: dict[str, float]) -> None:
        for stage, seconds in timings.items():
            self.stages.labels(mode, stage).observe(seconds)

    def _maintain(self, report: Any) -> None:
        if report.demoted:
            self.moves.labels("demote").inc(len(report.demoted))
        if report.promoted:
            self.moves.labels("promote").inc(len(report.promoted))

    def render(
        self,
        names: Callable[[list[str]], dict[str, str]] | None = None,
        *,
        server_wide: bool = True,
    ) -> bytes:
        """The server-wide families (unless ``server_wide`` is False) and the memories of the
        namespaces ``names`` keeps (engine name -> shown name; None: every namespace)."""
        tiers = CollectorRegistry()
        tiers.register(_Tiers(self.db, names))
        tiers.register(_Cache(self.db, names))
        return (generate_latest(self.registry) if server_wide else b"") + generate_latest(tiers)
