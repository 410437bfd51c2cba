// Concurrent sessions in one process: N runs at once, each two model calls of 50 ms (a timer) with
// one tool call between, agentloop against the hand-written loop of bench/workload.ts on the same
// model (validating the arguments with zod, awaiting the async tool), interleaved round by
// round. Reports runs per second, the p50 added latency, and what each parked run holds: the live
// heap (after a full GC) and the RSS while all N wait on their first model call.
//
//   npm run build && node --expose-gc bench/concurrency-sessions.ts [sessions=10000] [rounds=5]
//   node --expose-gc bench/concurrency-sessions.ts 1000 1 --snapshot   # heap snapshot per kind, by type
//   ... --snapshot --shapes   # objects told apart by their properties, the rest by what holds them
//   ... --generator   # also the hand-written loop written as an async generator
//   node --expose-gc bench/concurrency-sessions.ts 100000 1 --only agentloop   # one kind: its peak RSS
//   ... --json   # one JSON line instead of the text (bench/run.ts reads it)
import { readFileSync, rmSync } from "node:fs";
import { writeHeapSnapshot } from "node:v8";
import { Agent, defineTool } from "../dist/index.js";
import { add, type FakeModel, floor, schema } from "./workload.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ARGS = '{"a":1,"b":2}';

/** Calls into the model: the probe resolves when `parked` of them are waiting at once. */
let waiting = 0;
let probe: { at: number; resolve: () => void } | undefined;
async function modelDelay(): Promise<void> {
  waiting++;
  if (probe && waiting >= probe.at) probe.resolve();
  await sleep(50);
  waiting--;
}

const usage = { inputTokens: 1, outputTokens: 1 };
/** The model both kinds call: 50 ms, then add(...) until the history has a tool result, then "done". */
const model: FakeModel = {
  id: "fake",
  reset: () => {},
  async *stream(request) {
    await modelDelay();
    const done = request.messages.some((m) => m.role === "tool");
    yield {
      type: "done",
      message: done
        ? { content: "done", toolCalls: [], finishReason: "stop", usage }
        : {
            content: "",
            toolCalls: [{ id: "c", name: "add", arguments: ARGS }],
            finishReason: "tool_calls",
            usage,
          },
    };
  },
};
const agent = new Agent({
  model,
  tools: [defineTool({ name: "add", description: "Adds two numbers.", parameters: schema, execute: add })],
});

/** The floor (bench/workload.ts): a careful hand-written loop on the same model. */
const handWritten = floor(model, false);

const kinds = {
  agentloop: async () => {
    const result = await agent.run("go");
    if (result.stopReason !== "final_answer") throw new Error(result.stopReason);
    return result;
  },
  "hand-written loop": handWritten,
  // The same floor written as an async generator handing out events (bench/workload.ts, streaming
  // off in its model): what a parked run costs any loop built on generators and promises, with
  // almost no state of its own. Only with --generator.
  "hand-written generator loop": floor(model, true),
} as const;
type Kind = keyof typeof kinds;

interface Round {
  runsPerSecond: number;
  p50: number;
  heapPerRun: number;
  rssMiB: number;
}

/** N runs at once: the heap and RSS while all are parked on their first model call, then the timing. */
async function round(kind: Kind, sessions: number, snapshot: boolean): Promise<Round> {
  gc?.();
  gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const before = snapshot
    ? writeHeapSnapshot(`/tmp/concurrency-${kind.replace(/\W/g, "-")}-before.heapsnapshot`)
    : "";
  const parked = new Promise<void>((resolve) => {
    probe = { at: sessions, resolve };
  });
  const started = performance.now();
  const added: number[] = new Array(sessions);
  const all = Array.from({ length: sessions }, async (_, i) => {
    const t = performance.now();
    await kinds[kind]();
    added[i] = performance.now() - t - 100;
  });
  await parked;
  probe = undefined;
  // A full GC while every run waits: what is left is what the runs hold (their timers wait too).
  gc?.();
  const measured = { heap: process.memoryUsage().heapUsed - heapBefore, rss: process.memoryUsage().rss };
  if (snapshot) {
    const after = writeHeapSnapshot(`/tmp/concurrency-${kind.replace(/\W/g, "-")}-after.heapsnapshot`);
    console.log(`\n${kind}: what ${sessions} parked runs hold, by type (bytes per run, self size)`);
    diff(before, after, sessions);
  }
  await Promise.all(all);
  const elapsed = performance.now() - started;
  added.sort((a, b) => a - b);
  return {
    runsPerSecond: (sessions / elapsed) * 1000,
    p50: added[sessions >> 1] ?? Number.NaN,
    heapPerRun: measured.heap / sessions,
    rssMiB: measured.rss / 2 ** 20,
  };
}

