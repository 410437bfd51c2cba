// The in-process loop against the hand-written floor, for profiling (`npm run bench` measures the
// same pair in bench/overhead.ts): the workload, its fake model and the floor of bench/workload.ts
// (the same model for both, the arguments validated with the same zod schema, the same async
// tool). agentloop runs with its defaults (guards, 60 s tool timeout, pruning).
// Runners are interleaved in one process (order alternating by round); each sample counts CPU time
// (µs of user + system time per iteration, the GC's threads included); the report gives the median
// and min-max, and the median (min-max) of the per-round ratios to the floor. No GC is forced
// between samples: a process running for real seldom runs a full GC, and one forced before every
// sample (--gc-per-sample, with --expose-gc) makes agentloop's samples 2-3x slower and the floor's
// not at all (V8's --trace-deopt: the GC clears objects agentloop's optimised code embeds, with no
// run alive to hold them, and the code is thrown away and compiled again, sample after sample).
//
//   node bench/loop-profile.ts [--rounds 15] [--sizes 100,1000,10000]
//        [--before <dist of the old code>] [--json] [--expose-gc --gc-per-sample]
//   node --cpu-prof bench/loop-profile.ts --only agentloop --mode plain --sizes 1000 --rounds 40
//   node bench/loop-profile.ts --summarise <file.cpuprofile> [--skip-startup]   (self time by function)
//   node bench/loop-profile.ts --alloc --only agentloop --mode plain --sizes 1000   (bytes allocated per iteration, by site)
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { type CpuProfile, selfTimes } from "./profile.ts";
import { add, type FakeModel, fakeModel, floor, schema } from "./workload.ts";

const { values: flags } = parseArgs({
  options: {
    rounds: { type: "string", default: "15" },
    sizes: { type: "string", default: "100,1000,10000" },
    before: { type: "string" },
    only: { type: "string" },
    mode: { type: "string" },
    summarise: { type: "string" },
    "skip-startup": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
    alloc: { type: "boolean", default: false },
    "gc-per-sample": { type: "boolean", default: false },
  },
});

if (flags.summarise) {
  const profile = JSON.parse(readFileSync(flags.summarise, "utf8")) as CpuProfile;
  process.stdout.write(`${selfTimes(profile, 45, { skipStartup: flags["skip-startup"] })}\n`);
  process.exit(0);
}

type Runner = () => Promise<unknown>;

interface AgentloopModule {
  Agent: new (
    options: Record<string, unknown>,
  ) => {
    run(input: string): Promise<{ stopReason: string }>;
    stream(input: string): AsyncIterable<unknown> & { result: Promise<{ stopReason: string }> };
  };
  defineTool(definition: Record<string, unknown>): unknown;
}

/** agentloop with its defaults: guards, timeouts and pruning on; only `maxIterations` is raised to N + 1. */
function agentloop(lib: AgentloopModule, model: FakeModel, n: number, streaming: boolean): Runner {
  const tool = lib.defineTool({
    name: "add",
    description: "Adds two numbers.",
    parameters: schema,
    execute: add,
  });
  const agent = new lib.Agent({ model, tools: [tool], maxIterations: n + 1 });
  return async () => {
    model.reset();
    let result: { stopReason: string };
    if (streaming) {
      const run = agent.stream("go");
      for await (const _event of run);
      result = await run.result;
    } else result = await agent.run("go");
    if (result.stopReason !== "final_answer") throw new Error(`agentloop stopped with ${result.stopReason}`);
  };
}

