// Compaction through the CLI (SPEC section 13): `--compact` and config "compaction" against the
// fake OpenAI server, the summary stored as a checkpoint, SIGKILL during and right after a
// compaction then `--resume`, a provider's context-overflow answer, bad input, chat's /compact.
// No sleeps: each kill waits for a request the server saw.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Message } from "../src/core/messages.js";
import { startFakeAnthropicServer } from "../src/testing/fake-anthropic-server.js";
import type { FakeRequest, FakeResponse } from "../src/testing/fake-openai-server.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { CLI, runCli, until } from "./helpers.js";

const root = mkdtempSync(join(tmpdir(), "agentloop-compact-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let server: FakeOpenAIServer | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
  await server?.close();
  server = undefined;
});

interface WireMessage {
  role: string;
  content: string | null;
}
const messagesOf = (request: FakeRequest) => (request.body as { messages: WireMessage[] }).messages;
const isSummaryRequest = (request: FakeRequest) =>
  String(messagesOf(request)[0]?.content ?? "").startsWith("You compact");
const SUMMARY = "SUMMARY: the sums 1+1 to 6+1 were computed.";
const carriesSummary = (request: FakeRequest) =>
  messagesOf(request).some((m) => String(m.content ?? "").includes(SUMMARY));
/** A long narration per reply, so that a few turns fill the budget. */
const narration = (k: number) => `Step ${k}: ${"I keep working on the sums carefully. ".repeat(25)}`;

/**
 * A workspace with a fake model that calls the calculator `calls` times (one call per request,
 * counted over the requests that are not summaries), then answers; summaries answer `summary`.
 */
async function workspace(
  options: { calls?: number; summary?: (request: FakeRequest) => FakeResponse; config?: object } = {},
) {
  const dir = mkdtempSync(join(root, "w-"));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify(options.config ?? {}));
  const calls = options.calls ?? 10;
  let step = 0;
  const stall = new Set<string>();
  server = await startFakeOpenAIServer({
    respond: (request) => {
      if (isSummaryRequest(request)) {
        if (stall.delete("summary")) return { stall: true };
        return options.summary?.(request) ?? { text: SUMMARY };
      }
      if (carriesSummary(request) && stall.delete("after")) return { stall: true };
      step++;
      if (step > calls) return { text: "All sums done." };
      return {
        text: narration(step),
        toolCalls: [{ name: "calculator", arguments: { expression: `${step}+1` } }],
      };
    },
  });
  const fake = server;
  const env = { OPENAI_BASE_URL: fake.url, OPENAI_API_KEY: "sk-test", AGENTLOOP_DB: join(dir, "s.db") };
  return {
    dir,
    env,
    stall,
    server: fake,
    summaries: () => fake.requests.filter(isSummaryRequest).length,
    run: (args: string[], input?: string) =>
      runCli(args, { cwd: dir, env, ...(input !== undefined && { input }) }),
    /** Starts `agentloop run --session s` in the background (its output unread). */
    start(args: string[]) {
      const child = spawn(process.execPath, [CLI, "run", "--session", "s", ...args], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? "", ...env },
        stdio: "ignore",
      });
      children.push(child);
      const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
      return {
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
  };
}

const COMPACT = ["--compact", "--max-context-tokens", "3000", "--max-iterations", "20"];
const summariesIn = (messages: readonly Message[]) =>
  messages.filter((m) => m.role === "user" && m.compaction);
const events = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { type: string; [k: string]: unknown });

