/**
 * A namespace over HTTP: the methods of the Python client's `RemoteNamespace` (and so of the
 * embedded `synapsedb.Namespace`), camelCased where Python has an underscore (`writeMany`,
 * `recordAnswer`, `sessionAppend` ...), with Python's keyword arguments as an options object
 * by the same names. Each answers a Promise of the server's value object; errors are the
 * classes of `./errors.ts`.
 */

import type { CallArgs, SynapseClient } from "./client.js";
import { ValidationError } from "./errors.js";
import type {
  AgentOptions,
  AppendOptions,
  AsOfOptions,
  AuditOptions,
  BatchItem,
  CacheInvalidateOptions,
  CacheLookupOptions,
  CacheStoreOptions,
  Change,
  ChangesOptions,
  ConfigChanges,
  EntitiesOptions,
  EventsOptions,
  FollowOptions,
  ForgetOptions,
  MemoriesOptions,
  MemoryInput,
  MessageInput,
  QueryOptions,
  RecallOptions,
  RecordAnswerOptions,
  RememberOptions,
  SessionAppendOptions,
  SessionInfoOptions,
  SessionLoadOptions,
  SessionSearchOptions,
  SetOptions,
  StreamsOptions,
  UpdateOptions,
} from "./inputs.js";
import { Feed } from "./sse.js";
import type {
  AuditEntry,
  CacheEntry,
  CacheHit,
  CacheStats,
  Event,
  Fact,
  Forgotten,
  Lineage,
  MaintenanceReport,
  Memory,
  MemoryAccess,
  Message,
  NamespaceConfig,
  OperationKey,
  Operations,
  QueryResult,
  Recalled,
  Remembered,
  SessionInfo,
  Snapshot,
  Stats,
} from "./types.gen.js";
import { checkAgent, timeValue, type TimeLike, wireValue } from "./wire.js";

const NS = "/v1/namespaces/{ns}";

function time(value: TimeLike | undefined | null, field: string): string | number | undefined {
  return value === undefined || value === null ? undefined : timeValue(value, field);
}

function list(value: string | readonly string[] | undefined): string[] | undefined {
  return value === undefined ? undefined : typeof value === "string" ? [value] : [...value];
}

export class Namespace {
  constructor(
    private readonly client: SynapseClient,
    readonly name: string,
    readonly agent: string | undefined,
  ) {}

  private who(agent: string | undefined): string | undefined {
    return agent === undefined ? this.agent : checkAgent(agent);
  }

  private run<K extends OperationKey>(op: K, args: Omit<CallArgs<K>, "path"> & { path?: object }): Promise<Operations[K]["answer"]> {
    const path = { ns: this.name, ...args.path } as Operations[K]["path"];
    return this.client.call(op, { ...args, path });
  }

  // -- memories -----------------------------------------------------------------------------

  /** Writes a memory about `entity` (text, or content with its fields). */
  async write(entity: string, memory: string | MemoryInput, options: AgentOptions = {}): Promise<Memory> {
    const fields = typeof memory === "string" ? { content: memory } : memory;
    return this.run(`POST ${NS}/memories`, {
      query: { include: this.client.include },
      body: { entity, ...fields },
      agent: this.who(options.agent),
    });
  }

  /** Writes many memories, all or none. */
  async writeMany(items: readonly BatchItem[], options: AgentOptions = {}): Promise<Memory[]> {
    const out = items.map((item) => {
      if (Array.isArray(item)) {
        const [entity, payload] = item as readonly [string, string | MemoryInput];
        return { entity, ...(typeof payload === "string" ? { content: payload } : payload) };
      }
      return item;
    });
    return this.run(`POST ${NS}/memories:batch`, {
      query: { include: this.client.include },
      body: { items: out },
      agent: this.who(options.agent),
    });
  }

  /** A new version of memory `id` with `changes` (compare-and-set with `if_version`). */
  async update(id: string, changes: Partial<MemoryInput>, options: UpdateOptions = {}): Promise<Memory> {
    return this.run(`PATCH ${NS}/memories/{id}`, {
      path: { id },
      query: { include: this.client.include },
      body: { changes, if_version: options.if_version },
      agent: this.who(options.agent),
    });
  }

