/** Server-Sent Events: the parser, and following streams and changes live with resume. */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { connect, parseEvents, ValidationError, type Change, type Event, type Namespace, type SynapseClient } from "@synapsedb/client";

import { Server } from "./support/server.js";

function body(chunks: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(enc.encode(c));
      controller.close();
    },
  });
}

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe("the event-stream parser", () => {
  test("fields, comments, multi-line data, kept ids and any line end, split anywhere", async () => {
    const text =
      ": keep-alive\r\n\r\n" +
      "id: 1\r\nevent: event\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
      "data:no space\n\n" +
      "id: 2\revent: change\rdata: x\r\r" +
      "event: ignored-without-data\n\n" +
      "id\ndata: id reset\n\n" +
      "data: never finished";
    const expected = [
      { id: "1", event: "event", data: '{"a":\n1}' },
      { id: "1", event: "message", data: "no space" },
      { id: "2", event: "change", data: "x" },
      { id: "", event: "message", data: "id reset" },
    ];
    assert.deepEqual(await all(parseEvents(body([text]))), expected);
    const bytes = [...text]; // one character per chunk: every boundary, CRLF split included
    assert.deepEqual(await all(parseEvents(body(bytes))), expected);
    const utf8 = "data: caf\u00e9 \u{1F600}\n\n";
    const raw = new TextEncoder().encode(utf8);
    const split = new ReadableStream<Uint8Array>({
      start(c) {
        for (const b of raw) c.enqueue(Uint8Array.of(b)); // multi-byte characters split too
        c.close();
      },
    });
    assert.deepEqual(await all(parseEvents(split)), [{ id: "", event: "message", data: "caf\u00e9 \u{1F600}" }]);
  });
});

describe("live feeds", () => {
  let server: Server;
  let db: SynapseClient;
  let mem: Namespace;

  before(async () => {
    server = await Server.start();
    db = connect(server.url);
    mem = db.namespace("live", { agent: "intake" });
  });

  after(async () => {
    db?.close();
    await server?.close();
  });

  test("follow: history, then events appended while it is open; resume after lastEventId", async () => {
    const first = await mem.append("user:1", "one");
    const feed = mem.follow("user:1");
    const got: Event[] = [];
    const during = ["two", "three"];
    for await (const ev of feed) {
      got.push(ev);
      const next = during.shift();
      if (next) await mem.append("user:1", next); // arrives live, on the open feed
      if (got.length === 3) break;
    }
    assert.deepEqual(
      got.map((e) => e.content),
      ["one", "two", "three"],
    );
    assert.equal(got[0]?.id, first.id);
    assert.equal(feed.lastEventId, got[2]?.id);
    await mem.append("user:1", "four");
    const resumed = await all(mem.follow("user:1", { after: feed.lastEventId!, idle_timeout: 0.5 }));
    assert.deepEqual(
      resumed.map((e) => e.content),
      ["four"],
      "after the last id seen: nothing missed, nothing twice",
    );
    await assert.rejects(all(mem.follow("user:1", { after: "not-an-id" })), (e) => e instanceof ValidationError);
    assert.throws(() => {
      const f = mem.follow("user:1", { idle_timeout: 0.2 });
      void f[Symbol.asyncIterator]();
      void f[Symbol.asyncIterator]();
    }, TypeError);
  });

  test("changes: every committed change, live, with action and target; resume and replay", async () => {
    const ns = db.namespace("changes", { agent: "intake" });
    const feed = ns.changes();
    const it = feed[Symbol.asyncIterator]();
    const pending = it.next(); // connects: the feed starts now
    await new Promise((ok) => setTimeout(ok, 300));
    const m = await ns.write("user:1", "refund asked");
    await ns.set("user:1", "order", 1458);
    const ev = await ns.append("user:2", "hello", { searchable: false });
    await ns.update(m.id, { salience: 0.9 });
    const got: Change[] = [(await pending).value as Change];
    while (got.length < 4) got.push((await it.next()).value as Change);
    assert.deepEqual(
      got.map((c) => [c.action, c.entity, c.target]),
      [
        ["write", "user:1", m.id],
        ["set", "user:1", "order"],
        ["append", "user:2", `user:2/${ev.id}`],
        ["update", "user:1", m.id],
      ],
    );
    assert.equal(got[0]?.namespace, "changes");
    assert.equal(got[0]?.agent, "intake");
    await it.return?.();

    await ns.delete(m.id);
    const resumed = await all(ns.changes({ after: got[1]!.id, idle_timeout: 0.5 }));
    assert.deepEqual(
      resumed.map((c) => c.action),
      ["append", "update", "delete"],
      "exact resume on the same server process",
    );
    const one = await all(ns.changes({ since: "2000-01-01T00:00:00Z", entity: "user:2", idle_timeout: 0.5 }));
    assert.deepEqual(
      one.map((c) => [c.action, c.entity]),
      [["append", "user:2"]],
    );
    assert.match(one[0]!.id, /-r-0$/, "history replayed from the audit trail");
  });

  test("idle_timeout, an abort signal and close() end a feed quietly", async () => {
    const started = Date.now();
    assert.deepEqual(await all(mem.follow("nobody", { idle_timeout: 0.3 })), []);
    assert.ok(Date.now() - started < 10_000);
    const abort = new AbortController();
    const feed = mem.follow("nobody", { signal: abort.signal });
    setTimeout(() => abort.abort(), 200);
    assert.deepEqual(await all(feed), []);
    assert.deepEqual(await all(mem.follow("user:1", { signal: AbortSignal.abort() })), [], "aborted before it starts");
    const other = connect(server.url);
    const closing = other.namespace("live").changes();
    setTimeout(() => other.close(), 200);
    assert.deepEqual(await all(closing), []);
  });
});

describe("resume across a server restart", () => {
  test("a followed stream continues where it was cut: nothing missed, nothing twice", async () => {
    const server = await Server.start();
    try {
      const db = connect(server.url);
      const mem = db.namespace("restart");
      await mem.append("s", "before-1");
      await mem.append("s", "before-2");
      const feed = mem.follow("s", { retries: 60, retryDelayMs: 100, retryMaxDelayMs: 250 });
      const it = feed[Symbol.asyncIterator]();
      assert.equal(((await it.next()).value as Event).content, "before-1");
      assert.equal(((await it.next()).value as Event).content, "before-2");
      const third = it.next(); // waiting on the live feed when the server goes away
      await server.restart({ kill: true }); // a crash: SIGTERM would wait for the open feed
      const writer = connect(server.url).namespace("restart");
      await writer.append("s", "after-1");
      await writer.append("s", "after-2");
      assert.equal(((await third).value as Event).content, "after-1");
      assert.equal(((await it.next()).value as Event).content, "after-2");
      await it.return?.();
      db.close();
    } finally {
      await server.close();
    }
  });
});
