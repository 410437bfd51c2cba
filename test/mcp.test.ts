// MCP client against real servers from npm and the project's users example.
import { type ChildProcess, spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Agent } from "../src/agent/agent.js";
import { errorMessage } from "../src/core/errors.js";
import { connectMcpServers, type McpServerConfig, type McpToolset } from "../src/mcp/index.js";
import { scriptedModel } from "../src/testing/scripted-model.js";
import { serialiseResult } from "../src/tools/execute.js";
import type { ToolProgress } from "../src/tools/tool.js";

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
const EVERYTHING = root("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const FILESYSTEM = root("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
const USERS_SERVER = root("examples/users-server/server.mjs");
const USERS_JSON = root("examples/users-server/users.json");

// Started with this Node binary, so the transport's pid is the server's own.
const everything: McpServerConfig = { command: process.execPath, args: [EVERYTHING, "stdio"] };

/** Calls a tool the way the loop does: validate, execute, a throw becomes an error result. */
async function callTool(
  toolset: McpToolset,
  name: string,
  args: Record<string, unknown> = {},
  onProgress?: (progress: ToolProgress) => void,
): Promise<{ content: string; isError: boolean }> {
  const tool = toolset.tools().find((candidate) => candidate.name === name);
  if (!tool) throw new Error(`no tool '${name}'`);
  const checked = tool.validate(args);
  if (!checked.ok) return { content: checked.message, isError: true };
  try {
    const signal = new AbortController().signal;
    const result = await tool.execute(checked.value, {
      signal,
      toolCallId: "call_1",
      ...(onProgress && { onProgress }),
    });
    return { content: serialiseResult(result), isError: false };
  } catch (error) {
    return { content: errorMessage(error), isError: true };
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function pidsOf(toolset: McpToolset): number[] {
  return toolset.servers().flatMap((server) => (server.pid === undefined ? [] : [server.pid]));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** Starts server-everything in an HTTP mode on a free port; resolves once it listens. */
async function startEverythingHttp(
  mode: "streamableHttp" | "sse",
): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    let said = "";
    child.stderr?.setEncoding("utf8").on("data", (text: string) => {
      said += text;
      if (/(listening|running) on port/i.test(said)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`server-everything ${mode} exited (${code}): ${said}`)));
  });
  return { child, port };
}

describe("server-everything over stdio", () => {
  let toolset: McpToolset;
  const warnings: string[] = [];
  beforeAll(async () => {
    toolset = await connectMcpServers({ everything }, { onWarning: (message) => warnings.push(message) });
  }, 60_000);
  afterAll(() => toolset?.close());

  it("lists its tools in the server's order, skipping the task-only one with a warning", () => {
    expect(toolset.tools().map((tool) => tool.name)).toEqual([
      "echo",
      "get-annotated-message",
      "get-env",
      "get-resource-links",
      "get-resource-reference",
      "get-structured-content",
      "get-sum",
      "get-tiny-image",
      "gzip-file-as-resource",
      "toggle-simulated-logging",
      "toggle-subscriber-updates",
      "trigger-long-running-operation",
      // Offered to clients that declare elicitation (and roots: only when some are offered).
      "trigger-elicitation-request",
    ]);
    expect(toolset.sources()[0]).toEqual({ name: "echo", server: "everything", originalName: "echo" });
    expect(warnings).toEqual([
      expect.stringContaining("'simulate-research-query' of server 'everything' is skipped"),
    ]);
    const echo = toolset.tools()[0];
    expect(echo?.description).toBe("Echoes back the input string");
    expect(echo?.parameters).toMatchObject({ type: "object", required: ["message"] });
    expect(echo?.parameters).not.toHaveProperty("$schema");
    expect(toolset.servers()).toEqual([
      { name: "everything", state: "up", transport: "stdio", pid: expect.any(Number) },
    ]);
  });

  it("calls echo and get-sum", async () => {
    expect(await callTool(toolset, "echo", { message: "hi" })).toEqual({
      content: "Echo: hi",
      isError: false,
    });
    expect((await callTool(toolset, "get-sum", { a: 2, b: 3 })).content).toContain("5");
  });

  it("validates arguments with the tool's input schema before calling", async () => {
    const result = await callTool(toolset, "echo", {});
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/^message: /);
  });

  it("turns a result with isError into a thrown error", async () => {
    const echo = toolset.tools().find((tool) => tool.name === "echo");
    // Skips local validation so the server itself rejects the arguments.
    const call = echo?.execute({}, { signal: new AbortController().signal, toolCallId: "x" });
    await expect(call).rejects.toThrow(/Input validation error/);
  });

  it("replaces images and resources with placeholders", async () => {
    const image = await callTool(toolset, "get-tiny-image");
    expect(image.content).toMatch(
      /^Here's the image you requested:\n\[image: image\/png, [\d.]+ (bytes|KB)\]\nThe image above is the MCP logo\.$/,
    );
    const reference = await callTool(toolset, "get-resource-reference", {
      resourceType: "Text",
      resourceId: 1,
    });
    expect(reference.content).toMatch(
      /\[resource: demo:\/\/resource\/dynamic\/text\/1 \(text\/plain\), \d+ bytes\]/,
    );
    const links = await callTool(toolset, "get-resource-links", { count: 2 });
    expect(links.content).toContain("[resource link: demo://resource/dynamic/");
  });

  it("gives structured content as JSON once", async () => {
    const result = await callTool(toolset, "get-structured-content", { location: "Chicago" });
    expect(JSON.parse(result.content)).toEqual({
      temperature: 36,
      conditions: "Light rain / drizzle",
      humidity: 82,
    });
  });

  it("reports the progress of a long-running tool", async () => {
    const progress: ToolProgress[] = [];
    const result = await callTool(
      toolset,
      "trigger-long-running-operation",
      { duration: 0.3, steps: 3 },
      (p) => progress.push(p),
    );
    expect(result.content).toContain("Long running operation completed");
    // Coalesced to a few reports a second: the first at once, the last before the result.
    expect(progress[0]).toEqual({ progress: 1, total: 3 });
    expect(progress.at(-1)).toEqual({ progress: 3, total: 3 });
    expect(progress.map((p) => p.progress)).toEqual([...new Set(progress.map((p) => p.progress))].sort());
  });
});

