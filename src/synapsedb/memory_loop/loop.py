"""The memory loop: ``remember`` (turns in, typed memories out) and ``recall`` (a turn in, a
context block out), over any namespace handle: an embedded ``Namespace`` or a
``RemoteNamespace`` (only their public methods are used).

``remember`` stores the turns first (a session stream; each turn a searchable ``event``
memory) and queues an extraction job durably, then returns: nothing is lost when the LLM is
down, absent or slow. A background worker (``start``) or ``run_pending`` runs the jobs:
extraction by the LLM, conflict resolution, writes. With ``wait=True`` the job runs inline
and ``remember`` returns its decisions.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..errors import (
    EmbeddingError,
    NotOwnerError,
    SynapseError,
    UpstreamError,
    ValidationError,
)
from ..types import Decision, Recalled, Remembered
from ..validation import check_entity
from . import jobs as queue
from .extract import Candidate, Chat, Turn, extract, turn_memory_id
from .recall import as_messages, recall
from .resolve import apply, decide, neighbours
from .settings import LoopSettings
from .turns import (
    MAX_SESSION_CHARS,
    WINDOW_CALLS,
    caller_memories,
    index_turns,
    index_window,
    parse_turns,
    window,
)
from .when import resolve

__all__ = ["CONFIG_ENTITY", "MemoryLoop", "turn_memory_id"]

log = logging.getLogger("synapsedb.memory_loop")
CONFIG_ENTITY = "synapsedb:config"
JOBS_PER_PASS = 8  # jobs the worker runs in one namespace before visiting the next


def is_outage(exc: SynapseError) -> bool:
    """The model could not be reached or answer (connection, timeout, 429/5xx, breaker
    open): nothing is wrong with the job itself."""
    if isinstance(exc, EmbeddingError):  # the embedder is down: indexing waits for it
        return True
    if not isinstance(exc, UpstreamError):
        return False
    if "mode" in exc.details:  # it answered, but never to the schema: the job counts
        return False
    status = exc.status
    return exc.breaker_open or status is None or status in (408, 429) or status >= 500


def malformed(spec: Mapping[str, Any]) -> str | None:
    """What is wrong with a job's spec (a KV fact anyone who can write the namespace can
    set), or None."""
    bad = [k for k in ("session", "stream", "first", "last")
           if not isinstance(spec.get(k), str)]  # fmt: skip
    return f"malformed job: {', '.join(bad)} missing or not a string" if bad else None


class MemoryLoop:
    """The memory loop (retrieve, inject, extract, store) over SynapseDB namespaces.

    ``llm`` is a :class:`~synapsedb.llm.ChatClient` (or anything with its ``chat_json`` and
    ``configured``); None or an unconfigured client is a supported mode: turns are stored,
    extraction waits in the queue, recall uses the heuristic rewriter.
    """

    def __init__(
        self, llm: Any = None, settings: LoopSettings | None = None, *, owns_llm: bool = False
    ) -> None:
        self.llm = llm
        self._owns_llm = owns_llm  # close() closes the client too
        self.settings = settings or LoopSettings()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._dirty: set[str] = set()  # namespaces that may hold due jobs
        self._arrived: set[str] = set()  # namespaces taken over from another process
        self._queued: dict[str, int] = {}  # namespace -> jobs seen queued
        self._failed: dict[str, int] = {}
        self._claimed: dict[tuple[str, str], tuple[Any, queue.Job]] = {}  # jobs held now
        self._caught_up: set[str] = set()  # namespaces whose stored turns are all indexed
        self.extracted = 0  # jobs done (this process)
        self.last_error: str | None = None

    # -- the LLM's state ---------------------------------------------------------------------------

    @property
    def llm_ready(self) -> bool:
        """An LLM is configured and its circuit breaker lets calls through."""
        llm = self.llm
        return llm is not None and bool(getattr(llm, "configured", True)) and str(
            getattr(llm, "breaker_state", "closed")) != "open"  # fmt: skip

    def _chat(self) -> Chat | None:
        return self.llm if self.llm_ready else None

    def status(self) -> dict[str, Any]:
        """For /readyz and /metrics: ``llm`` is ``absent`` (none configured), ``ok`` or
        ``unavailable`` (its breaker is open); the queue's depth as last seen."""
        llm = self.llm
        if llm is None or not getattr(llm, "configured", True):
            state = "absent"
        else:
            state = "ok" if self.llm_ready else "unavailable"
        with self._lock:
            queued, failed = sum(self._queued.values()), sum(self._failed.values())
        return {"llm": state, "extraction_queued": queued, "extraction_failed": failed,
                "extracted": self.extracted, "last_error": self.last_error}  # fmt: skip

    # -- remember ------------------------------------------------------------------------------

    def remember(
        self,
        ns: Any,
        messages: Any,
        *,
        entity: str,
        session: str | None = None,
        agent: str | None = None,
        memories: Sequence[Mapping[str, Any]] | None = None,
        wait: bool = False,
        defer_index: bool = False,
    ) -> Remembered:
        """Store ``messages`` (OpenAI-style dicts with ``role`` and ``content``, optional
        ``ts``/``name``; or one string, a user turn) in the stream ``session:<session>`` of
        ``entity``, then extract memories from them: queued (``status="queued"``), or inline
        with ``wait=True``. ``memories`` are memories the caller extracted itself (``type``,
        ``content``, optional ``confidence``, ``valid_from``): they skip the LLM and go
        straight to conflict resolution, inline, and no extraction job is queued.

        ``defer_index`` (the memory proxy, on an answer's path): the turns and their job are
        stored, durably, but not yet embedded; :meth:`index_now` makes them searchable, and
        so does the first recall of the namespace in a process that restarted before."""
        entity = check_entity(entity)
        session = check_entity(session or datetime.now(UTC).strftime("%Y-%m-%d"), "session")
        if len(session) > MAX_SESSION_CHARS:
            raise ValidationError(f"session: {len(session)} characters, over the limit of "
                                  f"{MAX_SESSION_CHARS}", field="session",
                                  limit=MAX_SESSION_CHARS)  # fmt: skip
        msgs = as_messages(messages)
        if len(msgs) > self.settings.max_turns:
            raise ValidationError(f"messages: {len(msgs)} turns, over the limit of "
                                  f"{self.settings.max_turns}", field="messages",
                                  limit=self.settings.max_turns)  # fmt: skip
        if not isinstance(wait, bool):
            raise ValidationError("wait: expected true or false", field="wait")
        stream = f"session:{session}"
        turns: list[Turn] = []
        bodies = parse_turns(msgs, session)
        extra = caller_memories(memories, self.settings.max_candidates)
        for role, text, body in bodies:  # the turns first: kept whatever extraction does
            if not text.strip():
                continue
            ev = ns.append(entity, body, stream=stream, agent=agent, searchable=False)
            turns.append(Turn(ev.id, str(role), text, ev.ts))
        # then their searchable memories, embedded in one batch before remember returns: the
        # next recall, from this process or another on the same data, finds them
        index = any(t.role in ("user", "assistant") for t in turns)
        indexed = False
        if index and not defer_index:
            try:
                index_turns(ns, entity, session, stream, turns, agent)
                indexed = True
            except EmbeddingError:  # the embedder is down: the job indexes them later
                pass
        decisions: list[Decision] = []
        if extra:
            said = turns[-1].ts if turns else datetime.now(UTC)
            cands = [Candidate(t, c, entity, conf, tuple(x.id for x in turns if x.role == "user"),
                               resolve(vf, said) if vf else None, said)
                     for t, c, conf, vf in extra]  # fmt: skip
            decisions += self._resolve(ns, cands, session, agent, llm=None)
        ids = tuple(t.id for t in turns)
        # the caller extracted these turns itself (memories=), or there is no user turn to mine
        extract = memories is None and any(t.role == "user" for t in turns)
        if not extract and (indexed or not index):
            return Remembered(entity, session, stream, ids,
                              "extracted" if decisions else "stored", None,
                              tuple(decisions))  # fmt: skip
        spec = {"session": session, "stream": stream, "first": turns[0].id,
                "last": turns[-1].id, "index": index, "indexed": indexed,
                "extract": extract}  # fmt: skip
        if wait:
            chat = self._chat()
            try:
                if index and not indexed:
                    self._index(ns, {**spec, "entity": entity, "agent": agent})
                    spec["indexed"] = True
                if extract and chat is None:
                    raise UpstreamError("remember(wait=True): no LLM available to extract with "
                                        f"({self.status()['llm']}); the turns are stored and "
                                        "their extraction is queued",
                                        configured=self.llm is not None)  # fmt: skip
                if extract and chat is not None:
                    decisions += self._extract(ns, {**spec, "entity": entity, "agent": agent},
                                               chat)  # fmt: skip
            except SynapseError as exc:
                # what could not run inline waits in the queue, as without wait: the turns
                # are stored and nothing is lost (details.job names the job)
                exc.details["job"] = self._enqueue(ns, spec, agent)
                raise
            return Remembered(entity, session, stream, ids,
                              "extracted" if extract or decisions else "stored", None,
                              tuple(decisions))  # fmt: skip
        key = self._enqueue(ns, spec, agent)
        return Remembered(entity, session, stream, tuple(t.id for t in turns), "queued", key,
                          tuple(decisions))  # fmt: skip

    def index_now(self, ns: Any, job: str) -> int:
        """Make the turns of a job that ``remember(defer_index=True)`` queued searchable now;
        how many memories were written. Idempotent (a turn already indexed is skipped)."""
        found = queue.get(ns, job)
        if found is None or not found.value.get("index") or found.value.get("indexed"):
            return 0
        n = self._index(ns, {**found.value, "agent": found.agent})
        if not queue.held(found, time.time()):  # a worker holding it marks it itself
            queue.update(ns, found, {"indexed": True}, found.agent)  # lost to one: no matter
        return n

    def _catch_up(self, ns: Any) -> None:
        """Once per namespace and process, before its first recall: index the turns stored
        but not yet searchable (their process stopped before it could), so no recall waits
        for the worker."""
        if ns.name in self._caught_up:
            return
        for job in queue.jobs(ns):
            if job.state != "failed" and job.value.get("index") and not job.value.get("indexed"):
                with contextlib.suppress(SynapseError):
                    self.index_now(ns, job.key)
        self._caught_up.add(ns.name)

    def _enqueue(self, ns: Any, spec: dict[str, Any], agent: str | None) -> str:
        key = queue.enqueue(ns, spec, agent)
        self._note_queued(ns.name, +1)
        self._wake.set()
        return key

    # -- extraction ------------------------------------------------------------------------------

    def _window(self, ns: Any, spec: Mapping[str, Any]) -> tuple[str, list[Any]]:
        return window(ns, spec, WINDOW_CALLS * self.settings.max_turns)

    def _index(self, ns: Any, spec: Mapping[str, Any]) -> int:
        return index_window(ns, spec, WINDOW_CALLS * self.settings.max_turns)

    def _extract(self, ns: Any, spec: Mapping[str, Any], chat: Chat) -> list[Decision]:
        entity, evs = self._window(ns, spec)
        turns = [Turn(e.id, str((e.data or {}).get("role", "user")), e.content, e.ts)
                 for e in evs]  # fmt: skip
        if not turns:
            return []
        cands = extract(chat, turns, entity, self.settings)
        return self._resolve(ns, cands, spec["session"], spec.get("agent"), llm=chat)

    def _resolve(self, ns: Any, cands: Sequence[Candidate], session: str,
                 agent: str | None, llm: Chat | None) -> list[Decision]:  # fmt: skip
        out: list[Decision] = []
        for cand in cands:  # one at a time: a candidate sees what the previous one wrote
            near = neighbours(ns, cand, self.settings, agent)
            (verdict,) = decide(llm, [cand], [near], self.settings)
            out.append(apply(ns, cand, verdict, session=session, agent=agent))
        return out

    def run_pending(self, ns: Any, *, limit: int | None = None) -> int:
        """Run the namespace's due jobs now: make their turns searchable (when remember could
        not), and extract (only while an LLM is available: otherwise the job waits). Returns
        how many jobs finished."""
        chat = self._chat()
        done = 0
        now = time.time()
        worked = 0
        for job in queue.due(ns, now):
            if (limit is not None and worked >= limit) or self._stop.is_set():
                break
            # the job's writer: the worker acts as it, never as the agent its value names
            # (a fact a key bound to one agent can set with any value); its own writes of
            # the job keep that writer
            who = job.agent
            index = bool(job.value.get("index")) and not job.value.get("indexed")
            extract = bool(job.value.get("extract", True))
            if not index and extract and chat is None:
                continue  # waits for an LLM (a job with nothing left to do is finished below)
            mine = queue.claim(ns, job, now, who)
            if mine is None:
                continue
            worked += 1
            held = (ns.name, mine.key)
            self._claimed[held] = (ns, mine)
            try:
                outcome = self._run(ns, mine, who, index, extract, chat)
            finally:
                self._claimed.pop(held, None)
            done += outcome == "done"
            if outcome == "embedder down":
                break  # the rest waits for it too
            if outcome == "model failing":
                chat = None  # the other jobs only get indexed
        self._recount(ns)
        return done

    def _run(self, ns: Any, mine: queue.Job, who: str | None, index: bool, extract: bool,
             chat: Chat | None) -> str:  # fmt: skip
        """Run one claimed job: ``done``, ``waiting`` (indexed; extraction waits for an
        LLM), ``taken`` (another worker has it), ``failed``, ``embedder down`` or ``model
        failing`` (both rescheduled)."""
        problem = malformed(mine.value)
        if problem is not None:  # parked at once: no retry can repair it
            self.last_error = problem
            queue.reschedule(ns, mine, problem, time.time(), 0.0, 1, who)
            return "failed"
        try:
            if index:
                self._index(ns, {**mine.value, "agent": who})
                indexed = queue.update(ns, mine, {"indexed": True}, who)
                if indexed is None:
                    return "taken"  # our lease ran out: the other worker goes on
                mine = indexed
            if extract and chat is None:
                queue.release(ns, mine, who)  # indexed; extraction waits for an LLM
                return "waiting"
            if extract and chat is not None:
                self._extract(ns, {**mine.value, "agent": who}, chat)
        except SynapseError as exc:
            self.last_error = queue.scrubbed(f"{type(exc).__name__}: {exc.message}")
            queue.reschedule(ns, mine, self.last_error, time.time(), self.settings.retry_base_s,
                             self.settings.max_attempts, who, outage=is_outage(exc))  # fmt: skip
            if isinstance(exc, EmbeddingError):
                return "embedder down"
            return "model failing" if isinstance(exc, UpstreamError) else "failed"
        except Exception as exc:  # a bug: logged; the job counts a failure (parked after
            # max_attempts), instead of staying "running" and being retaken forever
            log.exception("memory loop: job %s of namespace %r failed", mine.key, ns.name)
            self.last_error = queue.scrubbed(f"{type(exc).__name__}: {exc}")[:1000]
            queue.reschedule(ns, mine, f"internal error ({self.last_error})", time.time(),
                             self.settings.retry_base_s, self.settings.max_attempts, who)  # fmt: skip
            return "failed"
        queue.finish(ns, mine, who)
        self.extracted += int(extract)
        return "done"

    def retry_failed(self, ns: Any) -> int:
        """Queue the namespace's parked (failed) jobs again."""
        n = queue.retry_failed(ns)
        self._recount(ns)
        return n

    def _note_queued(self, name: str, delta: int) -> None:
        with self._lock:
            self._queued[name] = max(0, self._queued.get(name, 0) + delta)
            self._dirty.add(name)

    def _recount(self, ns: Any) -> None:
        all_jobs = queue.jobs(ns)
        with self._lock:
            self._queued[ns.name] = sum(j.state != "failed" for j in all_jobs)
            self._failed[ns.name] = sum(j.state == "failed" for j in all_jobs)
            if not any(j.state != "failed" and j.value.get("index") and not j.value.get("indexed")
                       for j in all_jobs):  # fmt: skip
                self._dirty.discard(ns.name)  # nothing to do without an LLM (waiting below)

    def _names(self) -> list[str]:
        """The namespaces the worker visits now: those with turns to index, and while an LLM
        is available those with extraction waiting."""
        with self._lock:
            names = set(self._dirty)
            if self.llm_ready:
                names.update(n for n, q in self._queued.items() if q)
        return sorted(names)

    # -- recall --------------------------------------------------------------------------------

    def threshold(self, ns: Any) -> float:
        """The namespace's recall threshold (``configure``), else the settings'."""
        try:
            value = ns.get(CONFIG_ENTITY, "recall").value
        except SynapseError:
            return self.settings.threshold
        t = value.get("threshold") if isinstance(value, dict) else None
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= 1:
            return self.settings.threshold  # a fact set by hand, not by configure
        return float(t)

    def configure(self, ns: Any, *, threshold: float) -> float:
        """Set the namespace's recall threshold (calibrated similarity, 0..1), durably."""
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or not (0 <= threshold <= 1)
        ):
            raise ValidationError("threshold: expected a number from 0 to 1", field="threshold")
        ns.set(CONFIG_ENTITY, "recall", {"threshold": float(threshold)})
        return float(threshold)

    def recall(
        self,
        ns: Any,
        messages_or_text: Any,
        *,
        entity: str | None = None,
        budget_tokens: int | None = None,
        k: int | None = None,
        threshold: float | None = None,
        rewrite: str | None = None,
        agent: str | None = None,
    ) -> Recalled:
        """The memories the last user turn needs, as a context block within ``budget_tokens``
        (see :mod:`synapsedb.memory_loop.recall`)."""
        budget = self.settings.budget_tokens if budget_tokens is None else budget_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= 100_000:
            raise ValidationError("budget_tokens: expected an integer from 1 to 100000",
                                  field="budget_tokens", limit=100_000)  # fmt: skip
        k = self.settings.k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
            raise ValidationError("k: expected an integer from 1 to 100", field="k", limit=100)
        if threshold is None:
            threshold = self.threshold(ns)
        elif (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or not (0 <= threshold <= 1)
        ):
            raise ValidationError("threshold: expected a number from 0 to 1", field="threshold")
        how = self.settings.rewrite if rewrite is None else rewrite
        if how not in ("llm", "heuristic"):
            raise ValidationError("rewrite: expected 'llm' or 'heuristic'", field="rewrite")
        if entity is not None:
            entity = check_entity(entity)
        self._catch_up(ns)
        return recall(ns, messages_or_text, entity=entity, budget_tokens=budget, k=k,
                      threshold=float(threshold), settings=self.settings, llm=self._chat(),
                      rewrite=how, agent=agent)  # fmt: skip

    # -- the background worker -----------------------------------------------------------------

    def start(self, db: Any, *, names: Callable[[], Iterable[str]] | None = None) -> None:
        """Run queued jobs in a daemon thread: every namespace with jobs once (jobs queued
        before a restart; found in storage, not by loading each namespace), then those
        ``remember`` queued into, every ``poll_s`` (at once after a
        ``remember``)."""
        if self._thread is not None:
            return
        if names is None:  # those with jobs, found without loading every namespace
            find = getattr(db, "namespaces_with_facts", None)
            names = (lambda: find(queue.JOBS_ENTITY)) if callable(find) else db.namespaces
        with self._lock:
            self._dirty.update(names())
        self._stop.clear()
        self._thread = threading.Thread(target=self._work, args=(db,), daemon=True,
                                        name="synapsedb-memory-loop")  # fmt: skip
        self._thread.start()

    def _work(self, db: Any) -> None:
        # what the worker reads keeps no namespace in memory (engine/residency.py)
        quietly = getattr(getattr(db, "core", None), "quietly", contextlib.nullcontext)
        with quietly():
            self._run_jobs(db)

    def _run_jobs(self, db: Any) -> None:
        counted = False
        while not self._stop.is_set():
            self._wake.wait(self.settings.poll_s)
            self._wake.clear()
            if self._stop.is_set():
                continue
            try:
                self._take_arrivals(db)
            except SynapseError as exc:  # storage unreachable: they are looked at next time
                self.last_error = exc.message
            if not counted:
                # the queues as they are, before any job runs (a pass of slow extractions must
                # not leave /readyz saying nothing is queued); after the first wait, so that an
                # open still loads each namespace at its first use (engine/lazy.py)
                counted = True
                self._count(db)
            for name in self._names():
                if self._stop.is_set():
                    break
                try:
                    # a few jobs per namespace per pass: one tenant's backlog cannot starve
                    # the others (the rest is due again on the next pass)
                    if self.run_pending(db.namespace(name), limit=JOBS_PER_PASS):
                        self._wake.set()
                except NotOwnerError:
                    self._elsewhere(name)
                except SynapseError as exc:  # a namespace that cannot be read right now
                    self.last_error = f"{name}: {exc.message}"
                except Exception:  # a bug: logged, the worker goes on with the others
                    log.exception("memory loop: jobs of namespace %r failed", name)

    def _elsewhere(self, name: str) -> None:
        """Another process owns ``name`` (sharded placement): its jobs are that one's."""
        with self._lock:
            self._dirty.discard(name)
            self._queued.pop(name, None)
            self._failed.pop(name, None)

    def visit(self, names: list[str]) -> None:
        """Look at the jobs of ``names`` soon (namespaces this process just took over from
        another, which may have left jobs queued): those of them with jobs in storage."""
        with self._lock:
            self._arrived.update(names)
        self._wake.set()

    def _take_arrivals(self, db: Any) -> None:
        with self._lock:
            arrived, self._arrived = self._arrived, set()
        if not arrived:
            return
        find = getattr(db, "namespaces_with_facts", None)
        with_jobs = set(find(queue.JOBS_ENTITY)) if callable(find) else arrived
        with self._lock:
            self._dirty.update(arrived & with_jobs)

    def _count(self, db: Any) -> None:
        for name in self._names():
            if self._stop.is_set():
                return
            try:
                self._recount(db.namespace(name))
            except NotOwnerError:
                self._elsewhere(name)
            except SynapseError as exc:
                self.last_error = f"{name}: {exc.message}"
            except Exception:  # a bug: logged, the worker goes on with the others
                log.exception("memory loop: jobs of namespace %r not counted", name)

    def stop(self) -> None:
        """Stop the worker: it finishes the job it is running if that takes at most
        ``stop_wait_s``; jobs still held after that are given back (due at once), so the next
        process to open the data runs them instead of waiting out a lease."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.stop_wait_s)
            self._thread = None
        for ns, job in list(self._claimed.values()):
            with contextlib.suppress(SynapseError):
                queue.release(ns, job, job.agent)
        self._claimed.clear()

    def close(self) -> None:
        """Stop the worker, and close the LLM client if the loop made it."""
        self.stop()
        if self._owns_llm and self.llm is not None:
            self.llm.close()

    @classmethod
    def from_env(cls) -> MemoryLoop:
        """A loop with the LLM of ``SYNAPSEDB_LLM_*`` (none when unset) and the settings of
        ``SYNAPSEDB_LOOP_*``."""
        from ..config import LLMSettings
        from ..llm import ChatClient

        llm_settings = LLMSettings.from_env()
        llm = ChatClient(llm_settings) if llm_settings.configured else None
        return cls(llm, LoopSettings.from_env(), owns_llm=True)
