import { mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { redactSecrets } from "../src/core/redact.js";
import { Agent, type AgentEvent, defineTool } from "../src/index.js";
import { connectMcpServers } from "../src/mcp/index.js";
import { createApp } from "../src/server/index.js";
import { memoryStore, sqliteStore } from "../src/store/index.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { scriptedModel } from "../src/testing/index.js";
import { runCli } from "./helpers.js";
import { call } from "./support/mcp-helpers.js";

const FILESYSTEM = fileURLToPath(
  new URL("../node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", import.meta.url),
);
const TEST_SERVER = fileURLToPath(new URL("./support/mcp-test-server.mjs", import.meta.url));
const KEY = "sk-proj-Zq8uT1mW4xN7rB0cV3yH6kL9pS2dF5gJ";
const MiB = 1024 * 1024;
const SERVER_KEY = "agentloop-server-key-0123456789";

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("configured secrets", () => {
  it("never reach events, the model or stdout when a tool reads them (agentloop run --json, real MCP server)", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-secrets-")));
    writeFileSync(join(dir, ".env"), `OPENAI_API_KEY=${KEY}\nAGENTLOOP_API_KEY=${SERVER_KEY}\nDEBUG=1\n`);
    const mcpServers = { files: { command: process.execPath, args: [FILESYSTEM, dir] } };
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers }));
    server = await startFakeOpenAIServer({
      respond: [
        { toolCalls: [{ name: "read_text_file", arguments: { path: join(dir, ".env") } }] },
        { text: "The file sets OPENAI_API_KEY, AGENTLOOP_API_KEY and DEBUG." },
      ],
    });
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: KEY, AGENTLOOP_API_KEY: SERVER_KEY };
    const run = await runCli(["run", "--json", "What does .env set?"], { cwd: dir, env });
    expect(run.code).toBe(0);
    const events = run.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as AgentEvent);
    const result = events.find((e) => e.type === "tool_result");
    expect(result).toMatchObject({ name: "read_text_file", isError: false });
    expect(result?.type === "tool_result" && result.content).toBe(
      "OPENAI_API_KEY=[REDACTED]\nAGENTLOOP_API_KEY=[REDACTED]\nDEBUG=1\n",
    );
    for (const text of [run.stdout, run.stderr, JSON.stringify(server.requests.map((r) => r.body))]) {
      expect(text).not.toContain(KEY);
      expect(text).not.toContain(SERVER_KEY);
    }
  }, 60_000);

  it("are redacted from tool results before truncation, from progress and from errors (library)", async () => {
    const secret = "tok_live_4f9a8b7c6d5e4f3a2b1c";
    const leak = defineTool({
      name: "leak",
      description: "Returns text around a secret.",
      parameters: z.object({ fail: z.boolean() }),
      execute: ({ fail }, { onProgress }) => {
        onProgress?.({ progress: 1, message: `using ${secret}` });
        if (fail) throw new Error(`request with ${secret} was refused`);
        // The secret straddles the truncation limit: no prefix of it may survive the cut.
        return `${"x".repeat(90)}${secret} tail`;
      },
    });
    const model = scriptedModel([
      { toolCalls: [{ name: "leak", arguments: { fail: false } }] },
      { toolCalls: [{ name: "leak", arguments: { fail: true } }] },
      { text: "done" },
    ]);
    const agent = new Agent({ model, tools: [leak], secrets: [secret], maxToolResultChars: 100 });
    const events: AgentEvent[] = [];
    const stream = agent.stream("go");
    for await (const event of stream) events.push(event);
    const everything = JSON.stringify({ events, requests: model.requests });
    expect(everything).not.toContain(secret.slice(0, 6));
    expect(everything).toContain("[REDACTED]");
    const results = events.filter((e) => e.type === "tool_result");
    expect(results.map((e) => e.type === "tool_result" && e.isError)).toEqual([false, true]);
    expect(results[1]).toMatchObject({ content: "request with [REDACTED] was refused" });
  });
});

describe("redactSecrets", () => {
  it("leaves no long visible tail of a provider-masked key", () => {
    const masked = [
      "Incorrect API key provided: sk-proj-abc1************************************************wXyZ.",
      "Invalid API Key: gsk_AbCd********************************1234 (groq)",
      "key xai-AbCd****************efgh5678 rejected",
    ];
    expect(masked.map((m) => redactSecrets(m, []))).toEqual([
      "Incorrect API key provided: sk-[REDACTED].",
      "Invalid API Key: [REDACTED] (groq)",
      "key [REDACTED] rejected",
    ]);
  });
});

/** How many times `needle` occurs in `text`. */
const hits = (text: string, needle: string) => text.split(needle).length - 1;

