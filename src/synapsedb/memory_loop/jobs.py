"""The durable extraction queue: one KV fact per job, in the namespace it belongs to.

A job names a window of a session's stream (first and last event id). It is written in the
same namespace as the turns, right after them, so it survives a crash or restart exactly as the
turns do, and it is visible to the tenant (``facts("synapsedb:jobs")``). A worker claims a job
with a compare-and-set on its version (two workers never run it at once) and a lease: a
worker that dies mid-job leaves it due again when the lease runs out, or at once when the lease
names a process of this host that is gone; a worker that stops gives its jobs back. Success deletes the fact
(its history keeps the record); failure reschedules it with exponential backoff, and after
``max_attempts`` parks it as ``failed`` with the last error (``retry_failed`` queues it again).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import NotFoundError, VersionConflictError

__all__ = ["JOBS_ENTITY", "Job", "claim", "due", "enqueue", "finish", "reschedule", "retry_failed"]

JOBS_ENTITY = "synapsedb:jobs"
LEASE_S = 300.0  # a claimed job is due again after this long (its worker died)
MAX_DELAY_S = 3600.0
OUTAGE_DELAY_S = 300.0  # longest wait of a job whose model was unreachable
MAX_COUNT = 1_000_000  # a job's attempts or outages as read (a forged count is capped)
MAX_DOUBLINGS = 30  # the backoff doubles at most this often (the wait is capped anyway)


@dataclass(frozen=True, slots=True)
class Job:
    """A job as read: ``agent`` is the writer of this version of its fact, the agent its
    writes are made as (the value's own ``agent`` field is not trusted: any writer of the
    namespace can set it). The queue's writes keep that writer."""

    key: str
    version: int
    value: dict[str, Any]
    agent: str | None = None

    @property
    def state(self) -> str:
        return str(self.value.get("state", "queued"))


def _number(value: Any) -> float:
    """A job's time or count; anything else (the job is a fact a tenant can write by hand)
    counts as 0, so one odd fact cannot stop the queue."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else 0.0


def _count(value: Any) -> int:
    """A job's attempts or outages, 0..MAX_COUNT: a count set by hand to 1e300 or -1e9 must
    neither overflow the backoff (2 ** it: a float overflow, or a computation that never ends
    and stops the worker of every namespace) nor keep a job from ever being parked."""
    return int(min(MAX_COUNT, max(0.0, _number(value))))


@cache
def holder() -> dict[str, Any]:
    """This process, as a lease names it: host, process id and the process's start (so a
    reused process id is not taken for the process that held the lease)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "started": _started(pid)}


def _started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None where /proc
    does not say (not Linux, or no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def holder_gone(value: Any) -> bool:
    """Whether the lease ``value`` names a process of this host that no longer runs (or this
    very process, which holds no lease it does not know of: a job left ``running`` by an
    earlier process with the same id). A holder on another host is never judged: its lease
    runs out instead."""
    if not isinstance(value, dict) or value.get("host") != socket.gethostname():
        return False
    pid = value.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    if value == holder():
        return False
    if pid == os.getpid():
        return True  # an earlier process with our id: we hold no such lease
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # another user's live process
    started = _started(pid)
    return started is not None and value.get("started") is not None and started != value["started"]


_ADDRESS = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,;:)]", re.I)


def scrubbed(error: str) -> str:
    """An error as a job records it: a tenant can read the job, so no address (the
    operator's model endpoint, with whatever its URL carries) is kept."""
    return _ADDRESS.sub("<address>", error)


def new_key() -> str:
    return f"extract:{time.time_ns():x}{os.urandom(4).hex()}"


def enqueue(ns: Any, spec: dict[str, Any], agent: str | None) -> str:
    key = new_key()
    value = {
        **spec,
        "state": "queued",
        "attempts": 0,
        "due": 0.0,
        "error": None,
        "queued_at": time.time(),
    }
    ns.set(JOBS_ENTITY, key, value, if_version=0, agent=agent)
    return key


def jobs(ns: Any) -> list[Job]:
    try:
        facts = ns.facts(JOBS_ENTITY)
    except NotFoundError:
        return []
    return [Job(f.key, f.version, f.value, f.agent) for f in facts if isinstance(f.value, dict)]


