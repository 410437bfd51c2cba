// A stdio MCP server for the crash-and-resume tests, run as `node gate-mcp-server.mjs <log> <gate>`.
// Every line it writes goes to the <log> file: `pid <pid>` at start; `note <text>` when the tool
// `note` runs; `wait started` and, once the file <gate> exists, `wait done` for `wait_for_file`
// (`wait aborted` instead when the client cancels the call first).
// It exits when its stdin ends (the agentloop process that started it died).
import { appendFileSync, existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const [log, gate] = process.argv.slice(2);
const write = (line) => appendFileSync(log, `${line}\n`);
const text = (value) => ({ content: [{ type: "text", text: value }] });
const server = new McpServer({ name: "gate-server", version: "1.0.0" });

server.registerTool(
  "note",
  { description: "Writes a note.", inputSchema: { text: z.string() } },
  ({ text: note }) => {
    write(`note ${note}`);
    return text("noted");
  },
);

server.registerTool(
  "wait_for_file",
  { description: "Answers once the gate file exists." },
  async ({ signal }) => {
    write("wait started");
    while (!existsSync(gate)) {
      if (signal.aborted) {
        write("wait aborted");
        return text("aborted");
      }
      await sleep(20);
    }
    write("wait done");
    return text("gate open");
  },
);

process.stdin.on("end", () => process.exit(0));
await server.connect(new StdioServerTransport());
write(`pid ${process.pid}`);
