/** The client against a real open server: every group of methods, and the error tree. */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  ClosedError,
  connect,
  NotFoundError,
  StorageError,
  SynapseError,
  UpstreamError,
  ValidationError,
  VersionConflictError,
  type Memory,
  type Namespace,
  type SynapseClient,
} from "@synapsedb/client";

import { freePort, Server } from "./support/server.js";

let server: Server;
let db: SynapseClient;
let mem: Namespace;

before(async () => {
  server = await Server.start();
  db = connect(server.url);
  mem = db.namespace("acme-support", { agent: "intake" });
});

after(async () => {
  db?.close();
  await server?.close();
});

const isError =
  <T extends SynapseError>(cls: new (...args: never[]) => T, check: (err: T) => boolean = () => true) =>
  (err: unknown): boolean => {
    assert.ok(err instanceof cls, `expected ${cls.name}, got ${String(err)}`);
    assert.ok(check(err as T), `unexpected ${String(err)} ${JSON.stringify((err as T).details)}`);
    return true;
  };

describe("memories", () => {
  test("write, get, update, history, delete and time travel", async () => {
    const m = await mem.write("user:4321", {
      content: "Refund requested for order #1458 last week",
      salience: 0.9,
      ts: new Date("2025-10-24T10:00:00Z"),
      metadata: { channel: "email", order: 1458 },
    });
    assert.equal(m.entity, "user:4321");
    assert.equal(m.agent, "intake");
    assert.equal(m.version, 1);
    assert.equal(m.ts, "2025-10-24T10:00:00Z");
    assert.deepEqual(m.metadata, { channel: "email", order: 1458 });
    assert.equal((await mem.get(m.id)).content, m.content);

    const v2 = await mem.update(m.id, { content: "Refund approved for order #1458" }, { if_version: 1, agent: "knowledge" });
    assert.equal(v2.version, 2);
    assert.equal(v2.agent, "knowledge");
    await assert.rejects(
      mem.update(m.id, { salience: 0.1 }, { if_version: 1 }),
      isError(VersionConflictError, (e) => e.code === "version_conflict" && e.httpStatus === 409),
    );
    const asOfV1 = await mem.get(m.id, { as_of: m.recorded_at });
    assert.equal(asOfV1.version, 1, "as of its first commit the memory is version 1");

    const gone = await mem.delete(m.id);
    assert.equal(gone.deleted, true);
    const versions = await mem.history(m.id);
    assert.deepEqual(
      versions.map((v) => [v.version, v.deleted]),
      [[1, false], [2, false], [3, true]],
    );
    await assert.rejects(mem.get(m.id), isError(NotFoundError, (e) => e.httpStatus === 404));
    assert.equal((await mem.get(m.id, { as_of: v2.recorded_at })).content, "Refund approved for order #1458");
  });

  test("writeMany takes objects and [entity, memory] pairs, all or none", async () => {
    const before = (await mem.memories("user:batch")).length;
    const written = await mem.writeMany([
      ["user:batch", "plain text"],
      ["user:batch", { content: "with fields", type: "preference" }],
      { entity: "user:batch", content: "an object" },
    ]);
    assert.deepEqual(
      written.map((m) => m.content),
      ["plain text", "with fields", "an object"],
    );
    assert.deepEqual(
      (await mem.memories("user:batch", { types: "preference" })).map((m) => m.content),
      ["with fields"],
    );
    await assert.rejects(
      mem.writeMany([["user:batch", "fine"], ["user:batch", { content: "bad", salience: 7 }]]),
      isError(ValidationError, (e) => e.field === "items[1].salience"),
    );
    assert.equal((await mem.memories("user:batch")).length, before + 3, "a refused batch writes nothing");
  });
});

