// The benchmark suite: `npm run bench` (or `npm run bench -- --quick`, a smoke run with small
// sizes). Writes BENCHMARKS.md and bench/results/overhead.svg from this one run. Timings are for
// comparison on one machine, never assertions; the targets table judges the issue's targets from
// the numbers measured here.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import { httpPeers } from "./http-peers.ts";
import { missedNotes } from "./missed.ts";
import {
  chartData,
  FLOOR,
  type Heap,
  heapMarkdown,
  heapOf,
  measureOverhead,
  overheadMarkdown,
} from "./overhead.ts";
import { replicaScaling } from "./replicas.ts";
import { parallelTools } from "./scenarios.ts";
import { subAgentCost } from "./subagents.ts";
import { tracingCost } from "./tracing.ts";
import { compactionCost } from "./compaction.ts";
import { recordingCost } from "./record.ts";
import { median, type TargetResult } from "./section.ts";
import { serverUnderLoad } from "./server.ts";
import { storeBenchmarks } from "./store.ts";
import { chart } from "./svg.ts";
import {
  coldStartPart,
  concurrencyPart,
  heapTargets,
  httpPart,
  inProcessTargets,
  loopPart,
  pruningPart,
  storeTargets,
} from "./targets.ts";

const quick = process.argv.includes("--quick");
const started = performance.now();
const sections: string[] = [];
const targets: TargetResult[] = [];
const took: string[] = [];
/** Runs one part, noting how long it took. */
async function part<T>(name: string, run: () => Promise<T> | T): Promise<T> {
  process.stderr.write(`${name}...\n`);
  const t = performance.now();
  const result = await run();
  took.push(`${name} ${((performance.now() - t) / 1000).toFixed(0)} s`);
  return result;
}

const SIZES = quick ? [10, 100] : [10, 100, 1_000, 10_000];
const overhead = await part("overhead in process", () =>
  measureOverhead(SIZES, quick ? 3 : 7, quick ? 1_000 : 12_000),
);
sections.push(overheadMarkdown(overhead));
const alone = await part("agentloop and the floor alone", () =>
  loopPart(
    SIZES.filter((n) => n >= 100),
    quick ? 3 : 41,
  ),
);
sections.push(alone.markdown);
targets.push(...alone.targets, ...inProcessTargets(overhead));

const heapSizes = quick ? [100] : [1_000, 10_000];
const heap = await part("heap", () => {
  const table: Record<string, Record<number, Heap>> = {};
  for (const name of Object.keys(overhead.cells["non-streaming"])) {
    table[name] = {};
    for (const n of heapSizes) {
      // Skipped where the overhead table skipped, or where one run would take over 20 s (extrapolated
      // from the largest N measured, as growing with N: some peers copy their history every turn).
      const cells = overhead.cells["non-streaming"][name] ?? {};
      const measured =
        SIZES.filter((size) => size <= n && cells[size] && "samples" in cells[size]).at(-1) ?? n;
      const cell = cells[measured];
      const estimateMs =
        cell && "samples" in cell
          ? (median(cell.samples) * n * (n / measured)) / 1000
          : Number.POSITIVE_INFINITY;
      (table[name] as Record<number, Heap>)[n] =
        estimateMs > 20_000 ? { held: "skipped", retained: "skipped" } : heapOf(name, n, 120_000);
    }
  }
  return table;
});
sections.push(heapMarkdown(heapSizes, heap));
targets.push(...heapTargets(heapSizes, heap));

const http = await part("end to end over HTTP", () => httpPart(quick ? 20 : 100, quick ? 3 : 20));
const peersOverHttp = await part("every framework over HTTP", () =>
  httpPeers(quick ? 10 : 50, quick ? 2 : 5),
);
sections.push(`${http.markdown}\n\n${peersOverHttp}`);
targets.push(...http.targets);

const concurrency = await part("concurrent sessions", () =>
  concurrencyPart(quick ? 1_000 : 10_000, quick ? 2 : 5, quick ? 10_000 : 100_000),
);
sections.push(concurrency.markdown);
targets.push(...concurrency.targets);

const server = await part("server under load", () => serverUnderLoad(quick ? 3 : 8, quick ? 1 : 2, 100));
sections.push(server.markdown);
targets.push(...server.targets);

const cold = await part("cold start", () => coldStartPart(quick ? 5 : 20));
sections.push(cold.markdown);
targets.push(...cold.targets);

const pruning = await part("pruning", () => pruningPart());
sections.push(pruning.markdown);
targets.push(...pruning.targets);

const store = await part("session stores", () =>
  storeBenchmarks(quick ? 300 : 2_000, quick ? 60 : 600, quick ? 300 : 1_000),
);
sections.push(...store.sections);
targets.push(...storeTargets(store, cold.heavy));