describe("megabytes on every path that redacts: cut first, redacted in linear time", () => {
  it("a 1 MiB path before auth is refused at once, logged cut, without a prefix of the key at the cut", async () => {
    const lines: string[] = [];
    const { app } = createApp({
      agents: { m: new Agent({ model: scriptedModel([]) }) },
      apiKey: SERVER_KEY,
      log: (line) => lines.push(line),
    });
    for (const path of [`/v1/${"a".repeat(MiB)}`, `/v1/${"b".repeat(190)}${SERVER_KEY}${"c".repeat(MiB)}`]) {
      const res = await app.request(path);
      expect(res.status).toBe(401);
    }
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line.length).toBeLessThan(300);
      expect(line).toMatch(/^GET \/v1\/[ab]+… 401 \d+ms$/);
      expect(line).not.toContain(SERVER_KEY.slice(0, 6));
    }
  });

  it("an unknown approval id of 1 MiB is echoed as a short prefix", async () => {
    const app = notesApp();
    const json = { "content-type": "application/json" };
    const started = await app.request("/v1/chat/completions", {
      method: "POST",
      headers: json,
      body: JSON.stringify({ model: "notes", messages: [{ role: "user", content: "Save hi" }] }),
    });
    const { id } = (await started.json()) as { id: string };
    const res = await app.request(`/v1/runs/${id}/approvals`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ approve: [`${"x".repeat(MiB)}`] }),
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { message: string; code: string } };
    expect(error.code).toBe("unknown_call");
    expect(error.message).toBe(`No call '${"x".repeat(80)}…' waits for approval; waiting: w1 (write_note).`);
  });

  it("a 1 MiB id or type a request names is echoed as a short prefix (approvals, input items, formats)", async () => {
    const app = notesApp();
    const post = (path: string, body: unknown) =>
      app.request(path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const started = await post("/v1/chat/completions", {
      model: "notes",
      messages: [{ role: "user", content: "Save hi" }],
    });
    const { id } = (await started.json()) as { id: string };
    const long = "x".repeat(MiB);
    const refusals: [string, unknown][] = [
      [`/v1/runs/${id}/approvals`, { approve: [long], deny: [long] }],
      ["/v1/responses", { model: "notes", input: [{ type: long }] }],
      ["/v1/responses", { model: "notes", input: "hi", text: { format: { type: long } } }],
      [
        "/v1/chat/completions",
        { model: "notes", messages: [{ role: "user", content: "hi" }], response_format: { type: long } },
      ],
    ];
    for (const [path, body] of refusals) {
      const res = await post(path, body);
      expect(res.status, path).toBe(400);
      const { error } = (await res.json()) as { error: { message: string } };
      expect(error.message, path).toContain(`'${"x".repeat(80)}…'`);
      expect(error.message.length, path).toBeLessThan(300);
    }
  });

  it("a 1 MiB error body of the model API becomes one short line (agentloop run)", async () => {
    server = await startFakeOpenAIServer({
      respond: [
        { status: 400, body: JSON.stringify({ error: { message: `${"a".repeat(MiB)} ${KEY}` } }) },
        { status: 404, headers: { "content-type": "text/html" }, body: `<title>${"<".repeat(MiB)}` },
        { status: 404, headers: { "content-type": "text/html" }, body: "<title<h1".repeat(MiB / 9) },
      ],
    });
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: KEY };
    const stderr: string[] = [];
    for (let i = 0; i < 3; i++) {
      const run = await runCli(["run", "go"], { env });
      expect(run.code).toBe(5);
      stderr.push(run.stderr);
    }
    expect(stderr[0]).toMatch(/^agentloop: model_error: Model API error \(HTTP 400\): a+…\n$/);
    expect(stderr[0]?.length).toBeLessThan(1100);
    expect(stderr.slice(1)).toEqual([
      "agentloop: model_error: Model API error (HTTP 404): no title (an HTML page, probably from a proxy) (check the model id and the base URL)\n",
      "agentloop: model_error: Model API error (HTTP 404): no title (an HTML page, probably from a proxy) (check the model id and the base URL)\n",
    ]);
  }, 60_000);

  it("a 1 MiB error message of an MCP server is cut before it is redacted", async () => {
    const failing = {
      transport: async () => {
        const [client, end] = InMemoryTransport.createLinkedPair();
        const mcp = new Server({ name: "failing", version: "1.0.0" }, { capabilities: { tools: {} } });
        mcp.setRequestHandler(ListToolsRequestSchema, () => ({
          tools: [{ name: "fail", inputSchema: { type: "object" as const } }],
        }));
        mcp.setRequestHandler(CallToolRequestSchema, () => {
          throw new McpError(-32603, `${"a".repeat(MiB)} Bearer ${KEY}`);
        });
        await mcp.connect(end);
        return client;
      },
    };
    const toolset = await connectMcpServers({ failing });
    try {
      const result = await call(toolset, "fail", {});
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(
        /^MCP server 'failing' could not run 'fail': (MCP error -32603: )+a+…\.$/,
      );
      expect(result.content.length).toBeLessThan(4100);
    } finally {
      await toolset.close();
    }
  });

  it("an MCP error message with an API key across the cut keeps no head of it", async () => {
    vi.stubEnv("OPENAI_API_KEY", KEY);
    const failing = {
      transport: async () => {
        const [client, end] = InMemoryTransport.createLinkedPair();
        const mcp = new Server({ name: "failing", version: "1.0.0" }, { capabilities: { tools: {} } });
        mcp.setRequestHandler(ListToolsRequestSchema, () => ({
          tools: [{ name: "fail", inputSchema: { type: "object" as const } }],
        }));
        // The message is cut at 4,000 characters, 20 of them into the key.
        mcp.setRequestHandler(CallToolRequestSchema, () => {
          throw new McpError(-32603, `${"a".repeat(3962)}${KEY}${"b".repeat(MiB)}`);
        });
        await mcp.connect(end);
        return client;
      },
    };
    // The agent redacts the key from what it gets, so only a head cut off by the MCP client can show.
    const toolset = await connectMcpServers({ failing });
    try {
      const result = await call(toolset, "fail", {});
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(/a…\.$/);
      expect(result.content).not.toContain(KEY.slice(0, 8));
    } finally {
      await toolset.close();
      vi.unstubAllEnvs();
    }
  });
});

