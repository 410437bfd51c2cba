// For every missed target of BENCHMARKS.md: a profile taken now, on this machine: CPU self time by
// function (`node --cpu-prof`, summarised by bench/loop-profile.ts --summarise) or, for the
// per-session heap, a heap snapshot diff by type (bench/concurrency-sessions.ts --snapshot). The
// analysis of what would close each distance is a dated note in docs/notes/, not text in the benchmark.

import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Agent, defineTool } from "../dist/index.js";
import { openAIChatModel } from "../dist/models/openai-chat.js";
import { sqliteStore } from "../dist/store/index.js";
import { RUNNERS } from "./peers.ts";
import { child } from "./processes.ts";
import { type CpuProfile, profileWhile, selfTimes, shareIn } from "./profile.ts";
import type { TargetResult } from "./section.ts";
import { result, state } from "./store.ts";
import { add, schema } from "./workload.ts";

const script = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const BIN = fileURLToPath(new URL("../dist/cli/bin.js", import.meta.url));

/** Self time by function of one `node --cpu-prof` run of `args` (its start-up left out), the `top` heaviest. */
function cpuProfile(args: string[], top: number): string {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-prof-"));
  try {
    child(["--cpu-prof", `--cpu-prof-dir=${dir}`, ...args]);
    const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
    if (!file) return "(no profile written)";
    return selfTimes(JSON.parse(readFileSync(join(dir, file), "utf8")) as CpuProfile, top, {
      skipStartup: true,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Self time by function of agentloop's runs of the in-process workload at N = 1,000, profiled in this process. */
async function inProcessProfile(streaming: boolean, quick: boolean): Promise<string> {
  const run = RUNNERS.agentloop?.(1_000, streaming);
  if (!run) return "(no runner)";
  for (let i = 0; i < 5; i++) await run(); // warm-up
  const until = performance.now() + (quick ? 500 : 3_000);
  const profile = await profileWhile(async () => {
    while (performance.now() < until) await run();
  });
  return selfTimes(profile, 18);
}

/** `work` repeated for `ms` after a warm-up, profiled in this process; `ours`: also the share of agentloop's own code. */
async function profileRepeated(work: () => Promise<unknown>, ms: number, ours = false): Promise<string> {
  for (let i = 0; i < 3; i++) await work();
  const until = performance.now() + ms;
  const profile = await profileWhile(async () => {
    while (performance.now() < until) await work();
  });
  const share = ours
    ? `agentloop's own code (dist/): ${shareIn(profile, /^file:\/\/(?!.*node_modules).*\/dist\//)} of the samples\n`
    : "";
  return `${share}${selfTimes(profile, 18, { skipStartup: true })}`;
}

/** agentloop's runs over HTTP (bench/http-perf-upstream.ts in a child, N = 100), profiled in this process. */
async function httpProfile(quick: boolean): Promise<string> {
  const upstream = spawn(process.execPath, [script("./http-perf-upstream.ts"), "100"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  try {
    const line = await new Promise<string>((resolve) =>
      createInterface({ input: upstream.stdout }).once("line", resolve),
    );
    const model = openAIChatModel({
      model: "gpt-4o-mini",
      baseURL: (JSON.parse(line) as { chat: string }).chat,
      apiKey: "sk-bench",
    });
    const tool = defineTool({
      name: "add",
      description: "Adds two numbers.",
      parameters: schema,
      execute: add,
    });
    const agent = new Agent({ model, tools: [tool], maxIterations: 101 });
    return await profileRepeated(() => agent.run("go"), quick ? 500 : 3_000, true);
  } finally {
    upstream.stdin?.end();
  }
}

/** Self time by file of `agentloop run` from its spawn to its end, against a fake upstream in this process. */
async function coldRunProfile(): Promise<string> {
  const { startFakeOpenAIServer } = await import("../dist/testing/index.js");
  const upstream = await startFakeOpenAIServer({ respond: [{ text: "ok" }] });
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-prof-"));
  try {
    await new Promise<void>((resolve, reject) => {
      const run = spawn(process.execPath, ["--cpu-prof", `--cpu-prof-dir=${dir}`, BIN, "run", "hi"], {
        env: { ...process.env, OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-bench" },
        stdio: "ignore",
      });
      run.on("error", reject);
      run.on("exit", () => resolve());
    });
    const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
    if (!file) return "(no profile written)";
    const summary = selfTimes(JSON.parse(readFileSync(join(dir, file), "utf8")) as CpuProfile, 14, {
      byFile: true,
    });
    // A bundle chunk is named by what is in it: the packages (and agentloop's modules) it holds most of.
    return summary.replace(/dist\/cli-bundle\/(\S+\.js)/g, (whole, chunk: string) => {
      const text = readFileSync(
        fileURLToPath(new URL(`../dist/cli-bundle/${chunk}`, import.meta.url)),
        "utf8",
      );
      const counts = new Map<string, number>();
      for (const [, where] of text.matchAll(/^\/\/ (?:node_modules\/((?:@[^/]+\/)?[^/]+)|(dist))\//gm)) {
        const name = where ?? "agentloop";
        counts.set(name, (counts.get(name) ?? 0) + 1);
      }
      const top = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 3);
      return `${whole} (modules of ${top.map(([name, n]) => `${name} ${n}`).join(", ")})`;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await upstream.close();
  }
}

/** Checkpoints into a SQLite file (WAL, NORMAL), profiled in this process. */
async function sqliteProfile(quick: boolean): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-prof-"));
  const store = await sqliteStore(join(dir, "profile.db"));
  try {
    const handle = await store.acquire("profile");
    const checkpoint = {
      messages: [result],
      run: { runId: "run-profile", status: "running" as const, state },
    };
    const profile = await profileRepeated(() => handle.checkpoint(checkpoint), quick ? 300 : 2_000);
    await handle.release();
    return profile;
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** How to profile each target that has a profile, by its key in bench/targets.ts. */
const PROFILES: Record<string, (quick: boolean) => string | Promise<string>> = {
  "in-process non-streaming": (quick) => inProcessProfile(false, quick),
  "in-process streaming": (quick) => inProcessProfile(true, quick),
  http: (quick) => httpProfile(quick),
  "concurrency throughput": (quick) =>
    cpuProfile(
      [
        "--expose-gc",
        script("./concurrency-sessions.ts"),
        quick ? "1000" : "10000",
        quick ? "1" : "2",
        "--only",
        "agentloop",
        "--json",
      ],
      18,
    ),
  "concurrency heap": () =>
    ["agentloop", "hand-written generator loop"]
      .map((kind) =>
        child([
          "--expose-gc",
          script("./concurrency-sessions.ts"),
          "1000",
          "1",
          "--snapshot",
          "--shapes",
          "--only",
          kind,
        ])
          .trim()
          .split("\n")
          .filter((line) => /:|^\s*-?\d+ B/.test(line))
          .slice(0, 22)
          .join("\n"),
      )
      .join("\n\n"),
  "sqlite checkpoint": (quick) => sqliteProfile(quick),
  "cold help": () => cpuProfile([BIN, "--help"], 12),
  "cold first request": () => coldRunProfile(),
};

/**
 * Where the analysis of the missed targets is: a dated note written from the profiles of one run
 * (numbers move with every change; the reasoning is of its day, and lives apart from the code).
 */
const ANALYSIS = "docs/notes/2026-11-26-missed-targets.md";

/** A profile, taken now, of every missed target that has one, and where the analysis is. */
export async function missedNotes(targets: TargetResult[], quick: boolean): Promise<string> {
  const missed = targets.filter((t) => !t.met);
  if (missed.length === 0) return "Every target above is met.";
  const parts: string[] = [];
  for (const t of missed) {
    const take = t.key ? PROFILES[t.key] : undefined;
    let profile = "";
    if (take) {
      try {
        profile = `\n\n\`\`\`\n${await take(quick)}\n\`\`\``;
      } catch (error) {
        profile = `\n\n(profile failed: ${(error as Error).message.split("\n")[0]})`;
      }
    }
    parts.push(`### Missed: ${t.target}\n\nMeasured ${t.result}.${profile}`);
  }
  return `## Missed targets: profiles\n\nEach profile was taken in this run: CPU self time by function, share of the samples, module loading
and idle time left out. Why each target is missed and what would close it: [a dated note](${ANALYSIS}).\n\n${parts.join("\n\n")}`;
}
