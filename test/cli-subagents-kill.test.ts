// Sub-agents' crash resume with real processes (SPEC section 10): `agentloop run --session` with
// two parallel delegations, killed with SIGKILL while the children's tools run, while a child
// streams, and between the two delegations, then `--resume`d. The children's tool is an MCP server
// whose calls wait for a file the test creates and are logged, so every execution is counted; the
// model is the fake OpenAI server, which tells the runs apart by their system prompt and sees
// every request. No sleeps: each kill waits for an event, a log line or a request.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { CLI, runCli, until } from "./helpers.js";

const TOOLS = fileURLToPath(new URL("./support/gated-tools-server.mjs", import.meta.url));
const root = mkdtempSync(join(tmpdir(), "agentloop-subkill-"));
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

interface Message {
  role: string;
  content: string;
}

/** Who asks: the top-level run, or the worker on task A or B; and how many replies it has had. */
function whoAsks(messages: Message[]): { who: string; replies: number } {
  const system = messages.find((m) => m.role === "system")?.content ?? "";
  const user = messages.find((m) => m.role === "user")?.content ?? "";
  const replies = messages.filter((m) => m.role === "assistant").length;
  return { who: system.includes("You are the worker.") ? `worker-${user}` : "top", replies };
}

const delegate = (id: string, task: string) => ({
  id,
  name: "delegate_task",
  arguments: { agent: "worker", task },
});

