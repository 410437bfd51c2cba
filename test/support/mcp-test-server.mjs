// A stdio MCP server for the MCP client's tests, run as `node mcp-test-server.mjs [--ignore-sigterm]`.
// Tools: `env` (the environment it got, as JSON), `big` (a text of `bytes` characters),
// `busy` (starts a grandchild that shares its stdout and stderr, reports both pids as a progress
// message, then never answers), `hang` (never answers), `ask` (sends `elicitation/create` with the
// given message and form, as given, and returns the answer as JSON), `roots` (the client's
// `roots/list`, as JSON), `flood` (reports progress 1 to `count` of `count`, then answers "done"),
// `save` (writes `text` to the file `path` and says how many characters).
// With --ignore-sigterm it, and the grandchild `busy` starts, ignore SIGTERM and stdin's end.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { ElicitResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const stubborn = process.argv.includes("--ignore-sigterm");
if (stubborn) {
  process.on("SIGTERM", () => console.error("SIGTERM ignored"));
  setInterval(() => {}, 1000);
}

const text = (value) => ({ content: [{ type: "text", text: value }] });
const server = new McpServer({ name: "test-server", version: "1.0.0" });

server.registerTool("env", { description: "The server's environment as JSON." }, () =>
  text(JSON.stringify(process.env)),
);

server.registerTool(
  "big",
  { description: "A text of the given length.", inputSchema: { bytes: z.number().int().positive() } },
  ({ bytes }) => text("x".repeat(bytes)),
);

server.registerTool("busy", { description: "Never answers." }, async (extra) => {
  const grandchild = spawn(
    process.execPath,
    ["-e", `${stubborn ? "process.on('SIGTERM', () => {});" : ""} setInterval(() => {}, 1000);`],
    { stdio: ["ignore", "inherit", "inherit"] }, // holds the server's stdout and stderr
  );
  await new Promise((resolve) => grandchild.once("spawn", resolve));
  const progressToken = extra._meta?.progressToken;
  if (progressToken !== undefined) {
    await extra.sendNotification({
      method: "notifications/progress",
      params: { progressToken, progress: 1, message: JSON.stringify([process.pid, grandchild.pid]) },
    });
  }
  return new Promise(() => {});
});

server.registerTool(
  "flood",
  { description: "Reports progress count times.", inputSchema: { count: z.number().int().positive() } },
  async ({ count }, extra) => {
    const progressToken = extra._meta?.progressToken;
    for (let progress = 1; progress <= count && progressToken !== undefined; progress++) {
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken, progress, total: count },
      });
    }
    return text("done");
  },
);

server.registerTool("hang", { description: "Never answers." }, () => new Promise(() => {}));

server.registerTool(
  "ask",
  {
    description: "Asks the user to fill in a form.",
    inputSchema: { message: z.string(), form: z.record(z.string(), z.unknown()) },
  },
  async ({ message, form }, extra) => {
    const answer = await extra.sendRequest(
      { method: "elicitation/create", params: { message, requestedSchema: form } },
      ElicitResultSchema,
    );
    return text(JSON.stringify(answer));
  },
);

server.registerTool(
  "save",
  { description: "Writes a text to a file.", inputSchema: { path: z.string(), text: z.string() } },
  ({ path, text: content }) => {
    writeFileSync(path, content);
    return text(`saved ${content.length} characters`);
  },
);

server.registerTool("roots", { description: "The client's roots as JSON." }, async () =>
  text(JSON.stringify(await server.server.listRoots())),
);

await server.connect(new StdioServerTransport());
console.error("test-server ready");