const parallel = await part("parallel tools", () => parallelTools());
sections.push(parallel.markdown);
targets.push(...parallel.targets);

sections.push((await part("sub-agents", () => subAgentCost(quick ? 5 : 11))).markdown);
sections.push((await part("tracing", () => tracingCost(quick ? 5 : 11))).markdown);
sections.push((await part("compaction", () => compactionCost())).markdown);
sections.push((await part("recording", () => recordingCost(quick ? 5 : 11))).markdown);

sections.push(await part("replicas on PostgreSQL", () => replicaScaling(quick ? 2 : 5, quick ? 1 : 2)));

const notes = await part("profiles of missed targets", () => missedNotes(targets, quick));

mkdirSync(new URL("./results/", import.meta.url), { recursive: true });
writeFileSync(
  new URL("./results/overhead.svg", import.meta.url),
  chart(chartData(overhead, "non-streaming"), SIZES),
);
// The versions installed of the packages bench/package.json names (not whatever else is in its node_modules).
const declared = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")) as {
  devDependencies: Record<string, string>;
};
const versions = Object.fromEntries(
  Object.entries(
    JSON.parse(
      execFileSync("npm", ["ls", "--json", "--depth=0"], {
        cwd: new URL(".", import.meta.url),
        encoding: "utf8",
      }),
    ).dependencies as Record<string, { version: string }>,
  ).filter(([name]) => name in declared.devDependencies),
);
const minutes = (performance.now() - started) / 60_000;
const report = `# Benchmarks

Generated by \`npm run bench${quick ? " -- --quick" : ""}\` on ${new Date().toISOString().slice(0, 10)} in ${minutes.toFixed(1)} minutes (${took.join(", ")}):
${os.cpus()[0]?.model ?? "cpu"} (${os.cpus().length} cores), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, ${os.platform()};
load average ${os
  .loadavg()
  .map((l) => l.toFixed(1))
  .join(", ")} at the end (other work shares the machine: compare ratios measured side by side, not digits
across sections or runs). Peers: ${Object.entries(versions)
  .map(([name, v]) => `${name} ${v.version}`)
  .join(", ")}.

## Method

In process (bench/workload.ts, bench/peers.ts, bench/overhead.ts): one workload for every framework.
A fake model asks for \`add({"a": i, "b": 2})\` on turn i of N, then answers "done"; the tool, the same
async function for all, adds. Each framework gets a lean hand-written fake in its own model interface,
doing what agentloop's does and nothing more: agentloop and the ${FLOOR} share one fake (an async
generator of events, agentloop's \`Model\`); the Vercel AI SDK gets a plain \`LanguageModelV4\` object
(\`doGenerate\`, and \`doStream\` on a \`ReadableStream\`); the OpenAI Agents SDK a plain \`Model\`
(\`getResponse\`, \`getStreamedResponse\`); LangGraph a \`BaseChatModel\` with \`_generate\` and
\`_streamResponseChunks\` under \`createReactAgent\`. Streaming, every turn streams a text delta before its
tool call or answer, and each framework is driven through its streaming API end to end (agentloop
\`stream()\`, the floor an async generator of events, \`streamText\`, \`run(..., { stream: true })\`,
LangGraph \`stream\` with \`streamMode: "messages"\`). agentloop runs with its defaults (repetition guard,
60 s tool timeout with its abort signal, budgets, pruning), only \`maxIterations\` raised to N + 1, as the
peers' step limits are. The ${FLOOR} is what a careful hand-written loop does: it keeps the history,
parses each call's arguments and validates them with the tool's zod schema, awaits the tool, and has no
guards, timeouts, budgets or pruning. Frameworks are interleaved round by round in one process; a sample
is CPU time (user + system of the process) after a full GC, so that no framework's garbage is collected
in another's sample; tables give median [min-max]. Both have a price for agentloop: the peers exercise
Node's own JS internals (streams, timers, AbortSignal, event targets) in their own ways, and a full GC
with no run alive makes V8 drop agentloop's optimised code (see "alone in a process" below), so its rows
here are two to three times its cost alone; the in-process target is judged with agentloop and the floor
alone in a process, with no GC forced ("agentloop against the hand-written loop, alone in a process").

Over HTTP, under load, at cold start and with stores, each section says how it measures; every
comparison there is interleaved too, with the other side (upstream, load generator, database) in its own
process.

![overhead per iteration](bench/results/overhead.svg)

## Targets

| target | measured | result |
| --- | --- | --- |
${targets.map((t) => `| ${t.target} | ${t.result} | ${t.met ? "met" : "**missed**"} |`).join("\n")}

${notes}

## Measurements

${sections.join("\n\n")}
`;
writeFileSync(new URL("../BENCHMARKS.md", import.meta.url), report);
process.stderr.write(`wrote BENCHMARKS.md in ${minutes.toFixed(1)} minutes\n`);