describe("queries", () => {
  test("hybrid, vector and filtered queries; lineage of an answer; audit and snapshot", async () => {
    const a = await mem.write("user:7", { content: "Customer prefers email over phone calls", metadata: { tier: "gold" } });
    await mem.write("user:7", { content: "Order #77 shipped to Lisbon on Monday", metadata: { tier: "silver" } });
    const result = await mem.query("how should we contact the customer?", { entity: "user:7", k: 5 });
    assert.match(result.query_id, /\S/);
    assert.equal(result.hits[0]?.id, a.id);
    assert.ok(result.hits[0]!.score > 0);

    const filtered = await mem.query("order", { entity: "user:7", filter: { tier: "silver" }, mode: "keyword" });
    assert.deepEqual(
      filtered.hits.map((h) => h.content),
      ["Order #77 shipped to Lisbon on Monday"],
    );
    assert.equal((await mem.get(a.id)).embedding, undefined, "answers are lean by default");
    const full = connect(server.url, { include: ["embedding"] });
    const stored = await full.namespace("acme-support").get(a.id);
    full.close();
    assert.ok(Array.isArray(stored.embedding) && stored.embedding.length === 384);
    assert.throws(
      () => connect(server.url, { include: ["vector" as "embedding"] }),
      isError(ValidationError, (e) => e.field === "include"),
    );
    const byVector = await mem.query(null, { embedding: Float32Array.from(stored.embedding), mode: "vector", k: 1 });
    assert.equal(byVector.hits[0]?.id, a.id);
    const explained = await mem.query("email", { entity: "user:7", explain: true, k: 1 });
    assert.ok(explained.hits[0]?.explanation, "explain adds the ranking's explanation");
    const past = await mem.query("email", { entity: "user:7", as_of: "2000-01-01T00:00:00Z" });
    assert.deepEqual(past.hits, [], "nothing was known in 2000");

    const lineage = await mem.recordAnswer("ans-7", [result.query_id], {
      agent: "resolution",
      text: "Email them",
      cited: [a.id],
    });
    assert.equal(lineage.answer_id, "ans-7");
    const again = await mem.lineage("ans-7");
    assert.deepEqual(
      again.queries.map((q) => q.query_id),
      [result.query_id],
    );
    assert.equal(again.queries[0]?.hits[0]?.id, a.id);
    assert.deepEqual(
      again.cited.map((c) => c.id),
      [a.id],
    );
    await assert.rejects(mem.lineage("no-such-answer"), isError(NotFoundError));

    const trail = await mem.audit("user:7");
    assert.ok(trail.some((e) => e.action === "write" && e.target === a.id && e.agent === "intake"));
    const snap = await mem.snapshot("user:7");
    assert.equal(snap.memories.length, 2);
  });

  test("server-side validation errors carry field and limit; nothing is written", async () => {
    await assert.rejects(
      mem.query("x", { k: 0 }),
      isError(ValidationError, (e) => e.field === "k" && e.limit === 1000 && e.httpStatus === 422),
    );
    await assert.rejects(
      mem.write("user:7", { content: "x", salience: 2 }),
      isError(ValidationError, (e) => e.field === "salience"),
    );
  });
});

