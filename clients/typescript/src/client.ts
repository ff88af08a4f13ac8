/**
 * The HTTP client: `connect(url, {apiKey})` gives a {@link SynapseClient} whose namespaces
 * have the Python client's methods (`synapsedb.connect(url).namespace(name)`), answering the
 * server's value objects as `src/types.gen.ts` types them and raising the classes of
 * `./errors.ts`, rebuilt from the server's codes.
 *
 * Every request goes through {@link SynapseClient.call}, typed by `Operations` (generated
 * from the server's OpenAPI document): a route, a query parameter or a body field that the
 * server does not have is a compile error here.
 */

import { ClosedError, errorFromBody, StorageError, SynapseError, ValidationError } from "./errors.js";
import { Namespace } from "./namespace.js";
import { ANSWER_FORMATS, type OperationKey, type Operations, type WhoAmI } from "./types.gen.js";
import { checkAgent, checkNamespace, pathSegment, queryString, type TimeLike, wireValue } from "./wire.js";

export interface ConnectOptions {
  /** An API key (`sdb_<id>_<secret>`), sent as `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Seconds a request may take, answer included (default 30; a feed: until it answers). */
  timeout?: number;
  /** Headers added to every request. */
  headers?: Record<string, string>;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** What answers add to their lean default: `["embedding"]` gives every memory its vector
   * (left out otherwise: 384 numbers are about 8 KB of JSON per memory). */
  include?: readonly "embedding"[];
}

/** What `include` may name. */
const INCLUDE: ReadonlySet<string> = new Set(["embedding"]);

/** The time parameters of the routes (a Date or epoch seconds is accepted for them). */
const TIME_FIELDS: ReadonlySet<string> = new Set(["as_of", "since", "until", "valid_at"]);
type TimeField = "as_of" | "since" | "until" | "valid_at";

type Query<K extends OperationKey> = Operations[K]["query"];
/** A route's query parameters, times as any {@link TimeLike}. */
export type QueryArgs<K extends OperationKey> = {
  [P in keyof Query<K>]: P extends TimeField ? TimeLike | Exclude<Query<K>[P], string | string[]> : Query<K>[P];
};
/** A route's JSON body: only the fields it reads. */
export type BodyArgs<K extends OperationKey> = { [F in Operations[K]["body"]]?: unknown };

export interface CallArgs<K extends OperationKey> {
  path: Operations[K]["path"];
  query?: QueryArgs<K>;
  body?: BodyArgs<K>;
  /** A JSON lines body (routes that read `application/x-ndjson`). */
  lines?: string;
  /** The acting agent (`X-Agent`). */
  agent?: string | undefined;
  signal?: AbortSignal;
}

export class SynapseClient {
  readonly url: string;
  /** `include` as the memory routes' query parameter takes it (undefined: lean answers). */
  readonly include: string | undefined;
  private readonly fetchImpl: typeof fetch;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly closing = new AbortController();

