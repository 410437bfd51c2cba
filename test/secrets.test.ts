import { mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { redactSecrets } from "../src/core/redact.js";
import { Agent, type AgentEvent, defineTool } from "../src/index.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { scriptedModel } from "../src/testing/index.js";
import { runCli } from "./helpers.js";

const FILESYSTEM = fileURLToPath(
  new URL("../node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", import.meta.url),
);
const KEY = "sk-proj-Zq8uT1mW4xN7rB0cV3yH6kL9pS2dF5gJ";
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
