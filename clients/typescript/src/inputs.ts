/**
 * What the namespace methods take: the Python client's keyword arguments, by the same
 * (snake_case) names the server reads. `checks` below holds each against the fields its route
 * reads in `Operations` (generated from the server's OpenAPI document), so an option the server
 * does not read is a compile error.
 */

import type { Message, Operations } from "./types.gen.js";
import type { FeedOptions } from "./sse.js";
import type { TimeLike } from "./wire.js";

export type { TimeLike } from "./wire.js";

/** A vector: numbers, or a typed array. */
export type Vector = readonly number[] | Float32Array | Float64Array;

type JSONObject = { [key: string]: unknown };

/** A memory to write (`content` plus its optional fields). */
export interface MemoryInput {
  content: string;
  type?: string;
  metadata?: JSONObject;
  embedding?: Vector;
  salience?: number;
  ts?: TimeLike;
  agent?: string;
  pinned?: boolean;
  ttl?: number | null;
  id?: string;
  valid_from?: TimeLike | null;
  valid_to?: TimeLike | null;
}

/** One item of `writeMany`: a memory with its entity, or `[entity, text or memory]`. */
export type BatchItem = (MemoryInput & { entity: string }) | readonly [string, string | MemoryInput];

export interface AgentOptions {
  /** The acting agent (else the namespace's). */
  agent?: string;
}

export interface AsOfOptions {
  as_of?: TimeLike;
}

export interface UpdateOptions extends AgentOptions {
  if_version?: number;
}

export interface MemoriesOptions extends AsOfOptions {
  types?: string | readonly string[];
  limit?: number;
  valid_at?: TimeLike;
  /** A memory id: the memories after it, newest first (the next, older page). */
  before?: string;
}

/** A page of `entities()`: names sorted, `after` one (the last of the previous page),
 * starting with `prefix`, at most `limit` (1 to 10,000; all of them when absent). */
export interface EntitiesOptions extends AsOfOptions {
  prefix?: string;
  after?: string;
  limit?: number;
}

/** A page of `streams()`, as `entities()` pages: names sorted, `after` one, starting with
 * `prefix`, at most `limit` (1 to 10,000; all of them when absent). */
export type StreamsOptions = EntitiesOptions;

export interface QueryOptions extends AgentOptions {
  embedding?: Vector;
  entity?: string;
  filter?: JSONObject;
  k?: number;
  mode?: "hybrid" | "vector" | "keyword";
  as_of?: TimeLike;
  valid_at?: TimeLike;
  min_score?: number;
  types?: string | readonly string[];
  since?: TimeLike;
  until?: TimeLike;
  dedup?: boolean;
  explain?: boolean;
  tiers?: string | readonly string[];
  /** Keep memories whose valid time ended (replaced by an update); left out by default. */
  include_ended?: boolean;
}

export interface SetOptions extends AgentOptions {
  if_version?: number;
  /** Seconds until the fact expires. */
  ttl?: number;
}

export interface AppendOptions extends AgentOptions {
  stream?: string;
  /** Also a searchable memory (default true). */
  searchable?: boolean;
}

export interface EventsOptions extends AsOfOptions {
  start?: string;
  end?: string;
  after?: string;
  since?: TimeLike;
  until?: TimeLike;
  limit?: number;
  order?: "asc" | "desc";
}

/** A chat message in OpenAI's shape. */
export interface MessageInput {
  role: Message["role"];
  content: string;
  name?: string | null;
  tool_calls?: JSONObject[] | null;
  tool_call_id?: string | null;
  metadata?: JSONObject | null;
}

export interface RememberOptions extends AgentOptions {
  entity: string;
  session?: string;
  memories?: JSONObject[];
  /** Run the extraction before answering (else it is queued). */
  wait?: boolean;
}

export interface RecallOptions extends AgentOptions {
  entity?: string;
  budget_tokens?: number;
  k?: number;
  threshold?: number;
  rewrite?: string;
}

export interface SessionAppendOptions {
  searchable?: boolean;
  entity?: string;
}

export interface SessionLoadOptions extends AsOfOptions {
  last?: number;
  strategy?: "buffer" | "window" | "token_buffer" | "summary" | "summary_buffer" | "vector";
  k?: number;
  max_tokens?: number;
  model?: string;
  keep?: number;
  summary_tokens?: number;
  ttl?: number;
}

export interface SessionSearchOptions extends AsOfOptions {
  k?: number;
  exclude?: readonly string[];
  ttl?: number;
}

export interface SessionInfoOptions extends AsOfOptions {
  count_limit?: number;
  ttl?: number;
}

