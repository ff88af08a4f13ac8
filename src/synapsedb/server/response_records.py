"""Where the memory proxy keeps a Responses API response's record (its entity, session, input
turns, output and the response it continued), so that ``previous_response_id`` can bring the
chain's turns back, and so that erasing the user, or the session, erases it too.

A record holds the user's words, so it lives where both purges reach:

- the **record** is an event of the session's companion stream ``synapsedb:session:<session>``
  (:func:`~synapsedb.conversation.layout.records_stream`), its entity the user, its ``data``
  the record, not searchable. ``forget(entity=<user>, purge=True)`` erases it (an event about
  the user); ``DELETE sessions/<session>?purge=true`` erases it (the session's purge erases its
  companion stream);
- the **lookup** from a response id to that event is a KV fact of the reserved entity
  ``synapsedb:responses`` (key: the response id; value: the stream and the event id, no words
  and no user name), kept RESPONSE_TTL_S as OpenAI keeps a stored response. After either
  purge the event is gone, so the lookup leads nowhere: the chain is a 400 "no response".

Records stored whole in the lookup fact by earlier versions are still read (they expire within
RESPONSE_TTL_S of being written).
"""

from __future__ import annotations

from typing import Any

from ..conversation.layout import records_stream
from ..engine import Namespace
from ..errors import NotFoundError, ValidationError

__all__ = ["CHAIN_ENTITY", "RESPONSE_TTL_S", "save_record", "stored_record"]

CHAIN_ENTITY = "synapsedb:responses"  # response id -> where its record is: one fact each
RESPONSE_TTL_S = 30 * 86_400  # as long as OpenAI keeps a stored response
AGENT = "proxy"


def save_record(ns: Namespace, ident: str, record: dict[str, Any]) -> None:
    """Store response ``ident``'s record durably (``record["entity"]`` and ``["session"]``
    say where); a record over the namespace's value limit keeps the end of each long turn
    (the start is cut first, halving until it fits)."""
    entity, session = record["entity"], record["session"]
    keep = 1 << 20
    while True:
        try:
            event = ns.append(
                entity,
                {"content": f"response {ident}", "data": _cut(record, keep)},
                stream=records_stream(session),
                agent=AGENT,
                searchable=False,
            )
            break
        except ValidationError as exc:
            if exc.details.get("field") != "data" or keep < 64:
                raise
            keep //= 2
    where = {"stream": event.stream, "event": event.id}
    ns.set(CHAIN_ENTITY, ident, where, ttl=RESPONSE_TTL_S, agent=AGENT)


def stored_record(ns: Namespace, ident: str) -> dict[str, Any] | None:
    """Response ``ident``'s record, or None when there is none: never stored, expired, or
    erased with its user or its session."""
    try:
        where = ns.get(CHAIN_ENTITY, ident).value
    except NotFoundError:
        return None
    if not isinstance(where, dict):
        return None
    if "input" in where:  # a record stored whole by an earlier version
        return where
    stream, event = where.get("stream"), where.get("event")
    if not isinstance(stream, str) or not isinstance(event, str):
        return None
    try:
        found = ns.events(stream, start=event, end=event, limit=1)
    except ValidationError:
        return None
    if not found or not isinstance(found[0].data, dict):
        return None
    return dict(found[0].data)


def _cut(record: dict[str, Any], keep: int) -> dict[str, Any]:
    def short(text: Any) -> Any:
        return text[-keep:] if isinstance(text, str) and len(text) > keep else text

    turns = [{**t, "content": short(t.get("content"))} for t in record.get("input", [])]
    return {**record, "input": turns, "output": short(record.get("output"))}
