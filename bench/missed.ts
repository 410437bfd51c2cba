// For every missed target of BENCHMARKS.md: a profile taken now, on this machine, and what would
// close the distance. The profiles: CPU self time by function (`node --cpu-prof`, summarised by
// bench/loop-profile.ts --summarise) or, for the per-session heap, a heap snapshot diff by type
// (bench/concurrency-sessions.ts --snapshot).

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

interface Note {
  /** How to take the profile; undefined: none. */
  profile?: (quick: boolean) => string | Promise<string>;
  /** What the profile shows and what would close the distance. */
  why: string;
}

const NOTES: Record<string, Note> = {
  "in-process non-streaming": {
    profile: (quick) => inProcessProfile(false, quick),
    why: `What the issue listed is gone: no timer, AbortController or listener per tool call (one timer
per timeout length, one listener per run only when the caller passed a signal), one generator for the
whole run, two clock readings per iteration, the repetition guard's signature kept, no event objects
for a run nobody listens to. Per iteration the loop still does what the floor does not: it keeps the
run as a value (a step record per iteration, usage added up, the pending calls), checks the guards and
the budget, fits the history to the context window (an upper bound counted incrementally), and
prepares each call (depth check, JSON, zod) into a record the tool, the events and the checkpoint
share. The garbage collector's share is the rest: each iteration allocates about 3.1 KB where the
floor allocates 2.7 KB, and keeps more of it (the step records). What would close the rest: the step
record and the pending calls folded into the messages they describe, and the request object reused
from one iteration to the next.`,
  },
  "in-process streaming": {
    profile: (quick) => inProcessProfile(true, quick),
    why: `Streamed, each iteration hands its reader five events (iteration_start, message_delta,
message, tool_call, tool_result: SPEC section 3) where the floor hands out two, and each costs a
resumption of the run's generator and a promise for the reader's \`await\` (\`runLoop\` and the
handle's \`next\` in the profile). Serving the events that follow one another with nothing in between
(a reply's \`message\` and its \`tool_call\`s) from one resumption would take most of the difference;
at N = 10,000 the run's history, kept whole, also makes the old generation's collections longer.`,
  },
  http: {
    profile: (quick) => httpProfile(quick),
    why: `The profile is of agentloop's runs alone in this process (the upstream in a child): agentloop's
own code is the first line's share of the samples, its self time; the rest is the official client's
work, which the floor does alike (serialising the body, writing it, its headers, the SSE parser, the
response body cancelled after \`[DONE]\`, a DOMException each time: the SDK's, for the floor too), and
the garbage collector. The adapter keeps each history's wire messages and extends them, reads the
SDK's stream with one generator and leaves the connection alone when the response was read to its
end; what agentloop adds per request is the loop's iteration (the in-process rows) run among the
client's work, where its code is less warm than in a tight loop. The ratio's rounds vary by more than
the 5% at stake on this 2-core machine, where the upstream and the client share the cores: the share
of agentloop's own code is the steadier figure of the two.`,
  },
  "concurrency throughput": {
    profile: (quick) =>
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
    why: `With 10,000 runs parked on a 50 ms model, a third of the CPU is the garbage collector: every
run allocates about 9.6 KB from its start to its end where the floor allocates 5.4 KB, and keeps
4.2 KB alive while it waits (the heap row), so each scavenge copies more survivors and the old
generation fills sooner. The generator is not the cause: the callback-driven prototype (see the heap
note) ran 0.55 of the floor's runs per second against 0.56 for the generator in the same measurement.
What would close it is allocating and keeping less per run: the same changes as for the heap, and
per iteration the step record and the pending calls' arrays made only when needed.`,
  },
  "concurrency heap": {
    profile: () =>
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
    why: `The snapshot diffs above name what a parked run holds, objects by their properties and the
rest by what holds them. The hand-written loop written as a generator (second diff) holds 2.8 KB, of
which about 2.6 KB is the machinery of a loop suspended on a model's async generator: the frames'
registers, the generator objects, and the promises, closures and contexts of the pending awaits.
That machinery is not what agentloop could save: a prototype that drives a run nobody listens to with
promise callbacks instead of its generator (branch cb-experiment, not merged) held 4,066 bytes per
parked run against 4,155, and ran as many runs per second. The other 1.3 KB is the run's data: its
loop object (the agent's options, tool specs, prompt and limits copied per run, the signal, the
memo: about 190 bytes), the run state with its usage, steps, guards and allowed tools (about 450),
the context memo's two objects (160), the run's AbortController (about 110), the handle and its sink
(about 150), the run id. Under 3 KB would take a third of that: what an agent's runs share held once
and pointed to, the memo's two objects made one, the guard state made when a guard first counts (a
change of the stored state's shape), the AbortController made only when something reads the signal.`,
  },
  "concurrency rss": {
    why: `The process's RSS is the live heap of the parked runs (about the per-session heap above times
the number of runs) plus the room V8 sizes its heap with (free pages kept for reuse, as in "Server under
load"). Bringing the per-session heap under 3 KB halves the first part; capping V8's heap
(\`--max-old-space-size\`, \`--max-semi-space-size\`) bounds the second.`,
  },
  "sqlite checkpoint": {
    profile: (quick) => sqliteProfile(quick),
    why: `A checkpoint is one SQLite transaction of three statements (the session row's update, guarded
by its holder; the message insert; the run upsert) after the JSON encoding of the message and the run
state. In the profile nearly all of it is \`exec\`: the transaction's BEGIN and COMMIT, i.e. SQLite
appending the changed pages to the WAL; the statements and the encoding are a few per cent. The median
sits at the target and a loaded machine moves it either side; fewer pages changed per checkpoint (a
smaller run state, the session row not rewritten by every checkpoint) would give it room.`,
  },
  "cold help": {
    profile: () => cpuProfile([BIN, "--help"], 12),
    why: `\`--help\` already loads only commander and the CLI's entry module (commands import their
implementation when they run, and Node's compile cache is on); what remains above \`node -e 0\` is
loading and compiling those modules and commander building the help text (the profile). Bundling the
CLI entry and commander into one file, or a hand-written \`--help\` that prints a static text before
loading commander, would close it.`,
  },
  "cold first request": {
    profile: () => coldRunProfile(),
    why: `Measured from the spawn, so Node.js's own start counts: on this machine \`node -e 0\` takes
about 80 ms and a bare \`node -e "fetch(...)"\` reaches the upstream after about 140 ms, so 150 ms
from the spawn is out of anyone's reach here; what agentloop adds is the difference to that fetch.
The CLI ships as one esbuild bundle (scripts/bundle-cli.mjs) with Node's compile cache on, which took
about 90 ms off (one file to read instead of the openai SDK's 200-odd modules). In the profile (spawn
to exit, by file; bundle chunks named by the modules they hold) Node's own bootstrap and undici, which
the bare fetch pays too, come first; of the bundle, the chunk with the openai SDK costs the most (its
module defines a class for every resource of the API when it loads), agentloop's own modules and
commander less. What would close it: a client that loads only the chat completions resource (the SDK
offers none), or the CLI's own HTTP and SSE path for its first request, which this project leaves to
the SDK on purpose.`,
  },
};

/** The closing notes of every missed target that has one, with its profile. */
export async function missedNotes(targets: TargetResult[], quick: boolean): Promise<string> {
  const missed = targets.filter((t) => !t.met && t.key && NOTES[t.key]);
  if (missed.length === 0) return "Every target above is met.";
  const parts: string[] = [];
  for (const t of missed) {
    const note = NOTES[t.key as string] as Note;
    let profile = "";
    if (note.profile) {
      try {
        profile = `\n\n\`\`\`\n${await note.profile(quick)}\n\`\`\``;
      } catch (error) {
        profile = `\n\n(profile failed: ${(error as Error).message.split("\n")[0]})`;
      }
    }
    parts.push(`### Missed: ${t.target}\n\nMeasured ${t.result}.${profile}\n\n${note.why}`);
  }
  return `## Missed targets: why, and what would close them\n\nEach profile was taken in this run: CPU self time by function, share of the samples, module loading
and idle time left out.\n\n${parts.join("\n\n")}`;
}
