// MCP client robustness: startup failures, crashes, aborts, timeouts, list changes, no process left behind.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { AgentloopError, errorMessage } from "../src/core/errors.js";
import { runningChildPids } from "../src/mcp/children.js";
import { connectMcpServers, type McpServerConfig } from "../src/mcp/index.js";
import { call, isAlive, pidOf, until } from "./support/mcp-helpers.js";

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
const EVERYTHING = root("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const USERS_SERVER = root("examples/users-server/server.mjs");
const everything: McpServerConfig = { command: process.execPath, args: [EVERYTHING, "stdio"] };
const users: McpServerConfig = { command: process.execPath, args: [USERS_SERVER] };
const LONG_TIMEOUT = 60_000;

describe("startup", () => {
  it(
    "rejects naming a server that is not optional and closes the others",
    async () => {
      const start = connectMcpServers({ users, broken: { command: "agentloop-no-such-command" } });
      const error = await start.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AgentloopError);
      expect((error as AgentloopError).code).toBe("mcp_start");
      expect((error as AgentloopError).message).toBe(
        `MCP server 'broken' failed to start: command 'agentloop-no-such-command' not found. Install it, or fix its "command" (a program on PATH or a full path), or mark it "optional": true.`,
      );
      expect(runningChildPids()).toEqual([]);
    },
    LONG_TIMEOUT,
  );

  it(
    "quotes what a crashing server said on stderr, without secrets",
    async () => {
      const crashing = {
        command: process.execPath,
        args: ["-e", "console.error('bad API key', process.env.MY_API_KEY); process.exit(1)"],
        env: { MY_API_KEY: "very-secret-value" },
      };
      const error = await connectMcpServers({ crashing }).catch((e: unknown) => e);
      expect(errorMessage(error)).toBe(
        `MCP server 'crashing' failed to start: the server exited with code 1 (stderr: bad API key [REDACTED]). Check its "command", "args" and "env", or mark it "optional": true.`,
      );
    },
    LONG_TIMEOUT,
  );

  it(
    "warns about an optional server and goes on",
    async () => {
      const warnings: string[] = [];
      const toolset = await connectMcpServers(
        { broken: { command: "agentloop-no-such-command", optional: true }, users },
        { onWarning: (message) => warnings.push(message) },
      );
      try {
        expect(warnings).toEqual([
          "MCP server 'broken' failed to start and is skipped (it is optional): command 'agentloop-no-such-command' not found.",
        ]);
        expect(toolset.tools().map((tool) => tool.name)).toEqual([
          "search_users",
          "get_user_by_id",
          "update_user",
        ]);
        expect(toolset.servers()[0]).toMatchObject({ name: "broken", state: "failed" });
      } finally {
        await toolset.close();
      }
    },
    LONG_TIMEOUT,
  );

  it(
    "gives up on a server that does not answer in time and ends its process",
    async () => {
      const pidFile = join(mkdtempSync(join(tmpdir(), "agentloop-mcp-")), "pid");
      const silent = {
        command: process.execPath,
        args: [
          "-e",
          `require("fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`,
        ],
      };
      await expect(connectMcpServers({ silent }, { startupTimeoutMs: 500 })).rejects.toThrow(
        "MCP server 'silent' failed to start: no answer within 0.5 s.",
      );
      expect(isAlive(Number(readFileSync(pidFile, "utf8")))).toBe(false);
    },
    LONG_TIMEOUT,
  );
});

