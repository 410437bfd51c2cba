// MCP client failures: each cause named in its error, and busy servers ended with their process tree.
import { createServer, type Server } from "node:http";
import { fileURLToPath } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { errorMessage } from "../src/core/errors.js";
import { runningChildPids } from "../src/mcp/children.js";
import { connectMcpServers, type McpToolset } from "../src/mcp/index.js";
import { call, isAlive, pidOf, until } from "./support/mcp-helpers.js";

const TEST_SERVER = fileURLToPath(new URL("./support/mcp-test-server.mjs", import.meta.url));
const LONG_TIMEOUT = 60_000;

describe("causes named in errors", () => {
  /** A Streamable HTTP MCP server (stateless) that wants `Authorization: Bearer <token>`. */
  async function remoteServer(): Promise<{ url: string; token: { value: string }; server: Server }> {
    const token = { value: "right-token" };
    const server = createServer(async (req, res) => {
      if (req.headers.authorization !== `Bearer ${token.value}`) {
        res.writeHead(401, { "content-type": "text/plain" }).end("Unauthorized");
        return;
      }
      const mcp = new McpServer({ name: "remote", version: "1.0.0" });
      mcp.registerTool("echo", { inputSchema: { text: z.string() } }, ({ text }) => ({
        content: [{ type: "text", text }],
      }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on("close", () => void mcp.close());
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    return { url: `http://127.0.0.1:${port}/mcp`, token, server };
  }

  it(
    "an HTTP 401 at startup and during a call, naming the config file and never the header",
    async () => {
      const { url, token, server } = await remoteServer();
      try {
        const wrong = { url: `${url}?key=in-query`, headers: { Authorization: "Bearer wrong-token" } };
        const error = await connectMcpServers({ remote: wrong }, { configFile: "team/mcp.json" }).catch(
          (e: unknown) => e,
        );
        expect(errorMessage(error)).toBe(
          `MCP server 'remote' (team/mcp.json) failed to start: ${url} answered 401 Unauthorized. Check its "headers" (e.g. "Authorization"), or mark it "optional": true.`,
        );

        const right = { url, headers: { Authorization: "Bearer right-token" } };
        const toolset = await connectMcpServers({ remote: right }, { configFile: "team/mcp.json" });
        try {
          token.value = "rotated-token";
          expect(await call(toolset, "echo", { text: "hi" })).toEqual({
            content: `MCP server 'remote' (team/mcp.json) could not run 'echo': ${url} answered 401 Unauthorized. Check its "headers" (e.g. "Authorization").`,
            isError: true,
          });
          expect(toolset.servers()[0]?.state).toBe("up");
          token.value = "right-token";
          expect(await call(toolset, "echo", { text: "back" })).toEqual({ content: "back", isError: false });
        } finally {
          await toolset.close();
        }
      } finally {
        server.close();
      }
    },
    LONG_TIMEOUT,
  );

  it(
    "a refused connection, and a server that exits with its code and last stderr lines",
    async () => {
      const { url, server } = await remoteServer();
      await new Promise((resolve) => server.close(resolve));
      const refused = await connectMcpServers({ remote: { url } }).catch((e: unknown) => e);
      expect(errorMessage(refused)).toBe(
        `MCP server 'remote' failed to start: nothing is listening at ${url}. Start the server, or fix its "url", or mark it "optional": true.`,
      );

      const exiting = {
        command: process.execPath,
        args: ["-e", "for (const n of [1, 2, 3, 4]) console.error('line ' + n); process.exit(3)"],
      };
      const exited = await connectMcpServers({ exiting }).catch((e: unknown) => e);
      expect(errorMessage(exited)).toBe(
        `MCP server 'exiting' failed to start: the server exited with code 3 (stderr: line 2 | line 3 | line 4). Check its "command", "args" and "env", or mark it "optional": true.`,
      );
    },
    LONG_TIMEOUT,
  );

  it(
    "a result over the stdio message limit is an error result, and the next call restarts the server",
    async () => {
      const toolset = await connectMcpServers({ probe: { command: process.execPath, args: [TEST_SERVER] } });
      try {
        const first = pidOf(toolset, "probe");
        expect(await call(toolset, "big", { bytes: 11 * 1024 * 1024 })).toEqual({
          content:
            "MCP server 'probe' could not run 'big': it sent a message over the 10.0 MB limit of MCP stdio messages. Ask the tool for less (a filter, a range, a page). It will be restarted on the next call.",
          isError: true,
        });
        expect(await call(toolset, "big", { bytes: 5 })).toEqual({ content: "xxxxx", isError: false });
        expect(pidOf(toolset, "probe")).not.toBe(first);
      } finally {
        await toolset.close();
      }
    },
    LONG_TIMEOUT,
  );
});

describe("closing a busy server", () => {
  const stubborn = { command: process.execPath, args: [TEST_SERVER, "--ignore-sigterm"] };

  /** Calls the test server's `busy`, which never answers; `pids` are its own and its child's. */
  function callBusy(toolset: McpToolset) {
    let reported: (pids: [number, number]) => void = () => {};
    const pids = new Promise<[number, number]>((resolve) => {
      reported = resolve;
    });
    const busy = call(
      toolset,
      "busy",
      {},
      { onProgress: ({ message }) => reported(JSON.parse(message ?? "")) },
    );
    return { busy, pids };
  }

  it(
    "ends a server that is in a tool call and ignores SIGTERM, and the process it started; close() is idempotent",
    async () => {
      const stubborn = { command: process.execPath, args: [TEST_SERVER, "--ignore-sigterm"] };
      const toolset = await connectMcpServers({ stubborn });
      let reported: (pids: number[]) => void = () => {};
      const started = new Promise<number[]>((resolve) => {
        reported = resolve;
      });
      const busy = call(
        toolset,
        "busy",
        {},
        { onProgress: ({ message }) => reported(JSON.parse(message ?? "")) },
      );
      const [server, grandchild] = (await started) as [number, number];
      expect(server).toBe(pidOf(toolset, "stubborn"));
      expect([isAlive(server), isAlive(grandchild)]).toEqual([true, true]);

      await Promise.all([toolset.close(), toolset.close()]);
      await toolset.close();
      expect(isAlive(server)).toBe(false);
      await until(() => !isAlive(grandchild), "the grandchild to be reaped");
      expect(runningChildPids()).toEqual([]);
      expect(await busy).toEqual({
        content: "MCP server 'stubborn' was closed during the call to 'busy'.",
        isError: true,
      });
    },
    LONG_TIMEOUT,
  );

  it(
    "fails the call at once when the server is killed and its child holds the pipes, and ends the child",
    async () => {
      const toolset = await connectMcpServers({ stubborn });
      try {
        const { busy, pids } = callBusy(toolset);
        const [server, grandchild] = await pids;
        process.kill(server, "SIGKILL");
        expect(await busy).toEqual({
          content: expect.stringMatching(
            /^MCP server 'stubborn' could not run 'busy': the server was killed by SIGKILL .*It will be restarted on the next call\.$/,
          ),
          isError: true,
        });
        await until(() => !isAlive(grandchild), "the grandchild to end");
      } finally {
        await toolset.close();
      }
    },
    LONG_TIMEOUT,
  );
});
