// `agentloop mcp serve` through the MCP Inspector's CLI mode (@modelcontextprotocol/inspector, run
// offline), the tool a user reaches for first to check an MCP server: the tool list and a call of
// run_agent, the model a fake OpenAI server.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { CLI } from "./helpers.js";

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const INSPECTOR = join(
  dirname(require.resolve("@modelcontextprotocol/inspector/package.json")),
  "..",
  "..",
  ".bin",
  "mcp-inspector",
);

let model: FakeOpenAIServer;
let dir: string;
beforeAll(async () => {
  model = await startFakeOpenAIServer({ respond: () => ({ text: "hello from the agent" }) });
  dir = mkdtempSync(join(tmpdir(), "agentloop-inspector-"));
  writeFileSync(join(dir, "agentloop.json"), "{}");
});
afterAll(() => model.close());

/** The Inspector's CLI against `agentloop mcp serve` in `dir`; its stdout parsed. */
async function inspect(...args: string[]): Promise<unknown> {
  const env = [`OPENAI_BASE_URL=${model.url}`, "OPENAI_API_KEY=sk-test", `PATH=${process.env.PATH ?? ""}`];
  const { stdout } = await run(
    INSPECTOR,
    ["--cli", ...env.flatMap((e) => ["-e", e]), "--cwd", dir, process.execPath, CLI, "mcp", "serve", ...args],
    { cwd: dir, env: { ...process.env, MCP_CATALOG_PATH: join(dir, "catalog.json") }, timeout: 30_000 },
  );
  return JSON.parse(stdout);
}

describe("agentloop mcp serve under the MCP Inspector's CLI", () => {
  it("lists run_agent with its schema", async () => {
    const listed = (await inspect("--method", "tools/list")) as {
      tools: { name: string; inputSchema: { required: string[] } }[];
    };
    expect(listed.tools.map((t) => t.name)).toEqual(["run_agent"]);
    expect(listed.tools[0]?.inputSchema.required).toEqual(["task"]);
  });

  it("calls run_agent and gets the run's output as text", async () => {
    const result = await inspect(
      "--method",
      "tools/call",
      "--tool-name",
      "run_agent",
      "--tool-arg",
      "task=hi",
    );
    expect(result).toEqual({ content: [{ type: "text", text: "hello from the agent" }] });
  });
});
