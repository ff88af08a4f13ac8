"""Strategies by name: what ``Sessions.load(id, strategy="window", k=6)`` and the session route
``GET .../sessions/{sid}/messages?strategy=window&k=6`` build.

A name and its options are checked here, once, for both paths, so an embedded load and one
over HTTP refuse the same input with the same error (the field named is the option's). The
strategy itself is :mod:`.strategies`' class of that name, wrapped around the store.

=================  ===========================================  ==========================
name               class                                        options
=================  ===========================================  ==========================
``buffer``         :class:`~.strategies.Buffer`                 none
``window``         :class:`~.strategies.Window`                 ``k`` (10)
``token_buffer``   :class:`~.strategies.TokenBuffer`            ``max_tokens`` (2000), ``model``
``summary``        :class:`~.strategies.Summary`                ``keep`` (0), ``summary_tokens``, ``model``
``summary_buffer`` :class:`~.strategies.SummaryBuffer`          ``max_tokens`` (2000), ``summary_tokens``, ``model``
``vector``         :class:`~.strategies.Vector`                 ``k`` (5)
=================  ===========================================  ==========================

``summary_tokens`` bounds the running summary (the Summarizer's ``max_tokens``, 300). The two
summarising strategies write the session's ``summary`` fact as they fold, so over HTTP they
need the write scope even on a GET.
"""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError
from ..surface.operations import SUMMARISING

__all__ = ["OPTIONS", "STRATEGIES", "SUMMARISING", "build", "check"]

OPTIONS: dict[str, tuple[str, ...]] = {
    "buffer": (),
    "window": ("k",),
    "token_buffer": ("max_tokens", "model"),
    "summary": ("keep", "summary_tokens", "model"),
    "summary_buffer": ("max_tokens", "summary_tokens", "model"),
    "vector": ("k",),
}
STRATEGIES: tuple[str, ...] = tuple(OPTIONS)
INT_OPTIONS = frozenset({"k", "max_tokens", "keep", "summary_tokens"})
MIN_SUMMARY_TOKENS = 16  # the Summarizer's smallest summary
ALL_OPTIONS: tuple[str, ...] = ("k", "max_tokens", "model", "keep", "summary_tokens")


def check(
    strategy: Any,
    options: dict[str, Any],
    *,
    last: Any = None,
    as_of: Any = None,
    summarizer: Any = None,
) -> dict[str, Any]:
    """The options given (those not None), checked against ``strategy``: a known name, only
    its own options, integers where integers go. ``last`` and ``as_of`` do not combine with
    a strategy (a strategy reads the session as it is now, and decides itself how much)."""
    given = {k: v for k, v in options.items() if v is not None}
    if strategy is None:
        if given or summarizer is not None:
            name = next(iter(given), "summarizer")
            raise ValidationError(
                f"{name}: an option of a strategy; give strategy= too", field=name
            )
        return given
    if not isinstance(strategy, str) or strategy not in OPTIONS:
        raise ValidationError(
            f"strategy: expected one of {', '.join(STRATEGIES)}, got {strategy!r}", field="strategy"
        )
    for name, value in (("last", last), ("as_of", as_of)):
        if value is not None:
            raise ValidationError(
                f"{name}: not with a strategy (the strategy decides what to read, from the "
                "session as it is now)",
                field=name,
            )
    allowed = OPTIONS[strategy]
    for name, value in given.items():
        if name not in allowed:
            what = f"its options are {', '.join(allowed)}" if allowed else "it has no options"
            raise ValidationError(
                f"{name}: not an option of strategy {strategy!r}; {what}", field=name
            )
        if name in INT_OPTIONS and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValidationError(f"{name}: expected an integer, got {value!r}", field=name)
        if name == "summary_tokens" and value < MIN_SUMMARY_TOKENS:
            raise ValidationError(
                f"summary_tokens: expected an integer >= {MIN_SUMMARY_TOKENS}, got {value}",
                field=name,
                limit=MIN_SUMMARY_TOKENS,
            )
        if name == "model" and not isinstance(value, str):
            raise ValidationError(f"model: expected a model name, got {value!r}", field="model")
    if summarizer is not None:
        if strategy not in SUMMARISING:
            raise ValidationError(
                f"summarizer: strategy {strategy!r} does not summarise; only "
                f"{', '.join(sorted(SUMMARISING))} do",
                field="summarizer",
            )
        if "summary_tokens" in given:
            raise ValidationError(
                "summary_tokens: give it to the Summarizer (max_tokens) when you pass one",
                field="summary_tokens",
            )
    return given


def build(
    store: Any,
    strategy: str,
    options: dict[str, Any],
    *,
    summarizer: Any = None,
    asynchronous: bool = False,
) -> Any:
    """The strategy ``strategy`` over ``store`` (its async twin with ``asynchronous``), from
    options already :func:`check`-ed. Summaries without a ``summarizer``: extractive, within
    ``summary_tokens``."""
    from . import strategies as s  # the tokenizer loads with them: only when one is asked for
    from .summary import Summarizer

    opts = dict(options)
    if strategy in SUMMARISING and summarizer is None:
        summarizer = Summarizer(max_tokens=opts.get("summary_tokens", 300), model=opts.get("model"))
    opts.pop("summary_tokens", None)
    prefix = "Async" if asynchronous else ""
    if strategy == "buffer":
        return getattr(s, prefix + "Buffer")(store)
    if strategy == "window":
        return getattr(s, prefix + "Window")(store, **opts)
    if strategy == "token_buffer":
        return getattr(s, prefix + "TokenBuffer")(store, **opts)
    if strategy == "summary":
        opts.pop("model", None)  # the Summarizer's tokenizer: Summary itself counts nothing
        return getattr(s, prefix + "Summary")(store, summarizer, **opts)
    if strategy == "summary_buffer":
        return getattr(s, prefix + "SummaryBuffer")(store, summarizer, **opts)
    return getattr(s, prefix + "Vector")(store, **opts)
