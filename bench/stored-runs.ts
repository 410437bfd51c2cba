// Stored runs per second: whole agent runs through the public `Agent` + `Session`, with each store
// and without one, so the table shows what persistence costs a run and an iteration.
//
// One run: a scripted model asks for `add` in its first ITERATIONS - 1 iterations and answers in
// the last; the tool adds. With a store the run holds a new session (`Session.open`), passes its
// `checkpoint` to `agent.stream()` and releases it after; without one it is `agent.run()`.
// Measured one run at a time (latency) and CONCURRENT at once (throughput), in rounds that take
// the stores in turn, so a burst of load from elsewhere on a shared machine hits every store alike;
// the median round is reported. CPU is this process's plus PostgreSQL's (its backends included).
import { z } from "zod";
import { Agent, defineTool, Session } from "../dist/index.js";
import type { SessionStore } from "../dist/store/index.js";
import { scriptedModel } from "../dist/testing/index.js";

export const ITERATIONS = 3;
export const CONCURRENT = 16;
const ROUNDS = 3;

export interface Variant {
  name: string;
  /** Undefined: runs without a store. */
  store?: SessionStore;
  /** CPU seconds used so far by the store's server, when it has one. */
  serverCpu?: () => number;
}

const agent = new Agent({
  model: scriptedModel((request) => {
    const results = request.messages.filter((m) => m.role === "tool").length;
    return results < ITERATIONS - 1
      ? { toolCalls: [{ name: "add", arguments: { a: results, b: 2 } }] }
      : { text: "The sum is 4." };
  }),
  tools: [
    defineTool({
      name: "add",
      description: "Adds two numbers.",
      parameters: z.object({ a: z.number(), b: z.number() }),
      execute: ({ a, b }) => a + b,
    }),
  ],
});

let sessions = 0;
let checkpoints = 0;

async function oneRun(store: SessionStore | undefined): Promise<void> {
  if (store === undefined) {
    const result = await agent.run("Add them up.");
    if (result.stopReason !== "final_answer") throw new Error(`run stopped with ${result.stopReason}`);
    return;
  }
  const session = await Session.open(store, `run-${++sessions}`);
  try {
    const result = await agent.stream("Add them up.", {
      history: session.messages,
      sessionId: session.id,
      checkpoint: (state) => {
        checkpoints++;
        return session.checkpoint(state);
      },
    }).result;
    if (result.stopReason !== "final_answer") throw new Error(`run stopped with ${result.stopReason}`);
  } finally {
    await session.release();
  }
}

interface Round {
  runs: number;
  runsPerSecond: number;
  /** CPU µs per run: this process, the store's server. */
  cpu: number;
  serverCpu: number;
}