  /** A memory by id, or a KV fact by entity and key. */
  get(id: string, options?: AsOfOptions): Promise<Memory>;
  get(entity: string, key: string, options?: AsOfOptions): Promise<Fact>;
  async get(target: string, keyOrOptions?: string | AsOfOptions, maybe?: AsOfOptions): Promise<Memory | Fact> {
    if (typeof keyOrOptions === "string") {
      // with a key the route answers that fact (without one, the entity's facts: see facts)
      const answer = await this.run(`GET ${NS}/facts`, {
        query: { entity: target, key: keyOrOptions, as_of: maybe?.as_of },
      });
      return answer as Fact;
    }
    return this.run(`GET ${NS}/memories/{id}`, {
      path: { id: target },
      query: { as_of: keyOrOptions?.as_of, include: this.client.include },
    });
  }

  /** What is known about `entity` (or the whole namespace), newest first. */
  async memories(entity?: string | null, options: MemoriesOptions = {}): Promise<Memory[]> {
    return this.run(`GET ${NS}/memories`, {
      query: {
        entity: entity ?? undefined,
        types: list(options.types),
        as_of: options.as_of,
        limit: options.limit,
        valid_at: options.valid_at,
        before: options.before,
        include: this.client.include,
      },
    });
  }

  /** Deletes (tombstones) a memory by id, or a KV fact by entity and key. */
  delete(id: string, options?: UpdateOptions): Promise<Memory>;
  delete(entity: string, key: string, options?: UpdateOptions): Promise<Fact>;
  async delete(target: string, keyOrOptions?: string | UpdateOptions, maybe?: UpdateOptions): Promise<Memory | Fact> {
    if (typeof keyOrOptions === "string") {
      return this.run(`DELETE ${NS}/facts`, {
        query: { entity: target, key: keyOrOptions, if_version: maybe?.if_version },
        agent: this.who(maybe?.agent),
      });
    }
    return this.run(`DELETE ${NS}/memories/{id}`, {
      path: { id: target },
      query: { if_version: keyOrOptions?.if_version, include: this.client.include },
      agent: this.who(keyOrOptions?.agent),
    });
  }

  /** Every version of a memory, or of a KV fact. */
  history(id: string, options?: AsOfOptions): Promise<Memory[]>;
  history(entity: string, key: string, options?: AsOfOptions): Promise<Fact[]>;
  async history(target: string, keyOrOptions?: string | AsOfOptions, maybe?: AsOfOptions): Promise<Memory[] | Fact[]> {
    if (typeof keyOrOptions === "string") {
      return this.run(`GET ${NS}/facts/history`, {
        query: { entity: target, key: keyOrOptions, as_of: maybe?.as_of },
      });
    }
    return this.run(`GET ${NS}/memories/{id}/history`, {
      path: { id: target },
      query: { as_of: keyOrOptions?.as_of, include: this.client.include },
    });
  }

  /** How often each memory was read (by id or as a search hit) and when last; ids that are
   * no memory of the namespace are left out. */
  async accesses(ids: string[]): Promise<MemoryAccess[]> {
    return this.run(`GET ${NS}/accesses`, { query: { ids } });
  }

  // -- retrieval ----------------------------------------------------------------------------

  /** Memories by meaning and keywords (hybrid), inside filters, as of any moment. */
  async query(text?: string | null, options: QueryOptions = {}): Promise<QueryResult> {
    const { agent, ...rest } = options;
    return this.run(`POST ${NS}/query`, {
      body: {
        ...rest,
        text: text ?? undefined,
        as_of: time(rest.as_of, "as_of"),
        valid_at: time(rest.valid_at, "valid_at"),
        since: time(rest.since, "since"),
        until: time(rest.until, "until"),
        types: list(rest.types),
        tiers: list(rest.tiers),
      },
      agent: this.who(agent),
    });
  }

  // -- the memory loop ----------------------------------------------------------------------

  /** Stores conversation turns and extracts typed memories from them. */
  async remember(messages: readonly MessageInput[] | string, options: RememberOptions): Promise<Remembered> {
    const { agent, ...rest } = options;
    return this.run(`POST ${NS}/remember`, { body: { messages, ...rest }, agent: this.who(agent) });
  }

