/**
 * Where the CLI's output goes when stdout is not a terminal (run `npm run build` first): a reader
 * slower than the CLI gets all of it, a stdout that fails ends the command with one line.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, openSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { CLI, type CliRun, runCli } from "./helpers.js";

const MANY_TOOLS = fileURLToPath(new URL("./support/many-tools-mcp-server.mjs", import.meta.url));
const EVERYTHING = fileURLToPath(
  new URL("../node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url),
);
/** More than 1 MiB, in few words (the fake server streams a word a chunk). */
const LONG = Array.from({ length: 12 }, (_, i) => `${i}${"x".repeat(100_000)}`).join(" ");

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function workspace(config: object = {}) {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-output-"));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify(config));
  server = await startFakeOpenAIServer({ respond: () => ({ text: LONG }) });
  const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
  return { dir, env };
}

/**
 * Runs the CLI with its stdout read only once the process exited (or after a pause, when it
 * waits for its reader): a pipe holds 64 KiB, the rest must wait in the CLI until it is read.
 */
async function runReadLate(
  args: string[],
  options: { cwd: string; env: Record<string, string>; input?: string },
) {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? "", ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  child.stdin.end(options.input ?? "");
  const exited = new Promise((resolve) => child.once("exit", resolve));
  await Promise.race([exited, delay(500)]);
  let stdout = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
  });
  const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
  return { code, stdout, stderr } satisfies CliRun;
}

describe("output read by a reader slower than the CLI", () => {
  it("sessions show --json gives all of a session of more than 1 MiB, as valid JSON", async () => {
    const { dir, env } = await workspace();
    expect((await runCli(["run", "--session", "big", "hi"], { cwd: dir, env })).code).toBe(0);
    const shown = await runReadLate(["sessions", "show", "big", "--json"], { cwd: dir, env });
    expect(shown.code).toBe(0);
    const messages = JSON.parse(shown.stdout) as { role: string; content: string }[];
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(messages[1]?.content).toBe(LONG);
  });

  it("tools --json gives all of a catalogue of more than 1 MiB, as valid JSON", async () => {
    const { dir, env } = await workspace({
      mcpServers: { many: { command: process.execPath, args: [MANY_TOOLS, "120", "10000"] } },
    });
    const listed = await runReadLate(["tools", "--json"], { cwd: dir, env });
    expect(listed.code).toBe(0);
    const tools = JSON.parse(listed.stdout) as { name: string; description: string }[];
    expect(tools.filter((t) => t.name.startsWith("tool_"))).toHaveLength(120);
    expect(tools.at(-1)?.description).toHaveLength(10_000 + "Tool 119: ".length);
  });

  it("piped chat gives all of a long answer", async () => {
    const { dir, env } = await workspace();
    const chat = await runReadLate(["chat"], { cwd: dir, env, input: "hi\n" });
    expect(chat).toMatchObject({ code: 0, stdout: `${LONG}\n`, stderr: "" });
  });
});

describe("notes about single tools of the catalogue", () => {
  it("are printed by tools (and with --verbose), not by every run, chat and mcp prompts", async () => {
    // server-everything offers a tool that runs only as an MCP task, which agentloop skips.
    const { dir, env } = await workspace({
      mcpServers: { everything: { command: process.execPath, args: [EVERYTHING, "stdio"] } },
    });
    const note =
      "agentloop: warning: MCP tool 'simulate-research-query' of server 'everything' is skipped: it runs only as an MCP task, which agentloop does not support.\n";
    const cli = (args: string[], input = "") => runCli(args, { cwd: dir, env, input });
    const [tools, run, chat, prompts, verbose] = await Promise.all([
      cli(["tools", "--json"]),
      cli(["run", "hi"]),
      cli(["chat"], "hi\n"),
      cli(["mcp", "prompts", "--json"]),
      cli(["run", "--verbose", "hi"]),
    ]);
    expect(tools).toMatchObject({ code: 0, stderr: note });
    for (const quiet of [run, chat, prompts]) expect(quiet).toMatchObject({ code: 0, stderr: "" });
    expect(verbose.stderr.split(note)).toHaveLength(2);
  });
});

describe("a stdout that fails", () => {
  it("a full disk (/dev/full) ends run --json, sessions and tools with one line on stderr and exit 1", async () => {
    const { dir, env } = await workspace();
    for (const args of [["run", "--json", "hi"], ["sessions", "--json"], ["tools"]]) {
      const child = spawn(process.execPath, [CLI, ...args], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? "", ...env },
        stdio: ["ignore", openSync("/dev/full", "w"), "pipe"],
      });
      let stderr = "";
      child.stderr?.setEncoding("utf8").on("data", (d: string) => {
        stderr += d;
      });
      const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
      expect({ args, code, stderr }).toEqual({
        args,
        code: 1,
        stderr: "agentloop: cannot write to stdout: no space left on device (ENOSPC): the output is lost\n",
      });
    }
  });
});

/** A folder on a 256 KiB file system of its own (tmpfs: needs root), or undefined where none can be mounted. */
function tinyDisk(): string | undefined {
  const dir = join(mkdtempSync(join(tmpdir(), "agentloop-tiny-")), "disk");
  mkdirSync(dir);
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", dir], { stdio: "ignore" });
    return dir;
  } catch {
    return undefined;
  }
}
const disk = tinyDisk();
afterAll(() => {
  if (disk) execFileSync("umount", [disk]);
});

describe("a store that fills its disk during a run", () => {
  it.skipIf(disk === undefined)(
    "run --json ends its events with an error and one turn_complete, exit 2 and one line on stderr",
    async () => {
      const { dir, env } = await workspace();
      const db = { ...env, AGENTLOOP_DB: join(disk as string, "sessions.db") };
      const run = await runCli(["run", "--json", "--session", "full", "hi"], { cwd: dir, env: db });
      const line =
        "agentloop: " +
        `${db.AGENTLOOP_DB} cannot be written: the disk is full: free some space or set AGENTLOOP_DB to another file; what was stored is kept: agentloop run --session full --resume continues the run once the store is back`;
      expect(run.stderr).toBe(`${line}\n`);
      expect(run.code).toBe(2);
      const events = run.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { type: string; [key: string]: unknown });
      expect(events.filter((e) => e.type === "turn_complete")).toHaveLength(1);
      expect(events.slice(-2)).toEqual([
        {
          type: "error",
          code: "store_unavailable",
          message: line.slice("agentloop: ".length),
          runId: expect.any(String),
        },
        expect.objectContaining({
          type: "turn_complete",
          stopReason: "aborted",
          sessionId: "full",
          iterations: 1,
        }),
      ]);
    },
  );
});
