/** A keyed server (`--auth keys`): API keys, scopes, bound agents, and tenant isolation. */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  connect,
  ForbiddenError,
  NotFoundError,
  UnauthorizedError,
  type Event,
  type SynapseError,
} from "@synapsedb/client";

import { createKeys, revokeKey, Server } from "./support/server.js";

let server: Server;
const keys: Record<string, { id: string; key: string }> = {};

before(async () => {
  server = await Server.start({
    auth: "keys",
    prepare: async (data) => {
      Object.assign(
        keys,
        await createKeys(data, {
          acme: { tenant: "acme", scopes: "read,write,admin" },
          acmeRead: { tenant: "acme", scopes: "read" },
          globex: { tenant: "globex", scopes: "read,write" },
          bound: { tenant: "acme", scopes: "read,write", agents: "intake" },
          revoked: { tenant: "acme", scopes: "read" },
        }),
      );
    },
  });
});

after(async () => {
  await server?.close();
});

const is =
  (cls: new (...args: never[]) => SynapseError, check: (e: SynapseError) => boolean = () => true) =>
  (err: unknown): boolean => {
    assert.ok(err instanceof cls, `expected ${cls.name}, got ${String(err)}`);
    assert.ok(check(err as SynapseError), JSON.stringify(err));
    return true;
  };

test("no key or a wrong key is unauthorized; a key without the scope is forbidden", async () => {
  await assert.rejects(connect(server.url).namespaces(), is(UnauthorizedError, (e) => e.httpStatus === 401));
  await assert.rejects(
    connect(server.url, { apiKey: "sdb_nope_nothing" }).namespace("support").stats(),
    is(UnauthorizedError),
  );
  const reader = connect(server.url, { apiKey: keys.acmeRead!.key }).namespace("support");
  await assert.rejects(reader.write("user:1", "not allowed"), is(ForbiddenError, (e) => e.code === "forbidden"));
  assert.deepEqual(await reader.memories("user:1"), []);
});

test("a key bound to an agent cannot act as another", async () => {
  const ns = connect(server.url, { apiKey: keys.bound!.key }).namespace("support");
  const m = await ns.write("user:2", "written by the bound key");
  assert.equal(m.agent, "intake", "a request naming no agent acts as the key's");
  await assert.rejects(
    ns.write("user:2", "posing as another", { agent: "resolution" }),
    is(ForbiddenError, (e) => e.field === "agent"),
  );
});

test("tenants cannot reach or detect each other's data", async () => {
  const acme = connect(server.url, { apiKey: keys.acme!.key }).namespace("support", { agent: "intake" });
  const globex = connect(server.url, { apiKey: keys.globex!.key }).namespace("support", { agent: "intake" });
  const secret = await acme.write("user:4321", "Acme's customer asked for a refund of order #1458");
  await acme.set("user:4321", "order", { id: 1458 });
  await acme.append("user:4321", "acme event");
  const q = await acme.query("refund order", { entity: "user:4321" });
  await acme.recordAnswer("acme-answer", [q.query_id]);

  const feed = globex.changes({ idle_timeout: 1 });
  const seen = (async () => {
    const out = [];
    for await (const c of feed) out.push(c);
    return out;
  })();
  await new Promise((ok) => setTimeout(ok, 200));
  await acme.write("user:4321", "written while globex follows its changes");
  await globex.write("user:1", "Globex's own memory");

  await assert.rejects(globex.get(secret.id), is(NotFoundError));
  await assert.rejects(globex.history(secret.id), is(NotFoundError));
  await assert.rejects(globex.get("user:4321", "order"), is(NotFoundError));
  await assert.rejects(globex.lineage("acme-answer"), is(NotFoundError));
  await assert.rejects(globex.update(secret.id, { content: "overwritten" }), is(NotFoundError));
  assert.deepEqual(await globex.memories("user:4321"), []);
  assert.deepEqual(await globex.events("user:4321"), []);
  assert.ok(
    (await globex.query("refund order #1458", { k: 10 })).hits.every((h) => h.entity !== "user:4321"),
    "a query of globex's never returns acme's memories",
  );
  assert.deepEqual(await globex.entities(), ["user:1"]);
  const followed: Event[] = [];
  for await (const ev of globex.follow("user:4321", { idle_timeout: 0.5 })) followed.push(ev);
  assert.deepEqual(followed, []);
  const changes = await seen;
  assert.deepEqual(
    changes.map((c) => [c.namespace, c.entity]),
    [["support", "user:1"]],
    "globex's change feed shows only its own write, under its own namespace name",
  );
  assert.equal((await acme.get(secret.id)).content, secret.content, "acme's memory is untouched");
});

test("a feed whose key is revoked ends with UnauthorizedError", async () => {
  const writer = connect(server.url, { apiKey: keys.acme!.key }).namespace("revoke");
  await writer.append("s", "first");
  const ns = connect(server.url, { apiKey: keys.revoked!.key }).namespace("revoke");
  const it = ns.follow("s")[Symbol.asyncIterator]();
  assert.equal(((await it.next()).value as Event).content, "first");
  await revokeKey(server.data, keys.revoked!.id);
  await assert.rejects(it.next(), is(UnauthorizedError, (e) => /revoked/.test(e.message)));
});