/** At least `runs` runs and at least `minMs`, `concurrent` at a time (fast variants get a measurable round). */
async function round(variant: Variant, runs: number, concurrent: number, minMs = 0): Promise<Round> {
  let begun = 0;
  const cpuBefore = process.cpuUsage();
  const serverBefore = variant.serverCpu?.() ?? 0;
  const started = performance.now();
  const more = () => begun < runs || performance.now() - started < minMs;
  await Promise.all(
    Array.from({ length: concurrent }, async () => {
      while (more()) {
        begun++;
        await oneRun(variant.store);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  return {
    runs: begun,
    runsPerSecond: begun / seconds,
    cpu: (cpu.user + cpu.system) / begun,
    serverCpu: (((variant.serverCpu?.() ?? 0) - serverBefore) * 1e6) / begun,
  };
}

const percent = (ratio: number) => `${(ratio * 100).toFixed(ratio < 0.1 ? 1 : 0)}%`;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

/**
 * The table of stored runs per second: per variant and concurrency at least `runs` runs, split over
 * the rounds, each round at least `roundMs`.
 */
export async function storedRuns(
  variants: Variant[],
  runs: number,
  roundMs: number,
): Promise<{ markdown: string; cpuPerIteration: Record<string, { own: number; server?: number }> }> {
  const perRound = Math.max(CONCURRENT, Math.floor(runs / ROUNDS));
  for (const variant of variants) await round(variant, CONCURRENT * 2, CONCURRENT, roundMs); // warm-up (JIT)
  const results = new Map<string, { one: Round[]; many: Round[] }>(
    variants.map((v) => [v.name, { one: [], many: [] }]),
  );
  checkpoints = 0;
  const storedBefore = sessions;
  for (let r = 0; r < ROUNDS; r++) {
    for (const variant of variants) {
      process.stderr.write(`stored runs: ${variant.name}, round ${r + 1}\n`);
      const entry = results.get(variant.name) as { one: Round[]; many: Round[] };
      entry.one.push(await round(variant, perRound, 1, roundMs));
      entry.many.push(await round(variant, perRound, CONCURRENT, roundMs));
    }
  }
  const perRun = checkpoints / (sessions - storedBefore);
  const none = results.get(variants[0]?.name ?? "");
  const baseOne = median(none?.one.map((r) => r.runsPerSecond) ?? []);
  const baseMany = median(none?.many.map((r) => r.runsPerSecond) ?? []);
  const cpuPerIteration: Record<string, { own: number; server?: number }> = {};
  const rows = variants.map((variant) => {
    const { one, many } = results.get(variant.name) as { one: Round[]; many: Round[] };
    const oneRps = median(one.map((r) => r.runsPerSecond));
    const manyRps = median(many.map((r) => r.runsPerSecond));
    const addedMs = ((1 / oneRps - 1 / baseOne) * 1000) / ITERATIONS;
    const cpu = median(many.map((r) => r.cpu)) / ITERATIONS;
    const server = variant.serverCpu ? median(many.map((r) => r.serverCpu)) / ITERATIONS : undefined;
    cpuPerIteration[variant.name] = { own: cpu, ...(server !== undefined && { server }) };
    return `| ${variant.name} | ${oneRps.toFixed(0)} | ${variant.store ? addedMs.toFixed(2) : "-"} | ${manyRps.toFixed(0)} | ${percent(manyRps / baseMany)} | ${cpu.toFixed(0)}${server === undefined ? "" : ` + ${server.toFixed(0)}`} |`;
  });
  const markdown = `### Stored runs per second (bench/stored-runs.ts; ${ITERATIONS} iterations a run; per cell at least ${perRound * ROUNDS} runs in ${ROUNDS} rounds of at least ${roundMs} ms, the median round)

Each run: a scripted model calls a tool in ${ITERATIONS - 1} iterations and answers in the last, through
\`Agent\` and, with a store, \`Session.open\` / \`checkpoint\` / \`release\` on a new session (about
${perRun.toFixed(1)} checkpoints a run, each awaited before the run goes on).

| store | runs/s, one at a time | added ms per iteration | runs/s, ${CONCURRENT} at once | of no store | CPU µs per iteration (this process + PostgreSQL) |
| --- | ---: | ---: | ---: | ---: | ---: |
${rows.join("\n")}

"Added ms per iteration" is the run's time one at a time over no store's, divided by its ${ITERATIONS}
iterations: what a user waits for persistence. "CPU per iteration" is CPU time (user + system) over
the runs done ${CONCURRENT} at once, which a busy shared machine distorts much less than wall time.${
    variants.some((v) => v.serverCpu)
      ? `
With PostgreSQL a stored run also holds a lease on its session (acquiring it is a transaction of six
or seven statements, releasing it one) and every statement is a round trip: its cost is mostly those
round trips (system calls and wake-ups in both processes, the server's own work) and, with
synchronous_commit on, each commit's wait for the WAL flush; runs done at once overlap the waits and
share flushes.`
      : ""
  }`;
  return { markdown, cpuPerIteration };
}
