"""What every namespace request goes through before and after its handler, on every path that
answers one: the routes (``app._ns_route``), the fast lane in front of the framework and the
connection that answers it itself (``fastlane``, ``limits``). One function each, so a change to
auth, rates or the error shape is made once.

- :func:`enter`: the key authorized for the scope (401, 403, and the key's and tenant's rates:
  429) and the engine namespace the tenant's name means;
- :func:`failed`: the one error a failure answers with: a SynapseError naming the namespace as
  the tenant does, or for a bug an internal error, its traceback logged.

The request guard (Host, cursors: ``middleware.RequestGuard``) runs before them, and the
latency metrics and access log (``middleware.observed``) after, on every path too.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import SynapseError
from .auth import authorize_header, engine_namespace, name_publicly
from .keys import ApiKey

__all__ = ["enter", "failed"]

log = logging.getLogger("synapsedb.server")


def enter(state: Any, authorization: str, scope: str, name: str) -> tuple[ApiKey | None, str]:
    """The request's key (None without keys) authorized for ``scope`` by its
    ``Authorization`` header, and the engine namespace ``name`` means for it."""
    key = authorize_header(state, authorization, scope)
    return key, engine_namespace(key, name)


def failed(exc: Exception, internal: str | None, public: str | None, what: str) -> SynapseError:
    """The error to answer a failed request with (``what``: its method and path, for the log).
    Called in the ``except`` block, so a bug's traceback is logged: bad input is a
    SynapseError where it is parsed, so anything else is a bug, still answered with the one
    JSON error body."""
    if isinstance(exc, SynapseError):
        if internal is not None and public is not None:
            name_publicly(exc, internal, public)
        return exc
    log.exception("unexpected error in %s", what)
    return SynapseError("internal error (logged on the server)")
