"""A conversation's turns in the memory loop: checked as they come, stored in the session's
stream, and made searchable (those worth a memory).

A turn is an event of the stream ``session:<session>`` of its entity (the conversation as it
was); a turn worth a memory is also a searchable ``event`` memory whose id is fixed by its
stream and event id (:func:`~.extract.turn_memory_id`), so indexing it twice writes nothing
new. A job names a window of a stream (first and last event id), never an entity: the
window's entity is its first turn's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..errors import NotFoundError, ValidationError
from ..times import to_us
from .acknowledge import worth_a_memory
from .extract import Turn, turn_memory_id
from .settings import MEMORY_TYPES
from .when import resolve

__all__ = ["caller_memories", "index_turns", "index_window", "parse_turns", "window"]

ROLES = ("system", "developer", "user", "assistant", "tool")
# Checked before anything is stored (the engine's own limits would stop a later turn after the
# earlier ones were appended): a turn's UTF-8 bytes (32,000: what one extraction prompt takes,
# well under the engine's max_content_bytes), a participant name (OpenAI's limit), a session
# name ("session:" + it names a stream).
MAX_TURN_BYTES = 32_000
WINDOW_CALLS = 4  # remember calls whose turns one job's window may hold (see window)
MAX_NAME_CHARS = 64
MAX_SESSION_CHARS = 248
MAX_MEMORY_CHARS = 2000  # a caller's memory, as an extracted one (extract.MAX_CONTENT)


def _text(m: Mapping[str, Any], i: int) -> str:
    c = m.get("content")
    if isinstance(c, list):
        c = " ".join(
            p.get("text", "") for p in c if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    if not isinstance(c, str):
        raise ValidationError(
            f"messages[{i}].content: expected a string or text parts",
            field=f"messages[{i}].content",
        )
    size = len(c.encode("utf-8", "surrogatepass")) if len(c) * 4 > MAX_TURN_BYTES else 0
    if size > MAX_TURN_BYTES:
        raise ValidationError(
            f"messages[{i}].content: {size} bytes, over the limit of {MAX_TURN_BYTES}",
            field=f"messages[{i}].content",
            limit=MAX_TURN_BYTES,
        )
    name = m.get("name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME_CHARS):
        raise ValidationError(
            f"messages[{i}].name: expected a string of at most {MAX_NAME_CHARS} characters",
            field=f"messages[{i}].name",
            limit=MAX_NAME_CHARS,
        )
    return c


def parse_turns(
    msgs: Sequence[Mapping[str, Any]], session: str
) -> list[tuple[str, str, dict[str, Any]]]:
    """Each message checked (role, content, name, ts) before anything is stored, as (role,
    text, the event's body)."""
    bodies = []
    for i, m in enumerate(msgs):
        role = m.get("role")
        if role not in ROLES:
            raise ValidationError(
                f"messages[{i}].role: expected one of {', '.join(ROLES)}",
                field=f"messages[{i}].role",
            )
        text = _text(m, i)
        data = {"role": role, "session": session, "searchable": role in ("user", "assistant")}
        if isinstance(m.get("name"), str):
            data["name"] = m["name"]
        body: dict[str, Any] = {
            "content": text,
            "data": data,
            "metadata": {"role": role, "session": session},
        }
        if m.get("ts") is not None:
            to_us(m["ts"], f"messages[{i}].ts")  # checked before anything is stored
            body["ts"] = m["ts"]
        bodies.append((str(role), text, body))
    return bodies


def caller_memories(
    memories: Sequence[Mapping[str, Any]] | None, most: int
) -> list[tuple[str, str, float, Any]]:
    """The memories a caller extracted itself, checked: (type, content, confidence,
    valid_from) each, at most ``most``."""
    out: list[tuple[str, str, float, Any]] = []
    if memories is None:
        return out
    if not isinstance(memories, Sequence) or isinstance(memories, str | bytes):
        raise ValidationError("memories: expected a list of objects", field="memories")
    if len(memories) > most:
        raise ValidationError(
            f"memories: {len(memories)} items, over the limit of {most}",
            field="memories",
            limit=most,
        )
    for i, m in enumerate(memories):
        f = f"memories[{i}]"
        if not isinstance(m, Mapping):
            raise ValidationError(f"{f}: expected an object", field=f)
        t, c = m.get("type", "fact"), m.get("content")
        if t not in MEMORY_TYPES:
            raise ValidationError(
                f"{f}.type: expected one of {', '.join(MEMORY_TYPES)}", field=f"{f}.type"
            )
        if not isinstance(c, str) or not c.strip():
            raise ValidationError(f"{f}.content: expected a non-empty string", field=f"{f}.content")
        if len(c) > MAX_MEMORY_CHARS:
            raise ValidationError(
                f"{f}.content: {len(c)} characters, over the limit of {MAX_MEMORY_CHARS}",
                field=f"{f}.content",
                limit=MAX_MEMORY_CHARS,
            )
        conf = m.get("confidence", 1.0)
        if isinstance(conf, bool) or not isinstance(conf, int | float) or not 0 <= conf <= 1:
            raise ValidationError(
                f"{f}.confidence: expected a number from 0 to 1", field=f"{f}.confidence"
            )
        vf = m.get("valid_from")
        if vf is not None and (not isinstance(vf, str) or resolve(vf, datetime.now(UTC)) is None):
            raise ValidationError(
                f"{f}.valid_from: expected a date (YYYY-MM-DD) or a phrase such as 'last week'",
                field=f"{f}.valid_from",
            )
        out.append((str(t), " ".join(c.split()), float(conf), vf))
    return out


def window(ns: Any, spec: Mapping[str, Any], most: int) -> tuple[str, list[Any]]:
    """The job's entity and its events in the job's window of the session stream. A job
    names no entity (its bookkeeping holds no names): it is the first turn's. Bounded: a
    job is a fact anyone who can write the namespace can set, naming any window, and the
    worker is every namespace's; it reads the turns of a few remember calls of the same
    entity and session that ran at the same time (interleaved)."""
    evs = ns.events(spec["stream"], start=spec["first"], end=spec["last"], limit=10_000)
    entity = spec.get("entity")
    if not isinstance(entity, str):
        entity = next((e.entity for e in evs if e.id == spec["first"]), None)
    if entity is None:
        return "", []
    mine = [e for e in evs if e.entity == entity]
    return entity, mine[:most]


def index_turns(
    ns: Any, entity: str, session: str, stream: str, turns: Sequence[Turn], agent: str | None
) -> int:
    """Write the searchable memories of the turns worth one (type ``event``, metadata
    ``stream``/``event_id``/``role``/``session``), embedded in one batch: user turns that
    are not small talk, assistant turns that do more than acknowledge."""
    items = []
    answered = ""
    for t in turns:
        if t.role == "user":
            answered = t.content
        if not worth_a_memory(t.role, t.content, answered):
            continue
        items.append(
            {
                "entity": entity,
                "id": turn_memory_id(stream, t.id),
                "type": "event",
                "content": t.content,
                "ts": t.ts,
                "metadata": {
                    "stream": stream,
                    "event_id": t.id,
                    "role": t.role,
                    "session": session,
                },
            }
        )
    if items:
        ns.write_many(items, agent=agent)
    return len(items)


def index_window(ns: Any, spec: Mapping[str, Any], most: int) -> int:
    """Index a job's turns that remember could not (the embedder was down). Idempotent: a
    turn whose memory exists (or existed) is skipped."""
    entity, evs = window(ns, spec, most)
    todo = []
    for e in evs:
        d = e.data or {}
        if not d.get("searchable"):
            continue
        try:
            ns.history(turn_memory_id(e.stream, e.id))
            continue  # written by an earlier run of this job (or since forgotten)
        except NotFoundError:
            pass
        todo.append(Turn(e.id, str(d.get("role", "user")), e.content, e.ts))
    if not todo:
        return 0
    session = str((evs[0].data or {}).get("session", ""))
    return index_turns(ns, entity, session, spec["stream"], todo, spec.get("agent"))