describe("agentloop run --compact", () => {
  it("replaces older turns by one summary, stored as a checkpoint that `sessions show` marks", async () => {
    const w = await workspace();
    const run = await w.run(["run", "--session", "s", "--json", ...COMPACT, "Compute the sums."]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const all = events(run.stdout);
    const compactions = all.filter((e) => e.type === "compaction");
    expect(compactions.length).toBeGreaterThan(0);
    for (const c of compactions) {
      expect(c.summarizedMessages).toBeGreaterThan(1);
      expect(c.tokensAfter as number).toBeLessThan(c.tokensBefore as number);
    }
    expect(all.at(-1)).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      output: "All sums done.",
    });
    expect(w.summaries()).toBe(compactions.length);
    // Requests after a compaction stay under the threshold and never send a result without its call.
    for (const request of w.server.requests) {
      const wire = messagesOf(request) as (WireMessage & {
        tool_call_id?: string;
        tool_calls?: { id: string }[];
      })[];
      const ids = new Set(wire.flatMap((m) => m.tool_calls?.map((c) => c.id) ?? []));
      for (const m of wire) if (m.role === "tool") expect(ids.has(m.tool_call_id as string)).toBe(true);
    }
    const stored = await w.stored();
    const summaries = summariesIn(stored);
    expect(summaries).toHaveLength(compactions.length);
    expect(summaries[0]).toMatchObject({ compaction: { replaced: compactions[0]?.summarizedMessages } });
    expect(summaries[0]?.content).toContain(SUMMARY);
    const show = await w.run(["sessions", "show", "s"]);
    expect(show.stdout).toMatch(/── compacted: \d+ earlier messages summarised/);
  });

  it("shows compactions in the progress", async () => {
    const w = await workspace({ config: { compaction: { at: 0.8 } } });
    const run = await w.run([
      "run",
      "--verbose",
      "--max-context-tokens",
      "3000",
      "--max-iterations",
      "20",
      "Compute.",
    ]);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/⇣ compacted: \d+ older messages → one summary \(\d+ → \d+ tokens\)/);
  });

  it("keeps the old history when killed during a compaction, and exactly one summary after one; --resume goes on", async () => {
    const w = await workspace();
    // 1. Killed while the summary is being written: the log is as it was.
    w.stall.add("summary");
    let run = w.start(COMPACT.concat("Compute the sums."));
    await until(() => (w.summaries() > 0 ? true : undefined));
    await run.kill();
    const before = await w.stored();
    expect(summariesIn(before)).toHaveLength(0);
    expect(before.length).toBeGreaterThan(6);

    // 2. Resumed: the summary is written; killed as the model is asked with it.
    w.stall.add("after");
    run = w.start([...COMPACT, "--resume"]);
    await until(() => (w.server.requests.some(carriesSummary) ? true : undefined));
    await run.kill();
    const after = await w.stored();
    expect(summariesIn(after)).toHaveLength(1);
    expect(after.slice(0, before.length)).toEqual(before); // the log keeps what was replaced
    expect(w.summaries()).toBe(2);

    // 3. Resumed from the compacted history (not summarised again first), to the end.
    const from = w.server.requests.length;
    const resumed = await w.run(["run", "--session", "s", "--json", ...COMPACT, "--resume"]);
    expect(resumed.code).toBe(0);
    expect(events(resumed.stdout).at(-1)).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
    });
    const next = w.server.requests[from] as FakeRequest;
    expect(isSummaryRequest(next)).toBe(false);
    expect(carriesSummary(next)).toBe(true);
    expect(messagesOf(next).length).toBeLessThan(before.length);
    const final = await w.stored();
    // One summary per compaction that finished: the one killed mid-way left nothing.
    expect(summariesIn(final)).toHaveLength(w.summaries() - 1);
    expect(final.slice(0, after.length)).toEqual(after);
  });

  it("compacts and retries once when the server answers 400 context_length_exceeded", async () => {
    let refused = false;
    const w = await workspace({ calls: 3 });
    const inner = w.server;
    const dir = w.dir;
    await inner.close();
    let step = 0;
    server = await startFakeOpenAIServer({
      respond: (request) => {
        if (isSummaryRequest(request)) return { text: SUMMARY };
        if (step === 3 && !refused) {
          refused = true;
          const body = JSON.stringify({
            error: {
              message:
                "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens.",
              type: "invalid_request_error",
              param: "messages",
              code: "context_length_exceeded",
            },
          });
          return { status: 400, body };
        }
        step++;
        if (step > 3) return { text: "All sums done." };
        return { toolCalls: [{ name: "calculator", arguments: { expression: `${step}+1` } }] };
      },
    });
    const env = { ...w.env, OPENAI_BASE_URL: server.url };
    const on = await runCli(["run", "--json", "--compact", "Compute."], { cwd: dir, env });
    expect(on.code).toBe(0);
    const all = events(on.stdout);
    expect(all.filter((e) => e.type === "compaction")).toHaveLength(1);
    expect(all.at(-1)).toMatchObject({ stopReason: "final_answer", iterations: 4 });
    // Without compaction: one line naming --compact, exit 5.
    refused = false;
    step = 0;
    const off = await runCli(["run", "Compute."], { cwd: dir, env });
    expect(off.code).toBe(5);
    const lines = off.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^agentloop: model_error: The prompt exceeds the model's context window \(HTTP 400\).*--compact/,
    );
  });

  it('compacts and retries once when Anthropic answers 400 "prompt is too long"', async () => {
    const dir = mkdtempSync(join(root, "a-"));
    let refused = false;
    let step = 0;
    const summaryOf = (body: { system?: unknown }) =>
      JSON.stringify(body.system ?? "").includes("You compact");
    const anthropic = await startFakeAnthropicServer({
      respond: (request) => {
        if (summaryOf(request.body as { system?: unknown })) return { text: SUMMARY };
        if (step === 4 && !refused) {
          refused = true;
          const body = JSON.stringify({
            type: "error",
            error: {
              type: "invalid_request_error",
              message: "prompt is too long: 210000 tokens > 200000 maximum",
            },
          });
          return { status: 400, body };
        }
        step++;
        if (step > 4) return { text: "All sums done." };
        return {
          text: narration(step),
          toolCalls: [{ name: "calculator", input: { expression: `${step}+1` } }],
        };
      },
    });
    try {
      const env = { ANTHROPIC_BASE_URL: anthropic.url, ANTHROPIC_API_KEY: "sk-ant-test" };
      const run = await runCli(["run", "--provider", "anthropic", "--json", "--compact", "Compute."], {
        cwd: dir,
        env,
      });
      expect(run.code).toBe(0);
      const all = events(run.stdout);
      expect(all.filter((e) => e.type === "compaction")).toHaveLength(1);
      expect(all.at(-1)).toMatchObject({ stopReason: "final_answer", output: "All sums done." });
    } finally {
      await anthropic.close();
    }
  });

  it("goes on with pruning and one warning when the provider rejects compaction.model", async () => {
    const w = await workspace({
      config: { compaction: { model: "no-such-model" } },
      summary: (request) =>
        (request.body as { model: string }).model === "no-such-model"
          ? {
              status: 404,
              body: JSON.stringify({
                error: {
                  message: "The model `no-such-model` does not exist",
                  type: "invalid_request_error",
                  code: "model_not_found",
                },
              }),
            }
          : { text: SUMMARY },
    });
    const run = await w.run(["run", "--max-context-tokens", "3000", "--max-iterations", "20", "Compute."]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("All sums done.\n");
    const lines = run.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^agentloop: warning: Compaction failed \(.*no-such-model.*\): older turns are pruned instead\.$/,
    );
    expect(w.summaries()).toBe(1);
  });

  it("refuses a compaction.at outside (0, 1] with one line naming the key", async () => {
    for (const at of [0, 1.5, "high"]) {
      const w = await workspace({ config: { compaction: { at } } });
      const run = await w.run(["run", "hi"]);
      expect(run.code).toBe(2);
      const lines = run.stderr.trim().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain("compaction.at");
      await w.server.close();
    }
  });
});

