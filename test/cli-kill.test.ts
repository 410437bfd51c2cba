// Crash resume with real processes: `agentloop run --session` killed with SIGKILL at many points
// (while the model streams, mid-tool, between two parallel calls), then `--resume`d. The tools
// are an MCP server of this test's own whose calls wait for a file the test creates and are
// logged, so every execution is counted; the model is the fake OpenAI server, so every request
// is seen. No sleeps: each kill waits for an event, a log line or a request.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Message } from "../src/core/messages.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { CLI, runCli, until } from "./helpers.js";

const TOOLS = fileURLToPath(new URL("./support/gated-tools-server.mjs", import.meta.url));
const root = mkdtempSync(join(tmpdir(), "agentloop-kill-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let server: FakeOpenAIServer | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
  await server?.close();
  server = undefined;
});

interface Event {
  type: string;
  [key: string]: unknown;
}

/** A workspace: the gated tools server configured, its call log, a fake model, a session store. */
async function workspace(respond: (assistantReplies: number) => object) {
  const dir = mkdtempSync(join(root, "w-"));
  const mcpServers = { gated: { command: process.execPath, args: [TOOLS, dir] } };
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers, builtinTools: false }));
  const stalled: number[] = [];
  const stall = new Set<number>();
  server = await startFakeOpenAIServer({
    respond: (request, index) => {
      const replies = request.body.messages.filter((m: { role: string }) => m.role === "assistant").length;
      if (stall.delete(replies)) {
        stalled.push(index);
        return { stall: true, afterText: "Working on it" };
      }
      return respond(replies);
    },
  });
  const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test", AGENTLOOP_DB: join(dir, "s.db") };
  const log = () => (existsSync(join(dir, "calls.log")) ? readFileSync(join(dir, "calls.log"), "utf8") : "");
  return {
    dir,
    env,
    stall,
    stalled,
    /** `start`/`end` lines of the call log, as [what, tag, pid]. */
    calls: () =>
      log()
        .split("\n")
        .filter(Boolean)
        .map((line) => line.split(" ") as [string, string, string]),
    /** The server pid running `tag` now (the last start of it), once it has started `count` times. */
    started: (tag: string, count = 1) =>
      until(() => {
        const starts = log()
          .split("\n")
          .filter((l) => l.startsWith(`start ${tag} `));
        return starts.length >= count ? (starts.at(-1)?.split(" ")[2] as string) : undefined;
      }),
    release: (tag: string, pid: string) => writeFileSync(join(dir, `go-${tag}-${pid}`), ""),
    /** Starts `agentloop run` with the events on stdout collected. */
    start(args: string[]) {
      const child = spawn(process.execPath, [CLI, "run", "--session", "s", "--json", ...args], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? "", ...env },
        stdio: ["ignore", "pipe", "pipe"],
      });
      children.push(child);
      const events: Event[] = [];
      let buffered = "";
      let stderr = "";
      child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
        buffered += chunk;
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) events.push(JSON.parse(line) as Event);
      });
      child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
        stderr += chunk;
      });
      const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
      return {
        events,
        exited,
        get stderr() {
          return stderr;
        },
        /** Resolves with the first event that satisfies `match` (after `from` events). */
        event: (match: (event: Event) => boolean, from = 0) => until(() => events.slice(from).find(match)),
        kill: async () => {
          child.kill("SIGKILL");
          await exited;
        },
      };
    },
    stored: async (): Promise<Message[]> => {
      const show = await runCli(["sessions", "show", "s", "--json"], { cwd: dir, env });
      expect(show.code).toBe(0);
      return JSON.parse(show.stdout) as Message[];
    },
    status: async () => {
      const ls = await runCli(["sessions", "--json"], { cwd: dir, env });
      return (JSON.parse(ls.stdout) as { status: string; stopReason?: string }[])[0];
    },
  };
}

const call = (id: string, tag: string) => ({ id, name: "step", arguments: { tag } });
const SCRIPT = [
  { toolCalls: [call("a1", "a"), call("b1", "b")] },
  { toolCalls: [call("c1", "c")] },
  { text: "All steps done." },
];
const asked = (tag: string, id: string) => ({
  role: "tool",
  toolCallId: id,
  name: "step",
  content: `done ${tag}`,
  isError: false,
});
const reply = (...ids: [string, string][]) => ({
  role: "assistant",
  content: "",
  toolCalls: ids.map(([id, tag]) => ({ id, name: "step", arguments: JSON.stringify({ tag }) })),
});
const USER = { role: "user", content: "Do the steps." };