describe("agentloop run --session with sub-agents killed with SIGKILL and resumed", () => {
  it("runs no completed call of any run twice, asks no answered iteration again, never recomputes a finished child", async () => {
    const dir = mkdtempSync(join(root, "w-"));
    writeFileSync(
      join(dir, "agentloop.json"),
      JSON.stringify({
        builtinTools: false,
        instructions: "You coordinate.",
        mcpServers: { gated: { command: process.execPath, args: [TOOLS, dir] } },
        agents: {
          worker: { description: "Does one step.", instructions: "You are the worker.", tools: ["step"] },
        },
      }),
    );
    const stall = new Set<string>();
    const asked: string[] = [];
    server = await startFakeOpenAIServer({
      respond: (request) => {
        const { who, replies } = whoAsks(request.body.messages as Message[]);
        asked.push(`${who}:${replies}`);
        if (stall.delete(`${who}:${replies}`)) return { stall: true, afterText: "Working on it" };
        if (who === "top")
          return replies === 0
            ? { toolCalls: [delegate("d1", "A"), delegate("d2", "B")] }
            : { text: "All delegated work done." };
        const task = who.slice("worker-".length);
        return replies === 0
          ? { toolCalls: [{ id: `s${task}`, name: "step", arguments: { tag: task.toLowerCase() } }] }
          : { text: `worker did ${task}` };
      },
    });
    const env = {
      PATH: process.env.PATH ?? "",
      OPENAI_BASE_URL: server.url,
      OPENAI_API_KEY: "sk-test",
      AGENTLOOP_DB: join(dir, "s.db"),
    };
    const log = () =>
      existsSync(join(dir, "calls.log")) ? readFileSync(join(dir, "calls.log"), "utf8") : "";
    const calls = () =>
      log()
        .split("\n")
        .filter(Boolean)
        .map((line) => line.split(" ") as [string, string, string]);
    const started = (tag: string, count: number) =>
      until(() => {
        const starts = calls().filter(([what, t]) => what === "start" && t === tag);
        return starts.length >= count ? (starts.at(-1)?.[2] as string) : undefined;
      });
    const release = (tag: string, pid: string) => writeFileSync(join(dir, `go-${tag}-${pid}`), "");
    const start = (args: string[]) => {
      const child = spawn(process.execPath, [CLI, "run", "--session", "s", "--json", ...args], {
        cwd: dir,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      children.push(child);
      const events: Event[] = [];
      let buffered = "";
      child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
        buffered += chunk;
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) events.push(JSON.parse(line) as Event);
      });
      const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
      return {
        events,
        exited,
        event: (match: (event: Event) => boolean) => until(() => events.find(match)),
        kill: async () => {
          child.kill("SIGKILL");
          await exited;
        },
      };
    };

    // 1. Killed while both children's steps run.
    let run = start(["Do the work."]);
    await Promise.all([started("a", 1), started("b", 1)]);
    await run.kill();

    // 2. Resumed: both steps run again (they were in flight). a finishes; worker A's next reply
    //    streams and is killed mid-stream, while b still runs.
    stall.add("worker-A:1");
    run = start(["--resume"]);
    const [pa] = await Promise.all([started("a", 2), started("b", 2)]);
    release("a", pa);
    await run.event((e) => e.type === "message_delta" && e.agent === "worker" && e.parentCallId === "d1");
    await run.kill();

    // 3. Resumed: a does not run again; worker A is asked again only for the reply it never
    //    finished, and its answer becomes d1's result; killed between the two delegations.
    run = start(["--resume"]);
    await started("b", 3);
    const d1 = await run.event(
      (e) => e.type === "tool_result" && e.id === "d1" && e.parentRunId === undefined,
    );
    expect(d1).toMatchObject({ content: "worker did A", isError: false });
    await run.kill();

    // 4. Resumed to the end: d1's child is not run again; b runs a last time.
    run = start(["--resume"]);
    release("b", await started("b", 4));
    expect(await run.exited).toBe(0);
    const last = run.events.at(-1);
    expect(last).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      output: "All delegated work done.",
    });
    expect(last?.parentRunId).toBeUndefined();
    // Worker A's events are not in this process's stream: it finished before.
    expect(run.events.some((e) => e.parentCallId === "d1")).toBe(false);
    expect(run.events.some((e) => e.type === "turn_complete" && e.parentCallId === "d2")).toBe(true);

    // Every step ran to its end once and never started again after that.
    const log1 = calls();
    for (const tag of ["a", "b"]) {
      expect(
        log1.filter(([what, t]) => what === "end" && t === tag),
        tag,
      ).toHaveLength(1);
      const end = log1.findIndex(([what, t]) => what === "end" && t === tag);
      expect(
        log1.slice(end).filter(([what, t]) => what === "start" && t === tag),
        tag,
      ).toEqual([]);
    }
    const starts = log1.filter(([what]) => what === "start").map(([, tag]) => tag);
    expect(starts.sort()).toEqual(["a", "a", "b", "b", "b", "b"]);
    // Each run's model was asked once per reply, and again only for the reply cut off mid-stream.
    const count = (key: string) => asked.filter((a) => a === key).length;
    expect(count("top:0")).toBe(1);
    expect(count("top:1")).toBe(1);
    expect(count("worker-A:0")).toBe(1);
    expect(count("worker-A:1")).toBe(2);
    expect(count("worker-B:0")).toBe(1);
    expect(count("worker-B:1")).toBe(1);

    // The stored session: the top-level conversation, and each child's run under its call.
    const show = await runCli(["sessions", "show", "s", "--json"], { cwd: dir, env });
    expect(show.code).toBe(0);
    const stored = JSON.parse(show.stdout) as { role: string; runs?: Record<string, unknown>[] }[];
    expect(stored.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    const runs = stored[1]?.runs ?? [];
    expect(runs.map((r) => [r.parentCallId, r.agent, r.depth, r.stopReason])).toEqual([
      ["d1", "worker", 1, "final_answer"],
      ["d2", "worker", 1, "final_answer"],
    ]);
    expect(runs[0]?.parentRunId).toBe(last?.runId);
    // Each child's transcript once: its task, its step and result, its answer.
    expect(((runs[0]?.messages ?? []) as Message[]).map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
    ]);
    const text = await runCli(["sessions", "show", "s"], { cwd: dir, env });
    expect(text.stdout).toMatch(
      /→ delegate_task .*\(d1\)\n {4}\[worker · run_\S+ · completed final_answer\]\n {4}user: A\n/,
    );
    const ls = await runCli(["sessions", "--json"], { cwd: dir, env });
    expect(JSON.parse(ls.stdout)[0]).toMatchObject({ status: "completed", stopReason: "final_answer" });
  }, 120_000);
});