describe("facts, events and streams", () => {
  test("set, get, facts, history, compare-and-set, delete", async () => {
    const f1 = await mem.set("user:4321", "order", { id: 1458, status: "open" });
    const f2 = await mem.set("user:4321", "order", { id: 1458, status: "refunded" }, { if_version: f1.version });
    assert.deepEqual((await mem.get("user:4321", "order")).value, { id: 1458, status: "refunded" });
    assert.deepEqual(
      (await mem.get("user:4321", "order", { as_of: f1.recorded_at })).value,
      { id: 1458, status: "open" },
    );
    await mem.set("user:4321", "plan", "gold");
    const facts = await mem.facts("user:4321");
    assert.deepEqual(facts.map((f) => f.key).sort(), ["order", "plan"]);
    await assert.rejects(
      mem.set("user:4321", "order", 1, { if_version: f1.version }),
      isError(VersionConflictError, (e) => e.expected === f1.version && e.actual === f2.version),
    );
    assert.deepEqual(
      (await mem.history("user:4321", "order")).map((f) => f.version),
      [1, 2],
    );
    assert.equal((await mem.delete("user:4321", "plan")).deleted, true);
    await assert.rejects(mem.get("user:4321", "plan"), isError(NotFoundError));
    await mem.set("user:4321", "nothing", null);
    assert.equal((await mem.get("user:4321", "nothing")).value, null, "null is a value");
  });

  test("append, events, streams and entities", async () => {
    const e1 = await mem.append("user:55", "Refund confirmed delivered on 10/28.");
    const e2 = await mem.append("user:55", { content: "Follow-up sent", data: { channel: "email" } }, { agent: "resolution" });
    assert.equal(e1.stream, "user:55");
    assert.equal(e2.agent, "resolution");
    assert.deepEqual(
      (await mem.events("user:55")).map((e) => e.id),
      [e1.id, e2.id],
    );
    assert.deepEqual(
      (await mem.events("user:55", { order: "desc", limit: 1 })).map((e) => e.id),
      [e2.id],
    );
    assert.deepEqual(
      (await mem.events("user:55", { after: e1.id })).map((e) => e.content),
      ["Follow-up sent"],
    );
    assert.ok((await mem.streams()).includes("user:55"));
    assert.ok((await mem.entities()).includes("user:55"));
    await mem.append("user:55", "not searchable", { stream: "audit-log", searchable: false });
    assert.equal((await mem.events("audit-log"))[0]?.memory_id, null);
  });

  test("entities and memories page: prefix, after, limit; before", async () => {
    const ns = db.namespace("pages");
    const written = await ns.writeMany(
      ["page:a", "page:b", "page:c", "page:c", "other:z"].map((e, i) => ({ entity: e, content: `note ${i}`, ts: 1_700_000_000 + i })),
    );
    assert.deepEqual(await ns.entities({ limit: 2 }), ["other:z", "page:a"]);
    assert.deepEqual(await ns.entities({ after: "page:a", limit: 2 }), ["page:b", "page:c"]);
    assert.deepEqual(await ns.entities({ prefix: "page:", after: "page:b" }), ["page:c"]);
    await assert.rejects(ns.entities({ limit: 0 }), isError(ValidationError, (e) => e.field === "limit"));
    const ids = written.map((m) => m.id);
    const first = await ns.memories(null, { limit: 2 });
    assert.deepEqual(first.map((m) => m.id), [ids[4], ids[3]]);
    const next = await ns.memories(null, { limit: 2, before: first[1]?.id });
    assert.deepEqual(next.map((m) => m.id), [ids[2], ids[1]]);
    await assert.rejects(ns.memories(null, { before: "m_nope" }), isError(NotFoundError, (e) => e.field === "before"));
    assert.equal((await db.whoami()).auth, "none");
  });

  test("streams page: prefix, after, limit", async () => {
    const ns = db.namespace("stream-pages");
    for (const stream of ["chat:b", "chat:a", "desk", "chat:c"]) {
      await ns.append("user:1", `in ${stream}`, { stream, searchable: false });
    }
    assert.deepEqual(await ns.streams(), ["chat:a", "chat:b", "chat:c", "desk"]);
    assert.deepEqual(await ns.streams({ limit: 2 }), ["chat:a", "chat:b"]);
    assert.deepEqual(await ns.streams({ after: "chat:b", limit: 2 }), ["chat:c", "desk"]);
    assert.deepEqual(await ns.streams({ prefix: "chat:", after: "chat:a" }), ["chat:b", "chat:c"]);
    await assert.rejects(ns.streams({ limit: 10_001 }), isError(ValidationError, (e) => e.field === "limit"));
  });
});

