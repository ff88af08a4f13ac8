"""Latency and token usage of every request a chat client sends, for tests and benchmarks
against a real model (tests/llm/conftest.py prints the table after ``make test-llm``).

    meter = Meter()
    with ChatClient(settings, transport=meter.transport("extraction")) as llm:
        ...
    print("\n".join(meter.report()))

The transports wrap httpx's own (a client's ``transport=`` argument, its public seam) and read
each answer's ``usage``; the numbers are measurements to print, never to assert.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["Call", "Meter"]


@dataclass(frozen=True)
class Call:
    """One request to the model: what was asked, what the server did, how long it took."""

    label: str
    response_format: str  # the type asked for, "-" for none
    status: int
    seconds: float  # from sending the request to the end of the answer's body
    prompt_tokens: int
    completion_tokens: int
    answer: str | None  # the first choice's message content, as the server sent it

    @property
    def tokens_per_s(self) -> float:
        """Completion tokens per second of the whole request (prompt processing included)."""
        return self.completion_tokens / self.seconds if self.seconds > 0 else 0.0


class Meter:
    """Records every request sent through its transports (given to a client's ``transport=``
    argument), to print latency and tokens per second after the run."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def transport(self, label: str) -> httpx.BaseTransport:
        return _Metered(self, label)

    def async_transport(self, label: str) -> httpx.AsyncBaseTransport:
        return _AsyncMetered(self, label)

    def record(
        self, label: str, request: httpx.Request, response: httpx.Response, seconds: float
    ) -> None:
        asked, answered = _json(request.content), _json(response.content)
        fmt, usage = asked.get("response_format"), answered.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        try:
            answer = answered["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            answer = None
        self.calls.append(
            Call(
                label,
                fmt.get("type", "?") if isinstance(fmt, dict) else "-",
                response.status_code,
                seconds,
                int(usage.get("prompt_tokens") or 0),
                int(usage.get("completion_tokens") or 0),
                answer if isinstance(answer, str) else None,
            )
        )

    def of(self, label: str) -> list[Call]:
        """The calls made through transports labelled ``label``, in order."""
        return [c for c in self.calls if c.label == label]

    def report(self) -> list[str]:
        lines = [
            f"{'test':<58} {'format':<11} {'status':>6} {'s':>6} {'prompt':>6} "
            f"{'compl':>5} {'tok/s':>6}"
        ]
        for c in self.calls:
            lines.append(
                f"{c.label[:58]:<58} {c.response_format:<11} {c.status:>6} "
                f"{c.seconds:>6.2f} {c.prompt_tokens:>6} {c.completion_tokens:>5} "
                f"{c.tokens_per_s:>6.1f}"
            )
        for fmt in sorted({c.response_format for c in self.calls}):
            calls = [c for c in self.calls if c.response_format == fmt]
            seconds = sorted(c.seconds for c in calls)
            tokens = sum(c.completion_tokens for c in calls)
            lines.append(
                f"response_format {fmt}: {len(calls)} requests, latency median "
                f"{seconds[len(seconds) // 2]:.2f} s, max {seconds[-1]:.2f} s; "
                f"{tokens} completion tokens in {sum(seconds):.1f} s = "
                f"{tokens / max(sum(seconds), 1e-9):.1f} tok/s"
            )
        return lines


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class _Metered(httpx.BaseTransport):
    def __init__(self, meter: Meter, label: str) -> None:
        self._meter, self._label, self._inner = meter, label, httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = time.perf_counter()
        response = self._inner.handle_request(request)
        response.read()
        self._meter.record(self._label, request, response, time.perf_counter() - start)
        return response

    def close(self) -> None:
        self._inner.close()


class _AsyncMetered(httpx.AsyncBaseTransport):
    def __init__(self, meter: Meter, label: str) -> None:
        self._meter, self._label, self._inner = meter, label, httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        start = time.perf_counter()
        response = await self._inner.handle_async_request(request)
        await response.aread()
        self._meter.record(self._label, request, response, time.perf_counter() - start)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
