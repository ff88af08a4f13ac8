"""What a chat call does, written once for the sync and the async client.

Each operation is a generator that yields *steps* (:class:`Send` a request, :class:`Sleep`
before a retry) and receives each step's outcome (the ``httpx.Response``, or the
``httpx.TransportError`` the request raised). The clients in :mod:`synapsedb.llm.client` only
perform the steps, with blocking or awaitable I/O, so retries, the circuit breaker, the
structured-output fallback and the repair try cannot drift apart between them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from ..config import LLMSettings
from ..errors import UpstreamError, ValidationError
from . import wire
from .breaker import Backoff, CircuitBreaker
from .schema import check_schema
from .wire import ChatReply

__all__ = ["Send", "Session", "Sleep", "chat", "chat_json", "forward"]

log = logging.getLogger("synapsedb.llm")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Send:
    """POST this body to the chat-completions URL; the outcome is sent back in."""

    body: dict[str, Any]

    @property
    def content(self) -> bytes:
        return wire.encode(self.body)


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait this many seconds (before a retry)."""

    seconds: float


Outcome = httpx.Response | httpx.TransportError | None
Steps = Generator[Send | Sleep, Outcome, T]


class Session:
    """A client's state shared by its calls: settings, the breaker, the structured-output mode
    that works with this endpoint (learnt once, then remembered), and the redactor."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float],
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s, clock)
        self.backoff = Backoff(settings.backoff_base_s, settings.backoff_cap_s, random)
        self.mode = settings.structured_output
        self.redact = wire.Redactor(settings.api_key, settings.base_url)
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self.wall = wall

    def headers(self) -> dict[str, str]:
        out = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.settings.api_key:
            out["Authorization"] = f"Bearer {self.settings.api_key}"
        return out

    def error(self, message: str, **details: Any) -> UpstreamError:
        """An UpstreamError for ``message``, which names the upstream only as "LLM upstream":
        its message reaches tenants (the proxy's answers, a job's recorded error), so the
        operator's address and key are taken out. The operator's log gets it with the
        address (at DEBUG when an open breaker refused the call: no request was made)."""
        quiet = details.get("breaker_open") and not details.get("attempts")
        log.log(
            logging.DEBUG if quiet else logging.WARNING,
            "LLM upstream %s: %s",
            self.redact.url,
            self.redact(message),
        )
        return wire.upstream_error(f"LLM upstream: {message}", self.redact, **details)

    def downgrade(self, mode: str) -> str:
        """The mode after ``mode``, remembered for later calls unless another call already
        moved past ``mode`` (modes only ever move down the list)."""
        lower = wire.FALLBACK[mode]
        if self.mode == mode:
            self.mode = lower
            log.info(
                "LLM upstream %s refuses response_format %s; using %s from now on",
                self.redact.url,
                mode,
                lower,
            )
        return lower


def chat(
    session: Session,
    messages: Sequence[Mapping[str, Any]],
    *,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    stop: str | Sequence[str] | None = None,
) -> Steps[ChatReply]:
    """One chat completion (retried per the settings); UpstreamError if it fails."""
    body = wire.chat_body(
        session.settings.model,
        wire.check_messages(messages),
        temperature=temperature,
        max_tokens=max_tokens,
        stop=stop,
    )
    _require_configured(session)
    resp, attempts = yield from _send(session, body)
    return _reply(session, resp, attempts)


def chat_json(
    session: Session,
    messages: Sequence[Mapping[str, Any]],
    schema: Mapping[str, Any],
    *,
    name: str,
    temperature: float = 0.0,
    max_tokens: int | None = None,
) -> Steps[dict[str, Any]]:
    """A JSON object matching ``schema``, asked for in the session's structured-output mode
    (falling back json_schema -> json_object -> prompt when the endpoint refuses one), checked
    against the schema, with one repair try; UpstreamError if it still does not match."""
    check_schema(schema)
    if schema.get("type") != "object":
        raise ValidationError('schema.type: expected "object" at the root', field="schema.type")
    wire.check_schema_name(name)
    plain = wire.check_messages(messages)
    _require_configured(session)
    total = 0
    mode = session.mode
    while True:  # at most once per mode: each refusal moves ``mode`` down the list
        convo, fmt = wire.structured(plain, schema, name, mode)
        body = wire.chat_body(
            session.settings.model,
            convo,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=None,
            response_format=fmt,
        )
        resp, attempts = yield from _send(session, body)
        total += attempts
        if wire.refuses_format(resp.status_code, resp.content, mode):
            mode = session.downgrade(mode)
            continue
        reply = _reply(session, resp, total)
        value, problem = _structured_value(reply, schema)
        if value is not None:
            return value
        log.info(
            "LLM upstream %s: answer for schema %s is invalid (%s); one repair try",
            session.redact.url,
            name,
            session.redact(problem),
        )
        body["messages"] = wire.repair(convo, reply.content, problem)
        resp, attempts = yield from _send(session, body)
        total += attempts
        reply = _reply(session, resp, total)
        value, problem = _structured_value(reply, schema)
        if value is not None:
            return value
        raise session.error(
            f"the answer does not match schema {name!r} after one repair try: {problem}",
            attempts=total,
            mode=mode,
        )


def forward(
    session: Session, body: dict[str, Any], breaker: CircuitBreaker | None = None
) -> Steps[tuple[httpx.Response, int]]:
    """Send a caller's request body as it is (the memory proxy), retried like any call: the
    first answer that is not an upstream failure (a 2xx, or a 4xx the request caused) and the
    attempts made; UpstreamError when none comes (see :func:`_send`). ``breaker``: the one
    this caller's failures count in (the proxy keeps one per tenant), else the session's."""
    _require_configured(session)
    return (yield from _send(session, body, breaker))


def _structured_value(
    reply: ChatReply, schema: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    if reply.refusal is not None:
        return None, f"the model refused: {reply.refusal}"
    value, problem = wire.read_json(reply.content, schema)
    if value is not None:
        return value, ""
    problem = problem or "the answer is not a JSON object"
    if reply.finish_reason == "length":
        problem += " (the answer was cut off at max_tokens)"
    return None, problem


def _require_configured(session: Session) -> None:
    if not session.settings.configured:
        raise UpstreamError(
            "no LLM is configured: set SYNAPSEDB_LLM_BASE_URL (LLMSettings.base_url)",
            configured=False,
            attempts=0,
        )


def _reply(session: Session, resp: httpx.Response, attempts: int) -> ChatReply:
    """A 2xx answer as a ChatReply, or the UpstreamError a 4xx answer stands for."""
    if resp.status_code >= 400:
        raise session.error(
            f"answered {resp.status_code}: {wire.error_text(resp.content)}",
            status=resp.status_code,
            attempts=attempts,
            breaker_open=False,
        )
    try:
        return wire.parse_reply(resp.content)
    except ValueError as exc:  # garbage with a 2xx: a broken upstream, not worth a retry
        opened = session.breaker.fail()
        raise session.error(
            str(exc), status=resp.status_code, attempts=attempts, breaker_open=opened
        ) from None


# failures after which sending again is safe: the upstream cannot have started on the request
RESENDABLE = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.WriteError,
    httpx.WriteTimeout,
)
RESENDABLE_STATUSES = frozenset({408, 429, 503})  # not taken in: too slow to arrive, or refused


def _failed(outcome: Outcome) -> bool:
    """An upstream failure (the breaker counts it): a transport error, 408, 429 or a 5xx.
    Anything else (a 2xx, another 4xx) is an answer to pass on."""
    if isinstance(outcome, httpx.Response):
        return outcome.status_code in (408, 429) or outcome.status_code >= 500
    return True


def _resendable(outcome: Outcome) -> bool:
    """Whether a failed request may be sent again without doubling the upstream's work: the
    connection was never made or the request never wholly sent, or the upstream refused it
    unread (408, 429, 503). Not a timeout or a broken connection while waiting for the answer,
    nor another 5xx: the model may still be generating (a cold local model takes minutes over
    its first answer), and a second request would run beside the first."""
    if isinstance(outcome, httpx.Response):
        return outcome.status_code in RESENDABLE_STATUSES
    return isinstance(outcome, RESENDABLE)


def _describe(outcome: Outcome) -> str:
    if isinstance(outcome, httpx.Response):
        return f"answered {outcome.status_code}: {wire.error_text(outcome.content)}"
    if isinstance(outcome, httpx.ReadTimeout):
        return "timed out waiting for the answer (ReadTimeout)"
    if isinstance(outcome, httpx.TimeoutException):
        return f"timed out ({type(outcome).__name__})"
    if isinstance(outcome, RESENDABLE):
        return f"unreachable ({type(outcome).__name__}: {outcome})"
    return f"the connection broke before the answer ({type(outcome).__name__}: {outcome})"


def _send(
    session: Session, body: dict[str, Any], breaker: CircuitBreaker | None = None
) -> Steps[tuple[httpx.Response, int]]:
    """Send ``body`` until an answer that is not an upstream failure: a 2xx, or a 4xx other
    than 408 and 429 (our request is at fault: retrying cannot help). Only failures after
    which the upstream cannot be working on the request are retried (:func:`_resendable`: no
    connection, 408, 429, 503), up to ``max_retries`` times, waiting ``Retry-After`` when the
    upstream says (if not longer than ``backoff_cap_s``) or the jittered backoff. Answers the
    response and the number of attempts made; raises UpstreamError at once for any other
    failure (a timeout waiting for the answer, another 5xx), and when retries are exhausted,
    the wait asked for is too long, or the breaker is open."""
    settings, breaker = session.settings, breaker or session.breaker
    attempts = 0
    while True:
        admitted, probe = breaker.admit()
        if not admitted:
            wait = breaker.remaining_s()
            raise session.error(
                f"circuit breaker open after {breaker.failures} consecutive failures; not "
                f"calling it for {wait:.1f} s more",
                attempts=attempts,
                breaker_open=True,
                retry_after=round(wait, 3),
            )
        attempts += 1
        settled = False
        try:
            outcome = yield Send(body)
            if isinstance(outcome, httpx.Response) and not _failed(outcome):
                breaker.succeed()
                settled = True
                return outcome, attempts
            opened = breaker.fail()
            settled = True
        finally:
            if probe and not settled:
                breaker.abandon()
        status = outcome.status_code if isinstance(outcome, httpx.Response) else None
        problem = _describe(outcome)
        asked = None
        if isinstance(outcome, httpx.Response):
            asked = wire.retry_after(outcome.headers, session.wall())
        if not _resendable(outcome):
            raise session.error(
                f"{problem} (not retried: the upstream may still be working "
                "on it, and a second request would double its load)",
                status=status,
                attempts=attempts,
                breaker_open=opened,
                retry_after=asked,
            )
        if opened or attempts > settings.max_retries:
            why = "the circuit breaker opened" if opened else f"{attempts} attempts"
            raise session.error(
                f"{problem} (gave up after {why})",
                status=status,
                attempts=attempts,
                breaker_open=opened,
                retry_after=asked,
            )
        if asked is not None and asked > settings.backoff_cap_s:
            raise session.error(
                f"{problem}; it asks to retry after {asked:g} s, longer than backoff_cap_s "
                f"({settings.backoff_cap_s:g} s)",
                status=status,
                attempts=attempts,
                breaker_open=False,
                retry_after=asked,
            )
        delay = asked if asked is not None else session.backoff.delay(attempts - 1)
        log.warning(
            "LLM upstream %s %s; retry %d of %d in %.2f s",
            session.redact.url,
            session.redact(problem),
            attempts,
            settings.max_retries,
            delay,
        )
        yield Sleep(delay)
