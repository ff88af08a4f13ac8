/** docs/integrations/typescript.md: its example compiles against the package and runs against
 * a real server, and its table names every public namespace method. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, test } from "node:test";

import { Namespace } from "@synapsedb/client";

import { PACKAGE, REPO, Server } from "./support/server.js";

const DOC = join(REPO, "docs/integrations/typescript.md");
const run = promisify(execFile);

function examples(): string[] {
  return [...readFileSync(DOC, "utf8").matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

let server: Server;

before(async () => {
  server = await Server.start();
});

after(async () => {
  await server?.close();
});

test("the page's example type-checks and runs as written", async () => {
  const blocks = examples();
  assert.equal(blocks.length, 2, "the page has exactly the examples this test runs");
  // inside the package, so `@synapsedb/client` resolves to it (a package's self-reference)
  const dir = join(PACKAGE, "build", "docs-example");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "example.ts"), blocks[0]!);
  const tsc = join(PACKAGE, "node_modules/typescript/bin/tsc");
  const compilerOptions = { strict: true, target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", types: ["node"], outDir: "." };
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["example.ts"] }));
  await run(process.execPath, [tsc, "-p", dir], { cwd: dir }).catch((err: { stdout?: string }) => {
    assert.fail(`the example does not compile:\n${err.stdout ?? String(err)}`);
  });
  const { stdout } = await run(process.execPath, [join(dir, "example.js")], {
    cwd: dir,
    env: { ...process.env, SYNAPSEDB_URL: server.url, SYNAPSEDB_API_KEY: "" },
    timeout: 60_000,
  });
  const lines = stdout.trim().split("\n");
  assert.equal(lines[0], "Refund requested for order #1458 last week");
  assert.equal(lines[1], "{ id: 1458, status: 'refunded' }");
  assert.ok(lines.includes("0 memories known in 2000"), stdout);
  assert.ok(lines.includes("validation k 1000"), stdout);
  assert.ok(lines.includes("not_found 404"), stdout);
  assert.ok(lines.includes("live: Customer said thanks"), stdout);
});

test("the page's Vercel AI SDK example type-checks against the package and ai", async () => {
  // compiled, not run: it calls a hosted model (the tools and the proxy run in ai.test.ts)
  const dir = join(PACKAGE, "build", "docs-example-ai");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "example.ts"), examples()[1]!);
  const tsc = join(PACKAGE, "node_modules/typescript/bin/tsc");
  const compilerOptions = { strict: true, target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", types: ["node"], outDir: ".", skipLibCheck: true };
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["example.ts"] }));
  await run(process.execPath, [tsc, "-p", dir], { cwd: dir }).catch((err: { stdout?: string }) => {
    assert.fail(`the AI SDK example does not compile:\n${err.stdout ?? String(err)}`);
  });
});

test("the page names every public method of a namespace", () => {
  const text = readFileSync(DOC, "utf8");
  const methods = Object.getOwnPropertyNames(Namespace.prototype).filter((n) => n !== "constructor" && !["who", "run"].includes(n));
  assert.ok(methods.length > 40);
  const missing = methods.filter((m) => !text.includes(`\`${m}\``) && !text.includes(`\`${m}(`));
  assert.deepEqual(missing, []);
});
