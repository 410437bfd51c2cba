/**
 * What the end-to-end tests of `agentloop serve` replicas on PostgreSQL share: a workspace with the
 * gate MCP server (its temp dir removed after the file's tests), chat requests, and reading a
 * stream until a pattern shows.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect } from "vitest";
import type { FakeRequest } from "../../src/testing/fake-http.js";
import type { Postgres } from "./postgres.js";
import type { ServeProcess } from "./serve-process.js";

const GATE_SERVER = new URL("./gate-mcp-server.mjs", import.meta.url).pathname;
/** The password of every database URL: it must never be printed. */
export const PASSWORD = "hunter2-not-printed";

/** A fresh database's URL on `pg`, with the password. */
export const databaseOf = async (pg: Postgres) =>
  (await pg.database()).replace("agentloop@", `agentloop:${PASSWORD}@`);

/** A replica's environment: the upstream at `upstreamUrl`, runs stored in `db`. */
export const replicaEnv = (upstreamUrl: string | undefined, db: string) => ({
  OPENAI_BASE_URL: upstreamUrl ?? "",
  OPENAI_API_KEY: "sk-upstream",
  AGENTLOOP_DB: db,
});

/** Stops the replicas (SIGTERM, those still running) and checks that none printed the password. */
export async function stopAll(...servers: ServeProcess[]): Promise<void> {
  for (const server of servers) if (server.child.exitCode === null) server.child.kill("SIGTERM");
  for (const server of servers) await server.exited;
  for (const server of servers) expect(server.stderr()).not.toContain(PASSWORD);
}

type WireMessage = { role: string; content: string | null; tool_call_id?: string };
export const messagesOf = (request: FakeRequest) => (request.body.messages ?? []) as WireMessage[];
/** The user messages the model was sent, joined: what a reply "heard". */
export const heard = (request: FakeRequest) =>
  messagesOf(request)
    .filter((m) => m.role === "user")
    .map((m) => m.content)
    .join(" | ");

export function post(url: string, body: unknown, session?: string): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(session && { "x-agentloop-session": session }) },
    body: JSON.stringify(body),
  });
}

export const chat = (base: string, content: string, session?: string, extra: object = {}) =>
  post(`${base}/v1/chat/completions`, { messages: [{ role: "user", content }], ...extra }, session);

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A workspace: the gate MCP server in a config (with `approval` when given), its log and gate files. */
export function workspace(approval?: object) {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-replicas-"));
  dirs.push(dir);
  const log = join(dir, "tools.log");
  const gate = join(dir, "gate");
  const config = join(dir, "agentloop.json");
  writeFileSync(
    config,
    JSON.stringify({
      mcpServers: { gate: { command: process.execPath, args: [GATE_SERVER, log, gate] } },
      ...(approval && { approval }),
    }),
  );
  const lines = () =>
    (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []).filter(
      (l) => !l.startsWith("pid "),
    );
  return { dir, gate, config, lines };
}

/** A reply that notes, then waits for the gate: the run is mid-tool until the gate file exists. */
export const NOTE_THEN_WAIT = {
  text: "Noting, then waiting.",
  toolCalls: [
    { id: "n1", name: "note", arguments: { text: "one" } },
    { id: "w1", name: "wait_for_file", arguments: {} },
  ],
};

/** Reads a chat completion stream until `pattern` shows; returns what was read and the reader. */
export async function readUntil(res: Response, pattern: RegExp) {
  const reader = res.body?.getReader() as ReadableStreamDefaultReader<Uint8Array>;
  let seen = "";
  while (!pattern.test(seen)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before ${pattern}: ${seen}`);
    seen += new TextDecoder().decode(value);
  }
  return { seen, reader };
}
