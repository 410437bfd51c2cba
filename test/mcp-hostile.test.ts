// MCP servers that misbehave on the wire: replies the SDK cannot read, floods of notifications.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { Agent } from "../src/agent/agent.js";
import type { AgentEvent } from "../src/core/events.js";
import { connectMcpServers } from "../src/mcp/index.js";
import { scriptedModel } from "../src/testing/scripted-model.js";
import { call } from "./support/mcp-helpers.js";

const TEST_SERVER = fileURLToPath(new URL("./support/mcp-test-server.mjs", import.meta.url));
const HOSTILE_SERVER = fileURLToPath(new URL("./support/hostile-mcp-server.mjs", import.meta.url));

describe("a reply that is not valid JSON-RPC", () => {
  it("fails its call at once with a clear error, and the server goes on answering", async () => {
    const toolset = await connectMcpServers(
      { hostile: { command: process.execPath, args: [HOSTILE_SERVER] } },
      { configFile: "agentloop.json" },
    );
    try {
      // No time limit of its own: before the fix, the call waited forever.
      expect(await call(toolset, "empty", {})).toEqual({
        content:
          "MCP server 'hostile' (agentloop.json) could not run 'empty': MCP error -32603: the server replied with neither a result nor an error.",
        isError: true,
      });
      expect(await call(toolset, "malformed", {})).toEqual({
        content:
          "MCP server 'hostile' (agentloop.json) could not run 'malformed': MCP error -32603: the server's reply is not valid JSON-RPC.",
        isError: true,
      });
      expect(await call(toolset, "echo", { text: "still here" })).toEqual({
        content: "still here",
        isError: false,
      });
      expect(toolset.servers()[0]?.state).toBe("up");
    } finally {
      await toolset.close();
    }
  });
});

describe("a reply that is not valid JSON-RPC over Streamable HTTP", () => {
  it.each(["json", "sse"])(
    "fails its call at once, named as such (not as an OAuth answer): %s answer",
    async (answer) => {
      const server = createServer(async (req, res) => {
        let body = "";
        for await (const chunk of req) body += chunk;
        const { id, method, params } = req.method === "POST" ? JSON.parse(body) : {};
        if (id === undefined) {
          res.writeHead(req.method === "POST" ? 202 : 405).end();
          return;
        }
        const result =
          method === "initialize"
            ? {
                protocolVersion: params.protocolVersion,
                capabilities: { tools: {} },
                serverInfo: { name: "hostile", version: "1.0.0" },
              }
            : method === "tools/list"
              ? { tools: [{ name: "empty", inputSchema: { type: "object" } }] }
              : undefined;
        const reply = JSON.stringify({ jsonrpc: "2.0", id, ...(result && { result }) });
        if (answer === "json" || result) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(reply);
          return;
        }
        // The event, and the stream left open (as a server that still works on the call would).
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`event: message\ndata: ${reply}\n\n`);
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const toolset = await connectMcpServers({ remote: { url: `${url}/mcp` } });
      try {
        // An event is read as a stdio line is (the SDK would drop it and wait for the timeout).
        const why =
          answer === "json"
            ? "its reply is not valid JSON-RPC. Check the server."
            : "MCP error -32603: the server replied with neither a result nor an error.";
        expect(await call(toolset, "empty", {})).toEqual({
          content: `MCP server 'remote' could not run 'empty': ${why}`,
          isError: true,
        });
      } finally {
        await toolset.close();
        server.closeAllConnections();
        server.close();
      }
    },
  );
});

describe("a flood of progress notifications", () => {
  it("becomes a few tool_progress events, the last one with the final progress, before the result", async () => {
    const toolset = await connectMcpServers({ probe: { command: process.execPath, args: [TEST_SERVER] } });
    try {
      const model = scriptedModel([
        { toolCalls: [{ name: "flood", arguments: { count: 32_000 } }] },
        { text: "Flooded." },
      ]);
      const agent = new Agent({ model, tools: toolset.tools() });
      const seen: AgentEvent[] = [];
      for await (const event of agent.stream("Flood me.")) {
        if (event.type === "tool_progress" || event.type === "tool_result") seen.push(event);
      }
      const progress = seen.filter((event) => event.type === "tool_progress");
      expect(progress.length).toBeGreaterThan(0);
      expect(progress.length).toBeLessThan(100);
      expect(progress[0]).toMatchObject({ name: "flood", progress: 1, total: 32_000 });
      expect(seen.at(-2)).toMatchObject({ type: "tool_progress", progress: 32_000, total: 32_000 });
      expect(seen.at(-1)).toMatchObject({ type: "tool_result", content: "done", isError: false });
    } finally {
      await toolset.close();
    }
  });
});
