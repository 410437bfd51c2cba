// SIGTERM and SIGHUP through the built CLI (run `npm run build` first): like Ctrl+C, they abort
// the run, print its last event and end every MCP child.
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { CLI } from "./helpers.js";

const EVERYTHING = fileURLToPath(
  new URL("../node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url),
);
const USERS_SERVER = fileURLToPath(new URL("../examples/users-server/server.mjs", import.meta.url));
const USERS_JSON = fileURLToPath(new URL("../examples/users-server/users.json", import.meta.url));

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function fake(respond: FakeResponder) {
  server = await startFakeOpenAIServer({ respond });
  return { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
}

/** A folder whose agentloop.json starts one stdio MCP server, with `marker` on its command line. */
function workspace(server: { command: string; args: string[] }): string {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-signals-"));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers: { tools: server } }));
  return dir;
}

/** Processes still running whose command line mentions `marker`. */
function survivors(marker: string): string[] {
  try {
    return execFileSync("pgrep", ["-af", marker], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** The CLI as a child process whose output can be awaited; stdin stays open until `end()`. */
function start(args: string[], options: { env: Record<string, string>; cwd: string }) {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? "", ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const waiters: { text: string; resolve: () => void }[] = [];
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
    for (const w of waiters.filter((w) => stdout.includes(w.text))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    exited,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    /** Resolves once stdout contains `text`. */
    printed: (text: string) =>
      new Promise<void>((resolve) => {
        if (stdout.includes(text)) resolve();
        else waiters.push({ text, resolve });
      }),
  };
}

/** Resolves once the fake model server has received a request. */
async function modelCalled(fake: FakeOpenAIServer): Promise<void> {
  while (fake.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
}

const events = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { type: string; stopReason?: string });

describe.each(["SIGTERM", "SIGHUP"] as const)("agentloop run on %s", (signal) => {
  it("during an MCP tool call: one aborted turn_complete, exit 130, no MCP child left", async () => {
    const marker = `agentloop-signal-${randomUUID()}`;
    const dir = workspace({ command: process.execPath, args: [EVERYTHING, "stdio", marker] });
    const env = await fake([
      {
        toolCalls: [{ name: "trigger-long-running-operation", arguments: { duration: 120, steps: 120 } }],
      },
    ]);
    const run = start(["run", "--json", "Run the long operation."], { env, cwd: dir });
    await run.printed('"type":"tool_call"');
    expect(survivors(marker)).toHaveLength(1);
    run.child.kill(signal);
    expect(await run.exited).toEqual({ code: 130, signal: null });
    const printed = events(run.stdout);
    expect(printed.filter((e) => e.type === "turn_complete")).toHaveLength(1);
    expect(printed.at(-1)).toMatchObject({ type: "turn_complete", stopReason: "aborted" });
    expect(server?.requests).toHaveLength(1);
    expect(survivors(marker)).toEqual([]);
  });

  it("during a model call: 'aborted' on stderr, exit 130", async () => {
    const env = await fake(() => ({ stall: true, afterText: "Let me think" }));
    const run = start(["run", "hi"], { env, cwd: process.cwd() });
    await modelCalled(server as FakeOpenAIServer);
    run.child.kill(signal);
    expect(await run.exited).toEqual({ code: 130, signal: null });
    expect(run.stderr).toBe("agentloop: aborted\n");
  });
});

describe("agentloop chat on SIGTERM", () => {
  it("stops the answer in flight, closes the MCP servers and exits 130", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-signals-"));
    const users = join(dir, `users-${randomUUID()}.json`);
    copyFileSync(USERS_JSON, users);
    writeFileSync(
      join(dir, "agentloop.json"),
      JSON.stringify({ mcpServers: { users: { command: process.execPath, args: [USERS_SERVER, users] } } }),
    );
    const env = await fake(() => ({ stall: true, afterText: "Looking" }));
    const chat = start(["chat"], { env, cwd: dir });
    chat.child.stdin.write("find Bob\n"); // stdin stays open: the chat is waiting for more
    await chat.printed("Looking");
    expect(survivors(users)).toHaveLength(1);
    chat.child.kill("SIGTERM");
    expect(await chat.exited).toEqual({ code: 130, signal: null });
    expect(chat.stdout).toBe("Looking\n(aborted)\n");
    expect(survivors(users)).toEqual([]);
  });
});
