#!/usr/bin/env node
// Latency of the TypeScript client against the Python sync client: one `synapsedb serve`
// (a temporary data directory, the local MiniLM embedder, durability "os"), the same
// operations from each client in turn (write: one memory, embedded by the server; query: a
// text query, k=10; get fact: GET /facts, the server's fast lane, where client overhead shows
// most), sequential requests, p50 and p95 in milliseconds, as a markdown table.
//
//   npm run build && node bench/latency.mjs [--n 300]

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";

import { connect } from "../dist/index.js";
import { python, REPO, Server } from "../build/test/support/server.js";

const n = Number(process.argv[process.argv.indexOf("--n") + 1] || 300) || 300;

function pct(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function node(url) {
  const mem = connect(url).namespace("bench-node", { agent: "bench" });
  for (let i = 0; i < 20; i++) {
    await mem.write(`user:${i % 10}`, `warm-up memory ${i} about order #${1000 + i}`);
    await mem.query(`order ${i}`, { k: 10 });
  }
  await mem.set("user:1", "order", { id: 1458 });
  const out = { write: [], query: [], "get fact": [] };
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await mem.write(`user:${i % 50}`, `Customer ${i} asked about the refund of order #${2000 + i}`);
    out.write.push(performance.now() - t);
  }
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await mem.query(`refund status of order #${2000 + i}`, { k: 10 });
    out.query.push(performance.now() - t);
  }
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await mem.get("user:1", "order");
    out["get fact"].push(performance.now() - t);
  }
  return out;
}

async function py(url) {
  const script = fileURLToPath(new URL("./latency_python.py", import.meta.url));
  const { stdout } = await promisify(execFile)(python(), [script, url, String(n)], { cwd: REPO, maxBuffer: 1 << 26 });
  return JSON.parse(stdout);
}

const server = await Server.start();
try {
  const nodeRes = await node(server.url);
  const pyRes = await py(server.url);
  const f = (x) => x.toFixed(2);
  console.log(`| operation (n=${n}, sequential) | TypeScript p50 ms | Python sync p50 ms | TypeScript p95 ms | Python sync p95 ms |`);
  console.log("|---|---|---|---|---|");
  for (const op of Object.keys(nodeRes)) {
    console.log(`| ${op} | ${f(pct(nodeRes[op], 50))} | ${f(pct(pyRes[op], 50))} | ${f(pct(nodeRes[op], 95))} | ${f(pct(pyRes[op], 95))} |`);
  }
  console.log(`\nnode ${process.version}; one synapsedb serve on 127.0.0.1 (SYNAPSEDB_DURABILITY=os, minilm)`);
} finally {
  await server.close();
}
