/** The types cannot drift from the server: src/types.gen.ts is what the live server's
 * /openapi.json generates, every data route is used by the client, and the error classes have
 * the Python tree's codes, statuses and subclass relations. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, test } from "node:test";

import { ERROR_CLASSES, OPERATION_KEYS, SynapseError } from "@synapsedb/client";

import { PACKAGE, python, REPO, Server } from "./support/server.js";

// the generator is plain JavaScript next to the package (scripts/gen-types.mjs)
const generator = (await import(join(PACKAGE, "scripts/gen-types.mjs"))) as typeof import("../scripts/gen-types.mjs");

let server: Server;

before(async () => {
  server = await Server.start();
});

after(async () => {
  await server?.close();
});

test("src/types.gen.ts is what the server's OpenAPI document generates", async () => {
  const doc = await generator.load(server.url);
  const fresh = generator.generate(doc);
  const committed = readFileSync(generator.OUTPUT, "utf8");
  assert.ok(
    fresh === committed,
    "src/types.gen.ts differs from the server's /openapi.json: regenerate it with " +
      "`npm run gen -- http://127.0.0.1:7379` against `synapsedb serve`, then fix what no longer compiles",
  );
});

/** Routes the client leaves to other tools, and why. */
const NOT_IN_CLIENT: Record<string, string> = {
  "GET /healthz": "operations: a probe for load balancers",
  "GET /readyz": "operations: a probe for load balancers",
  "GET /metrics": "operations: Prometheus scrapes it",
  "POST /v1/chat/completions": "the memory proxy: OpenAI SDKs speak to it (docs/proxy.md)",
  "POST /v1/responses": "the memory proxy: OpenAI SDKs speak to it (docs/proxy.md)",
  "POST /v1/namespaces/{ns}/chat/completions": "the memory proxy: OpenAI SDKs speak to it (docs/proxy.md)",
  "POST /v1/namespaces/{ns}/responses": "the memory proxy: OpenAI SDKs speak to it (docs/proxy.md)",
};

test("every data route of the document is called by the client", () => {
  const source = ["client.ts", "namespace.ts"]
    .map((f) => readFileSync(join(PACKAGE, "src", f), "utf8"))
    .join("\n")
    .replaceAll("${NS}", "/v1/namespaces/{ns}");
  const missing = OPERATION_KEYS.filter((op) => !(op in NOT_IN_CLIENT) && !source.includes(`${op}\``) && !source.includes(`${op}"`));
  assert.deepEqual(missing, [], "routes with no client method");
  for (const op of Object.keys(NOT_IN_CLIENT)) {
    assert.ok((OPERATION_KEYS as readonly string[]).includes(op), `${op} is no longer a route: drop it from NOT_IN_CLIENT`);
  }
});

test("the error classes have the Python tree's codes, statuses and subclass relations", async () => {
  const script = `
import json, synapsedb.errors as e
classes = list({c: None for n in e.__all__
                 if isinstance(c := getattr(e, n), type) and issubclass(c, e.SynapseError)})
print(json.dumps({c.code: {"name": c.__name__, "status": c.http_status,
                           "is": sorted(b.code for b in classes if issubclass(c, b))} for c in classes}))
`;
  const { stdout } = await promisify(execFile)(python(), ["-c", script], { cwd: REPO });
  const py = JSON.parse(stdout) as Record<string, { name: string; status: number; is: string[] }>;
  assert.deepEqual([...ERROR_CLASSES.keys()].sort(), Object.keys(py).sort());
  for (const [code, cls] of ERROR_CLASSES) {
    const want = py[code]!;
    const err = new cls("m", { field: "f", limit: 3 });
    assert.equal(cls.name, want.name);
    assert.equal(err.code, code);
    assert.equal(err.httpStatus, want.status, code);
    assert.ok(err instanceof SynapseError && err instanceof Error);
    const is = [...ERROR_CLASSES].filter(([, other]) => err instanceof other).map(([c]) => c);
    assert.deepEqual(is.sort(), want.is, `${code}: instanceof as Python's issubclass`);
    assert.equal(err.field, "f");
    assert.equal(err.limit, 3);
  }
});

test("the generator's JSON Schema subset", () => {
  const t = generator.tsType;
  assert.equal(t({ anyOf: [{ type: "string" }, { type: "null" }] }), "string | null");
  assert.equal(t({ type: "array", items: { anyOf: [{ type: "integer" }, { type: "null" }] } }), "(number | null)[]");
  assert.equal(t({ type: "array", prefixItems: [{ type: "string" }, { type: "number" }], items: false }), "[string, number]");
  assert.equal(t({ enum: ["user", "tool"] }), '"user" | "tool"');
  assert.equal(t({ type: "object", additionalProperties: { $ref: "#/components/schemas/Error" } }), "{ [key: string]: ErrorBody }");
  assert.equal(t({}), "unknown");
  assert.equal(t({ type: "object" }), "Record<string, unknown>");
  assert.equal(
    t({ type: "object", properties: { "a-b": { type: "boolean" }, c: {} }, required: ["c"] }),
    '{\n  "a-b"?: boolean;\n  c: unknown;\n}',
  );
  assert.throws(() => t({ type: "tuple" }), /unsupported/);
  assert.throws(() => generator.generate({ openapi: "3.1.0" }), /not an OpenAPI document/);
});