describe("configured secrets the model writes", () => {
  /** A model that puts `KEY` in a tool's arguments, then in its answer (streamed in 8-character deltas). */
  function leakyModel() {
    return scriptedModel([
      { text: `Saving ${KEY} now.`, toolCalls: [{ id: "c1", name: "save", arguments: { text: KEY } }] },
      { text: `Saved. The key is ${KEY}.`, thinking: `I should not repeat ${KEY}.` },
    ]);
  }

  it("are not in events or the state when the arguments spell them with JSON escapes, while the tool gets them", async () => {
    const received: string[] = [];
    const save = defineTool({
      name: "save",
      description: "Saves a text.",
      parameters: z.object({ text: z.string() }),
      execute: ({ text }) => {
        received.push(text);
        return "saved";
      },
    });
    // `\u0073` is "s": the arguments mean the key without holding it as written.
    const spelt = `\\u0073${KEY.slice(1)}`;
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "save", arguments: `{"text":"${spelt}"}` }] },
      { text: "Saved." },
    ]);
    const events: AgentEvent[] = [];
    const result = await new Agent({
      model,
      tools: [save],
      secrets: [KEY],
      onEvent: (e) => events.push(e),
    }).run("Save the key.");
    expect(received).toEqual([KEY]);
    expect(events.find((e) => e.type === "tool_call")).toMatchObject({ arguments: { text: "[REDACTED]" } });
    expect(hits(JSON.stringify({ events, state: result.state }), KEY.slice(1, 12))).toBe(0);
  });

  it("are not in events, the state, the store or the server's answers, while the tool gets them (library, server)", async () => {
    const received: string[] = [];
    const save = defineTool({
      name: "save",
      description: "Saves a text.",
      parameters: z.object({ text: z.string() }),
      execute: ({ text }) => {
        received.push(text);
        return "saved";
      },
    });
    const events: AgentEvent[] = [];
    const agent = new Agent({
      model: leakyModel(),
      tools: [save],
      secrets: [KEY],
      onEvent: (e) => events.push(e),
    });
    const result = await agent.run("Save the key.");
    const handle = new Agent({ model: leakyModel(), tools: [save], secrets: [KEY] }).stream("Save the key.");
    for await (const event of handle) events.push(event);
    expect(received).toEqual([KEY, KEY]);
    expect(result.text).toBe("Saved. The key is [REDACTED].");
    const deltas = events.filter((e) => e.type === "message_delta").map((e) => e.text);
    expect(deltas.join("")).toContain("Saving [REDACTED] now.");
    const everything = JSON.stringify({ events, state: result.state, handle: (await handle.result).state });
    expect(hits(everything, KEY.slice(0, 9))).toBe(0);
    expect(events.find((e) => e.type === "tool_call")).toMatchObject({ arguments: { text: "[REDACTED]" } });

    const dir = mkdtempSync(join(tmpdir(), "agentloop-secrets-"));
    const file = join(dir, "a.db");
    const store = await sqliteStore(file);
    const served = new Agent({ model: leakyModel(), tools: [save], secrets: [KEY] });
    const { app } = createApp({ agents: { m: served }, store });
    const res = await app.request("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "Save the key." }] }),
    });
    const body = await res.text();
    expect(res.status).toBe(200);
    expect(body).toContain("Saved. The key is [REDACTED].");
    await store.close();
    expect(received).toEqual([KEY, KEY, KEY]);
    expect(hits(body, KEY.slice(0, 9))).toBe(0);
    expect(hits(readFileSync(file).toString("latin1"), KEY.slice(0, 9))).toBe(0);
  });

  it("leave a run waiting for approval stored without them; resumed from that state, the tool runs with the arguments as stored", async () => {
    const received: string[] = [];
    const save = defineTool({
      name: "save",
      description: "Saves a text.",
      parameters: z.object({ text: z.string() }),
      needsApproval: true,
      execute: ({ text }) => {
        received.push(text);
        return "saved";
      },
    });
    const agent = new Agent({ model: leakyModel(), tools: [save], secrets: [KEY] });
    const waiting = await agent.run("Save the key.");
    expect(waiting.stopReason).toBe("approval_required");
    expect(waiting.pendingApprovals).toEqual([{ id: "c1", name: "save", arguments: { text: "[REDACTED]" } }]);
    const stored = JSON.parse(JSON.stringify(waiting.state));
    expect(hits(JSON.stringify(stored), KEY.slice(0, 9))).toBe(0);
    const resumed = await agent.resume(stored, { approve: "all" }).result;
    expect(resumed.stopReason).toBe("final_answer");
    expect(received).toEqual(["[REDACTED]"]);
    // Approved in the run itself, the call runs with the arguments the model sent.
    const asked: unknown[] = [];
    const onApproval = (request: { arguments: Record<string, unknown> }) => {
      asked.push(request.arguments);
      return "approve" as const;
    };
    await new Agent({ model: leakyModel(), tools: [save], secrets: [KEY], onApproval }).run("Save the key.");
    expect(asked).toEqual([{ text: "[REDACTED]" }]);
    expect(received).toEqual(["[REDACTED]", KEY]);
  });

  it("are not in --json stdout, plain stdout, the SQLite file or sessions show (agentloop run, real MCP server)", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-secrets-")));
    const saved = join(dir, "saved.txt");
    const mcpServers = { notes: { command: process.execPath, args: [TEST_SERVER] } };
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers }));
    const script = [
      { text: `Saving ${KEY}.`, toolCalls: [{ name: "save", arguments: { path: saved, text: KEY } }] },
      { text: `Saved. The key is ${KEY}.` },
    ];
    server = await startFakeOpenAIServer({ respond: [...script, ...script] });
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: KEY, AGENTLOOP_DB: join(dir, "agentloop.db") };
    const json = await runCli(["run", "--json", "--session", "s1", "Save the key."], { cwd: dir, env });
    expect(json.code).toBe(0);
    expect(readFileSync(saved, "utf8")).toBe(KEY);
    const plain = await runCli(["run", "--session", "s2", "Save the key."], { cwd: dir, env });
    expect(plain.code).toBe(0);
    expect(plain.stdout).toBe("Saved. The key is [REDACTED].\n");
    const show = await runCli(["sessions", "show", "s1", "--json"], { cwd: dir, env });
    const shown = await runCli(["sessions", "show", "s2"], { cwd: dir, env });
    expect(show.code).toBe(0);
    expect(shown.stdout).toContain('→ save {"path":');
    const events = json.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as AgentEvent);
    expect(events.find((e) => e.type === "tool_call")).toMatchObject({ arguments: { text: "[REDACTED]" } });
    const db = readFileSync(join(dir, "agentloop.db")).toString("latin1");
    for (const text of [
      json.stdout,
      json.stderr,
      plain.stdout,
      plain.stderr,
      show.stdout,
      shown.stdout,
      db,
    ]) {
      expect(hits(text, KEY.slice(0, 9))).toBe(0);
    }
  }, 60_000);
});

/** A server whose agent `notes` asks to call write_note (id w1), which waits for approval. */
function notesApp() {
  const write = defineTool({
    name: "write_note",
    description: "Writes the note.",
    parameters: z.object({ text: z.string() }),
    needsApproval: true,
    execute: () => "saved",
  });
  const model = scriptedModel([{ toolCalls: [{ id: "w1", name: "write_note", arguments: { text: "hi" } }] }]);
  return createApp({ agents: { notes: new Agent({ model, tools: [write] }) }, store: memoryStore() }).app;
}
