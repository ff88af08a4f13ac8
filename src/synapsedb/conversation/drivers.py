"""Running a plan: a generator of namespace calls, written once for sync and async callers.

A *plan* yields the namespace calls it needs (:class:`NsCall`: a public method name and its
arguments), gets each answer back (or the exception, thrown in) and returns its result. A
driver runs it: :func:`drive` calls a synchronous namespace (an embedded ``Namespace`` or
``synapsedb.connect(url).namespace(..)``), :func:`drive_async` awaits an async one
(``synapsedb.connect_async(url).namespace(..)``). So the conversation layer's logic is not
mirrored into a sync and an async twin, and it uses only the public namespace methods.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

__all__ = ["NsCall", "Plan", "call", "drive", "drive_async"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NsCall:
    """One call of a public namespace method: ``getattr(ns, method)(*args, **kwargs)``; a dotted
    name reaches a sub-surface (``sessions.load``: ``ns.sessions.load``)."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Plan: TypeAlias = Generator[NsCall, Any, T]


def call(method: str, *args: Any, **kwargs: Any) -> NsCall:
    return NsCall(method, args, kwargs)


def _method(ns: Any, name: str) -> Any:
    target = ns
    for part in name.split("."):
        target = getattr(target, part)
    return target


def drive(ns: Any, plan: Plan[T]) -> T:
    """Run ``plan`` against a synchronous namespace; an exception of a call is thrown into
    the plan (which may handle it) and otherwise propagates."""
    step, value = plan.send, None
    while True:
        try:
            nc = step(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            value, step = _method(ns, nc.method)(*nc.args, **nc.kwargs), plan.send
        except Exception as exc:
            value, step = exc, plan.throw


async def drive_async(ns: Any, plan: Plan[T]) -> T:
    """:func:`drive` for a namespace whose methods return awaitables. A method that returns
    a plain value (a synchronous namespace) is taken as its answer."""
    step, value = plan.send, None
    while True:
        try:
            nc = step(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            value = _method(ns, nc.method)(*nc.args, **nc.kwargs)
            if inspect.isawaitable(value):
                value = await value
            step = plan.send
        except Exception as exc:
            value, step = exc, plan.throw