describe("sessions, the memory loop and the cache", () => {
  test("session append, load, info, list, search, configure, clear and purge", async () => {
    const first = await mem.sessionAppend("chat-1", { role: "user", content: "Hi, where is my refund?" });
    assert.equal(first.role, "user");
    assert.match(first.id ?? "", /\S/);
    const more = await mem.sessionAppend(
      "chat-1",
      [
        { role: "assistant", content: "Let me check order #1458." },
        { role: "user", content: "Thanks, it was a refund for a blue jacket" },
      ],
      { searchable: true },
    );
    assert.equal(more.length, 2);
    assert.deepEqual(
      (await mem.sessionLoad("chat-1")).map((m) => m.role),
      ["user", "assistant", "user"],
    );
    assert.deepEqual(
      (await mem.sessionLoad("chat-1", { last: 1 })).map((m) => m.content),
      ["Thanks, it was a refund for a blue jacket"],
    );
    assert.deepEqual(
      (await mem.sessionLoad("chat-1", { strategy: "window", k: 2 })).length,
      2,
    );
    const info = await mem.sessionInfo("chat-1");
    assert.equal(info.count, 3);
    assert.ok((await mem.sessionList()).includes("chat-1"));
    const found = await mem.sessionSearch("chat-1", "jacket", { k: 1 });
    assert.deepEqual(
      found.map((m) => m.content),
      ["Thanks, it was a refund for a blue jacket"],
    );
    await mem.sessionConfigure("chat-1", { ttl: 3600 });
    assert.equal((await mem.sessionInfo("chat-1")).ttl, 3600);
    assert.equal(await mem.sessionClear("chat-1"), null);
    assert.deepEqual(await mem.sessionLoad("chat-1"), []);
    assert.equal((await mem.sessionLoad("chat-1", { as_of: info.last_at! })).length, 3, "history keeps a cleared session");
    const purged = await mem.sessionClear("chat-1", { purge: true });
    assert.equal(purged.purged, true);
    assert.deepEqual(await mem.sessionPurgeExpired(), []);
    await assert.rejects(
      mem.sessionAppend("chat-1", { role: "robot" as "user", content: "x" }),
      isError(ValidationError, (e) => (e.field ?? "").startsWith("message")),
    );
    await assert.rejects(mem.sessionLoad(".."), isError(ValidationError, (e) => e.field === "session_id"));
  });

  test("remember stores turns and queues extraction; recall builds the context block", async () => {
    await mem.write("user:9", "Customer prefers email over phone");
    const recalled = await mem.recall("how does the customer like to be contacted?", { entity: "user:9" });
    assert.equal(recalled.needed, true);
    assert.match(recalled.context ?? "", /prefers email/);
    const remembered = await mem.remember([{ role: "user", content: "I moved to Berlin" }], { entity: "user:9", session: "s-9" });
    assert.equal(remembered.status, "queued");
    assert.equal(remembered.turns.length, 1);
    await assert.rejects(
      mem.remember([{ role: "user", content: "and I like tea" }], { entity: "user:9", wait: true }),
      isError(UpstreamError, (e) => e.code === "upstream" && e.httpStatus === 502),
      "no chat model is configured, so waiting for extraction is refused",
    );
  });

  test("the semantic cache: store, lookup, invalidate, stats", async () => {
    const entry = await mem.cacheStore("what is the refund policy?", { answer: "30 days" }, { scope: "faq", tags: ["policy"] });
    assert.equal(entry.scope, "faq");
    const hit = await mem.cacheLookup("what's the refund policy", { scope: "faq" });
    assert.deepEqual(hit?.value, { answer: "30 days" });
    assert.equal(await mem.cacheLookup("how tall is the Eiffel tower?", { scope: "faq" }), null);
    assert.equal(await mem.cacheInvalidate(null, { tag: "policy" }), 1);
    const stats = await mem.cacheStats();
    assert.equal(stats.entries, 0);
    assert.equal(stats.hits, 1);
  });
});

