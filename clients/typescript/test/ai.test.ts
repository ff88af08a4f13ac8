/** `@synapsedb/client/ai` with the real Vercel AI SDK (`ai`): its memory tools run inside
 * `generateText` driven by the SDK's own test model (`MockLanguageModelV3` from `ai/test`,
 * scripted tool calls), against a real `synapsedb serve`; and the memory proxy as the base URL
 * of the SDK's OpenAI-compatible provider (`@ai-sdk/openai-compatible`), whose upstream model is
 * a stand-in HTTP server here (what a hosted model would be). */

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server as HttpServer } from "node:http";
import { after, before, describe, test } from "node:test";

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { connect, type SynapseClient } from "@synapsedb/client";
import { memoryProxyURL, memoryTools } from "@synapsedb/client/ai";
import { Server } from "./support/server.js";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

function toolCall(id: string, toolName: string, input: unknown) {
  return {
    content: [{ type: "tool-call" as const, toolCallId: id, toolName, input: JSON.stringify(input) }],
    finishReason: { unified: "tool-calls" as const, raw: undefined },
    usage,
    warnings: [],
  };
}

function text(words: string) {
  return { content: [{ type: "text" as const, text: words }], finishReason: { unified: "stop" as const, raw: undefined }, usage, warnings: [] };
}

describe("memory tools in generateText", () => {
  let server: Server;
  let db: SynapseClient;

  before(async () => {
    server = await Server.start();
    db = connect(server.url);
  });
  after(async () => {
    db.close();
    await server.close();
  });

  test("the model remembers, recalls and keeps a fact through the tools", async () => {
    const ns = db.namespace("ai-tools", { agent: "assistant" });
    const model = new MockLanguageModelV3({
      doGenerate: [
        toolCall("c1", "remember", { content: "The customer prefers email, never phone calls", type: "preference" }),
        toolCall("c2", "setFact", { key: "order", value: { id: 1458, status: "refunded" } }),
        toolCall("c3", "recall", { query: "how should we contact the customer?", k: 1 }),
        toolCall("c4", "getFact", { key: "order" }),
        text("Email them: order 1458 is refunded."),
      ],
    });
    const result = await generateText({
      model,
      tools: memoryTools(ns, { entity: "user:4321" }),
      prompt: "Note that I prefer email, then tell me how you will contact me.",
      stopWhen: stepCountIs(6),
    });
    assert.equal(result.text, "Email them: order 1458 is refunded.");
    const outputs = result.steps.flatMap((s) => s.toolResults.map((r) => [r.toolName, r.output] as const));
    assert.deepEqual(outputs.map(([name]) => name), ["remember", "setFact", "recall", "getFact"]);
    const recalled = outputs[2]![1] as { query_id: string; hits: { content: string }[] };
    assert.equal(recalled.hits[0]!.content, "The customer prefers email, never phone calls");
    assert.deepEqual(outputs[3]![1], { key: "order", value: { id: 1458, status: "refunded" }, version: 1 });

    // stored where the tools said, as the assistant
    const [memory] = await ns.memories("user:4321");
    assert.equal(memory!.type, "preference");
    assert.equal(memory!.agent, "assistant");
    // what the SDK sent the model: the tools as JSON Schema function definitions
    const offered = model.doGenerateCalls[0]!.tools!;
    assert.deepEqual(offered.map((t) => t.name).sort(), ["getFact", "recall", "remember", "setFact"]);
    const remember = offered.find((t) => t.name === "remember") as { inputSchema: { required: string[] } };
    assert.deepEqual(remember.inputSchema.required, ["content"]); // the entity has a default
  });

  test("a SynapseDB error reaches the model as the tool's error, naming the field", async () => {
    const ns = db.namespace("ai-errors");
    const model = new MockLanguageModelV3({
      doGenerate: [toolCall("c1", "remember", { entity: "user:1", content: "x", salience: 7 }), text("Sorry.")],
    });
    const result = await generateText({ model, tools: memoryTools(ns), prompt: "remember x", stopWhen: stepCountIs(3) });
    const errors = result.steps.flatMap((s) => s.content.filter((p) => p.type === "tool-error"));
    assert.equal(errors.length, 1);
    assert.match(String((errors[0] as { error: unknown }).error), /salience/);
    assert.deepEqual(await ns.memories("user:1"), []); // nothing written
    // the model's next call saw the error as the tool's result
    const seen = JSON.stringify(model.doGenerateCalls[1]!.prompt);
    assert.match(seen, /salience/);
  });
});

describe("the memory proxy as an AI SDK provider's base URL", () => {
  let upstream: HttpServer;
  let asked: { messages: { role: string; content: unknown }[]; model: string }[];
  let server: Server;

  before(async () => {
    asked = [];
    // a stand-in for the hosted model the server forwards to (OpenAI's chat completions)
    upstream = createServer((req: IncomingMessage, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        const parsed = JSON.parse(body) as { messages: { role: string; content: unknown }[]; model: string; response_format?: unknown };
        asked.push(parsed);
        const content = parsed.response_format ? '{"memories": []}' : "Your budget for Hawaii is $10,000.";
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({
          id: `chatcmpl-${asked.length}`, object: "chat.completion", created: 1_760_000_000, model: parsed.model,
          choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
          usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 },
        }));
      });
    });
    await new Promise<void>((ok) => upstream.listen(0, "127.0.0.1", () => ok()));
    const address = upstream.address();
    const port = typeof address === "object" && address ? address.port : 0;
    server = await Server.start({
      env: { SYNAPSEDB_LLM_BASE_URL: `http://127.0.0.1:${port}/v1`, SYNAPSEDB_LLM_MODEL: "stand-in-model" },
    });
  });
  after(async () => {
    await server.close();
    await new Promise<void>((ok) => upstream.close(() => ok()));
  });

  test("generateText through createOpenAICompatible gets the answer, with memory injected", async () => {
    const db = connect(server.url);
    try {
      await db.namespace("travel").write("user:42", "The user's budget for the Hawaii trip is $10,000");
    } finally {
      db.close();
    }
    const synapsedb = createOpenAICompatible({ name: "synapsedb", baseURL: memoryProxyURL(server.url, "travel"), apiKey: "unused-without-keys" });
    const result = await generateText({
      model: synapsedb("stand-in-model"),
      prompt: "What's my budget for the Hawaii trip?",
      providerOptions: { synapsedb: { user: "user:42" } }, // the entity recalled and stored
    });
    assert.equal(result.text, "Your budget for Hawaii is $10,000.");
    const first = asked[0]!;
    assert.equal(first.model, "stand-in-model");
    const system = first.messages.filter((m) => m.role === "system").map((m) => JSON.stringify(m.content)).join("\n");
    assert.match(system, /budget for the Hawaii trip is \$10,000/); // recalled and injected
    assert.equal(first.messages.at(-1)!.content, "What's my budget for the Hawaii trip?");
  });

  test("memoryProxyURL: a namespace's route, or the server's default", () => {
    assert.equal(memoryProxyURL("http://h:7379/", "acme support"), "http://h:7379/v1/namespaces/acme%20support");
    assert.equal(memoryProxyURL("http://h:7379"), "http://h:7379/v1");
  });
});
