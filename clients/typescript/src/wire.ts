/**
 * Values as the wire carries them: what a request sends must reach the server unchanged, so a
 * value JSON would alter (NaN and the infinities become `null`, a `Map` becomes `{}`, an
 * `undefined` in an array becomes `null`, a `bigint` throws) is refused here with a
 * ValidationError naming its place (`metadata.tags[2]`), as the Python client's `wire_value`
 * does. Nothing is sent when a value is refused.
 */

import { ValidationError } from "./errors.js";

/** A moment: an ISO-8601 string, epoch seconds, or a Date. */
export type TimeLike = string | number | Date;

/** The server's limit on JSON nesting. */
export const MAX_DEPTH = 64;

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return (value as object).constructor?.name ?? "object";
  return typeof value;
}

/** `value` as JSON carries it unchanged (Dates as ISO-8601, typed arrays as number lists). */
export function wireValue(value: unknown, field: string, depth = 0): unknown {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (Number.isFinite(value)) return value;
    throw new ValidationError(`${field}: expected a finite number, got ${value}`, { field });
  }
  if (depth >= MAX_DEPTH) {
    throw new ValidationError(`${field}: nested deeper than ${MAX_DEPTH} levels`, { field, limit: MAX_DEPTH });
  }
  if (value instanceof Date) return timeValue(value, field);
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === undefined) {
        throw new ValidationError(`${field}[${i}]: undefined is not a JSON value`, { field: `${field}[${i}]` });
      }
      out[i] = wireValue(item, `${field}[${i}]`, depth + 1);
    }
    return out;
  }
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    if (value instanceof BigInt64Array || value instanceof BigUint64Array) {
      throw new ValidationError(`${field}: a ${describe(value)} is not a JSON value`, { field });
    }
    return wireValue(Array.from(value as unknown as ArrayLike<number>), field, depth);
  }
  if (typeof value === "object") {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      throw new ValidationError(
        `${field || "value"}: a ${describe(value)} is not a JSON value; send a number, string, boolean, array or plain object`,
        { field: field || "value" },
      );
    }
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      if (item === undefined) continue; // an absent field, as JSON.stringify has it
      out[key] = wireValue(item, field ? `${field}.${key}` : key, depth + 1);
    }
    return out;
  }
  throw new ValidationError(`${field || "value"}: a ${describe(value)} is not a JSON value`, { field: field || "value" });
}

/** A time argument as the wire carries it, meaning the same instant as embedded: strings as
 * they are (the server parses them), epoch seconds as numbers, Dates as ISO-8601. */
export function timeValue(value: TimeLike, field: string): string | number {
  if (typeof value === "string") return value;
  if (typeof value === "number") {
    if (Number.isFinite(value)) return value;
    throw new ValidationError(`${field}: expected a time, got ${value}`, { field });
  }
  if (value instanceof Date) {
    const ms = value.getTime();
    if (Number.isNaN(ms)) throw new ValidationError(`${field}: an invalid Date`, { field });
    return value.toISOString();
  }
  throw new ValidationError(`${field}: expected an ISO-8601 string, epoch seconds or a Date, got ${describe(value)}`, {
    field,
  });
}

type QueryValue = string | number | boolean | readonly string[] | Date | undefined | null;

/** The query string of `params` (undefined and null left out, arrays repeated). */
export function queryString(params: { [key: string]: QueryValue }, timeFields: ReadonlySet<string>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    if (Array.isArray(value)) {
      value.forEach((v, i) => {
        if (typeof v !== "string") {
          throw new ValidationError(`${key}[${i}]: expected a string, got ${describe(v)}`, { field: `${key}[${i}]` });
        }
        search.append(key, v);
      });
    } else if (timeFields.has(key)) {
      search.append(key, String(timeValue(value as TimeLike, key)));
    } else if (typeof value === "number" && !Number.isFinite(value)) {
      throw new ValidationError(`${key}: expected a finite number, got ${value}`, { field: key });
    } else {
      search.append(key, String(value));
    }
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** One URL path segment. WHATWG URLs (fetch's) take `.` and `..`, even percent-encoded, for
 * dot segments and would send the request elsewhere: such ids are refused, naming `field`. */
export function pathSegment(value: unknown, field: string): string {
  if (typeof value !== "string" || value === "") {
    throw new ValidationError(`${field}: expected a non-empty string, got ${describe(value)}`, { field });
  }
  if (value === "." || value === "..") {
    throw new ValidationError(`${field}: ${JSON.stringify(value)} cannot be a URL path segment`, { field });
  }
  return encodeURIComponent(value);
}

/** 1-64 characters of [a-z0-9._-] starting with a letter or digit (the server's rule). */
const NAMESPACE = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export function checkNamespace(name: unknown): string {
  if (typeof name !== "string" || !NAMESPACE.test(name)) {
    throw new ValidationError(
      `namespace: ${JSON.stringify(name)} is not a valid name; use 1-64 characters of [a-z0-9._-] starting with a letter or digit`,
      { field: "namespace", limit: 64 },
    );
  }
  return name;
}

/** An agent name: a non-blank string of at most 128 characters, no NUL. */
export function checkAgent(agent: unknown, field = "agent"): string | undefined {
  if (agent === undefined || agent === null) return undefined;
  if (typeof agent !== "string") {
    throw new ValidationError(`${field}: expected a string, got ${describe(agent)}`, { field });
  }
  if (agent.trim() === "") throw new ValidationError(`${field}: must not be empty`, { field });
  const chars = [...agent].length; // code points, as the server counts
  if (chars > MAX_AGENT_CHARS) {
    throw new ValidationError(`${field}: ${chars} characters, over the limit of ${MAX_AGENT_CHARS}`, {
      field,
      limit: MAX_AGENT_CHARS,
    });
  }
  if (agent.includes("\u0000")) throw new ValidationError(`${field}: must not contain NUL characters`, { field });
  return agent;
}

export const MAX_AGENT_CHARS = 128;
