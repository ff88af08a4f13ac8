/**
 * The SynapseDB error tree, with the wire `code` and HTTP status of each class exactly as the
 * Python package's `synapsedb.errors` has them, so `err instanceof NotFoundError` here means
 * what `except NotFoundError` means there. A server error body
 * `{"error": {"code", "message", "details"}}` is rebuilt into the class of its code
 * ({@link errorFromBody}); `details.field` and `details.limit` name the offending field and
 * the limit it went over.
 *
 * ```
 * SynapseError                     internal                500
 * ├── ValidationError              validation              422  bad input; nothing written
 * ├── NotFoundError                not_found               404
 * ├── VersionConflictError         version_conflict        409  compare-and-set lost
 * ├── QuotaExceededError           quota_exceeded          429  namespace or tenant limit
 * ├── StorageError                 storage                 503  the store failed, or the server is unreachable
 * ├── UnauthorizedError            unauthorized            401  no valid API key
 * ├── ForbiddenError               forbidden               403  the key lacks the scope
 * ├── MethodNotAllowedError        method_not_allowed      405
 * ├── RequestTimeoutError          request_timeout         408
 * ├── PayloadTooLargeError         payload_too_large       413
 * ├── UnsupportedMediaTypeError    unsupported_media_type  415
 * ├── HostNotAllowedError          host_not_allowed        421
 * ├── EmbeddingError               embedding               502
 * │   └── ModelMissingError        model_missing           503  the local model is not installed
 * ├── UpstreamError                upstream                502  the chat model failed
 * ├── ClosedError                  closed                  503  the client (or database) was closed
 * ├── NotOwnerError                not_owner               503  another process serves the namespace
 * └── MemoryAPIError               memory_api              500  the agent memory layer
 *     ├── MemoryStoreError         memory_store            503
 *     ├── MemoryRetrievalError     memory_retrieval        503
 *     ├── MemoryMaintenanceError   memory_maintenance      503
 *     └── MemoryConfigError        memory_config           422  also `instanceof ValidationError`
 * ```
 *
 * The agent memory layer's classes are also exported under the original Agent Memory API's names
 * (`MemoryAPIException`, `MemoryStoreException`, ...): the same classes.
 */

export type ErrorDetails = { [key: string]: unknown };

export class SynapseError extends Error {
  static readonly code: string = "internal";
  static readonly httpStatus: number = 500;
  /** The wire code of this class (`not_found` ...). */
  readonly code: string;
  /** The HTTP status the server answers this error with. */
  readonly httpStatus: number;
  /** Structured details as the server sent them (`field`, `limit`, `expected` ...). */
  readonly details: ErrorDetails;

  constructor(message: string, details: ErrorDetails = {}) {
    super(message);
    const cls = new.target as unknown as { code: string; httpStatus: number; name: string };
    this.name = cls.name;
    this.code = cls.code;
    this.httpStatus = cls.httpStatus;
    this.details = Object.fromEntries(Object.entries(details).filter(([, v]) => v !== null && v !== undefined));
  }

  /** The field the error is about (a dotted path such as `metadata.tags`), if any. */
  get field(): string | undefined {
    const f = this.details.field;
    return typeof f === "string" ? f : undefined;
  }

  /** The limit that was exceeded, if any. */
  get limit(): unknown {
    return this.details.limit;
  }

  /** The wire shape: `{code, message, details}`. */
  toJSON(): { code: string; message: string; details: ErrorDetails } {
    return { code: this.code, message: this.message, details: { ...this.details } };
  }
}

/** Bad input: a field is missing, malformed or over its limit. Nothing was written. */
export class ValidationError extends SynapseError {
  static override readonly code: string = "validation";
  static override readonly httpStatus: number = 422;

  static override [Symbol.hasInstance](value: unknown): boolean {
    // MemoryConfigError is a ValidationError too, as in Python (which has multiple
    // inheritance); the check stays exact for every subclass of ValidationError itself
    return (
      Function.prototype[Symbol.hasInstance].call(this, value) ||
      (this === ValidationError && value instanceof MemoryConfigError)
    );
  }
}

/** The memory, fact, stream, answer or namespace does not exist (at the requested moment). */
export class NotFoundError extends SynapseError {
  static override readonly code: string = "not_found";
  static override readonly httpStatus: number = 404;
}

/** A compare-and-set failed: the current version is not the expected one. */
export class VersionConflictError extends SynapseError {
  static override readonly code: string = "version_conflict";
  static override readonly httpStatus: number = 409;

  get expected(): number | undefined {
    return typeof this.details.expected === "number" ? this.details.expected : undefined;
  }

  get actual(): number | undefined {
    return typeof this.details.actual === "number" ? this.details.actual : undefined;
  }
}

/** A namespace, key or tenant limit would be exceeded (`details.retry_after` for rates). */
export class QuotaExceededError extends SynapseError {
  static override readonly code: string = "quota_exceeded";
  static override readonly httpStatus: number = 429;

  /** Seconds until a retry may succeed (rate limits), if the server said. */
  get retryAfter(): number | undefined {
    return typeof this.details.retry_after === "number" ? this.details.retry_after : undefined;
  }
}

/** The durable store failed, or (client side) the server could not be reached in time. */
export class StorageError extends SynapseError {
  static override readonly code: string = "storage";
  static override readonly httpStatus: number = 503;
}

/** The server requires an API key and the request carried none that is valid. */
export class UnauthorizedError extends SynapseError {
  static override readonly code: string = "unauthorized";
  static override readonly httpStatus: number = 401;
}

/** The API key is valid but lacks the scope, namespace or agent the request needs. */
export class ForbiddenError extends SynapseError {
  static override readonly code: string = "forbidden";
  static override readonly httpStatus: number = 403;
}

