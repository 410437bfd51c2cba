// A stdio MCP server whose calls the test holds and counts, run as
// `node gated-tools-server.mjs <folder>`. Tool `step` ({ tag }): appends "start <tag> <pid>" to
// <folder>/calls.log, waits until the file <folder>/go-<tag>-<pid> exists (the test creates it),
// appends "end <tag> <pid>" and answers "done <tag>". The server exits when its stdin ends (its
// client died), so a killed agentloop leaves no server waiting behind.
import { appendFileSync, existsSync, watch } from "node:fs";
import { join } from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const folder = process.argv[2];
const log = join(folder, "calls.log");

/** Resolves once `file` exists: watched, then checked, so a file made in between is not missed. */
function exists(file) {
  return new Promise((resolve) => {
    const watcher = watch(folder, () => {
      if (existsSync(file)) {
        watcher.close();
        resolve();
      }
    });
    if (existsSync(file)) {
      watcher.close();
      resolve();
    }
  });
}

const server = new McpServer({ name: "gated-tools", version: "1.0.0" });
server.registerTool(
  "step",
  { description: "Does one step of the task.", inputSchema: { tag: z.string() } },
  async ({ tag }) => {
    appendFileSync(log, `start ${tag} ${process.pid}\n`);
    await exists(join(folder, `go-${tag}-${process.pid}`));
    appendFileSync(log, `end ${tag} ${process.pid}\n`);
    return { content: [{ type: "text", text: `done ${tag}` }] };
  },
);

process.stdin.on("end", () => process.exit(0));
await server.connect(new StdioServerTransport());