  constructor(url: string, options: ConnectOptions = {}) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ValidationError(`url: ${JSON.stringify(url)} is not a URL`, { field: "url" });
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new ValidationError(`url: expected http or https, got ${parsed.protocol}`, { field: "url" });
    }
    const timeout = options.timeout ?? 30;
    if (!(typeof timeout === "number" && timeout > 0 && Number.isFinite(timeout))) {
      throw new ValidationError(`timeout: expected seconds > 0, got ${timeout}`, { field: "timeout" });
    }
    for (const name of options.include ?? []) {
      if (!INCLUDE.has(name)) {
        throw new ValidationError(`include: expected one of embedding, got ${JSON.stringify(name)}`, { field: "include" });
      }
    }
    this.include = options.include?.length ? [...new Set(options.include)].sort().join(",") : undefined;
    this.url = url.replace(/\/+$/, "");
    this.timeoutMs = timeout * 1000;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.headers = { ...options.headers };
    if (options.apiKey) this.headers.Authorization = `Bearer ${options.apiKey}`;
  }

  /** A namespace; `agent` acts in each call that names none. */
  namespace(name: string, options: { agent?: string } = {}): Namespace {
    return new Namespace(this, checkNamespace(name), checkAgent(options.agent));
  }

  /** The namespaces' names (the key's tenant's, in keys mode). */
  async namespaces(): Promise<string[]> {
    return this.call("GET /v1/namespaces", { path: {} });
  }

  /** What the client's key may do: auth mode, key id, tenant, scopes, namespaces and agents
   * (null: any). Never the secret; the server still checks every request. */
  async whoami(): Promise<WhoAmI> {
    return this.call("GET /v1/whoami", { path: {} });
  }

  /** Closes the client: open feeds end, later calls raise ClosedError. */
  close(): void {
    this.closing.abort(new ClosedError("the client is closed"));
  }

  get closed(): boolean {
    return this.closing.signal.aborted;
  }

  /** One request to a route of `Operations`, answering its typed answer. */
  async call<K extends OperationKey>(op: K, args: CallArgs<K>): Promise<Operations[K]["answer"]> {
    const { resp, done, timer } = await this.send(op, args, false);
    try {
      const text = await resp.text();
      return (ANSWER_FORMATS[op] === "json" ? JSON.parse(text) : text) as Operations[K]["answer"];
    } catch (err) {
      throw this.failure(err, args.signal, timer);
    } finally {
      done();
    }
  }

  /** Opens a feed's response (its status checked; the timeout covers only the answer's head). */
  async open<K extends OperationKey>(op: K, args: CallArgs<K>, lastEventId?: string): Promise<Response> {
    const { resp, done } = await this.send(op, args, true, lastEventId);
    done();
    return resp;
  }

  private async send<K extends OperationKey>(
    op: K,
    args: CallArgs<K>,
    feed: boolean,
    lastEventId?: string,
  ): Promise<{ resp: Response; done: () => void; timer: AbortSignal }> {
    if (this.closed) throw new ClosedError("the client is closed");
    const [method, template] = op.split(" ", 2) as [string, string];
    const pathArgs = args.path as Record<string, string>;
    const path = template.replace(/\{(\w+)\}/g, (_, name: string) =>
      pathSegment(pathArgs[name], PATH_FIELDS[name] ?? name),
    );
    const query = args.query ? queryString(args.query as Parameters<typeof queryString>[0], TIME_FIELDS) : "";
    const headers: Record<string, string> = { ...this.headers };
    const agent = checkAgent(args.agent);
    if (agent !== undefined) headers["X-Agent"] = agent;
    if (lastEventId !== undefined) headers["Last-Event-ID"] = lastEventId;
    if (feed) headers.Accept = "text/event-stream";
    let body: string | undefined;
    if (args.lines !== undefined) {
      body = args.lines;
      headers["Content-Type"] = "application/x-ndjson";
    } else if (args.body !== undefined || method === "POST" || method === "PUT" || method === "PATCH") {
      body = JSON.stringify(wireValue(args.body ?? {}, ""));
      headers["Content-Type"] = "application/json";
    }
    const timer = new AbortController();
    const timeout = setTimeout(() => timer.abort(new StorageError(`no answer within ${this.timeoutMs / 1000} s`)), this.timeoutMs);
    const signals = [timer.signal, this.closing.signal];
    if (args.signal) signals.push(args.signal);
    const signal = AbortSignal.any(signals);
    const done = () => clearTimeout(timeout);
    let resp: Response;
    try {
      resp = await this.fetchImpl(this.url + path + query, { method, headers, body, signal });
    } catch (err) {
      done();
      throw this.failure(err, args.signal, timer.signal);
    }
    if (resp.status >= 400) {
      try {
        throw errorFromBody(resp.status, await resp.text());
      } catch (err) {
        throw this.failure(err, args.signal, timer.signal);
      } finally {
        done();
      }
    }
    return { resp, done, timer: timer.signal };
  }

  /** What a failed fetch raises: the caller's own abort as it is, the server's error, a
   * StorageError when the server could not be reached or did not answer in time, a
   * ClosedError after close(). */
  private failure(err: unknown, own?: AbortSignal, timer?: AbortSignal): unknown {
    if (err instanceof SynapseError) return err; // the server's error
    if (own?.aborted) return own.reason;
    if (this.closing.signal.aborted) return new ClosedError("the client is closed");
    if (timer?.aborted) return timer.reason;
    if (err instanceof SyntaxError) return new StorageError(`the server answered malformed JSON: ${err.message}`);
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
    return new StorageError(`server unreachable: ${err instanceof Error ? err.message : String(err)}${cause}`);
  }
}

/** The argument each path parameter comes from, as errors name it. */
const PATH_FIELDS: Record<string, string> = { ns: "namespace", sid: "session_id" };

/** A client of the server at `url` (`http://127.0.0.1:7379`). */
export function connect(url: string, options: ConnectOptions = {}): SynapseClient {
  return new SynapseClient(url, options);
}