describe("agentloop chat /compact", () => {
  it("summarises everything before the latest exchange, says so when there is nothing older, and stores it with a session", async () => {
    const w = await workspace({ calls: 0 });
    const nothing = await w.run(["chat", "--session", "c"], "first question\n/compact\n");
    expect(nothing.code).toBe(0);
    expect(nothing.stdout).toContain(
      "Nothing to compact: the conversation has nothing before its latest exchange.",
    );
    const chat = await w.run(["chat", "--session", "c"], "second question\n/compact\nthird question\n");
    expect(chat.code).toBe(0);
    expect(chat.stdout).toMatch(/Compacted 2 messages into one summary \(\d+ → \d+ tokens\)\./);
    const show = await runCli(["sessions", "show", "c", "--json"], { cwd: w.dir, env: w.env });
    const stored = JSON.parse(show.stdout) as Message[];
    expect(summariesIn(stored)).toEqual([expect.objectContaining({ compaction: { replaced: 2, kept: 2 } })]);
    // The third question went to the model after the summary, not after the first exchange.
    const last = messagesOf(w.server.requests.at(-1) as FakeRequest).map((m) => m.content);
    expect(last).toEqual([
      expect.stringContaining(SUMMARY),
      "second question",
      "All sums done.",
      "third question",
    ]);
  });
});
