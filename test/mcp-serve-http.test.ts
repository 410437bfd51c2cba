// `agentloop serve --mcp` (SPEC section 14): the official MCP client over Streamable HTTP at /mcp,
// behind the same key as /v1, the model a fake OpenAI server.
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  type CallToolResult,
  ElicitRequestSchema,
  type ElicitResult,
  ProgressNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  type FakeToolCall,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { startServe } from "./support/serve-process.js";

const GATE = fileURLToPath(new URL("./support/gate-mcp-server.mjs", import.meta.url));
const KEY = "sk-agentloop-mcp-test";

let model: FakeOpenAIServer | undefined;
const clients: Client[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => {});
  await model?.close();
  model = undefined;
});

interface WireMessage {
  role: string;
  content?: string | null;
  tool_call_id?: string;
}

const callsThenAnswer =
  (calls: FakeToolCall[]): FakeResponder =>
  (request) => {
    const messages = request.body.messages as WireMessage[];
    if (messages.at(-1)?.role === "user") return { text: "", toolCalls: calls };
    const results = messages.filter((m) => m.role === "tool").map((m) => `${m.tool_call_id}=${m.content}`);
    return { text: `Results: ${results.join("; ")}` };
  };

/** `agentloop serve --mcp` with AGENTLOOP_API_KEY in a folder with `config`; resolves to its /mcp URL. */
async function serveMcp(respond: FakeResponder, config: object = {}) {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-http-"));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify(config));
  model = await startFakeOpenAIServer({ respond });
  const serve = startServe(
    { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test", AGENTLOOP_API_KEY: KEY },
    ["--mcp"],
    dir,
  );
  return { url: new URL(`${await serve.url()}/mcp`), serve, dir };
}

async function connect(
  url: URL,
  elicit?: (params: { message: string }) => ElicitResult,
  key = KEY,
): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  const client = new Client(
    { name: "http-test", version: "1.0.0" },
    elicit ? { capabilities: { elicitation: { form: {} } } } : {},
  );
  if (elicit) client.setRequestHandler(ElicitRequestSchema, (request) => elicit(request.params));
  await client.connect(transport);
  clients.push(client);
  return client;
}

const text = (result: unknown) =>
  ((result as CallToolResult).content as { text: string }[]).map((c) => c.text).join("\n");
const calc = (id: string, expression = "6*7"): FakeToolCall => ({
  id,
  name: "calculator",
  arguments: { expression },
});