describe("agentloop run --session killed with SIGKILL and resumed", () => {
  it("never runs a completed call twice, never asks the model again for an answered iteration, loses and duplicates nothing", async () => {
    const w = await workspace((replies) => SCRIPT[replies] ?? { text: "unexpected" });

    // 1. Killed while the model streams its first reply: only the input is stored.
    w.stall.add(0);
    let run = w.start(["Do the steps."]);
    await run.event((e) => e.type === "message_delta");
    await run.kill();
    expect(await w.stored()).toEqual([USER]);
    expect(await w.status()).toMatchObject({ status: "interrupted" });

    // 2. Resumed, then killed while both calls run: the reply is stored, no result.
    run = w.start(["--resume"]);
    await Promise.all([w.started("a", 1), w.started("b", 1)]);
    await run.kill();
    expect(await w.stored()).toEqual([USER, reply(["a1", "a"], ["b1", "b"])]);

    // 3. Resumed: both calls run again (they were in flight); killed between them, after a's result.
    run = w.start(["--resume"]);
    const [pa] = await Promise.all([w.started("a", 2), w.started("b", 2)]);
    w.release("a", pa);
    await run.event((e) => e.type === "tool_result" && e.id === "a1");
    await run.kill();
    expect(await w.stored()).toEqual([USER, reply(["a1", "a"], ["b1", "b"]), asked("a", "a1")]);

    // 4. Resumed: only b runs again; killed while the model streams the second reply.
    w.stall.add(1);
    run = w.start(["--resume"]);
    w.release("b", await w.started("b", 3));
    const b = await run.event((e) => e.type === "tool_result");
    expect(b).toMatchObject({ id: "b1", content: "done b" });
    await run.event((e) => e.type === "message_delta");
    await run.kill();
    const afterFirst = [USER, reply(["a1", "a"], ["b1", "b"]), asked("a", "a1"), asked("b", "b1")];
    expect(await w.stored()).toEqual(afterFirst);

    // 5. Resumed, killed while c runs; 6. resumed to the end.
    run = w.start(["--resume"]);
    await w.started("c", 1);
    await run.kill();
    expect(await w.stored()).toEqual([...afterFirst, reply(["c1", "c"])]);
    run = w.start(["--resume"]);
    w.release("c", await w.started("c", 2));
    expect(await run.exited).toBe(0);
    expect(run.events.at(-1)).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      output: "All steps done.",
      sessionId: "s",
    });

    // Every call ran to its end once, and never started again after that.
    const calls = w.calls();
    for (const tag of ["a", "b", "c"]) {
      const ends = calls.filter(([what, t]) => what === "end" && t === tag);
      expect(ends, tag).toHaveLength(1);
      const end = calls.findIndex(([what, t]) => what === "end" && t === tag);
      expect(
        calls.slice(end).filter(([what, t]) => what === "start" && t === tag),
        tag,
      ).toEqual([]);
    }
    // In flight at a kill, a call runs again: a twice, b three times, c twice.
    const starts = calls.filter(([what]) => what === "start").map(([, tag]) => tag);
    expect(starts.sort()).toEqual(["a", "a", "b", "b", "b", "c", "c"]);
    // The model was asked again only for replies it never finished (the stalled ones).
    const replies = (server?.requests ?? []).map(
      (r) => r.body.messages.filter((m: { role: string }) => m.role === "assistant").length,
    );
    expect(replies).toEqual([0, 0, 1, 1, 2]);
    expect(w.stalled).toEqual([0, 2]);
    // The final request carries the whole conversation once, results in call order.
    const last = ((server?.requests.at(-1)?.body.messages ?? []) as { role: string; tool_call_id?: string }[])
      .filter((m) => m.role !== "system")
      .map((m) => (m.role === "tool" ? m.tool_call_id : m.role));
    expect(last).toEqual(["user", "assistant", "a1", "b1", "assistant", "c1"]);
    expect(await w.stored()).toEqual([
      ...afterFirst,
      reply(["c1", "c"]),
      asked("c", "c1"),
      { role: "assistant", content: "All steps done." },
    ]);
    expect(await w.status()).toMatchObject({ status: "completed", stopReason: "final_answer" });
  }, 90_000); // a dozen real processes killed and resumed one after another: slow on a loaded machine
});

describe("two processes on one session", () => {
  it("the second exits 2 with one clear line; the first finishes unharmed", async () => {
    const w = await workspace(
      (replies) => [{ toolCalls: [call("x1", "x")] }, { text: "First done." }][replies] ?? {},
    );
    const first = w.start(["First task."]);
    const pid = await w.started("x");
    const second = await runCli(["run", "--session", "s", "Second task."], { cwd: w.dir, env: w.env });
    expect(second.code).toBe(2);
    expect(second.stderr).toMatch(
      /^agentloop: session 's' is in use by another agentloop process \(process \d+\): wait for it or use another --session; if that process is gone, --force takes the session over\n$/,
    );
    const rm = await runCli(["sessions", "rm", "s"], { cwd: w.dir, env: w.env });
    expect(rm.code).toBe(2);
    expect(rm.stderr).toContain("in use by another agentloop process");
    expect(await w.status()).toMatchObject({ status: "running" });

    w.release("x", pid);
    expect(await first.exited).toBe(0);
    expect(first.events.at(-1)).toMatchObject({ type: "turn_complete", output: "First done." });
    expect(server?.requests).toHaveLength(2);
    expect(await w.stored()).toEqual([
      { role: "user", content: "First task." },
      reply(["x1", "x"]),
      asked("x", "x1"),
      { role: "assistant", content: "First done." },
    ]);
  });
});
