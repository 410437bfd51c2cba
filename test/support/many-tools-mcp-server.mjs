// A stdio MCP server with many tools, each with a long description: `node many-tools-mcp-server.mjs
// <count> <description length>`. For what the CLI prints about a big catalogue.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const count = Number(process.argv[2] ?? 100);
const length = Number(process.argv[3] ?? 10_000);
const server = new McpServer({ name: "many-tools", version: "1.0.0" });
for (let i = 0; i < count; i++) {
  const description = `Tool ${i}: ${"d".repeat(length)}`;
  server.registerTool(`tool_${i}`, { description }, () => ({ content: [{ type: "text", text: `${i}` }] }));
}
await server.connect(new StdioServerTransport());