/** The route exists but not with this method (`details.allowed`). */
export class MethodNotAllowedError extends SynapseError {
  static override readonly code: string = "method_not_allowed";
  static override readonly httpStatus: number = 405;
}

/** The request body did not arrive within the server's deadline. */
export class RequestTimeoutError extends SynapseError {
  static override readonly code: string = "request_timeout";
  static override readonly httpStatus: number = 408;
}

/** A request body over the server's limit. */
export class PayloadTooLargeError extends SynapseError {
  static override readonly code: string = "payload_too_large";
  static override readonly httpStatus: number = 413;
}

/** A request body whose Content-Type is not the one the route reads. */
export class UnsupportedMediaTypeError extends SynapseError {
  static override readonly code: string = "unsupported_media_type";
  static override readonly httpStatus: number = 415;
}

/** The request's Host names a host the server does not serve. */
export class HostNotAllowedError extends SynapseError {
  static override readonly code: string = "host_not_allowed";
  static override readonly httpStatus: number = 421;
}

/** The embedding service failed or answered something unusable. */
export class EmbeddingError extends SynapseError {
  static override readonly code: string = "embedding";
  static override readonly httpStatus: number = 502;
}

/** The server's local embedding model is not installed (`synapsedb models install`). */
export class ModelMissingError extends EmbeddingError {
  static override readonly code: string = "model_missing";
  static override readonly httpStatus: number = 503;
}

/** The chat model (an OpenAI-compatible endpoint) failed, or none is configured. */
export class UpstreamError extends SynapseError {
  static override readonly code: string = "upstream";
  static override readonly httpStatus: number = 502;

  get status(): number | undefined {
    return typeof this.details.status === "number" ? this.details.status : undefined;
  }

  get attempts(): number | undefined {
    return typeof this.details.attempts === "number" ? this.details.attempts : undefined;
  }

  get breakerOpen(): boolean {
    return Boolean(this.details.breaker_open);
  }
}

/** The client (or the server's database) was closed. */
export class ClosedError extends SynapseError {
  static override readonly code: string = "closed";
  static override readonly httpStatus: number = 503;
}

/** Another process owns the namespace, or none does while it moves (sharded placement on
 * PostgreSQL): nothing was written; retry after `details.retry_after` seconds, or send it to
 * `details.owner`. */
export class NotOwnerError extends SynapseError {
  static override readonly code: string = "not_owner";
  static override readonly httpStatus: number = 503;
}

/** The agent memory layer failed (`details.cause`: the underlying error's code). */
export class MemoryAPIError extends SynapseError {
  static override readonly code: string = "memory_api";
  static override readonly httpStatus: number = 500;
}

export class MemoryStoreError extends MemoryAPIError {
  static override readonly code: string = "memory_store";
  static override readonly httpStatus: number = 503;
}

export class MemoryRetrievalError extends MemoryAPIError {
  static override readonly code: string = "memory_retrieval";
  static override readonly httpStatus: number = 503;
}

export class MemoryMaintenanceError extends MemoryAPIError {
  static override readonly code: string = "memory_maintenance";
  static override readonly httpStatus: number = 503;
}

/** A bad agent memory configuration; also `instanceof ValidationError`. */
export class MemoryConfigError extends MemoryAPIError {
  static override readonly code: string = "memory_config";
  static override readonly httpStatus: number = 422;
}

// the original Agent Memory API's names for the agent memory layer's errors: the same classes
export {
  MemoryAPIError as MemoryAPIException,
  MemoryStoreError as MemoryStoreException,
  MemoryRetrievalError as MemoryRetrievalException,
  MemoryMaintenanceError as MemoryMaintenanceException,
  MemoryConfigError as MemoryConfigException,
};

type ErrorClass = (new (message: string, details?: ErrorDetails) => SynapseError) & {
  readonly code: string;
  readonly httpStatus: number;
};

/** Every class of the tree, by wire code. */
export const ERROR_CLASSES: ReadonlyMap<string, ErrorClass> = new Map(
  (
    [
      SynapseError,
      ValidationError,
      NotFoundError,
      VersionConflictError,
      QuotaExceededError,
      StorageError,
      UnauthorizedError,
      ForbiddenError,
      MethodNotAllowedError,
      RequestTimeoutError,
      PayloadTooLargeError,
      UnsupportedMediaTypeError,
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
    ] as ErrorClass[]
  ).map((cls) => [cls.code, cls]),
);

/** The error of `code` (an unknown code: a SynapseError, the code kept in `details.code`). */
export function errorFromCode(code: string, message: string, details: ErrorDetails = {}): SynapseError {
  const cls = ERROR_CLASSES.get(code);
  if (cls) return new cls(message, details);
  return new SynapseError(message, { ...details, code });
}

/** The error an HTTP error answer stands for: its JSON body's class, else a SynapseError
 * quoting the status and the start of the body. */
export function errorFromBody(status: number, text: string): SynapseError {
  try {
    const body: unknown = JSON.parse(text);
    if (body && typeof body === "object" && "error" in body) {
      const err = (body as { error: unknown }).error;
      if (err && typeof err === "object") {
        const { code, message, details } = err as { code?: unknown; message?: unknown; details?: unknown };
        if (typeof code === "string" && typeof message === "string") {
          const d = details && typeof details === "object" && !Array.isArray(details) ? (details as ErrorDetails) : {};
          return errorFromCode(code, message, d);
        }
      }
    }
  } catch {
    // not JSON: described below
  }
  return new SynapseError(`HTTP ${status}: ${text.slice(0, 200)}`, { status });
}