/** Self sizes by type and name that grew between two heap snapshots, per run. */
function diff(beforePath: string, afterPath: string, runs: number): void {
  const tally = (path: string) => {
    const snap = JSON.parse(readFileSync(path, "utf8"));
    rmSync(path);
    const fields: string[] = snap.snapshot.meta.node_fields;
    const types: string[] = snap.snapshot.meta.node_types[0];
    const [t, n, s] = ["type", "name", "self_size"].map((f) => fields.indexOf(f)) as [number, number, number];
    const edgeFields: string[] = snap.snapshot.meta.edge_fields;
    const edgeTypes: string[] = snap.snapshot.meta.edge_types[0];
    const ec = fields.indexOf("edge_count");
    const sizes = new Map<string, { bytes: number; count: number }>();
    // With --shapes, everything else is told apart by the edge it is first held by (parent: edge name).
    const retainer = new Map<number, string>();
    if (shapes) {
      const to = edgeFields.indexOf("to_node");
      let e0 = 0;
      for (let i = 0; i < snap.nodes.length; i += fields.length) {
        const count = snap.nodes[i + ec] as number;
        const parent = `${types[snap.nodes[i + t]]}:${String(snap.strings[snap.nodes[i + n]]).slice(0, 20)}`;
        for (let e = e0; e < e0 + count * edgeFields.length; e += edgeFields.length) {
          const child = snap.edges[e + to] as number;
          const kind = edgeTypes[snap.edges[e]];
          if (kind === "weak" || retainer.has(child)) continue;
          const label =
            kind === "element" || kind === "hidden"
              ? `[${snap.edges[e + 1]}]`
              : snap.strings[snap.edges[e + 1]];
          retainer.set(child, `${parent}.${label}`);
        }
        e0 += count * edgeFields.length;
      }
    }
    let edge = 0;
    for (let i = 0; i < snap.nodes.length; i += fields.length) {
      const type = types[snap.nodes[i + t]] ?? "?";
      const name =
        type === "object" || type === "closure" || type === "native" ? snap.strings[snap.nodes[i + n]] : "";
      // With --shapes, plain objects are told apart by their property names.
      let props = "";
      const edges = snap.nodes[i + ec] as number;
      if (shapes && name === "Object") {
        const names: string[] = [];
        for (let e = edge; e < edge + edges * edgeFields.length; e += edgeFields.length) {
          if (edgeTypes[snap.edges[e]] === "property") names.push(snap.strings[snap.edges[e + 1]]);
        }
        props = ` {${names.join(",")}}`;
      }
      if (shapes && name !== "Object") props = ` <- ${retainer.get(i) ?? "?"}`;
      edge += edges * edgeFields.length;
      const key = `${type} ${String(name).slice(0, 50)}${props}`;
      const entry = sizes.get(key) ?? { bytes: 0, count: 0 };
      entry.bytes += snap.nodes[i + s];
      entry.count++;
      sizes.set(key, entry);
    }
    return sizes;
  };
  const a = tally(beforePath);
  const b = tally(afterPath);
  const rows = [...b]
    .map(([key, v]) => ({
      key,
      bytes: (v.bytes - (a.get(key)?.bytes ?? 0)) / runs,
      count: (v.count - (a.get(key)?.count ?? 0)) / runs,
    }))
    .filter((r) => r.bytes > 2)
    .sort((x, y) => y.bytes - x.bytes);
  let total = 0;
  for (const r of rows) total += r.bytes;
  for (const r of rows.slice(0, shapes ? 60 : 30))
    console.log(`${r.bytes.toFixed(0).padStart(7)} B  ${r.count.toFixed(2).padStart(6)}x  ${r.key}`);
  console.log(`${total.toFixed(0).padStart(7)} B  total`);
}

const sessions = Number(process.argv[2] ?? 10_000);
const rounds = Number(process.argv[3] ?? 5);
const snapshot = process.argv.includes("--snapshot");
const shapes = process.argv.includes("--shapes");
// `--only agentloop` (or `--only hand-written`): one kind, e.g. for its peak RSS in a process of its own.
const only = process.argv[process.argv.indexOf("--only") + 1];
const generator = process.argv.includes("--generator");
const chosen = (Object.keys(kinds) as Kind[]).filter(
  (kind) =>
    (process.argv.includes("--only") ? kind.startsWith(only ?? "") : true) &&
    (kind !== "hand-written generator loop" || generator || (only ?? "").includes("generator")),
);
const results: Record<Kind, Round[]> = {
  agentloop: [],
  "hand-written loop": [],
  "hand-written generator loop": [],
};
for (const kind of chosen) await round(kind, Math.min(sessions, 1_000), false); // warm-up
for (let r = 0; r < rounds; r++) {
  for (const kind of chosen) results[kind].push(await round(kind, sessions, snapshot));
}

const median = (xs: number[]) => xs.toSorted((a, b) => a - b)[xs.length >> 1] ?? Number.NaN;
const ratios = results.agentloop.map(
  (r, i) => r.runsPerSecond / (results["hand-written loop"][i]?.runsPerSecond ?? Number.NaN),
);
const peakRssMiB = process.resourceUsage().maxRSS / 1024;
if (process.argv.includes("--json")) {
  console.log(
    JSON.stringify({
      sessions,
      rounds,
      results,
      ratios: chosen.includes("agentloop") && chosen.includes("hand-written loop") ? ratios : [],
      peakRssMiB,
    }),
  );
  process.exit(0);
}
const show = (xs: number[], digits: number) =>
  `${median(xs).toFixed(digits)} [${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)}]`;
console.log(
  `\n${sessions.toLocaleString("en")} concurrent runs (2 model calls of 50 ms, 1 tool call), ${rounds} interleaved rounds: median [min-max]`,
);
for (const [kind, rs] of Object.entries(results).filter(([, rs]) => rs.length > 0)) {
  console.log(
    `${kind.padEnd(27)} runs/s ${show(
      rs.map((r) => r.runsPerSecond),
      0,
    )}  p50 added ms ${show(
      rs.map((r) => r.p50),
      1,
    )}  live heap per run B ${show(
      rs.map((r) => r.heapPerRun),
      0,
    )}  RSS MiB ${show(
      rs.map((r) => r.rssMiB),
      0,
    )}`,
  );
}
if (chosen.includes("agentloop") && chosen.includes("hand-written loop"))
  console.log(`agentloop runs/s over the hand-written loop's, per round: ${show(ratios, 2)}`);
console.log(`peak RSS of this process: ${peakRssMiB.toFixed(0)} MiB`);
