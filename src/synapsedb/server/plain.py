"""The plain handler of an operation, made from its row of the operations table.

It parses what the row says travels (path segments, query parameters by their kind, the JSON
body's fields, refusing unknown ones), holds the request to the row's rules (the acting agent
and the agents payloads name, an admin scope for erasures), calls the API method on the
request's namespace (bound to the acting agent) and encodes the answer in the one JSON shape.
No route repeats a field list, a default or a check: the engine judges the values, as it
does for an embedded call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..engine import Namespace
from ..errors import ValidationError
from ..surface import Operation
from .auth import check_agents, public_view, require_scope
from .wire import agent_of, include_param, json_response, memory_response, read_body

__all__ = ["Handler", "Parser", "plain_handler"]

Handler = Callable[[Request, Namespace], Awaitable[Response]]


def method_of(target: Any, name: str) -> Any:
    """``ns.query``, or for a dotted name a sub-surface's (``sessions.load``)."""
    for part in name.split("."):
        target = getattr(target, part)
    return target


def default_call(op: Operation) -> Callable[[Any, dict[str, Any]], Any]:
    """Call the row's API method: positional fields in order, the others by name."""
    positional = tuple(f.argument for f in op.fields if f.positional)

    def call(ns: Any, args: dict[str, Any]) -> Any:
        first = [args.pop(name) for name in positional if name in args]
        return method_of(ns, op.name)(*first, **args)

    return call


class Parser:
    """What a request of ``op`` carries, read as its row says: the arguments of the API
    method, by name, and the namespace bound to the acting agent."""

    def __init__(self, op: Operation) -> None:
        self.op = op
        self.paths, self.queries = op.where("path"), op.where("query")
        self.fields, self.spreads = op.where("body"), op.where("spread")
        self.reads_body = bool(self.fields or self.spreads)
        self.known = {f.name for f in self.queries} | ({"include"} if op.memories else set())
        self.claimed = {f.name for f in self.fields}
        self.claimed |= {n for f in self.spreads if not f.rest for n in f.properties}
        if op.agent_in_body:
            self.claimed.add("agent")
        self.open_body = any(f.rest for f in self.spreads)
        self.payloads = tuple(f.argument for f in op.fields if f.payload)
        self.acting = bool(op.where("agent"))

    async def parse(self, request: Request, ns: Namespace) -> tuple[dict[str, Any], Namespace]:
        op = self.op
        args: dict[str, Any] = {f.argument: request.path_params[f.name] for f in self.paths}
        for name in request.query_params:
            if name not in self.known:
                raise ValidationError(
                    f"{name}: unknown parameter; allowed: "
                    f"{', '.join(sorted(self.known)) or 'none'}",
                    field=name,
                )
        for f in self.queries:
            raw = request.query_params.getlist(f.name)
            if raw:
                args[f.argument] = f.kind.from_query(raw, f.name)
            elif f.required:
                raise ValidationError(f"{f.name}: required query parameter", field=f.name)
        body: dict[str, Any] | None = None
        if self.reads_body:
            body = await read_body(request)
            if not self.open_body:
                for name in body:
                    if name not in self.claimed:
                        raise ValidationError(
                            f"{name}: unknown field; allowed: {', '.join(sorted(self.claimed))}",
                            field=name,
                        )
            for f in self.fields:
                if f.name in body:
                    args[f.argument] = body[f.name]
                elif f.required:
                    raise ValidationError(f"{f.name}: required", field=f.name)
            for f in self.spreads:
                part = {
                    k: v
                    for k, v in body.items()
                    if k in f.properties or (f.rest and k not in self.claimed)
                }
                args[f.argument] = f.decode(part)  # type: ignore[misc]
        if self.acting:
            agent = agent_of(request, body if op.agent_in_body else None)
            for name in self.payloads:
                value = args.get(name)
                check_agents(request, *(value if isinstance(value, list) else [value]))
            if agent is not None:
                ns = request.app.state.db.namespace(ns.name, agent=agent)
        if op.escalate is not None and (scope := op.escalate(args)) is not None:
            require_scope(request, scope)
        return args, ns


def plain_handler(op: Operation) -> Handler:
    """The route handler of ``op`` (``handler="plain"``)."""
    parser = Parser(op)
    call = op.call or default_call(op)

    async def handler(request: Request, ns: Namespace) -> Response:
        include = include_param(request) if op.memories else frozenset()
        args, ns = await parser.parse(request, ns)
        inline = op.inline(args) if callable(op.inline) else op.inline
        out = call(ns, args) if inline else await run_in_threadpool(call, ns, args)
        out = public_view(request, out)
        if op.memories:
            return memory_response(out, include, op.status)
        return json_response(out, op.status)

    return handler
