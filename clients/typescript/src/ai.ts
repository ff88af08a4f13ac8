/**
 * `@synapsedb/client/ai`: SynapseDB for the Vercel AI SDK (`ai`, version 6; a peer dependency,
 * needed only by this entry point).
 *
 * - {@link memoryTools}: AI SDK tools over a namespace, so a model remembers and recalls
 *   (`generateText({ tools: memoryTools(ns), ... })`): `remember`, `recall`, `getFact` and
 *   `setFact`, each calling the client method of the same meaning.
 * - {@link memoryProxyURL}: the base URL of SynapseDB's memory proxy for an OpenAI-compatible
 *   provider (`createOpenAICompatible({ baseURL: memoryProxyURL(url, "acme"), ... })` or
 *   `createOpenAI`): every call is then answered by the server's configured model, with what
 *   SynapseDB knows about the user injected and the turns stored.
 *
 * Tool inputs are JSON Schemas (`jsonSchema` from `ai`): no schema library is needed. A
 * SynapseDB error inside a tool is thrown as is (`ValidationError` with `field` ...), which the
 * AI SDK hands back to the model as the tool's error.
 */

import { jsonSchema, tool } from "ai";

import type { Namespace } from "./namespace.js";
import type { Fact, Memory, QueryResult } from "./types.gen.js";

export interface MemoryToolsOptions {
  /** Entity the tools use when the model names none (e.g. the user: `user:4321`). */
  entity?: string;
  /** Most hits `recall` returns (default 5). */
  k?: number;
}

/** What `recall` hands the model: the query's id (for lineage) and the hits, without vectors. */
export interface RecallOutput {
  query_id: string;
  hits: { id: string; entity: string; content: string; type: string; score: number; ts: string }[];
}

const ENTITY = { type: "string", description: "Who or what it is about, e.g. user:4321 or order:1458" } as const;

function entityOf(given: string | undefined, fallback: string | undefined): string {
  const entity = given ?? fallback;
  if (!entity) throw new TypeError("entity: the model named none and memoryTools has no default entity");
  return entity;
}

/** AI SDK tools that remember and recall through `ns` (a namespace of `connect(url)`). */
export function memoryTools(ns: Namespace, options: MemoryToolsOptions = {}) {
  const { entity: defaultEntity, k = 5 } = options;
  const entityProp = defaultEntity ? { ...ENTITY, description: `${ENTITY.description} (default ${defaultEntity})` } : ENTITY;
  const required = (names: string[]): string[] => (defaultEntity ? names.filter((n) => n !== "entity") : names);
  return {
    remember: tool({
      description: "Store a memory about an entity (a fact, preference or event), searchable by meaning with recall.",
      inputSchema: jsonSchema<{ entity?: string; content: string; type?: string; salience?: number }>({
        type: "object",
        properties: {
          entity: entityProp,
          content: { type: "string", description: "The memory itself, in plain words" },
          type: { type: "string", description: "fact (default), preference, procedure, episode or event" },
          salience: { type: "number", minimum: 0, maximum: 1, description: "How important, 0 to 1" },
        },
        required: required(["entity", "content"]),
        additionalProperties: false,
      }),
      execute: async (input): Promise<{ id: string; entity: string; content: string }> => {
        const { entity, ...memory } = input;
        const m: Memory = await ns.write(entityOf(entity, defaultEntity), memory);
        return { id: m.id, entity: m.entity, content: m.content };
      },
    }),
    recall: tool({
      description: "Find memories by meaning and keywords, best first; cite query_id with an answer.",
      inputSchema: jsonSchema<{ query: string; entity?: string; k?: number }>({
        type: "object",
        properties: {
          query: { type: "string", description: "What to look for, in words" },
          entity: { ...ENTITY, description: "Only memories about this entity" },
          k: { type: "integer", minimum: 1, maximum: 100, description: `How many hits at most (default ${k})` },
        },
        required: ["query"],
        additionalProperties: false,
      }),
      execute: async (input): Promise<RecallOutput> => {
        const result: QueryResult = await ns.query(input.query, {
          entity: input.entity ?? defaultEntity,
          k: input.k ?? k,
        });
        return {
          query_id: result.query_id,
          hits: result.hits.map((h) => ({
            id: h.id, entity: h.entity, content: h.content, type: h.type, score: h.score, ts: String(h.ts),
          })),
        };
      },
    }),
    getFact: tool({
      description: "Read a key-value fact about an entity (e.g. its order), or null when none is set.",
      inputSchema: jsonSchema<{ entity?: string; key: string }>({
        type: "object",
        properties: { entity: entityProp, key: { type: "string", description: "The fact's key" } },
        required: required(["entity", "key"]),
        additionalProperties: false,
      }),
      execute: async (input): Promise<{ key: string; value: unknown; version: number } | null> => {
        try {
          const fact: Fact = await ns.get(entityOf(input.entity, defaultEntity), input.key);
          return { key: fact.key, value: fact.value, version: fact.version };
        } catch (err) {
          if (err instanceof Error && (err as { code?: string }).code === "not_found") return null;
          throw err;
        }
      },
    }),
    setFact: tool({
      description: "Set a key-value fact about an entity to any JSON value (a new version; history keeps the old).",
      inputSchema: jsonSchema<{ entity?: string; key: string; value: unknown }>({
        type: "object",
        properties: {
          entity: entityProp,
          key: { type: "string", description: "The fact's key" },
          value: { description: "Any JSON value" },
        },
        required: required(["entity", "key", "value"]),
        additionalProperties: false,
      }),
      execute: async (input): Promise<{ key: string; version: number }> => {
        const fact: Fact = await ns.set(entityOf(input.entity, defaultEntity), input.key, input.value as never);
        return { key: fact.key, version: fact.version };
      },
    }),
  };
}

/** The memory proxy's OpenAI-compatible base URL on `serverUrl`: of `namespace`, or of the
 * server's default namespace (`synapsedb serve --proxy-namespace`) when none is given. */
export function memoryProxyURL(serverUrl: string, namespace?: string): string {
  const base = serverUrl.replace(/\/+$/, "");
  return namespace === undefined ? `${base}/v1` : `${base}/v1/namespaces/${encodeURIComponent(namespace)}`;
}
