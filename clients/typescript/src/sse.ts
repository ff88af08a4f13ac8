/**
 * Server-Sent Events: a parser for `text/event-stream` bodies (the WHATWG rules: `data` lines
 * joined by newlines, `id` kept across events, comments and unknown fields ignored, CR, LF or
 * CRLF line ends) and {@link Feed}, an async iterator over a feed that reconnects with
 * `Last-Event-ID` when the connection is cut, so it misses nothing and sees nothing twice
 * (the server resumes after that id).
 */

import { ClosedError, errorFromBody, StorageError, SynapseError } from "./errors.js";

export interface ServerSentEvent {
  /** The event's id (the last `id:` line seen so far, as the spec has it). */
  id: string;
  /** `event:`; "message" when the server named none. */
  event: string;
  data: string;
}

/** The events of an event-stream body, as they arrive. */
export async function* parseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder("utf-8");
  let buffer = "";
  let lastId = "";
  let event = "";
  let data: string[] = [];
  let hasData = false;
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        const cr = buffer.indexOf("\r", start);
        const lf = buffer.indexOf("\n", start);
        let end: number;
        let next: number;
        if (cr === -1 && lf === -1) break;
        if (cr !== -1 && (lf === -1 || cr < lf)) {
          if (cr === buffer.length - 1 && !done) break; // a CR whose LF may still come
          end = cr;
          next = buffer[cr + 1] === "\n" ? cr + 2 : cr + 1;
        } else {
          end = lf;
          next = lf + 1;
        }
        const line = buffer.slice(start, end);
        start = next;
        if (line === "") {
          if (hasData) yield { id: lastId, event: event || "message", data: data.join("\n") };
          event = "";
          data = [];
          hasData = false;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon === -1 ? line : line.slice(0, colon);
        let field = colon === -1 ? "" : line.slice(colon + 1);
        if (field.startsWith(" ")) field = field.slice(1);
        if (name === "data") {
          data.push(field);
          hasData = true;
        } else if (name === "event") {
          event = field;
        } else if (name === "id" && !field.includes("\u0000")) {
          lastId = field;
        }
      }
      buffer = buffer.slice(start);
      if (done) return; // an event without its closing blank line is dropped (the spec's rule)
    }
  } finally {
    await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

export interface FeedOptions {
  /** Resume after this id (the `id` of the last event handled); later ones follow. */
  after?: string;
  /** Seconds without events after which the server ends the feed (and the iteration). */
  idle_timeout?: number;
  /** Stops the feed (the iteration ends quietly). */
  signal?: AbortSignal;
  /** Reconnections in a row that may fail before the iteration throws (default 5). */
  retries?: number;
  /** Milliseconds before the first reconnection, doubled after each failure (default 250)... */
  retryDelayMs?: number;
  /** ...up to this many (default 5,000). */
  retryMaxDelayMs?: number;
}

/** How a feed connects: its request with `Last-Event-ID` set (or not), answering the response
 * or throwing the error the server answered. */
export type Connect = (lastEventId: string | undefined, signal: AbortSignal) => Promise<Response>;

/** A live feed of `T` (an Event, a Change): `for await (const item of feed)`. `lastEventId` is
 * the id of the last item yielded: pass it as `after` to resume in another process. */
export class Feed<T> implements AsyncIterable<T> {
  lastEventId: string | undefined;
  private readonly abort = new AbortController();
  private started = false;

  constructor(
    private readonly connect: Connect,
    private readonly kind: string,
    private readonly decode: (data: string, id: string) => T,
    private readonly options: FeedOptions = {},
  ) {
    this.lastEventId = options.after;
    if (options.signal?.aborted) this.abort.abort(options.signal.reason);
    else options.signal?.addEventListener("abort", () => this.abort.abort(options.signal?.reason), { once: true });
  }

  /** Ends the feed: a pending `next()` finishes and the connection closes. */
  close(): void {
    this.abort.abort();
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.started) throw new TypeError("a Feed can be iterated once; open another with its lastEventId as after");
    this.started = true;
    return this.run();
  }

  private async *run(): AsyncGenerator<T> {
    const signal = this.abort.signal;
    const retries = this.options.retries ?? 5;
    const idleMs = this.options.idle_timeout === undefined ? undefined : this.options.idle_timeout * 1000;
    let delay = this.options.retryDelayMs ?? 250;
    let failures = 0;
    try {
      while (!signal.aborted) {
        let quietSince = Date.now();
        try {
          const resp = await this.connect(this.lastEventId, signal);
          if (!resp.body) throw new StorageError("the feed answered no body");
          for await (const ev of parseEvents(resp.body)) {
            if (ev.event === "error") throw errorFromBody(401, ev.data);
            if (ev.event !== this.kind) continue;
            const item = this.decode(ev.data, ev.id);
            this.lastEventId = ev.id;
            failures = 0;
            delay = this.options.retryDelayMs ?? 250;
            yield item;
            quietSince = Date.now();
          }
          // The server ended the feed: after idle_timeout that is the end; sooner, it was cut
          // (a restart, or this reader fell behind the server's buffer) and resumes.
          if (idleMs !== undefined && Date.now() - quietSince >= idleMs - Math.min(1000, idleMs / 2)) return;
        } catch (err) {
          if (signal.aborted || err instanceof ClosedError) return; // stopped on purpose
          if (err instanceof SynapseError && !(err instanceof StorageError)) throw err; // the server said no
          failures += 1;
          if (failures > retries) {
            throw err instanceof SynapseError ? err : new StorageError(`feed lost: ${String(err)}`);
          }
        }
        await sleep(delay, signal);
        delay = Math.min(delay * 2, this.options.retryMaxDelayMs ?? 5000);
      }
    } finally {
      this.abort.abort();
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
