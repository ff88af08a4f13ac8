"""The command line's data commands: one per namespace operation, each thin over the library.

Every command works on a server (``--url``, ``--api-key``: ``synapsedb.connect``) or, with
``--data DIR``, on a data directory opened in this process (``synapsedb.open``): the same
methods either way. ``-n/--namespace`` picks the namespace, ``--agent`` the acting agent,
``--json`` prints the answer as the HTTP API encodes it (a memory's vector only with
``--include embedding``), and ``--help`` shows an example. Errors print ``error [code]:
message`` and exit 2 (``synapsedb.cli.main``).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from typing import Any

from .cli_args import assignments, data_parent, json_arg, lines_file, open_target, remote_parent
from .cli_format import print_json_line, show
from .errors import ValidationError

__all__ = ["COMMANDS", "add_parsers"]

Run = Callable[[Any, argparse.Namespace], Any]


# -- the commands: (help, example, arguments, run) ------------------------------------------


def _write(p: argparse.ArgumentParser) -> Run:
    p.add_argument("entity")
    p.add_argument("text")
    p.add_argument("--type", default="fact")
    p.add_argument("--salience", type=float)
    p.add_argument("--metadata", help="JSON object")
    p.add_argument("--ts", help="event time (ISO-8601 or epoch seconds)")
    p.add_argument("--ttl", type=float, help="seconds until it expires")
    p.add_argument("--pinned", action="store_true", help="never demoted to the cold tier")
    p.add_argument("--id", help="your own id (default: a new ULID)")

    def run(mem: Any, a: argparse.Namespace) -> Any:
        memory: dict[str, Any] = {"content": a.text, "type": a.type}
        for name in ("salience", "ts", "ttl", "id"):
            if getattr(a, name) is not None:
                memory[name] = getattr(a, name)
        if a.metadata:
            memory["metadata"] = json_arg(a.metadata, "metadata")
        if a.pinned:
            memory["pinned"] = True
        return mem.write(a.entity, memory)

    return run


def _write_many(p: argparse.ArgumentParser) -> Run:
    p.add_argument("file", help="JSON lines: one memory each, with its entity")
    return lambda mem, a: mem.write_many(lines_file(a.file, "file"))


def _update(p: argparse.ArgumentParser) -> Run:
    p.add_argument("id")
    p.add_argument("changes", help='JSON object, e.g. {"content": "...", "salience": 0.9}')
    p.add_argument("--if-version", type=int, help="only if this is the current version")
    return lambda mem, a: mem.update(a.id, json_arg(a.changes, "changes"), if_version=a.if_version)


def _get(p: argparse.ArgumentParser) -> Run:
    p.add_argument("target", help="a memory id, or an entity (with KEY)")
    p.add_argument("key", nargs="?")
    p.add_argument("--as-of", help="what was known then")
    return lambda mem, a: (
        mem.get(a.target, a.key, as_of=a.as_of) if a.key else mem.get(a.target, as_of=a.as_of)
    )


def _set(p: argparse.ArgumentParser) -> Run:
    p.add_argument("entity")
    p.add_argument("key")
    p.add_argument("value", help="JSON value")
    p.add_argument("--ttl", type=float, help="seconds until it expires")
    p.add_argument("--if-version", type=int, help="only if this is the current version")
    return lambda mem, a: mem.set(
        a.entity, a.key, json_arg(a.value, "value"), ttl=a.ttl, if_version=a.if_version
    )


def _delete(p: argparse.ArgumentParser) -> Run:
    p.add_argument("target", help="a memory id, or an entity (with KEY)")
    p.add_argument("key", nargs="?")
    p.add_argument("--if-version", type=int, help="only if this is the current version")
    return lambda mem, a: (
        mem.delete(a.target, a.key, if_version=a.if_version)
        if a.key
        else mem.delete(a.target, if_version=a.if_version)
    )


def _history(p: argparse.ArgumentParser) -> Run:
    p.add_argument("target", help="a memory id, or an entity (with KEY)")
    p.add_argument("key", nargs="?")
    p.add_argument("--as-of", help="as it was known then")
    return lambda mem, a: (
        mem.history(a.target, a.key, as_of=a.as_of)
        if a.key
        else mem.history(a.target, as_of=a.as_of)
    )


def _memories(p: argparse.ArgumentParser) -> Run:
    p.add_argument("entity", nargs="?", help="one entity's (default: the namespace's)")
    p.add_argument("--type", dest="types", action="append", help="only this type (repeatable)")
    p.add_argument("--as-of", help="what was known then")
    p.add_argument("--valid-at", help="only memories true then")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument(
        "--before", metavar="ID", help="the page after this memory (older): the last id of a page"
    )
    return lambda mem, a: mem.memories(
        a.entity, types=a.types, as_of=a.as_of, valid_at=a.valid_at, limit=a.limit, before=a.before
    )


def _facts(p: argparse.ArgumentParser) -> Run:
    p.add_argument("entity")
    p.add_argument("--as-of", help="what was known then")
    return lambda mem, a: mem.facts(a.entity, as_of=a.as_of)


def _append(p: argparse.ArgumentParser) -> Run:
    p.add_argument("entity")
    p.add_argument("text")
    p.add_argument("--stream", help="stream (default: the entity's own)")
    p.add_argument("--event-data", help="JSON object kept on the event")
    p.add_argument(
        "--not-searchable", action="store_true", help="only the stream event, no searchable memory"
    )

    def run(mem: Any, a: argparse.Namespace) -> Any:
        event: Any = a.text
        if a.event_data:
            event = {"content": a.text, "data": json_arg(a.event_data, "event_data")}
        return mem.append(a.entity, event, stream=a.stream, searchable=not a.not_searchable)

    return run


def _events(p: argparse.ArgumentParser) -> Run:
    p.add_argument("stream")
    p.add_argument("--after", help="only events after this id")
    p.add_argument("--since", help="only events at or after this time")
    p.add_argument("--until", help="only events before this time")
    p.add_argument("--as-of", help="what was known then")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--order", choices=("asc", "desc"), default="asc")
    return lambda mem, a: mem.events(
        a.stream,
        after=a.after,
        since=a.since,
        until=a.until,
        as_of=a.as_of,
        limit=a.limit,
        order=a.order,
    )


def _query(p: argparse.ArgumentParser) -> Run:
    p.add_argument("text")
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--entity")
    p.add_argument("--filter", help="JSON filter")
    p.add_argument("--mode", choices=("hybrid", "vector", "keyword"), default="hybrid")
    p.add_argument("--type", dest="types", action="append", help="only this type (repeatable)")
    p.add_argument("--as-of", help="what was known then (system time)")
    p.add_argument("--valid-at", help="only memories true then (valid time)")
    p.add_argument("--min-score", type=float)
    p.add_argument("--explain", action="store_true", help="each hit's scoring components")
    p.add_argument(
        "--include-ended",
        action="store_true",
        help="also memories no longer true (replaced by an update)",
    )
    return lambda mem, a: mem.query(
        a.text,
        k=a.k,
        entity=a.entity,
        filter=json_arg(a.filter, "filter"),
        mode=a.mode,
        types=a.types,
        as_of=a.as_of,
        valid_at=a.valid_at,
        min_score=a.min_score,
        explain=a.explain,
        include_ended=a.include_ended,
    )


def _answer(p: argparse.ArgumentParser) -> Run:
    p.add_argument("answer_id")
    p.add_argument("query_ids", nargs="+", help="query_id of each query the answer used")
    p.add_argument("--text", help="the answer's text")
    p.add_argument("--cite", action="append", default=[], help="a memory id it used (repeatable)")
    return lambda mem, a: mem.record_answer(a.answer_id, a.query_ids, text=a.text, cited=a.cite)


def _lineage(p: argparse.ArgumentParser) -> Run:
    p.add_argument("answer_id")
    return lambda mem, a: mem.lineage(a.answer_id)


def _audit(p: argparse.ArgumentParser) -> Run:
    p.add_argument("entity", nargs="?", help="only what concerns this entity")
    p.add_argument("--by", help="only what this agent did")
    p.add_argument("--since", help="from this time")
    p.add_argument("--until", help="before this time")
    p.add_argument("--limit", type=int, default=1000)
    return lambda mem, a: mem.audit(
        a.entity, agent=a.by, since=a.since, until=a.until, limit=a.limit
    )


def _snapshot(p: argparse.ArgumentParser) -> Run:
    p.add_argument("entity")
    p.add_argument("--as-of", help="the moment (default: now)")
    return lambda mem, a: mem.snapshot(a.entity, as_of=a.as_of)


def _forget(p: argparse.ArgumentParser) -> Run:
    p.add_argument("id", nargs="?", help="a memory id (or --entity)")
    p.add_argument("--entity", help="everything about this entity")
    p.add_argument(
        "--purge",
        action="store_true",
        help="erase instead of tombstoning (--entity only; admin over HTTP)",
    )
    return lambda mem, a: mem.forget(a.id, entity=a.entity, purge=a.purge)


def _maintain(p: argparse.ArgumentParser) -> Run:
    p.add_argument("--dry-run", action="store_true", help="report the moves, change nothing")
    return lambda mem, a: mem.maintain(dry_run=a.dry_run)


def _config(p: argparse.ArgumentParser) -> Run:
    p.add_argument("action", nargs="?", choices=("get", "set"), default="get")
    p.add_argument("settings", nargs="*", metavar="NAME=VALUE", help="with set: the changes")

    def run(mem: Any, a: argparse.Namespace) -> Any:
        if a.action == "get":
            if a.settings:
                raise ValidationError("setting: config get takes no NAME=VALUE", field="setting")
            return mem.config
        if not a.settings:
            raise ValidationError(
                "setting: config set needs at least one NAME=VALUE", field="setting"
            )
        return mem.configure(**assignments(a.settings))

    return run


def _entities(p: argparse.ArgumentParser) -> Run:
    p.add_argument("--as-of", help="what was known then")
    p.add_argument("--prefix", help="only names starting with this")
    p.add_argument(
        "--after", metavar="NAME", help="only names sorting after this: the last name of a page"
    )
    p.add_argument("--limit", type=int, help="at most this many, 1 to 10,000 (default: all)")
    return lambda mem, a: mem.entities(as_of=a.as_of, prefix=a.prefix, after=a.after, limit=a.limit)


def _streams(p: argparse.ArgumentParser) -> Run:
    p.add_argument("--as-of", help="what was known then")
    p.add_argument("--prefix", help="only names starting with this")
    p.add_argument(
        "--after", metavar="NAME", help="only names sorting after this: the last name of a page"
    )
    p.add_argument("--limit", type=int, help="at most this many, 1 to 10,000 (default: all)")
    return lambda mem, a: mem.streams(as_of=a.as_of, prefix=a.prefix, after=a.after, limit=a.limit)


def _remember(p: argparse.ArgumentParser) -> Run:
    p.add_argument("entity")
    p.add_argument("messages", nargs="+", help="turns as ROLE:TEXT (user:..., assistant:...)")
    p.add_argument("--session", help="session id (default: the entity's)")
    p.add_argument("--wait", action="store_true", help="extract now instead of queueing")

    def run(mem: Any, a: argparse.Namespace) -> Any:
        turns = []
        for i, turn in enumerate(a.messages):
            role, colon, text = turn.partition(":")
            if not colon or role not in ("user", "assistant", "system"):
                raise ValidationError(
                    f"messages[{i}]: expected ROLE:TEXT (user, assistant or system), got {turn!r}",
                    field=f"messages[{i}]",
                )
            turns.append({"role": role, "content": text.strip()})
        return mem.remember(turns, entity=a.entity, session=a.session, wait=a.wait)

    return run


def _recall(p: argparse.ArgumentParser) -> Run:
    p.add_argument("text")
    p.add_argument("--entity")
    p.add_argument("--budget-tokens", type=int)
    p.add_argument("-k", type=int)
    p.add_argument("--threshold", type=float)
    return lambda mem, a: mem.recall(
        a.text, entity=a.entity, budget_tokens=a.budget_tokens, k=a.k, threshold=a.threshold
    )


# name: (help, example, arguments -> run)
COMMANDS: dict[str, tuple[str, str, Callable[[argparse.ArgumentParser], Run]]] = {
    "write": (
        "write a memory",
        "synapsedb write user:4321 'Refund requested for order 1458' "
        '--salience 0.9 --metadata \'{"channel": "email"}\'',
        _write,
    ),
    "write-many": (
        "write memories from a JSON lines file, all or none",
        'synapsedb write-many memories.jsonl   # {"entity": "u:1", "content": "..."} per line',
        _write_many,
    ),
    "update": (
        "a new version of a memory",
        'synapsedb update 01J... \'{"content": "Refund approved"}\' --if-version 1',
        _update,
    ),
    "get": (
        "a memory by id, or a fact: ENTITY KEY",
        "synapsedb get user:4321 order --as-of 2025-11-01",
        _get,
    ),
    "set": (
        "set a KV fact: ENTITY KEY JSON-VALUE",
        "synapsedb set user:4321 order '{\"id\": 1458}' --ttl 86400",
        _set,
    ),
    "delete": (
        "delete (tombstone) a memory by id, or a fact: ENTITY KEY",
        "synapsedb delete user:4321 order",
        _delete,
    ),
    "history": (
        "every version of a memory, or of a fact: ENTITY KEY",
        "synapsedb history user:4321 order",
        _history,
    ),
    "memories": (
        "list memories, newest event time first",
        "synapsedb memories user:4321 --type preference --limit 20",
        _memories,
    ),
    "facts": ("an entity's KV facts", "synapsedb facts user:4321", _facts),
    "append": (
        "append to a stream (and a searchable memory)",
        "synapsedb append user:4321 'Refund delivered' --stream orders",
        _append,
    ),
    "events": ("read a stream", "synapsedb events user:4321 --order desc --limit 5", _events),
    "query": (
        "query by meaning and keywords",
        "synapsedb query 'user:4321 refund status' -k 5 --filter '{\"channel\": \"email\"}'",
        _query,
    ),
    "answer": (
        "record an answer and the queries it used",
        "synapsedb answer ans-1 QUERY_ID --text 'Refund delivered' --cite 01J...",
        _answer,
    ),
    "lineage": ("what an answer was built on", "synapsedb lineage ans-1", _lineage),
    "audit": (
        "who wrote and read what, when",
        "synapsedb audit user:4321 --by intake --since 2025-10-01",
        _audit,
    ),
    "snapshot": (
        "everything known about an entity at a moment",
        "synapsedb snapshot user:4321 --as-of 2025-11-01",
        _snapshot,
    ),
    "forget": (
        "forget a memory, or an entity (--purge: erase it)",
        "synapsedb forget --entity user:4321 --purge",
        _forget,
    ),
    "maintain": ("run maintenance now (tiers, TTLs)", "synapsedb maintain --dry-run", _maintain),
    "config": (
        "the namespace's lifecycle settings: get, or set NAME=VALUE",
        "synapsedb config set max_hot=10000 policy=reject",
        _config,
    ),
    "entities": (
        "entities with something visible, sorted (a page: --limit, --after, --prefix)",
        "synapsedb entities --prefix user: --limit 500",
        _entities,
    ),
    "streams": (
        "the namespace's streams, sorted (a page: --limit, --after, --prefix)",
        "synapsedb streams --prefix chat: --limit 500",
        _streams,
    ),
    "remember": (
        "store conversation turns and extract memories (the memory loop)",
        "synapsedb remember user:1 'user:I moved to Berlin' 'assistant:Noted!' --wait",
        _remember,
    ),
    "recall": (
        "the memories a turn needs, as a context block",
        "synapsedb recall 'where do I live?' --entity user:1",
        _recall,
    ),
}


def _command(run: Run) -> Callable[[argparse.Namespace], int]:
    def main(args: argparse.Namespace) -> int:
        with open_target(args) as db:
            value = run(db.namespace(args.namespace, agent=args.agent), args)
            show(value, as_json=args.json, vectors=bool(args.include))
        return 0

    return main


def _namespaces(args: argparse.Namespace) -> int:
    with open_target(args) as db:
        show(db.namespaces(), as_json=args.json)
    return 0


def _transfer(which: str) -> Callable[[argparse.Namespace], int]:
    def main(args: argparse.Namespace) -> int:
        from .cli_transfer import export_namespace, import_namespace

        with open_target(args) as db:
            mem = db.namespace(args.namespace, agent=args.agent)
            return export_namespace(mem, args) if which == "export" else import_namespace(mem, args)

    return main


def _follow(which: str) -> Callable[[argparse.Namespace], int]:
    def main(args: argparse.Namespace) -> int:
        if args.data:
            raise ValidationError(
                f"{which}: live feeds are served by a server; use --url", field="data"
            )
        with open_target(args) as db:
            mem = db.namespace(args.namespace, agent=args.agent)
            common = {"after": args.after, "idle_timeout": args.idle_timeout}
            feed = (
                mem.follow(args.stream, **common)
                if which == "follow"
                else mem.changes(entity=args.entity, since=args.since, **common)
            )
            with feed, contextlib.suppress(KeyboardInterrupt):
                for item in feed:  # --json: one object per line, printed as it comes
                    print_json_line(item) if args.json else show(item, as_json=False)
        return 0

    return main


def add_parsers(sub: Any, formatter: type[argparse.HelpFormatter]) -> argparse.ArgumentParser:
    """Register the data commands; returns the ``remote`` parent (for chat and mcp)."""
    remote = remote_parent()
    data = data_parent(remote)

    def parser(name: str, help: str, example: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            parents=[data],
            help=help,
            description=help[0].upper() + help[1:] + ".",
            epilog=f"example:\n  {example}",
            formatter_class=formatter,
        )

    for name, (help, example, arguments) in COMMANDS.items():
        p = parser(name, help, example)
        p.set_defaults(func=_command(arguments(p)))
    p = parser("namespaces", "the namespaces' names", "synapsedb namespaces --data ./synapse-data")
    p.set_defaults(func=_namespaces)
    p = parser(
        "export",
        "a namespace as JSON lines (lossless; progress on a terminal)",
        "synapsedb export -n acme --out acme.jsonl",
    )
    p.add_argument("--out", help="file (default: standard output)")
    p.set_defaults(func=_transfer("export"))
    p = parser(
        "import",
        "JSON lines from export, into an empty namespace (one transaction)",
        "synapsedb import acme.jsonl -n acme-copy",
    )
    p.add_argument("file")
    p.set_defaults(func=_transfer("import"))
    p = parser(
        "follow",
        "follow a stream live (a server's feed; resumes after a cut)",
        "synapsedb follow user:4321 --idle-timeout 60",
    )
    p.add_argument("stream")
    p.add_argument("--after", help="resume after this event id")
    p.add_argument("--idle-timeout", type=float, help="end after this many quiet seconds")
    p.set_defaults(func=_follow("follow"))
    p = parser(
        "changes",
        "follow every change committed in the namespace (a server's feed)",
        "synapsedb changes --entity user:4321 --since 2025-11-01 --json",
    )
    p.add_argument("--entity", help="only this entity's changes")
    p.add_argument("--since", help="from this time (history first), not now")
    p.add_argument("--after", help="resume after this change id")
    p.add_argument("--idle-timeout", type=float, help="end after this many quiet seconds")
    p.set_defaults(func=_follow("changes"))
    return remote
