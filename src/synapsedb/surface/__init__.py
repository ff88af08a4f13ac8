"""What a namespace is, local or remote, and how each of its operations travels over HTTP.

- :class:`NamespaceAPI`, :class:`SessionsAPI`, :class:`CacheAPI`: the protocols that the
  engine's ``Namespace`` and the client's ``RemoteNamespace`` both derive from (signatures and
  docstrings written once); :class:`AsyncNamespaceAPI` & co. are their async twins, generated
  (``tools/gen_surface.py``) and derived from by the async client.
- :data:`OPERATIONS`: one row per route (method, path, scope, fields, answer), from which the
  OpenAPI document, the server's routes and plain handlers, and the clients' requests are made.

A leaf: it imports only the value types, errors and times (docs/architecture.md).
"""

from .aio import AsyncCacheAPI, AsyncNamespaceAPI, AsyncSessionsAPI
from .cache import CacheAPI
from .namespace import NamespaceAPI
from .operation import Field, Operation
from .operations import BY_NAME, OPERATIONS
from .sessions import MAX_APPEND, SessionsAPI

__all__ = [
    "BY_NAME",
    "MAX_APPEND",
    "OPERATIONS",
    "AsyncCacheAPI",
    "AsyncNamespaceAPI",
    "AsyncSessionsAPI",
    "CacheAPI",
    "Field",
    "NamespaceAPI",
    "Operation",
    "SessionsAPI",
]
