"""``@cacheable(ttl=60)`` (the Agent Memory API's name): cache a function's results in a namespace's
semantic cache, keyed by its call's arguments.

The key of a call is built from its bound arguments (defaults applied): the text arguments
(all ``str`` arguments, or those named in ``semantic=``) joined by new lines are the key text,
matched by meaning; every other argument is matched exactly (the entry's ``params``). The
scope is the function's qualified name (or ``name=``), so two functions never answer for
each other. Sync and async functions both work; an async function's cache calls do not block
its event loop (embedded ones run in a worker thread).

Results must be JSON values. A call returns the result as JSON carries it, hit or miss, so
a function returning a tuple returns a list both times.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import orjson

from ..errors import SynapseError, ValidationError
from .front import SemanticCache
from .keying import check_scope, check_tags, check_threshold, check_ttl_s, check_value

__all__ = ["cacheable", "set_default_cache"]

log = logging.getLogger("synapsedb.cache")

F = TypeVar("F", bound=Callable[..., Any])

_default: contextvars.ContextVar[SemanticCache | None] = contextvars.ContextVar(
    "synapsedb_default_cache", default=None
)


def set_default_cache(cache: SemanticCache | None) -> contextvars.Token[SemanticCache | None]:
    """The cache ``@cacheable`` functions without ``cache=`` use, in this context (a
    :class:`contextvars.ContextVar`: threads and tasks started after this inherit it). Returns
    the token to restore the previous one with ``_default.reset``."""
    if cache is not None and not isinstance(cache, SemanticCache):
        raise ValidationError("cache: expected a SemanticCache or None", field="cache")
    return _default.set(cache)


def cacheable(
    ttl: float = 60.0,
    *,
    cache: SemanticCache | None = None,
    name: str | None = None,
    threshold: float | None = None,
    semantic: Sequence[str] | None = None,
    tags: Iterable[str] = (),
    fail_open: bool = False,
) -> Callable[[F], F]:
    """Cache the decorated function's results for ``ttl`` seconds in ``cache`` (default: the
    one given to :func:`set_default_cache`, looked up at each call). ``name``: the scope
    (default ``module.qualname``); ``threshold``: the cache's own when None; ``semantic``: the
    arguments whose text is matched by meaning (default: every ``str`` argument); ``tags``:
    for ``invalidate(tag=)``. ``fail_open``: when the cache fails (server down, a result that
    is not JSON), log it and return the function's own result instead of raising.

    The wrapped function gains ``cache_invalidate(*args, **kwargs)`` (drop that call's entry)
    and ``cache_clear()`` (drop every entry of its scope)."""
    ttl_s = check_ttl_s(ttl)
    thr = None if threshold is None else check_threshold(threshold)
    tag_list = check_tags(list(tags))
    if cache is not None and not isinstance(cache, SemanticCache):
        raise ValidationError("cache: expected a SemanticCache", field="cache")
    if not isinstance(fail_open, bool):
        raise ValidationError("fail_open: expected true or false", field="fail_open")

    def decorate(fn: F) -> F:
        scope = check_scope(name or f"{fn.__module__}.{fn.__qualname__}", "name")
        sig = inspect.signature(fn)
        wanted = None if semantic is None else set(semantic)
        if wanted is not None and not wanted <= set(sig.parameters):
            bad = sorted(wanted - set(sig.parameters))[0]
            raise ValidationError(
                f"semantic: {fn.__qualname__} has no argument {bad!r}", field="semantic"
            )

        def key_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any]:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            texts, exact = [], {}
            for pname, value in bound.arguments.items():
                if pname in ("self", "cls"):
                    continue
                if isinstance(value, str) and (wanted is None or pname in wanted):
                    texts.append(value)
                else:
                    exact[pname] = value
            text = "\n".join(t for t in texts if t.strip())
            if not text:  # nothing to match by meaning: the arguments are the key, exactly
                text = scope
            return text, exact or None

        def target() -> SemanticCache:
            found = cache or _default.get()
            if found is None:
                raise ValidationError(
                    f"cache: {fn.__qualname__} is @cacheable but no cache is set; pass "
                    "cache=SemanticCache(db, namespace) or call set_default_cache(...)",
                    field="cache",
                )
            return found

        def as_json(result: Any) -> Any:
            return orjson.loads(check_value(result, "result"))

        def lookup(c: SemanticCache, key: str, params: Any) -> Any:
            return c.lookup(key, scope=scope, params=params, threshold=thr)

        def store(c: SemanticCache, key: str, params: Any, value: Any) -> Any:
            return c.store(key, value, scope=scope, params=params, ttl=ttl_s, tags=tag_list)

        if inspect.iscoroutinefunction(fn):

            async def run(c: SemanticCache, call: Callable[..., Any], *a: Any) -> Any:
                if c.is_async:
                    return await call(c, *a)
                return await asyncio.to_thread(call, c, *a)

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                key, params = key_of(args, kwargs)
                try:
                    c = target()
                    hit = await run(c, lookup, key, params)
                except SynapseError:
                    if not fail_open:
                        raise
                    log.warning("cache lookup failed for %s", scope, exc_info=True)
                    return await fn(*args, **kwargs)
                if hit is not None:
                    return hit.value
                result = await fn(*args, **kwargs)
                try:
                    value = as_json(result)
                    await run(c, store, key, params, value)
                except SynapseError:
                    if not fail_open:
                        raise
                    log.warning("cache store failed for %s", scope, exc_info=True)
                    return result
                return value

            wrapper: Any = async_wrapper
        else:

            @functools.wraps(fn)
            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                key, params = key_of(args, kwargs)
                try:
                    c = target()
                    if c.is_async:
                        raise ValidationError(
                            f"cache: {fn.__qualname__} is a plain function; an async client's "
                            "cache needs an async function",
                            field="cache",
                        )
                    hit = lookup(c, key, params)
                except SynapseError:
                    if not fail_open:
                        raise
                    log.warning("cache lookup failed for %s", scope, exc_info=True)
                    return fn(*args, **kwargs)
                if hit is not None:
                    return hit.value
                result = fn(*args, **kwargs)
                try:
                    value = as_json(result)
                    store(c, key, params, value)
                except SynapseError:
                    if not fail_open:
                        raise
                    log.warning("cache store failed for %s", scope, exc_info=True)
                    return result
                return value

            wrapper = sync_wrapper

        def cache_invalidate(*args: Any, **kwargs: Any) -> Any:
            key, params = key_of(args, kwargs)
            return target().invalidate(key, scope=scope, params=params)

        def cache_clear() -> Any:
            return target().invalidate(scope=scope)

        wrapper.cache_invalidate = cache_invalidate
        wrapper.cache_clear = cache_clear
        wrapper.cache_scope = scope
        return wrapper  # type: ignore[no-any-return]

    return decorate
