/** A real `synapsedb serve` for the tests: a temporary data directory, a free 127.0.0.1 port,
 * the real local embedding model (all-MiniLM-L6-v2), and the repository's Python (`.venv`, or
 * SYNAPSEDB_PYTHON). Stopped and restarted on the same port and data (a feed must survive it). */

import { spawn, execFile, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** The repository root (clients/typescript/build/test/support -> ../../../../..). */
export const REPO = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../../../..");
/** clients/typescript. */
export const PACKAGE = resolve(REPO, "clients/typescript");

export function python(): string {
  if (process.env.SYNAPSEDB_PYTHON) return process.env.SYNAPSEDB_PYTHON;
  const venv = join(REPO, ".venv/bin/python");
  return existsSync(venv) ? venv : "python3";
}

export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => ok(port));
    });
  });
}

const run = promisify(execFile);

export interface KeyOptions {
  tenant: string;
  scopes: string;
  namespaces?: string;
  agents?: string;
}

/** API keys created on a data directory in one Python process (each `synapsedb keys create`
 * would start its own), by name: each key's id and secret. */
export async function createKeys(data: string, specs: Record<string, KeyOptions>): Promise<Record<string, { id: string; key: string }>> {
  const script = `
import json, sys
from synapsedb.server.keys import KeyStore
store, out = KeyStore(sys.argv[1]), {}
for name, o in json.loads(sys.argv[2]).items():
    split = lambda v: [x.strip() for x in v.split(",")] if v else None
    key, token = store.create(o["tenant"], split(o["scopes"]), namespaces=split(o.get("namespaces")),
                              agents=split(o.get("agents")))
    out[name] = {"id": key.id, "key": token}
print(json.dumps(out))
`;
  const { stdout } = await run(python(), ["-c", script, data, JSON.stringify(specs)], { cwd: REPO });
  return JSON.parse(stdout) as Record<string, { id: string; key: string }>;
}

export async function revokeKey(data: string, id: string): Promise<void> {
  await run(python(), ["-m", "synapsedb", "keys", "revoke", "--data", data, id], { cwd: REPO });
}

export class Server {
  readonly url: string;
  private proc: ChildProcess | undefined;
  private log = "";

  private constructor(
    readonly data: string,
    readonly port: number,
    private readonly auth: "keys" | "none",
    private readonly root: string,
    private readonly env: Record<string, string> = {},
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  /** A server on a new data directory; `keys`: run `prepare(data)` (create keys) first. */
  static async start(
    options: { auth?: "keys" | "none"; prepare?: (data: string) => Promise<void>; env?: Record<string, string> } = {},
  ): Promise<Server> {
    const root = mkdtempSync(join(tmpdir(), "synapsedb-ts-"));
    const server = new Server(join(root, "data"), await freePort(), options.auth ?? "none", root, options.env);
    if (options.prepare) await options.prepare(server.data);
    await server.boot();
    return server;
  }

  /** What the server wrote to stdout and stderr (for failure messages). */
  get output(): string {
    return this.log;
  }

  private async boot(): Promise<void> {
    const proc = spawn(
      python(),
      ["-m", "synapsedb", "serve", "--data", this.data, "--host", "127.0.0.1", "--port", String(this.port), "--auth", this.auth],
      {
        cwd: REPO,
        env: { ...process.env, SYNAPSEDB_DURABILITY: "os", SYNAPSEDB_EMBEDDER: "minilm", ...this.env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    this.proc = proc;
    proc.stdout?.on("data", (chunk: Buffer) => (this.log += chunk.toString()));
    proc.stderr?.on("data", (chunk: Buffer) => (this.log += chunk.toString()));
    const deadline = Date.now() + 90_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`synapsedb serve exited ${proc.exitCode}:\n${this.log}`);
      try {
        const resp = await fetch(`${this.url}/readyz`);
        await resp.arrayBuffer();
        if (resp.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`synapsedb serve did not become ready:\n${this.log}`);
      await new Promise((ok) => setTimeout(ok, 100));
    }
  }

  /** Stops the process: SIGTERM, then SIGKILL after 20 s (`kill`: SIGKILL at once, a crash). */
  async stop(options: { kill?: boolean } = {}): Promise<void> {
    const proc = this.proc;
    this.proc = undefined;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise<void>((ok) => proc.once("exit", () => ok()));
    proc.kill(options.kill ? "SIGKILL" : "SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
    await exited;
    clearTimeout(timer);
  }

  /** Stops (SIGKILL with `kill`: uvicorn's graceful stop waits for open feeds) and starts
   * again on the same port and data directory. */
  async restart(options: { kill?: boolean } = {}): Promise<void> {
    await this.stop(options);
    await this.boot();
  }

  /** Stops and removes the data directory. */
  async close(): Promise<void> {
    await this.stop();
    rmSync(this.root, { recursive: true, force: true });
  }
}