describe("agentloop serve --mcp", () => {
  it("needs the /v1 key on /mcp, and runs run_agent with progress for a client that sends it", async () => {
    const { url, serve } = await serveMcp(callsThenAnswer([calc("c1")]));
    expect(serve.stderr()).toContain("MCP: /mcp");
    const initialize = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    };
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const anonymous = await fetch(url, { method: "POST", headers, body: JSON.stringify(initialize) });
    expect(anonymous.status).toBe(401);
    await expect(connect(url, undefined, "sk-wrong")).rejects.toThrow(/Invalid or missing API key/);

    const client = await connect(url);
    const progress: string[] = [];
    client.setNotificationHandler(ProgressNotificationSchema, (n) => {
      progress.push(n.params.message ?? "");
    });
    const result = await client.callTool({
      name: "run_agent",
      arguments: { task: "Compute." },
      _meta: { progressToken: 1 },
    });
    expect(text(result)).toBe("Results: c1=42");
    expect(JSON.parse(progress.at(-1) ?? "")).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
    });
  });

  it("binds an MCP session to the client key that opened it", async () => {
    const sha256 = (key: string) => createHash("sha256").update(key).digest("hex");
    const { url } = await serveMcp(callsThenAnswer([]), {
      serve: {
        keys: [
          { name: "alice", sha256: sha256("sk-alice") },
          { name: "bob", sha256: sha256("sk-bob") },
        ],
      },
    });
    const alice = await connect(url, undefined, "sk-alice");
    const sessionId = (alice.transport as StreamableHTTPClientTransport).sessionId ?? "";
    expect(sessionId).not.toBe("");
    const list = { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} };
    const as = (key: string) =>
      fetch(url, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-session-id": sessionId,
          "mcp-protocol-version": "2025-06-18",
        },
        body: JSON.stringify(list),
      });
    expect((await as("sk-bob")).status).toBe(404);
    expect((await as("sk-alice")).status).toBe(200);
  });

  it("answers malformed JSON-RPC, an unknown session and a huge body in the protocol's own error shape, and keeps serving", async () => {
    const { url } = await serveMcp(() => ({ text: "Hello." }));
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(url, {
        method: "POST",
        headers: {
          authorization: `Bearer ${KEY}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body,
      });
    const malformed = await post("{not json");
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32700 } });
    const unknown = await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }), {
      "mcp-session-id": "no-such-session",
    });
    expect(unknown.status).toBe(404);
    const huge = await post(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: { x: "x".repeat(9_000_000) } }),
    );
    expect(huge.status).toBe(413);
    const client = await connect(url);
    await expect(client.callTool({ name: "no_such_tool", arguments: {} })).resolves.toMatchObject({
      isError: true,
    });
    expect(text(await client.callTool({ name: "run_agent", arguments: { task: "Hi." } }))).toBe("Hello.");
  });

  it("asks approvals through elicitation, on the call's own stream", async () => {
    const { url } = await serveMcp(callsThenAnswer([calc("c1")]), { approval: { require: ["calculator"] } });
    const asked: string[] = [];
    let answer: ElicitResult = { action: "accept", content: { approve: true } };
    const client = await connect(url, ({ message }) => {
      asked.push(message);
      return answer;
    });
    expect(text(await client.callTool({ name: "run_agent", arguments: { task: "Compute." } }))).toBe(
      "Results: c1=42",
    );
    answer = { action: "cancel" };
    expect(text(await client.callTool({ name: "run_agent", arguments: { task: "Compute." } }))).toBe(
      "Results: c1=The user declined this call: it was not run.",
    );
    expect(asked).toHaveLength(2);
    expect(asked[0]).toContain("calculator");
  });

  it("continues a waiting run on its session for a client without elicitation", async () => {
    const { url } = await serveMcp(callsThenAnswer([calc("c1")]), { approval: { require: ["calculator"] } });
    const client = await connect(url);
    const waiting = await client.callTool({
      name: "run_agent",
      arguments: { task: "Compute.", session: "h1" },
    });
    expect(waiting.isError).toBeFalsy();
    expect(text(waiting)).toContain('session "h1" and the task "approve"');
    // Another MCP session of the same client continues it: the session lives in the store.
    const other = await connect(url);
    const done = await other.callTool({ name: "run_agent", arguments: { task: "approve", session: "h1" } });
    expect(text(done)).toBe("Results: c1=42");
  });

  it("cancellation aborts the run and its tool call; the server keeps serving", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-http-cancel-"));
    const log = join(dir, "gate.log");
    const { url } = await serveMcp(
      (request) => {
        const last = (request.body.messages as WireMessage[]).at(-1);
        if (last?.role === "user" && String(last.content).includes("wait"))
          return { toolCalls: [{ id: "w1", name: "wait_for_file", arguments: {} }] };
        return { text: "Done." };
      },
      { mcpServers: { gate: { command: process.execPath, args: [GATE, log, join(dir, "gate")] } } },
    );
    const client = await connect(url);
    const controller = new AbortController();
    const call = client.callTool({ name: "run_agent", arguments: { task: "Please wait." } }, undefined, {
      signal: controller.signal,
    });
    while (!(existsSync(log) && readFileSync(log, "utf8").includes("wait started")))
      await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    await expect(call).rejects.toThrow();
    while (!readFileSync(log, "utf8").includes("wait aborted")) await new Promise((r) => setTimeout(r, 20));
    expect(text(await client.callTool({ name: "run_agent", arguments: { task: "Say done." } }))).toBe(
      "Done.",
    );
  });
});
