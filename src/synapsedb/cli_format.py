"""How the command line prints answers: ``--json`` gives the answer as the HTTP API encodes it
(a memory's vector only with ``--include embedding``); without it, short lines for a person."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import IO, Any

from .types import (
    AuditEntry,
    Event,
    Fact,
    Forgotten,
    Hit,
    Lineage,
    MaintenanceReport,
    Memory,
    NamespaceConfig,
    QueryResult,
    Recalled,
    Remembered,
    Snapshot,
    Stats,
)

__all__ = ["print_json", "print_json_line", "show"]


def print_json(value: Any, *, vectors: bool = False, out: IO[str] | None = None) -> None:
    """``value`` as indented JSON, encoded as the server encodes it (lean unless ``vectors``)."""
    import msgspec

    from .server.wire import encoder, lean, plain

    if not vectors:
        value = lean(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = plain(value)
    elif isinstance(value, list):
        value = [plain(v) if dataclasses.is_dataclass(v) else v for v in value]
    print(msgspec.json.format(encoder.encode(value), indent=2).decode(), file=out or sys.stdout)


def print_json_line(value: Any) -> None:
    """``value`` as one line of JSON (a feed's items: JSON lines, readable as they come)."""
    from .server.wire import encode, lean

    print(encode(lean(value)).decode(), flush=True)


def _t(value: datetime | None) -> str:
    return "-" if value is None else value.isoformat().replace("+00:00", "Z")


def _memory(m: Memory) -> str:
    flags = "".join(f" ({f})" for f in ("deleted", "erased", "pinned") if getattr(m, f))
    return f"{m.id}  v{m.version}  [{m.entity}] {m.type}: {m.content}{flags}"


def _fact(f: Fact) -> str:
    value = "(erased)" if f.erased else "(deleted)" if f.deleted else json.dumps(f.value)
    return f"{f.entity} {f.key} = {value}  (v{f.version}, {_t(f.recorded_at)})"


def _event(e: Event) -> str:
    return f"{e.id}  [{e.entity}] {e.content}" + (f"  {json.dumps(e.data)}" if e.data else "")


def _hit(h: Hit) -> str:
    return f"{h.score:8.4f}  {h.id}  [{h.entity}] {h.content}"


def _query(r: QueryResult) -> list[str]:
    head = f"query {r.query_id}" + (f" (entity {r.entity})" if r.entity else "")
    return [head, *(_hit(h) for h in r.hits)]


def _audit(a: AuditEntry) -> str:
    version = "" if a.version is None else f" v{a.version}"
    return f"{_t(a.at)}  {a.agent or '-'}  {a.action} {a.entity or '-'} {a.target}{version}"


def _forgotten(f: Forgotten) -> list[str]:
    if f.purged:
        out = [
            f"erased {f.target}: {f.memories} memories ({f.versions} versions), {f.facts} "
            f"facts, {f.events} events"
        ]
    else:
        out = [
            f"forgot {f.target}: {f.memories} memories, {f.facts} facts (tombstones: "
            "history keeps them)"
        ]
    if f.pending:
        out.append("the write-ahead log still holds the erased text: maintenance retries")
    return out


def _maintenance(r: MaintenanceReport) -> list[str]:
    head = f"maintenance of {r.namespace}" + (" (dry run: nothing changed)" if r.dry_run else "")
    out = [head]
    out += [f"  expired memory {m}" for m in r.expired_memories]
    out += [f"  expired fact {e} {k}" for e, k in r.expired_facts]
    out += [f"  demote {m} (score {s}): {why}" for m, s, why in r.demoted]
    out += [f"  promote {m}: {why}" for m, why in r.promoted]
    return out if len(out) > 1 else [head, "  nothing to do"]


def _lineage(lin: Lineage) -> list[str]:
    out = [f"answer {lin.answer_id} by {lin.agent or '-'} at {_t(lin.recorded_at)}"]
    if lin.text:
        out.append(f"  {lin.text}")
    for q in lin.queries:
        out.append(f"  query {q.query_id} by {q.agent or '-'}: {q.text or '(vector)'}")
        out += [f"    {r.id} v{r.version}: {r.content}" for r in q.hits]
    out += [f"  cited {r.id} v{r.version}: {r.content}" for r in lin.cited]
    return out


def _snapshot(s: Snapshot) -> list[str]:
    out = [f"{s.entity} as of {_t(s.as_of)}"]
    out += [f"  fact   {_fact(f)}" for f in s.facts]
    out += [f"  memory {_memory(m)}" for m in s.memories]
    out += [f"  event  {_event(e)}" for e in s.events]
    return out


def _fields(value: Any) -> list[str]:
    return [
        f"{f.name}: {json.dumps(getattr(value, f.name), default=str)}"
        for f in dataclasses.fields(value)
    ]


def _recalled(r: Recalled) -> list[str]:
    out = [f"needed: {r.needed}; query: {r.query} (rewritten by {r.rewritten_by})"]
    out += [f"{m.similarity:6.3f}  {m.id}  [{m.entity}] {m.content}" for m in r.memories]
    return out + ([r.context] if r.context else [])


def _remembered(r: Remembered) -> list[str]:
    out = [f"{len(r.turns)} turns in {r.stream}: {r.status}" + (f" (job {r.job})" if r.job else "")]
    return out + [
        f"  {d.action} {d.memory_id or d.target_id or ''}: {d.content}" for d in r.decisions
    ]


LINES: dict[type, Callable[[Any], list[str]]] = {
    Memory: lambda v: [_memory(v)],
    Fact: lambda v: [_fact(v)],
    Event: lambda v: [_event(v)],
    QueryResult: _query,
    AuditEntry: lambda v: [_audit(v)],
    Forgotten: _forgotten,
    MaintenanceReport: _maintenance,
    Lineage: _lineage,
    Snapshot: _snapshot,
    NamespaceConfig: _fields,
    Stats: _fields,
    Recalled: _recalled,
    Remembered: _remembered,
}


def lines(value: Any) -> list[str]:
    """``value`` as short lines for a person."""
    from .client.feeds import Change

    if isinstance(value, list):
        return [line for v in value for line in lines(v)]
    if isinstance(value, Change):
        return [
            f"{value.id}  {value.agent or '-'}  {value.action} {value.entity or '-'} "
            f"{value.target}" + ("" if value.version is None else f" v{value.version}")
        ]
    for kind, render in LINES.items():
        if isinstance(value, kind):
            return render(value)
    if isinstance(value, str | int | float):
        return [str(value)]
    return [json.dumps(value, default=str)]


def show(value: Any, *, as_json: bool, vectors: bool = False) -> None:
    """Print an answer: JSON (``as_json``) or lines."""
    if as_json:
        print_json(value, vectors=vectors)
        return
    for line in lines(value):
        print(line)