  /** The memories a conversation's last turn (or a text) needs, as a context block. */
  async recall(messagesOrText: readonly MessageInput[] | string, options: RecallOptions = {}): Promise<Recalled> {
    const { agent, ...rest } = options;
    const what = typeof messagesOrText === "string" ? { text: messagesOrText } : { messages: messagesOrText };
    return this.run(`POST ${NS}/recall`, { body: { ...rest, ...what }, agent: this.who(agent) });
  }

  // -- conversation sessions ----------------------------------------------------------------

  /** Appends a message (answering it as stored) or a list of at most 1,000 (answering them). */
  sessionAppend(sessionId: string, message: MessageInput, options?: SessionAppendOptions): Promise<Message>;
  sessionAppend(sessionId: string, messages: readonly MessageInput[], options?: SessionAppendOptions): Promise<Message[]>;
  async sessionAppend(
    sessionId: string,
    messageOrMessages: MessageInput | readonly MessageInput[],
    options: SessionAppendOptions = {},
  ): Promise<Message | Message[]> {
    const one = !Array.isArray(messageOrMessages);
    return this.run(`POST ${NS}/sessions/{sid}/messages`, {
      path: { sid: sessionId },
      body: { ...options, ...(one ? { message: messageOrMessages } : { messages: messageOrMessages }) },
      agent: this.agent,
    });
  }

  /** The session's messages: since its clear, the `last` N, as of a time, or by a strategy. */
  async sessionLoad(sessionId: string, options: SessionLoadOptions = {}): Promise<Message[]> {
    const answer = await this.run(`GET ${NS}/sessions/{sid}/messages`, {
      path: { sid: sessionId },
      query: { ...options },
      agent: this.agent,
    });
    return answer.messages;
  }

  /** Clears the session (history keeps it); `purge`: erases it (admin), answering what went. */
  sessionClear(sessionId: string, options?: { purge?: false }): Promise<null>;
  sessionClear(sessionId: string, options: { purge: true }): Promise<Forgotten>;
  sessionClear(sessionId: string, options?: { purge?: boolean }): Promise<Forgotten | null>;
  async sessionClear(sessionId: string, options: { purge?: boolean } = {}): Promise<Forgotten | null> {
    const answer = await this.run(`DELETE ${NS}/sessions/{sid}`, {
      path: { sid: sessionId },
      query: { purge: options.purge ? true : undefined },
      agent: this.agent,
    });
    // the route answers {} for a clear and the Forgotten report for a purge
    return options.purge ? (answer as unknown as Forgotten) : null;
  }

  /** The session's own ttl in seconds (null: it never expires). */
  async sessionConfigure(sessionId: string, options: { ttl: number | null }): Promise<void> {
    await this.run(`PUT ${NS}/sessions/{sid}`, { path: { sid: sessionId }, body: { ttl: options.ttl }, agent: this.agent });
  }

  /** Erases every expired session by the server's clock (admin); their ids. */
  async sessionPurgeExpired(options: { ttl?: number } = {}): Promise<string[]> {
    return this.run(`POST ${NS}/sessions:purge_expired`, { body: { ttl: options.ttl }, agent: this.agent });
  }

  /** The session's searchable messages most relevant to `text`, oldest first. */
  async sessionSearch(sessionId: string, text: string, options: SessionSearchOptions = {}): Promise<Message[]> {
    return this.run(`POST ${NS}/sessions/{sid}/search`, {
      path: { sid: sessionId },
      body: { ...options, text, as_of: time(options.as_of, "as_of") },
    });
  }

  /** Ids of the sessions with messages (not cleared, not expired). */
  async sessionList(options: { as_of?: TimeLike; ttl?: number } = {}): Promise<string[]> {
    return this.run(`GET ${NS}/sessions`, { query: { as_of: options.as_of, ttl: options.ttl } });
  }

  /** A session's counts and times. */
  async sessionInfo(sessionId: string, options: SessionInfoOptions = {}): Promise<SessionInfo> {
    return this.run(`GET ${NS}/sessions/{sid}`, { path: { sid: sessionId }, query: { ...options } });
  }

  // -- the semantic cache -------------------------------------------------------------------