describe("a running server", () => {
  it(
    "turns a crash into an error result and restarts on the next call",
    async () => {
      const toolset = await connectMcpServers({ everything });
      try {
        const first = pidOf(toolset, "everything") as number;
        const running = call(
          toolset,
          "trigger-long-running-operation",
          { duration: 10, steps: 20 },
          {
            onProgress: () => {
              if (isAlive(first)) process.kill(first, "SIGKILL");
            },
          },
        );
        const crashed = await running;
        expect(crashed.isError).toBe(true);
        expect(crashed.content).toMatch(
          /^MCP server 'everything' could not run 'trigger-long-running-operation': the server was killed by SIGKILL .*It will be restarted on the next call\.$/,
        );
        expect(await call(toolset, "echo", { message: "back" })).toEqual({
          content: "Echo: back",
          isError: false,
        });
        const second = pidOf(toolset, "everything") as number;
        expect(second).not.toBe(first);
        expect(isAlive(first)).toBe(false);

        // Killed between calls: marked down, then restarted by the next call.
        process.kill(second, "SIGKILL");
        await until(() => toolset.servers()[0]?.state === "down", "the server to be down");
        expect(await call(toolset, "echo", { message: "again" })).toEqual({
          content: "Echo: again",
          isError: false,
        });
        expect(toolset.servers()[0]).toMatchObject({ state: "up", pid: expect.any(Number) });
      } finally {
        await toolset.close();
      }
    },
    LONG_TIMEOUT,
  );

  it(
    "cancels an in-flight call when the run's signal aborts",
    async () => {
      const toolset = await connectMcpServers({ everything });
      try {
        const pid = pidOf(toolset, "everything");
        const controller = new AbortController();
        const result = await call(
          toolset,
          "trigger-long-running-operation",
          { duration: 30, steps: 30 },
          {
            signal: controller.signal,
            onProgress: () => controller.abort(),
          },
        );
        expect(result).toEqual({
          content: "The call to 'trigger-long-running-operation' on MCP server 'everything' was cancelled.",
          isError: true,
        });
        expect(await call(toolset, "echo", { message: "still here" })).toMatchObject({ isError: false });
        expect(pidOf(toolset, "everything")).toBe(pid);
      } finally {
        await toolset.close();
      }
    },
    LONG_TIMEOUT,
  );

  it(
    "limits each call to callTimeoutMs",
    async () => {
      const toolset = await connectMcpServers({ everything }, { callTimeoutMs: 300 });
      try {
        expect(toolset.tools()[0]?.timeoutMs).toBe(300);
        const result = await call(toolset, "trigger-long-running-operation", { duration: 10, steps: 2 });
        expect(result.isError).toBe(true);
        expect(result.content).toBe(
          "MCP server 'everything' could not run 'trigger-long-running-operation': no answer within 0.3 s.",
        );
      } finally {
        await toolset.close();
      }
    },
    LONG_TIMEOUT,
  );

  it(
    "refreshes its tools on tools/list_changed",
    async () => {
      const server = new McpServer({ name: "memory", version: "1.0.0" });
      server.registerTool("first", { description: "First", inputSchema: { n: z.number() } }, ({ n }) => ({
        content: [{ type: "text", text: `n=${n}` }],
      }));
      const inMemory: McpServerConfig = {
        transport: async () => {
          const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
          await server.connect(serverSide);
          return clientSide;
        },
      };
      const toolset = await connectMcpServers({ memory: inMemory });
      try {
        let changes = 0;
        toolset.on("changed", () => changes++);
        expect(toolset.tools().map((tool) => tool.name)).toEqual(["first"]);
        const second = server.registerTool("second.tool", { description: "Second" }, () => ({
          content: [{ type: "text", text: "two" }],
        }));
        await until(() => changes === 1, "the change event");
        expect(toolset.sources()).toEqual([
          { name: "first", server: "memory", originalName: "first" },
          { name: "second_tool", server: "memory", originalName: "second.tool" },
        ]);
        expect(await call(toolset, "second_tool", {})).toEqual({ content: "two", isError: false });
        second.remove();
        await until(() => changes === 2, "the second change event");
        expect(toolset.tools().map((tool) => tool.name)).toEqual(["first"]);
      } finally {
        await toolset.close();
        await server.close();
      }
    },
    LONG_TIMEOUT,
  );
});

describe("shutdown", () => {
  it(
    "close() ends every child process, and calls after it are error results",
    async () => {
      const toolset = await connectMcpServers({ a: everything, b: users, c: everything });
      const pids = toolset.servers().map((server) => server.pid as number);
      expect(pids.every((pid) => isAlive(pid))).toBe(true);
      await toolset.close();
      await toolset.close();
      for (const pid of pids) expect(isAlive(pid)).toBe(false);
      expect(runningChildPids()).toEqual([]);
      expect(toolset.servers().map((server) => server.state)).toEqual(["closed", "closed", "closed"]);
      expect(await call(toolset, "echo", { message: "late" })).toEqual({
        content: "MCP server 'a' is closed.",
        isError: true,
      });
    },
    LONG_TIMEOUT,
  );

  it(
    "ends its children when the process exits on SIGINT without closing them",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-exit-"));
      // Maps the sources' `./x.js` imports to `./x.ts`, so Node runs src/ directly.
      writeFileSync(
        join(dir, "hooks.mjs"),
        `import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
export async function resolve(specifier, context, next) {
  if (specifier.startsWith(".") && specifier.endsWith(".js") && context.parentURL?.endsWith(".ts")) {
    const url = new URL(specifier.replace(/\\.js$/, ".ts"), context.parentURL);
    if (existsSync(fileURLToPath(url))) return next(url.href, context);
  }
  return next(specifier, context);
}`,
      );
      // A stdio server that would outlive its stdin: only the exit hook can end it.
      const stubborn = {
        command: process.execPath,
        args: [
          "--input-type=module",
          "-e",
          `setInterval(() => {}, 1000); await import(${JSON.stringify(pathToFileURL(USERS_SERVER).href)});`,
        ],
      };
      writeFileSync(
        join(dir, "main.mjs"),
        `import { register } from "node:module";
register("./hooks.mjs", import.meta.url);
const { connectMcpServers } = await import(${JSON.stringify(pathToFileURL(root("src/mcp/index.ts")).href)});
const toolset = await connectMcpServers(${JSON.stringify({ stubborn })});
process.on("SIGINT", () => process.exit(130));
console.log(JSON.stringify(toolset.servers().map((server) => server.pid)));
setInterval(() => {}, 1000);`,
      );
      const child = spawn(
        process.execPath,
        ["--experimental-transform-types", "--no-warnings", join(dir, "main.mjs")],
        {
          stdio: ["ignore", "pipe", "inherit"],
        },
      );
      const pids = await new Promise<number[]>((resolve, reject) => {
        child.stdout.setEncoding("utf8").once("data", (line: string) => resolve(JSON.parse(line)));
        child.once("exit", (code) => reject(new Error(`the script exited early (${code})`)));
      });
      expect(pids).toHaveLength(1);
      expect(isAlive(pids[0] as number)).toBe(true);
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGINT");
      expect(await exited).toBe(130);
      await until(() => !isAlive(pids[0] as number), "the child to end");
    },
    LONG_TIMEOUT,
  );
});