const gc = (globalThis as { gc?: () => void }).gc;
const median = (values: number[]) => {
  const sorted = values.toSorted((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

const libs: Record<string, AgentloopModule> = {
  agentloop: (await import("../dist/index.js")) as unknown as AgentloopModule,
};
if (flags.before) libs["agentloop (before)"] = (await import(`${flags.before}/index.js`)) as AgentloopModule;
const rounds = Number(flags.rounds);
const sizes = (flags.sizes ?? "").split(",").map(Number);
const modes = flags.mode ? [flags.mode] : ["plain", "streaming"];

/** With --json: each mode and N's samples (CPU µs per iteration by runner, per round), printed at the end. */
const json: { mode: string; n: number; samples: Record<string, number[]> }[] = [];
for (const mode of modes) {
  const streaming = mode === "streaming";
  for (const n of sizes) {
    const runners: Record<string, Runner> = {};
    if (!flags.only || flags.only === "floor") runners.floor = floor(fakeModel(n, streaming), streaming);
    for (const [name, lib] of Object.entries(libs)) {
      if (!flags.only || flags.only === name)
        runners[name] = agentloop(lib, fakeModel(n, streaming), n, streaming);
    }
    const names = Object.keys(runners);
    if (flags.alloc) {
      for (const [name, run] of Object.entries(runners)) await allocations(name, run, n);
      continue;
    }
    // Enough runs per sample for about 30 ms of agentloop work.
    const loops = Math.max(1, Math.round(30_000 / (n * 8)));
    for (const run of Object.values(runners)) for (let i = 0; i < Math.max(3, loops); i++) await run(); // warm-up
    const samples: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 ? names.toReversed() : names;
      for (const name of order) {
        const run = runners[name] as Runner;
        if (flags["gc-per-sample"]) {
          gc?.();
          // The GC's helper threads go on sweeping after gc() returns; their CPU is the previous sample's.
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        // CPU time of the process (user + system, GC threads included): other processes on a
        // shared machine stretch wall time, not this.
        const started = process.cpuUsage();
        for (let i = 0; i < loops; i++) await run();
        const { user, system } = process.cpuUsage(started);
        (samples[name] as number[]).push((user + system) / (loops * n));
      }
    }
    const cells = names.map((name) => {
      const s = samples[name] as number[];
      return `${name} ${median(s).toFixed(2)} (${Math.min(...s).toFixed(2)}-${Math.max(...s).toFixed(2)})`;
    });
    const ratios = samples.floor
      ? names
          .filter((name) => name !== "floor")
          .map((name) => {
            const per = (samples[name] as number[]).map((v, i) => v / (samples.floor?.[i] as number));
            return `${name}/floor ${median(per).toFixed(2)}x (${Math.min(...per).toFixed(2)}-${Math.max(...per).toFixed(2)})`;
          })
      : [];
    json.push({ mode, n, samples });
    if (!flags.json)
      process.stdout.write(
        `${mode} N=${n} µs/iteration: ${cells.join(", ")}${ratios.length ? `; ${ratios.join(", ")}` : ""}\n`,
      );
  }
}

if (flags.json) process.stdout.write(`${JSON.stringify(json)}\n`);

/** Bytes allocated per iteration by one runner, by allocation site (sampled, dead objects included). */
async function allocations(name: string, run: Runner, n: number): Promise<void> {
  const { Session } = await import("node:inspector/promises");
  for (let i = 0; i < 3; i++) await run();
  const session = new Session();
  session.connect();
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 128,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  const runs = Math.max(1, Math.round(20_000 / n));
  for (let i = 0; i < runs; i++) await run();
  const { profile } = (await session.post("HeapProfiler.stopSampling")) as unknown as {
    profile: { head: AllocNode };
  };
  session.disconnect();
  interface AllocNode {
    callFrame: { functionName: string; url: string; lineNumber: number };
    selfSize: number;
    children: AllocNode[];
  }
  const sites = new Map<string, number>();
  let total = 0;
  const walk = (node: AllocNode) => {
    const frame = node.callFrame;
    const where = frame.url.replace(/^.*\/(dist|node_modules)\//, "$1/");
    const key = `${frame.functionName || "(anonymous)"} ${where}:${frame.lineNumber + 1}`;
    sites.set(key, (sites.get(key) ?? 0) + node.selfSize);
    total += node.selfSize;
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  const per = runs * n;
  process.stdout.write(`${name}: ${(total / per).toFixed(0)} bytes allocated per iteration (sampled)\n`);
  for (const [key, bytes] of [...sites].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
    process.stdout.write(`${(bytes / per).toFixed(0).padStart(7)}  ${key}\n`);
  }
}
