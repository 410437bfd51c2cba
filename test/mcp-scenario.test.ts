// An agent run against the users example server: find Bob, read his record, update his company.
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { Agent } from "../src/agent/agent.js";
import type { Settings } from "../src/cli/config.js";
import type { AgentEvent } from "../src/core/events.js";
import { connectMcpServers, type McpServerConfig } from "../src/mcp/index.js";
import { scriptedModel } from "../src/testing/scripted-model.js";

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));

it("accepts the CLI's parsed mcpServers as they are", () => {
  const fromCli: Settings["mcpServers"] = {
    files: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."] },
    remote: { url: "http://127.0.0.1:3001/mcp", headers: { Authorization: "Bearer x" }, optional: true },
  };
  const servers: Record<string, McpServerConfig> = fromCli;
  expect(Object.keys(servers)).toEqual(["files", "remote"]);
});

it("runs a multi-step task over MCP tools", async () => {
  const file = join(mkdtempSync(join(tmpdir(), "agentloop-users-")), "users.json");
  copyFileSync(root("examples/users-server/users.json"), file);
  const toolset = await connectMcpServers({
    users: { command: process.execPath, args: [root("examples/users-server/server.mjs"), file] },
  });
  try {
    const model = scriptedModel([
      { toolCalls: [{ name: "search_users", arguments: { query: "bob" } }] },
      { toolCalls: [{ name: "get_user_by_id", arguments: { id: "u2" } }] },
      { toolCalls: [{ name: "update_user", arguments: { id: "u2", company: "Initrode" } }] },
      { text: "Bob Stone now works at Initrode." },
    ]);
    const agent = new Agent({ model, tools: toolset.tools() });
    const results: Extract<AgentEvent, { type: "tool_result" }>[] = [];
    const run = agent.stream("Find Bob, read his record and move him to Initrode.");
    for await (const event of run) if (event.type === "tool_result") results.push(event);
    expect(await run.result).toMatchObject({
      stopReason: "final_answer",
      output: "Bob Stone now works at Initrode.",
    });
    expect(results.map((r) => [r.name, r.isError])).toEqual([
      ["search_users", false],
      ["get_user_by_id", false],
      ["update_user", false],
    ]);
    expect(JSON.parse(results[1]?.content ?? "")).toMatchObject({ name: "Bob Stone", company: "Globex" });
    expect(model.requests[0]?.tools?.map((tool) => tool.name)).toEqual([
      "search_users",
      "get_user_by_id",
      "update_user",
    ]);
    expect(JSON.parse(readFileSync(file, "utf8"))[1]).toMatchObject({ id: "u2", company: "Initrode" });
  } finally {
    await toolset.close();
  }
}, 60_000);

it("turns MCP progress notifications into tool_progress events", async () => {
  const everything = root("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
  const toolset = await connectMcpServers({
    everything: { command: process.execPath, args: [everything, "stdio"] },
  });
  try {
    const model = scriptedModel([
      { toolCalls: [{ name: "trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } }] },
      { text: "done" },
    ]);
    const agent = new Agent({ model, tools: toolset.tools() });
    const seen: string[] = [];
    for await (const event of agent.stream("Run the long operation.")) {
      if (event.type === "tool_progress") seen.push(`${event.name} ${event.progress}/${event.total}`);
      if (event.type === "tool_result") seen.push(`result ${event.isError}`);
    }
    expect(seen[0]).toBe("trigger-long-running-operation 1/3");
    expect(seen.at(-1)).toBe("result false");
  } finally {
    await toolset.close();
  }
}, 60_000);
