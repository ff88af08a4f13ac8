"""Where a tool call's namespace comes from.

A :class:`Backend` turns (the transport's request, the namespace a call names, the scope it
needs) into a :class:`Bound` namespace handle. Over stdio it is one database the process
opened, embedded or remote (:class:`LocalBackend`); on ``synapsedb serve`` the API key of the
HTTP request carrying the call decides the tenant and the scopes
(``synapsedb.integrations.mcp.http.ServedBackend``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ...errors import SynapseError

__all__ = ["Backend", "Bound", "LocalBackend"]


@dataclass
class Bound:
    """A namespace handle for one call, and the names to show in its errors."""

    ns: Any
    public: str
    internal: str

    def publish(self, err: SynapseError) -> SynapseError:
        """``err`` as the caller may see it (a served backend hides the tenant prefix)."""
        return err


class Backend(Protocol):
    default_namespace: str

    def bind(self, request: Any, namespace: str | None, scope: str) -> Bound:
        """The namespace a call reaches (``namespace`` None: the default one); raises the
        SynapseError the REST route would (401, 403, 422)."""
        ...  # pragma: no cover


class LocalBackend:
    """One database opened by this process: ``synapsedb.open(path)`` (the data directory's
    owner: no scopes to check) or ``synapsedb.connect(url, api_key=...)`` (the server checks
    the key on every request)."""

    def __init__(self, db: Any, namespace: str = "default", *, agent: str | None = None) -> None:
        self.db = db
        self.default_namespace = namespace
        self.agent = agent
        db.namespace(namespace, agent=agent)  # a bad name or agent fails here, at start

    def bind(self, request: Any, namespace: str | None, scope: str) -> Bound:
        name = self.default_namespace if namespace is None else namespace
        return Bound(self.db.namespace(name, agent=self.agent), name, name)
