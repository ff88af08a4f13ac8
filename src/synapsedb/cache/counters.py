"""Hit, miss, store and invalidation counts of the semantic cache, per namespace and scope.

They are counted where lookups run: in the process that holds the database (an embedded
program, or the server, whose ``/metrics`` exports them). One :class:`CacheCounters` belongs
to one open database (:func:`counters_for`), so every cache over its namespaces, in any
thread, adds to the same counts. They are not persisted: a restart starts them at zero (a
lookup is a read, and counting it durably would make every read a write).

What one tenant can make them hold is bounded: a namespace is counted only once it exists
(a lookup in an invented namespace counts nothing), and each namespace names at most
:data:`MAX_SCOPES` scopes, the rest counted under ``"(other)"``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from .records import ScopeStats

__all__ = ["MAX_SCOPES", "OTHER", "CacheCounters", "counters_for"]

MAX_SCOPES = 1000
OTHER = "(other)"


class _Namespace:
    __slots__ = ("invalidated", "scopes")

    def __init__(self) -> None:
        self.scopes: dict[str, list[int]] = {}  # scope -> [hits, misses, stores]
        self.invalidated = 0


class CacheCounters:
    """Thread-safe counts for every namespace of one database. ``exists(name)`` says whether
    a namespace exists (the database's list), asked once per namespace first seen."""

    def __init__(self, exists: Callable[[str], bool]) -> None:
        self._exists = exists
        self._lock = threading.Lock()
        self._namespaces: dict[str, _Namespace] = {}

    def _ns(self, namespace: str) -> _Namespace | None:
        ns = self._namespaces.get(namespace)
        if ns is None and self._exists(namespace):
            ns = self._namespaces.setdefault(namespace, _Namespace())
        return ns

    def _add(self, namespace: str, scope: str, column: int, n: int = 1) -> None:
        with self._lock:
            ns = self._ns(namespace)
            if ns is None:
                return
            row = ns.scopes.get(scope)
            if row is None:
                if len(ns.scopes) >= MAX_SCOPES:
                    scope = OTHER
                row = ns.scopes.setdefault(scope, [0, 0, 0])
            row[column] += n

    def hit(self, namespace: str, scope: str) -> None:
        self._add(namespace, scope, 0)

    def miss(self, namespace: str, scope: str) -> None:
        self._add(namespace, scope, 1)

    def stored(self, namespace: str, scope: str) -> None:
        self._add(namespace, scope, 2)

    def invalidated(self, namespace: str, n: int) -> None:
        if n <= 0:
            return
        with self._lock:
            ns = self._ns(namespace)
            if ns is not None:
                ns.invalidated += n

    def scopes(self, namespace: str) -> dict[str, ScopeStats]:
        with self._lock:
            ns = self._namespaces.get(namespace)
            rows = dict(ns.scopes) if ns is not None else {}
            return {s: ScopeStats(*r) for s, r in sorted(rows.items())}

    def invalidations(self, namespace: str) -> int:
        with self._lock:
            ns = self._namespaces.get(namespace)
            return ns.invalidated if ns is not None else 0

    def totals(self) -> dict[str, tuple[int, int, int, int]]:
        """namespace -> (hits, misses, stores, invalidated), for metrics."""
        with self._lock:
            out = {}
            for name, ns in self._namespaces.items():
                rows = list(ns.scopes.values())
                out[name] = (
                    sum(r[0] for r in rows),
                    sum(r[1] for r in rows),
                    sum(r[2] for r in rows),
                    ns.invalidated,
                )
            return out


_REGISTRY: weakref.WeakKeyDictionary[Any, CacheCounters] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def counters_for(db: Any) -> CacheCounters:
    """The counters of an open database (made on first use, gone with the database object)."""
    with _REGISTRY_LOCK:
        counters = _REGISTRY.get(db)
        if counters is None:
            counters = _REGISTRY[db] = CacheCounters(lambda name: name in set(db.namespaces()))
        return counters