describe("lifecycle", () => {
  test("forget, purge, export and import, maintain, config and stats", async () => {
    const ns = db.namespace("lifecycle", { agent: "ops" });
    const m = await ns.write("user:1", "to be forgotten");
    await ns.write("user:2", "kept");
    await ns.set("user:2", "k", 1);
    const forgotten = await ns.forget(m.id);
    assert.equal(forgotten.memories, 1);
    await assert.rejects(ns.get(m.id), isError(NotFoundError));
    const purged = await ns.forget(null, { entity: "user:2", purge: true });
    assert.equal(purged.purged, true);
    assert.deepEqual(await ns.memories("user:2"), []);

    await ns.write("user:3", { content: "exported", metadata: { n: 3 } });
    const records = await ns.export();
    assert.ok(records.length > 1);
    const copy = db.namespace("lifecycle-copy");
    assert.ok((await copy.importRecords(records)) > 0);
    assert.deepEqual(
      (await copy.memories("user:3")).map((x) => [x.content, x.metadata]),
      [["exported", { n: 3 }]],
    );

    const report = await ns.maintain({ dry_run: true });
    assert.equal(report.dry_run, true);
    const config = await ns.configure({ max_hot: 1000, recency: 0.4 });
    assert.equal(config.max_hot, 1000);
    assert.equal((await ns.config()).recency, 0.4);
    await assert.rejects(ns.configure({ policy: "nonsense" }), isError(ValidationError, (e) => e.field === "policy"));
    const stats = await ns.stats();
    assert.equal(stats.namespace, "lifecycle");
    assert.equal(stats.memories, 1);
    assert.ok((await db.namespaces()).includes("lifecycle-copy"));
  });
});

describe("client-side refusals", () => {
  test("values JSON would change are refused, naming the field, and nothing is sent", async () => {
    const count = async () => (await mem.memories("user:nan")).length;
    const n = await count();
    await assert.rejects(
      mem.write("user:nan", { content: "x", metadata: { score: Number.NaN } }),
      isError(ValidationError, (e) => e.field === "metadata.score"),
    );
    await assert.rejects(
      mem.write("user:nan", { content: "x", metadata: { tags: ["a", undefined as unknown as string] } }),
      isError(ValidationError, (e) => e.field === "metadata.tags[1]"),
    );
    await assert.rejects(
      mem.write("user:nan", { content: "x", metadata: { seen: new Map() as unknown as string } }),
      isError(ValidationError, (e) => e.field === "metadata.seen"),
    );
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 70; i++) deep = { d: deep };
    await assert.rejects(
      mem.write("user:nan", { content: "x", metadata: deep }),
      isError(ValidationError, (e) => e.limit === 64),
    );
    await assert.rejects(
      mem.query("x", { as_of: Number.POSITIVE_INFINITY }),
      isError(ValidationError, (e) => e.field === "as_of"),
    );
    await assert.rejects(mem.get(".."), isError(ValidationError, (e) => e.field === "id"));
    assert.equal(await count(), n);
    assert.throws(() => db.namespace("Not A Name"), isError(ValidationError, (e) => e.field === "namespace" && e.limit === 64));
    assert.throws(() => db.namespace("ok", { agent: "" }), isError(ValidationError, (e) => e.field === "agent"));
    assert.throws(() => connect("ftp://example.com"), isError(ValidationError, (e) => e.field === "url"));
  });

  test("an unreachable server is a StorageError; a closed client a ClosedError", async () => {
    const port = await freePort();
    const nowhere = connect(`http://127.0.0.1:${port}`, { timeout: 5 });
    await assert.rejects(nowhere.namespaces(), isError(StorageError, (e) => /unreachable/.test(e.message)));
    const other = connect(server.url);
    const ns = other.namespace("acme-support");
    const m: Memory = await ns.write("user:closed", "before close");
    other.close();
    assert.equal(other.closed, true);
    await assert.rejects(ns.get(m.id), isError(ClosedError, (e) => e.code === "closed"));
  });
});