  /** The cached entry of `scope` whose key means what `key` means, or null. */
  async cacheLookup(key: string, options: CacheLookupOptions = {}): Promise<CacheHit | null> {
    const { agent, ...rest } = options;
    return this.run(`POST ${NS}/cache:lookup`, { body: { ...rest, key }, agent: this.who(agent) });
  }

  /** Caches `value` (JSON) under `key` in `scope`. */
  async cacheStore(key: string, value: unknown, options: CacheStoreOptions = {}): Promise<CacheEntry> {
    if (value === undefined) throw new ValidationError("value: undefined is not a JSON value", { field: "value" });
    const { agent, ...rest } = options;
    return this.run(`POST ${NS}/cache`, { body: { ...rest, key, value }, agent: this.who(agent) });
  }

  /** Removes entries by key, tag, prefix or scope, or `all`; how many went. */
  async cacheInvalidate(key?: string | null, options: CacheInvalidateOptions = {}): Promise<number> {
    const { agent, all, ...rest } = options;
    const answer = await this.run(`POST ${NS}/cache:invalidate`, {
      body: { ...rest, key: key ?? undefined, all: all ? true : undefined },
      agent: this.who(agent),
    });
    const n = answer.invalidated;
    if (typeof n !== "number") throw new ValidationError("the server answered no count", { field: "invalidated" });
    return n;
  }

  /** Entries, and the server's hit, miss, store and invalidation counts. */
  async cacheStats(): Promise<CacheStats> {
    return this.run(`GET ${NS}/cache/stats`, {});
  }

  // -- lifecycle ----------------------------------------------------------------------------

  /** Forgets a memory by id, or an entity; `purge` erases (admin scope). */
  async forget(id?: string | null, options: ForgetOptions = {}): Promise<Forgotten> {
    return this.run(`POST ${NS}/forget`, {
      body: { id: id ?? null, entity: options.entity ?? null, purge: options.purge ?? false },
      agent: this.who(options.agent),
    });
  }