def get(ns: Any, key: str) -> Job | None:
    """One job by its key (None: finished, or never queued)."""
    try:
        fact = ns.get(JOBS_ENTITY, key)
    except NotFoundError:
        return None
    return (
        Job(fact.key, fact.version, fact.value, fact.agent)
        if isinstance(fact.value, dict)
        else None
    )


def due(ns: Any, now: float) -> list[Job]:
    """Queued jobs whose time has come, and running ones whose lease ran out or whose holder
    is gone (a process of this host that died holding it), oldest first."""
    ready = [
        j
        for j in jobs(ns)
        if (j.state == "queued" and _number(j.value.get("due")) <= now)
        or (
            j.state == "running"
            and (_number(j.value.get("due")) <= now or holder_gone(j.value.get("holder")))
        )
    ]
    return sorted(ready, key=lambda j: _number(j.value.get("queued_at")))


def update(ns: Any, job: Job, changes: dict[str, Any], agent: str | None) -> Job | None:
    """The job with ``changes``, written if nobody else wrote it since (None otherwise)."""
    value = {**job.value, **changes}
    try:
        fact = ns.set(JOBS_ENTITY, job.key, value, if_version=job.version, agent=agent)
    except (VersionConflictError, NotFoundError):
        return None
    return Job(job.key, fact.version, value, job.agent)


def held(job: Job, now: float) -> bool:
    """A worker holds the job now (claimed, its lease not run out)."""
    return job.state == "running" and _number(job.value.get("due")) > now


def claim(ns: Any, job: Job, now: float, agent: str | None) -> Job | None:
    """Take the job (None if another worker took or finished it first): ``running`` until
    the lease runs out."""
    return update(ns, job, {"state": "running", "due": now + LEASE_S, "holder": holder()}, agent)


def release(ns: Any, job: Job, agent: str | None) -> None:
    """Give a claimed job back, due at once, its attempts unchanged."""
    update(ns, job, {"state": "queued", "due": 0.0, "holder": None}, agent)


def finish(ns: Any, job: Job, agent: str | None) -> None:
    with contextlib.suppress(VersionConflictError, NotFoundError):  # finished elsewhere
        ns.delete(JOBS_ENTITY, job.key, if_version=job.version, agent=agent)


def reschedule(
    ns: Any,
    job: Job,
    error: str,
    now: float,
    base_s: float,
    max_attempts: int,
    agent: str | None,
    *,
    outage: bool = False,
) -> bool:
    """Put a failed job back with backoff, or park it as failed. True when it was parked.

    ``outage``: the model could not be reached (connection, timeout, 5xx, breaker open). That
    says nothing about the job, so it does not count towards ``max_attempts`` and the wait is
    capped at OUTAGE_DELAY_S: the job runs soon after the model returns, however long it was
    away. Other failures (an answer that never matched the schema, a refused request, a write
    that failed) count, and park the job after ``max_attempts``."""
    outages = _count(job.value.get("outages")) + int(outage)
    attempts = _count(job.value.get("attempts")) + int(not outage)
    parked = attempts >= max_attempts
    if outage:
        delay = min(OUTAGE_DELAY_S, base_s * 2 ** min(16, max(0, outages - 1)))
    else:
        delay = min(MAX_DELAY_S, base_s * 2 ** min(MAX_DOUBLINGS, max(0, attempts - 1)))
    value = {
        **job.value,
        "state": "failed" if parked else "queued",
        "due": now + delay,
        "attempts": attempts,
        "outages": outages,
        "error": scrubbed(error)[:1000],
        "holder": None,
    }
    try:
        ns.set(JOBS_ENTITY, job.key, value, if_version=job.version, agent=agent)
    except (VersionConflictError, NotFoundError):
        return False
    return parked


def retry_failed(ns: Any) -> int:
    """Queue every parked job again (attempts reset), each written as its own writer.
    Returns how many."""
    n = 0
    for job in jobs(ns):
        if job.state != "failed":
            continue
        value = {**job.value, "state": "queued", "attempts": 0, "due": 0.0}
        try:
            ns.set(JOBS_ENTITY, job.key, value, if_version=job.version, agent=job.agent)
            n += 1
        except (VersionConflictError, NotFoundError):
            pass
    return n