describe("server-everything over HTTP", () => {
  const servers: ChildProcess[] = [];
  afterAll(() => {
    for (const child of servers) child.kill();
  });

  it("speaks Streamable HTTP", async () => {
    const { child, port } = await startEverythingHttp("streamableHttp");
    servers.push(child);
    const toolset = await connectMcpServers({
      remote: { url: `http://127.0.0.1:${port}/mcp`, headers: { "X-Test": "1" } },
    });
    try {
      expect(toolset.servers()[0]?.transport).toBe("streamable-http");
      expect(await callTool(toolset, "echo", { message: "over http" })).toEqual({
        content: "Echo: over http",
        isError: false,
      });
      const progress: ToolProgress[] = [];
      await callTool(toolset, "trigger-long-running-operation", { duration: 0.2, steps: 2 }, (p) =>
        progress.push(p),
      );
      expect(progress[0]).toEqual({ progress: 1, total: 2 });
    } finally {
      await toolset.close();
    }
  }, 60_000);

  it("falls back to SSE for an older server", async () => {
    const { child, port } = await startEverythingHttp("sse");
    servers.push(child);
    const toolset = await connectMcpServers({ old: { url: `http://127.0.0.1:${port}/sse` } });
    try {
      expect(toolset.servers()[0]?.transport).toBe("sse");
      expect((await callTool(toolset, "echo", { message: "sse" })).content).toBe("Echo: sse");
    } finally {
      await toolset.close();
    }
  }, 60_000);
});

describe("server-filesystem", () => {
  it("reads a file in the folder given as the client's root", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-mcp-fs-")));
    writeFileSync(join(dir, "notes.txt"), "hello from the file\n");
    // Started with no directory: the server works in the roots the client lists, once it has them.
    let rootsTaken: () => void = () => {};
    const taken = new Promise<void>((resolve) => {
      rootsTaken = resolve;
    });
    const toolset = await connectMcpServers(
      { files: { command: process.execPath, args: [FILESYSTEM] } },
      {
        roots: [{ uri: pathToFileURL(dir).href, name: "notes" }],
        onServerLog: (_server, line) => {
          if (line.startsWith("Updated allowed directories from MCP roots")) rootsTaken();
        },
      },
    );
    try {
      await taken;
      expect(toolset.tools().map((tool) => tool.name)).toContain("read_text_file");
      const result = await callTool(toolset, "read_text_file", { path: join(dir, "notes.txt") });
      expect(result).toEqual({ content: "hello from the file\n", isError: false });
      const outside = await callTool(toolset, "read_text_file", { path: "/etc/hostname" });
      expect(outside.isError).toBe(true);
    } finally {
      await toolset.close();
    }
  }, 60_000);
});

