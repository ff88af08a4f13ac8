/** @synapsedb/client: SynapseDB over HTTP, with the Python client's methods and types. */

export { connect, SynapseClient } from "./client.js";
export type { BodyArgs, CallArgs, ConnectOptions, QueryArgs } from "./client.js";
export { Namespace } from "./namespace.js";
export { Feed, parseEvents } from "./sse.js";
export type { FeedOptions, ServerSentEvent } from "./sse.js";
export * from "./errors.js";
export type * from "./types.gen.js";
export { OPERATION_KEYS, ANSWER_FORMATS } from "./types.gen.js";
export type {
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
  TimeLike,
  UpdateOptions,
  Vector,
} from "./inputs.js";
