"""One operation of the HTTP API, declared once: :class:`Operation` and its :class:`Field` s.

A row says what the route is (method, path, the scope a key needs), what travels (each field:
where, of which kind, required or not, which argument of the :class:`~.namespace.NamespaceAPI`
method it carries) and what comes back (the answer's type and status). From the rows come the
OpenAPI document, the server's route list and its plain handlers, and the clients' requests
(docs/architecture.md). A row whose server side the table cannot express (a live feed, the
memory proxy, a session load with a strategy, an import) names a hand-written handler
(``handler="own"``); it still gives the document and the clients what they need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .kinds import STR, Kind

__all__ = ["Field", "Operation", "Where"]

# path: a segment of the path; query: the query string; body: a field of the JSON body;
# spread: an argument whose items are body fields (``write``'s memory); agent: the agent the
# request acts as (the X-Agent header, or an ``agent`` body field where the body has no spread)
Where = Literal["path", "query", "body", "spread", "agent"]


@dataclass(frozen=True, slots=True)
class Field:
    """One field of an operation. ``arg`` is the argument of the API method it carries
    (default: ``name``), passed positionally when ``positional``. A None argument is left out
    of the request, unless ``null`` (then it travels as JSON null). ``payload``: a value that
    may name its own agents (memories, events), held to the agents the key may act as."""

    name: str
    kind: Kind = STR
    at: Where = "body"
    required: bool = False
    doc: str = ""
    arg: str | None = None
    positional: bool = False
    null: bool = False
    payload: bool = False
    # spread fields: the body fields an argument becomes (client), the argument its body
    # fields make (server), their schemas (the document), and whether it takes every body
    # field no other field names (``rest``: write's memory, configure's changes), leaving the
    # engine to refuse unknown ones, or only those of ``properties``
    rest: bool = False
    encode: Callable[[Any, str], dict[str, Any]] | None = None
    decode: Callable[[dict[str, Any]], Any] | None = None
    properties: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def argument(self) -> str:
        return self.name if self.arg is None else self.arg


@dataclass(frozen=True, slots=True)
class Operation:
    """One route and what it does.

    ``name`` is the API method it serves (``query``, ``sessions.load``; also the document's
    operationId). ``path`` is under ``/v1/namespaces/{ns}`` unless ``namespaced`` is False.
    ``scope``: what the key needs (None: no key checked); ``escalate``: a stronger scope some
    arguments need (an erasure needs ``admin``; a load that stores a summary, ``write``). ``answer`` is the type the answer
    decodes to (or ``"ndjson"``, ``"event-stream"``, ``"text"``; a tuple of types: one of them,
    as the arguments decide, which the client then names); ``memories``: it holds
    memories, whose vectors it leaves out unless ``include=embedding``.

    Server side: ``handler="plain"`` parses the fields and calls the method on the request's
    namespace (bound to the acting agent), in a worker thread unless ``inline`` (a pure
    in-memory read, or a predicate of the arguments); ``call`` replaces that call when the
    answer is not the method's own, or two methods share the route. Client side: ``reply``
    shapes the decoded answer into the method's return value."""

    name: str
    method: str
    path: str
    scope: str | None
    summary: str
    answer: Any
    fields: tuple[Field, ...] = ()
    status: int = 200
    memories: bool = False
    namespaced: bool = True
    handler: Literal["plain", "own"] = "plain"
    inline: bool | Callable[[dict[str, Any]], bool] = False
    escalate: Callable[[dict[str, Any]], str | None] | None = None
    call: Callable[[Any, dict[str, Any]], Any] | None = None
    reply: Callable[[Any], Any] | None = None
    body: Literal["json", "ndjson", "none"] = "json"

    @property
    def route(self) -> str:
        """The path the server routes (``/v1/namespaces/{ns}/query``)."""
        return f"/v1/namespaces/{{ns}}{self.path}" if self.namespaced else self.path

    @property
    def operation_id(self) -> str:
        return self.name.replace(".", "_")

    def where(self, *places: Where) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.at in places)

    @property
    def agent_in_body(self) -> bool:
        """Whether an ``agent`` body field names the acting agent (not where a spread
        argument's own fields fill the body: ``write``'s memory has its own ``agent``)."""
        return bool(self.where("agent")) and not any(
            f.rest or "agent" in f.properties for f in self.where("spread")
        )