  /** Every stored row (admin scope), as the records `importRecords` takes. */
  async export(): Promise<Record<string, unknown>[]> {
    const text = await this.run(`GET ${NS}/export`, {});
    return text
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  /** Restores an export into this (empty) namespace (admin scope); how many records. */
  async importRecords(records: Iterable<Record<string, unknown>>): Promise<number> {
    const lines: string[] = [];
    let i = 0;
    for (const record of records) {
      lines.push(JSON.stringify(wireValue(record, `records[${i}]`)));
      i += 1;
    }
    const answer = await this.run(`POST ${NS}/import`, { lines: lines.map((l) => l + "\n").join("") });
    return Number(answer.imported);
  }

  /** Runs maintenance (admin scope): expiry, demotion, promotion. */
  async maintain(options: { dry_run?: boolean } = {}): Promise<MaintenanceReport> {
    return this.run(`POST ${NS}/maintain`, { body: { dry_run: options.dry_run ?? false } });
  }

  /** The namespace's lifecycle settings (Python: the `config` property). */
  async config(): Promise<NamespaceConfig> {
    return this.run(`GET ${NS}/config`, {});
  }

  /** Changes lifecycle settings (admin scope). */
  async configure(changes: ConfigChanges): Promise<NamespaceConfig> {
    return this.run(`PUT ${NS}/config`, { body: { ...changes } });
  }

  // -- lineage and audit --------------------------------------------------------------------

  /** Records an answer and the queries (and cited memories) it was built on. */
  async recordAnswer(answerId: string, queryIds: readonly string[], options: RecordAnswerOptions = {}): Promise<Lineage> {
    return this.run(`POST ${NS}/answers`, {
      body: { answer_id: answerId, query_ids: [...queryIds], text: options.text, cited: [...(options.cited ?? [])] },
      agent: this.who(options.agent),
    });
  }

  /** The queries and memory versions behind an answer. */
  async lineage(answerId: string): Promise<Lineage> {
    return this.run(`GET ${NS}/answers/{answer_id}/lineage`, { path: { answer_id: answerId } });
  }

  /** Who wrote and read what, when. */
  async audit(entity?: string | null, options: AuditOptions = {}): Promise<AuditEntry[]> {
    return this.run(`GET ${NS}/audit`, { query: { entity: entity ?? undefined, ...options } });
  }

  /** Everything known about `entity` at a moment. */
  async snapshot(entity: string, options: AsOfOptions = {}): Promise<Snapshot> {
    return this.run(`GET ${NS}/snapshot`, { query: { entity, as_of: options.as_of, include: this.client.include } });
  }

  // -- KV facts and streams -----------------------------------------------------------------

  /** Sets a KV fact (a new version; compare-and-set with `if_version`). */
  async set(entity: string, key: string, value: unknown, options: SetOptions = {}): Promise<Fact> {
    if (value === undefined) throw new ValidationError("value: undefined is not a JSON value", { field: "value" });
    return this.run(`PUT ${NS}/facts`, {
      body: { entity, key, value, if_version: options.if_version, ttl: options.ttl },
      agent: this.who(options.agent),
    });
  }

  /** The entity's KV facts. */
  async facts(entity: string, options: AsOfOptions = {}): Promise<Fact[]> {
    const answer = await this.run(`GET ${NS}/facts`, { query: { entity, as_of: options.as_of } });
    // without a key the route answers the entity's facts (with one, that fact: see get)
    return answer as Fact[];
  }

  /** Appends an event to a stream (the entity's by default); also a searchable memory. */
  async append(entity: string, event: string | Record<string, unknown>, options: AppendOptions = {}): Promise<Event> {
    return this.run(`POST ${NS}/events`, {
      body: { entity, event, stream: options.stream, searchable: options.searchable ?? true },
      agent: this.who(options.agent),
    });
  }

  /** A stream's events, oldest first (or `order: "desc"`). */
  async events(stream: string, options: EventsOptions = {}): Promise<Event[]> {
    return this.run(`GET ${NS}/events`, { query: { stream, ...options } });
  }

  /**
   * Follows a stream live (Server-Sent Events): the events after `after` (all of them
   * without it), then each new one as it is committed. A cut connection is resumed with
   * `Last-Event-ID`: nothing missed, nothing twice. Ends with `idle_timeout`, `close()`,
   * the `signal`, or `break`.
   */
  follow(stream: string, options: FollowOptions = {}): Feed<Event> {
    const { signal: _s, retries: _r, retryDelayMs: _d, retryMaxDelayMs: _m, after: _a, ...params } = options;
    return new Feed<Event>(
      (lastEventId, signal) =>
        this.client.open(
          `GET ${NS}/events/follow`,
          { path: { ns: this.name }, query: { stream, ...params }, signal },
          lastEventId,
        ),
      "event",
      (data) => JSON.parse(data) as Event,
      options,
    );
  }

  /**
   * Follows every change committed in the namespace (or to one `entity`), from now or from
   * `since`; resumes after `after` / a cut connection with `Last-Event-ID` (exact on the same
   * server process; after a restart replayed from durable history).
   */
  changes(options: ChangesOptions = {}): Feed<Change> {
    const { signal: _s, retries: _r, retryDelayMs: _d, retryMaxDelayMs: _m, after: _a, ...params } = options;
    return new Feed<Change>(
      (lastEventId, signal) =>
        this.client.open(
          `GET ${NS}/changes`,
          { path: { ns: this.name }, query: { ...params }, signal },
          lastEventId,
        ),
      "change",
      (data, id) => ({ id, ...(JSON.parse(data) as Omit<Change, "id">) }),
      options,
    );
  }

  // -- overview -----------------------------------------------------------------------------

  /** Entities with something visible, sorted by name; a page with `limit` (and `after`, the
   * last name of the previous page; `prefix`). Without `limit`, every name: page a large
   * namespace (docs/http.md, "Paging"). */
  async entities(options: EntitiesOptions = {}): Promise<string[]> {
    const { as_of, prefix, after, limit } = options;
    return this.run(`GET ${NS}/entities`, { query: { as_of, prefix, after, limit } });
  }

  /** The namespace's streams, sorted by name; a page with `limit` (and `after`, the last name
   * of the previous page; `prefix`), as `entities()`. Without `limit`, every name. */
  async streams(options: StreamsOptions = {}): Promise<string[]> {
    const { as_of, prefix, after, limit } = options;
    return this.run(`GET ${NS}/streams`, { query: { as_of, prefix, after, limit } });
  }

  /** Counts and bytes. */
  async stats(): Promise<Stats> {
    return this.run(`GET ${NS}/stats`, {});
  }
}
