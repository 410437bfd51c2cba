// MCP servers that misbehave on the wire: replies the SDK cannot read, floods of notifications.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { connectMcpServers } from "../src/mcp/index.js";
import { call } from "./support/mcp-helpers.js";

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