describe("the users example server", () => {
  it("finds Bob, reads his record and updates his company", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "agentloop-users-")), "users.json");
    copyFileSync(USERS_JSON, file);
    const toolset = await connectMcpServers({
      users: { command: process.execPath, args: [USERS_SERVER, file] },
    });
    try {
      expect(toolset.tools().map((tool) => tool.name)).toEqual([
        "search_users",
        "get_user_by_id",
        "update_user",
      ]);
      const found = JSON.parse((await callTool(toolset, "search_users", { query: "bob" })).content);
      expect(found).toEqual([{ id: "u2", name: "Bob Stone", email: "bob@example.com" }]);
      const record = JSON.parse((await callTool(toolset, "get_user_by_id", { id: found[0].id })).content);
      expect(record.company).toBe("Globex");
      const updated = await callTool(toolset, "update_user", { id: record.id, company: "Initrode" });
      expect(JSON.parse(updated.content)).toMatchObject({ id: "u2", company: "Initrode" });
      const reread = JSON.parse((await callTool(toolset, "get_user_by_id", { id: "u2" })).content);
      expect(reread).toEqual({ ...record, company: "Initrode" });
      expect(JSON.parse(readFileSync(file, "utf8"))[1].company).toBe("Initrode");
      const missing = await callTool(toolset, "get_user_by_id", { id: "u9" });
      expect(missing).toEqual({ content: expect.stringContaining("No user with id 'u9'"), isError: true });
    } finally {
      await toolset.close();
    }
  }, 60_000);
});

describe("tool names", () => {
  it("renames collisions <server>__<tool> in configuration order, with a warning", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "agentloop-users-")), "users.json");
    copyFileSync(USERS_JSON, file);
    const users: McpServerConfig = { command: process.execPath, args: [USERS_SERVER, file] };
    const warnings: string[] = [];
    const toolset = await connectMcpServers(
      { users, "crm.v2": users },
      { reservedNames: ["get_user_by_id"], onWarning: (message) => warnings.push(message) },
    );
    const pids = pidsOf(toolset);
    expect(pids).toHaveLength(2);
    try {
      expect(toolset.sources()).toEqual([
        { name: "search_users", server: "users", originalName: "search_users" },
        { name: "users__get_user_by_id", server: "users", originalName: "get_user_by_id" },
        { name: "update_user", server: "users", originalName: "update_user" },
        { name: "crm_v2__search_users", server: "crm.v2", originalName: "search_users" },
        { name: "crm_v2__get_user_by_id", server: "crm.v2", originalName: "get_user_by_id" },
        { name: "crm_v2__update_user", server: "crm.v2", originalName: "update_user" },
      ]);
      expect(warnings).toContain(
        "MCP tool 'get_user_by_id' of server 'users' is renamed 'users__get_user_by_id': 'get_user_by_id' is already taken by a built-in or local tool.",
      );
      expect(warnings).toContain(
        "MCP tool 'search_users' of server 'crm.v2' is renamed 'crm_v2__search_users': 'search_users' is already taken by MCP server 'users'.",
      );
      const renamed = await callTool(toolset, "crm_v2__get_user_by_id", { id: "u1" });
      expect(JSON.parse(renamed.content).name).toBe("Alice Martin");
    } finally {
      await toolset.close();
    }
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
  }, 60_000);

  it("treats names such as toString, constructor and __proto__ as ordinary names", async () => {
    const offered = ["toString", "constructor", "__proto__"];
    const server = new Server({ name: "odd", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: offered.map((name) => ({ name, inputSchema: { type: "object" as const } })),
    }));
    server.setRequestHandler(CallToolRequestSchema, (request) => ({
      content: [{ type: "text", text: `ran ${request.params.name}` }],
    }));
    // A server named like a prototype key, in a record as JSON.parse makes it.
    const servers = JSON.parse('{"__proto__": {}}') as Record<string, McpServerConfig>;
    Object.defineProperty(servers, "__proto__", {
      enumerable: true,
      value: {
        transport: async () => {
          const [client, side] = InMemoryTransport.createLinkedPair();
          await server.connect(side);
          return client;
        },
      },
    });
    const toolset = await connectMcpServers(servers);
    try {
      expect(toolset.sources().map((source) => `${source.server}/${source.name}`)).toEqual([
        "__proto__/toString",
        "__proto__/constructor",
        "__proto__/__proto__",
      ]);
      const calls = ["hasOwnProperty", "valueOf", ...offered].map((name, index) => ({
        id: `c${index}`,
        name,
        arguments: {},
      }));
      const model = scriptedModel([{ toolCalls: calls }, { text: "done" }]);
      const result = await new Agent({ model, tools: toolset.tools() }).run("Call them all.");
      expect(result.stopReason).toBe("final_answer");
      const results = model.requests[1]?.messages.filter((message) => message.role === "tool") ?? [];
      expect(results.map((message) => [message.content, message.isError === true])).toEqual([
        [expect.stringContaining("nknown tool 'hasOwnProperty'"), true],
        [expect.stringContaining("nknown tool 'valueOf'"), true],
        ["ran toString", false],
        ["ran constructor", false],
        ["ran __proto__", false],
      ]);
    } finally {
      await toolset.close();
      await server.close();
    }
  });
});