export interface CacheLookupOptions extends AgentOptions {
  scope?: string;
  params?: unknown;
  threshold?: number;
  match_literals?: boolean;
}

export interface CacheStoreOptions extends AgentOptions {
  scope?: string;
  params?: unknown;
  ttl?: number;
  tags?: readonly string[];
  match_literals?: boolean;
}

export interface CacheInvalidateOptions extends AgentOptions {
  scope?: string;
  params?: unknown;
  tag?: string;
  prefix?: string;
  all?: boolean;
  match_literals?: boolean;
}

export interface ForgetOptions extends AgentOptions {
  entity?: string;
  /** Erase (admin scope): gone from the files. */
  purge?: boolean;
}

export interface RecordAnswerOptions extends AgentOptions {
  text?: string;
  cited?: readonly string[];
}

export interface AuditOptions {
  agent?: string;
  since?: TimeLike;
  until?: TimeLike;
  limit?: number;
}

/** Lifecycle settings for `configure` (NamespaceConfig's fields). */
export type ConfigChanges = Partial<Operations["GET /v1/namespaces/{ns}/config"]["answer"]>;

export interface FollowOptions extends FeedOptions {}

export interface ChangesOptions extends FeedOptions {
  /** Only this entity's changes. */
  entity?: string;
  /** Start at this time (history first, from the audit trail), not now. */
  since?: TimeLike;
}

/** One committed change of a namespace, from `changes()` (docs/http.md, "Live sharing"). */
export interface Change {
  /** The feed id: pass it as `after` to resume after this change. */
  id: string;
  namespace: string;
  at: string;
  agent: string | null;
  action: "write" | "update" | "delete" | "set" | "unset" | "append";
  entity: string | null;
  /** A memory's id, a fact's key, or `stream/event-id`. */
  target: string;
  version: number | null;
}

// -- compile-time checks: every option is a field (or parameter) its route reads ------------------

type Fields<K extends keyof Operations> = Operations[K]["body"];
type Params<K extends keyof Operations> = keyof Operations[K]["query"];
type Within<T, Allowed> = Exclude<keyof T, Allowed> extends never ? true : never;
type NS = "/v1/namespaces/{ns}";

export const checks: [
  Within<MemoryInput & { entity: string }, Fields<`POST ${NS}/memories`>>,
  Within<UpdateOptions, Fields<`PATCH ${NS}/memories/{id}`>>,
  Within<MemoriesOptions & { entity?: string }, Params<`GET ${NS}/memories`>>,
  Within<EntitiesOptions, Params<`GET ${NS}/entities`>>,
  Within<StreamsOptions, Params<`GET ${NS}/streams`>>,
  Within<QueryOptions & { text?: string }, Fields<`POST ${NS}/query`>>,
  Within<SetOptions, Fields<`PUT ${NS}/facts`>>,
  Within<AppendOptions, Fields<`POST ${NS}/events`>>,
  Within<EventsOptions, Params<`GET ${NS}/events`>>,
  Within<RememberOptions, Fields<`POST ${NS}/remember`>>,
  Within<RecallOptions, Fields<`POST ${NS}/recall`>>,
  Within<SessionAppendOptions, Fields<`POST ${NS}/sessions/{sid}/messages`>>,
  Within<SessionLoadOptions, Params<`GET ${NS}/sessions/{sid}/messages`>>,
  Within<SessionSearchOptions, Fields<`POST ${NS}/sessions/{sid}/search`>>,
  Within<SessionInfoOptions, Params<`GET ${NS}/sessions/{sid}`>>,
  Within<CacheLookupOptions, Fields<`POST ${NS}/cache:lookup`>>,
  Within<CacheStoreOptions, Fields<`POST ${NS}/cache`>>,
  Within<CacheInvalidateOptions, Fields<`POST ${NS}/cache:invalidate`>>,
  Within<ForgetOptions, Fields<`POST ${NS}/forget`>>,
  Within<RecordAnswerOptions, Fields<`POST ${NS}/answers`>>,
  Within<AuditOptions, Params<`GET ${NS}/audit`>>,
  Within<Omit<FollowOptions, keyof FeedControl>, Params<`GET ${NS}/events/follow`>>,
  Within<Omit<ChangesOptions, keyof FeedControl>, Params<`GET ${NS}/changes`>>,
] = [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true];

/** The options of a feed that steer the client, not the request. */
type FeedControl = Pick<FeedOptions, "signal" | "retries" | "retryDelayMs" | "retryMaxDelayMs">;
