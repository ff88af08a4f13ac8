"""The memory proxy: an unmodified OpenAI client whose base URL is
``http://host:7379/v1/namespaces/<ns>`` gets memory (docs/proxy.md).

For each request: recall for the caller's entity (the memory loop, ``Database.memory_loop``),
inject the context block as a system message after the caller's own, forward to the configured
upstream model (:meth:`AsyncChatClient.forward <synapsedb.llm.AsyncChatClient.forward>`), and
pass the answer back unchanged. Once the answer is complete, a background worker records it
(``record_answer``, so ``lineage(<completion id>)`` shows the memories behind it) and hands
the turns to ``remember``. Memory work never delays or fails an answer: a recall that fails
forwards without memory, and what fails afterwards is logged (rate-limited).

Errors on these routes have OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``
(``code`` is SynapseDB's error code), so OpenAI SDKs raise their usual exceptions.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..config import LLMSettings
from ..engine import Database, Namespace
from ..errors import NotFoundError, SynapseError, UpstreamError, ValidationError
from ..ids import new_memory_id
from ..llm import AsyncChatClient, Chunk, ChunkStream
from ..memory_loop import MemoryLoop
from ..types import Recalled
from ..validation import check_entity, check_namespace
from .proxy_tenants import Slot, Tenants
from .response_records import save_record
from .wire import agent_of, encoder, error_headers

__all__ = ["Proxy", "Turn", "openai_error"]

log = logging.getLogger("synapsedb.proxy")

DEFAULT_ENTITY = "user:default"
ENTITY_HEADER = "x-synapsedb-entity"
SESSION_HEADER = "x-synapsedb-session"
ANSWER_HEADER = "X-SynapseDB-Answer-Id"
MEMORIES_HEADER = "X-SynapseDB-Memories"
AGENT = "proxy"
LANES = 4  # threads storing what was said after the answers
SETTLE_S = 5.0  # longest a recall waits for the entity's earlier answers to be stored
TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
}


def openai_status(err: SynapseError) -> int:
    """The status of ``err`` on a proxy route: bad input is a 400 (OpenAI's), no upstream
    configured a 503, otherwise the status of its class."""
    if isinstance(err, ValidationError):
        return 400
    if isinstance(err, UpstreamError) and err.details.get("configured") is False:
        return 503
    return err.http_status


def openai_error(err: SynapseError) -> Response:
    """``err`` in OpenAI's error shape, with the headers its class asks for (Retry-After ...)."""
    status = openai_status(err)
    kind = TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {
        "message": err.message,
        "type": kind,
        "param": err.details.get("field"),
        "code": err.code,
    }
    headers = error_headers(err)
    if isinstance(err, UpstreamError) and err.details.get("retry_after") is not None:
        headers["Retry-After"] = str(max(1, round(err.details["retry_after"] + 0.5)))
    return Response(
        encoder.encode({"error": body}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def error_chunk(err: SynapseError) -> dict[str, Any]:
    """What a stream that fails part-way sends last (OpenAI sends the same shape)."""
    return {
        "error": {"message": err.message, "type": "upstream_error", "param": None, "code": err.code}
    }


@dataclass(frozen=True, slots=True)
class Turn:
    """Who a proxied request is about: the entity recalled for and remembered under, the
    session its turns go to (None: the memory loop's default, one per day), the agent."""

    entity: str
    session: str | None
    agent: str | None


def answer_id(prefix: str) -> str:
    """A new id to record an answer under (``X-SynapseDB-Answer-Id``). Never the upstream's:
    an upstream may repeat its ids or make them guessable, and the first answer recorded under
    one would take the lineage of the others, or a request could take another's."""
    return f"{prefix}-sdb-{new_memory_id(time.time_ns() // 1000)}"


def inject(messages: Sequence[Mapping[str, Any]], recalled: Recalled | None) -> list[Any]:
    """``messages`` with the recalled context as a system message after the leading system
    (and developer) messages; unchanged when there is nothing to inject."""
    out = list(messages)
    if recalled is None or not recalled.context:
        return out
    at = 0
    while (
        at < len(out)
        and isinstance(out[at], Mapping)
        and out[at].get("role") in ("system", "developer")
    ):
        at += 1
    out.insert(at, {"role": "system", "content": recalled.context})
    return out


def new_turns(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """The user turns at the end of a conversation (after its last other message): what a
    client that resends the whole history says for the first time."""
    out: list[dict[str, Any]] = []
    for m in reversed(messages):
        if not isinstance(m, Mapping) or m.get("role") != "user":
            break
        out.append({"role": "user", "content": m.get("content")})
    return out[::-1]


TURN_BYTES = 32_000  # what remember takes of one turn (memory_loop.turns.MAX_TURN_BYTES)
CUT_MARK = " [...]"


def fit_turn(turn: Mapping[str, Any]) -> dict[str, Any]:
    """The turn with a text content cut to what remember stores (a pasted document must not
    cost the whole conversation's memory): the start kept, ``[...]`` marking the cut."""
    content = turn.get("content")
    if isinstance(content, list):  # text parts: stored as their text
        content = " ".join(
            p.get("text", "")
            for p in content
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    if not isinstance(content, str):
        return dict(turn)
    raw = content.encode("utf-8", "surrogatepass")
    if len(raw) <= TURN_BYTES:
        return {**turn, "content": content}
    keep = raw[: TURN_BYTES - len(CUT_MARK)].decode("utf-8", "ignore")
    return {**turn, "content": keep + CUT_MARK}


class Warnings:
    """Log a warning of each kind at most once per ``every_s``, saying how many were skipped."""

    def __init__(self, every_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s, self._clock = every_s, clock
        self._last: dict[str, float] = {}
        self._skipped: dict[str, int] = {}
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}  # kind -> warnings, logged or not

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    def warn(self, kind: str, message: str) -> None:
        now = self._clock()
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            last = self._last.get(kind)
            if last is not None and now - last < self.every_s:
                self._skipped[kind] = self._skipped.get(kind, 0) + 1
                return
            skipped = self._skipped.pop(kind, 0)
            self._last[kind] = now
        more = f" ({skipped} more like it since the last one)" if skipped else ""
        log.warning("memory proxy: %s%s", message, more)


class Proxy:
    """The proxy's state in the app: the upstream client, the default namespace of
    ``/v1/chat/completions`` and ``/v1/responses``, the background worker that stores what
    was said, and the responses whose records are still being written."""

    def __init__(
        self,
        db: Database,
        llm: LLMSettings | None = None,
        *,
        namespace: str = "default",
        client: AsyncChatClient | None = None,
    ) -> None:
        self.db = db
        self.namespace = check_namespace(namespace)
        self.client = client or AsyncChatClient(llm or LLMSettings())
        self.tenants = Tenants(self.client.settings)  # each tenant's breaker and share of calls
        self.warnings = Warnings()
        self.pending: dict[tuple[str, str], dict[str, Any]] = {}  # (ns, response id) -> record
        # a few lanes, so that the commits of several answers share group commits; the work
        # of one conversation (namespace, entity, session) always takes the same lane, in order
        self._lanes = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="synapsedb-proxy")
            for _ in range(LANES)
        ]
        self._queued: set[Future[None]] = set()
        self._by_entity: dict[tuple[str, str], set[Future[None]]] = {}  # (ns, entity) -> work
        self._closed = False

    @property
    def configured(self) -> bool:
        return self.client.configured

    def status(self) -> dict[str, Any]:
        """For /readyz and /metrics: the upstream model (``absent``: none configured, ``ok``,
        ``unavailable``: the circuit breaker of every tenant that called it is open), the
        tenants whose breaker is open, the upstream calls in flight, and the memory work that
        failed after answers, by kind (recall, record, chain, remember)."""
        states = self.tenants.states()
        opened = sum(1 for s in states if s == "open")
        if not self.client.configured:
            upstream = "absent"
        else:
            upstream = "unavailable" if states and opened == len(states) else "ok"
        return {
            "upstream": upstream,
            "memory_failures": dict(self.warnings.counts),
            "backlog": len(self._queued),
            "breakers_open": opened,
            "calls": self.tenants.calls(),
        }

    def enter(self, request: Request) -> Slot:
        """A place for one upstream call of the request's tenant (its key's; with auth off,
        the one tenant), or a 429 when the tenant has its share in flight."""
        key = getattr(request.state, "key", None)
        return self.tenants.enter(key.tenant if key is not None else "")

    def require_upstream(self) -> None:
        """503 in OpenAI's shape when no upstream model is configured."""
        if not self.client.configured:
            raise UpstreamError(
                "the memory proxy has no upstream model: set SYNAPSEDB_LLM_BASE_URL (and "
                "SYNAPSEDB_LLM_MODEL, SYNAPSEDB_LLM_API_KEY) where the server starts",
                configured=False,
                attempts=0,
            )

    def turn(
        self,
        request: Request,
        body: Mapping[str, Any],
        *,
        session: str | None = None,
        entity: str | None = None,
    ) -> Turn:
        """The entity (the body's ``user``, else ``X-SynapseDB-Entity``, else ``entity``, else
        user:default), the session (``X-SynapseDB-Session``, else ``session``) and the agent
        (the request's, else "proxy") of a request; 400 naming what is malformed."""
        user = body.get("user")
        if user is not None:
            who = check_entity(user, "user")
        elif (header := request.headers.get(ENTITY_HEADER)) is not None:
            who = check_entity(header, "X-SynapseDB-Entity")
        else:
            who = entity or DEFAULT_ENTITY
        given = request.headers.get(SESSION_HEADER)
        if given is not None:
            session = check_entity(given, "X-SynapseDB-Session")
        return Turn(who, session, agent_of(request) or AGENT)

    async def recall(self, ns: Namespace, messages: Sequence[Any], turn: Turn) -> Recalled | None:
        """The memories for this turn, or None when there is no loop or recall failed (then the
        request goes on without memory: logged, rate-limited)."""
        loop = self.db.memory_loop
        if loop is None:
            return None
        await self.settled(ns, turn.entity)  # what this entity said before is searchable
        try:
            how = getattr(getattr(loop, "settings", None), "proxy_rewrite", "heuristic")
            found = await run_in_threadpool(
                lambda: loop.recall(
                    ns, list(messages), entity=turn.entity, agent=turn.agent, rewrite=how
                )  # an LLM rewrite would delay every answer
            )
        except Exception as exc:  # degrade: answer without memory
            self.warnings.warn(
                "recall", f"recall failed, answering without memory: {type(exc).__name__}: {exc}"
            )
            return None
        return found if isinstance(found, Recalled) else None

    async def finish(
        self,
        ns: Namespace,
        turn: Turn,
        recalled: Recalled | None,
        answer: str,
        answer_id: str,
        said: Sequence[Mapping[str, Any]],
        record: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        """Once an answer is complete, before the caller has its end: store the turns
        ``said`` and the answer durably (the memory loop's ``remember``, embedding deferred:
        a process killed now loses no turn). Then, in the background: make them searchable,
        record the answer (lineage) as about the entity and the session, and store the
        response's record (``record``: its id and value, Responses API). The next recall of
        the same entity waits for that background work, so it finds these turns. Never
        raises; failures are logged."""
        if record is not None:
            self.pending[(ns.name, record[0])] = record[1]
        if self._closed:
            return
        # the session the turns go to: the caller's, else one per day (the memory loop's own
        # default, named here so that the answer can be tied to it)
        session = turn.session or datetime.now(UTC).strftime("%Y-%m-%d")
        job = await run_in_threadpool(self._keep, ns, turn, session, answer, said)
        lane = self._lanes[hash((ns.name, turn.entity, turn.session)) % LANES]
        work = lane.submit(
            self._finish, ns, turn, session, recalled, answer, answer_id, job, record
        )
        self._queued.add(work)
        who = (ns.name, turn.entity)
        self._by_entity.setdefault(who, set()).add(work)
        work.add_done_callback(lambda done: self._done(who, done))

    def _done(self, who: tuple[str, str], work: Future[None]) -> None:
        self._queued.discard(work)
        held = self._by_entity.get(who)
        if held is not None:
            held.discard(work)
            if not held:
                self._by_entity.pop(who, None)

    async def settled(self, ns: Namespace, entity: str) -> None:
        """Wait (at most SETTLE_S) until the background work of the entity's earlier answers
        is done: what they said is then searchable."""
        held = [asyncio.wrap_future(f) for f in self._by_entity.get((ns.name, entity), ())]
        if held:
            await asyncio.wait(held, timeout=SETTLE_S)

    def _keep(
        self,
        ns: Namespace,
        turn: Turn,
        session: str,
        answer: str,
        said: Sequence[Mapping[str, Any]],
    ) -> str | None:
        """Store the turns and the answer (not embedded yet); the job's key, if one."""
        loop = self.db.memory_loop
        turns = [*said, {"role": "assistant", "content": answer}] if answer else list(said)
        turns = [fit_turn(t) for t in turns]
        if loop is None or not turns:
            return None
        try:
            if isinstance(loop, MemoryLoop):  # embedded after the answer is out
                done = loop.remember(
                    ns,
                    turns,
                    entity=turn.entity,
                    session=session,
                    agent=turn.agent,
                    defer_index=True,
                )
            else:  # another loop behind the seam: stored as it stores them
                done = loop.remember(
                    ns, turns, entity=turn.entity, session=session, agent=turn.agent
                )
        except Exception as exc:
            self.warnings.warn(
                "remember", f"turns of {turn.entity!r} not remembered: {type(exc).__name__}: {exc}"
            )
            return None
        return done.job

    def _finish(
        self,
        ns: Namespace,
        turn: Turn,
        session: str,
        recalled: Recalled | None,
        answer: str,
        answer_id: str,
        job: str | None,
        record: tuple[str, dict[str, Any]] | None,
    ) -> None:
        # the answer is about the user and the session: a purge of either erases its text
        about = [turn.entity, f"session:{session}"]
        try:
            qids = [recalled.query_id] if recalled is not None and recalled.query_id else []
            cited = [m.id for m in recalled.memories] if recalled is not None else []
            try:
                ns.record_answer(
                    answer_id, qids, cited=cited, text=answer, agent=turn.agent, entities=about
                )
            except NotFoundError as exc:
                # a recall in a namespace that did not exist yet found nothing and logged no
                # query (namespaces come from writes): the answer is recorded without it
                if exc.details.get("field") != "query_ids" or cited:
                    raise
                ns.record_answer(answer_id, [], text=answer, agent=turn.agent, entities=about)
        except Exception as exc:
            self.warnings.warn(
                "record", f"answer {answer_id} not recorded: {type(exc).__name__}: {exc}"
            )
        if record is not None:
            try:
                save_record(ns, record[0], record[1])
            except Exception as exc:
                self.warnings.warn(
                    "chain", f"response {record[0]} not stored: {type(exc).__name__}: {exc}"
                )
            finally:
                self.pending.pop((ns.name, record[0]), None)
        loop = self.db.memory_loop  # last: the next recall of the entity waits for it
        if isinstance(loop, MemoryLoop) and job is not None:
            try:
                loop.index_now(ns, job)
            except Exception as exc:  # the job is durable: the worker indexes them later
                self.warnings.warn(
                    "remember",
                    f"turns of {turn.entity!r} not indexed yet: {type(exc).__name__}: {exc}",
                )

    def drain(self) -> None:
        """Wait until the background work queued so far is done (tests, shutdown)."""
        wait(list(self._queued))

    def _shutdown(self) -> None:
        for lane in self._lanes:
            lane.shutdown(wait=True)

    async def aclose(self) -> None:
        """Finish the background work, then release the upstream's connections."""
        self._closed = True
        await anyio.to_thread.run_sync(self._shutdown)
        await self.client.aclose()


class ProxyMetrics(Collector):
    """The proxy's state in /metrics (server-wide families)."""

    KINDS = ("recall", "record", "chain", "remember")

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    def collect(self) -> Iterator[Metric]:
        st = self.proxy.status()
        up = GaugeMetricFamily(
            "synapsedb_proxy_upstream_state",
            "The memory proxy's upstream model: 1 for the state it is in",
            labels=["state"],
        )
        for state in ("absent", "ok", "unavailable"):
            up.add_metric([state], 1.0 if st["upstream"] == state else 0.0)
        yield up
        failed = CounterMetricFamily(
            "synapsedb_proxy_memory_failures",
            "Memory work of the proxy that failed, the answer going out anyway",
            labels=["kind"],
        )
        for kind in self.KINDS:
            failed.add_metric([kind], st["memory_failures"].get(kind, 0))
        yield failed
        yield GaugeMetricFamily(
            "synapsedb_proxy_breakers_open",
            "Tenants whose circuit breaker for the upstream model is open",
            value=st["breakers_open"],
        )
        yield GaugeMetricFamily(
            "synapsedb_proxy_upstream_calls",
            "Calls of the memory proxy to the upstream model in flight, every tenant's",
            value=st["calls"],
        )


async def first_chunk(stream: ChunkStream) -> tuple[Chunk, AsyncIterator[Chunk]]:
    """The first event of a stream (a failure before it is still an error answer, not a
    broken stream) and the iterator over the rest."""
    events = aiter(stream)
    try:
        first = await anext(events)
    except StopAsyncIteration:
        await stream.aclose()
        raise UpstreamError(
            "LLM upstream: the stream ended before its first event", broken=True
        ) from None
    except BaseException:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        raise
    return first, events


def frame(chunk: Chunk) -> bytes:
    """A chunk as the server-sent event it came in (its data bytes unchanged)."""
    head = b"event: " + chunk.event.encode() + b"\n" if chunk.event else b""
    return head + b"".join(b"data: " + line + b"\n" for line in chunk.data.split(b"\n")) + b"\n"


async def relay(
    proxy: Proxy,
    ns: Namespace,
    turn: Turn,
    recalled: Recalled | None,
    stream: ChunkStream,
    first: Chunk,
    rest: AsyncIterator[Chunk],
    ident: str,
    said: Sequence[Mapping[str, Any]],
) -> AsyncIterator[bytes]:
    """The chat-completions stream passed through event by event, one event behind: once it
    has ended well, the turns are stored before its last event goes out. A stream that
    breaks part-way ends with an OpenAI error event; a client that leaves closes the
    upstream."""
    text: list[str] = [first.text]
    held = frame(first)
    done = False
    try:
        async for chunk in rest:
            text.append(chunk.text)
            yield held
            held = frame(chunk)
        done = True
    except UpstreamError as err:
        yield held
        yield b"data: " + encoder.encode(error_chunk(err)) + b"\n\n"
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
    if done:
        await proxy.finish(ns, turn, recalled, "".join(text), ident, said)
        yield held
