// The server under load, from outside: `agentloop serve` (the CLI, in its own process) and a
// hand-written server (bench/server-floor.ts, node:http + the official `openai` client) on the
// same upstream (bench/upstream.ts: the fake OpenAI server, 50 ms per answer, in its own process),
// loaded by autocannon in a third process (bench/load.ts). One request = one run: a chat
// completion whose model calls `calculator` once and then answers (two upstream calls, one tool
// call), non-streaming and streaming. The two servers take turns, round by round.
//
// Memory comes from inside each server (bench/mem-probe.ts, preloaded with --import):
// process.memoryUsage() every 500 ms, and GCs once the load is over (what the heap still holds;
// what V8 gives back); where the RSS is from /proc/<pid>/smaps. CPU comes from /proc (bench/cpu.ts).
//
//   npm run build && node bench/server.ts [--seconds 10] [--rounds 3] [--connections 100]
//   node bench/server.ts --soak 120 [--only agentloop] [--env MALLOC_ARENA_MAX=2] [--trim]
//     (one long load, memory printed every 5 s, then 10 s idle, a full GC, V8's last-resort GC, and
//     with --trim glibc's malloc_trim(0) called in the server through gdb: where the RSS is held)
import { mkdtempSync, rmSync } from "node:fs";
import os, { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { cpuSeconds } from "./cpu.ts";
import {
  child,
  collect,
  descriptors,
  load,
  type MemorySample,
  mallocTrim,
  memorySamples,
  type RssBreakdown,
  rssBreakdown,
  type Server,
  startServer,
  startUpstream,
} from "./processes.ts";
import { medianRange, type Section } from "./section.ts";

const MiB = 2 ** 20;

interface Measurement {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  failed: number;
  /** Server CPU ms per request. */
  cpuMs: number;
  /** MiB: RSS before the load (after V8's last-resort GC), its peak during it, after a full GC. */
  rssBefore: number;
  rssPeak: number;
  rssAfterGc: number;
  /** MiB: RSS after V8's last-resort GC once the load is over. */
  rssCompact: number;
  heapPeak: number;
  /** MiB of heap after a full GC once the load is over. */
  heapAfter: number;
  /** Where the RSS was as the load ended (before any GC). */
  breakdown: RssBreakdown | undefined;
}

async function measure(server: Server, seconds: number, connections: number, stream: boolean) {
  const rssBefore = (await collect(server)).compact.rss / MiB;
  const from = Date.now();
  let cpu = cpuSeconds(server.child.pid ?? 0);
  const result = await load(seconds, connections, [server.url], {
    stream,
    onStart: () => {
      cpu = cpuSeconds(server.child.pid ?? 0);
    },
  });
  const used = cpuSeconds(server.child.pid ?? 0) - cpu;
  const breakdown = rssBreakdown(server.child.pid);
  const after = await collect(server);
  const during = memorySamples(server).filter((s) => s.t >= from && s.tag === "tick");
  return {
    requests: result.ok,
    rps: result.ok / result.seconds,
    p50: result.p50,
    p99: result.p99,
    failed: result.non2xx + result.errors + result.timeouts,
    cpuMs: (used * 1000) / Math.max(1, result.ok),
    rssBefore,
    rssPeak: Math.max(rssBefore, ...during.map((s) => s.rss / MiB)),
    rssAfterGc: after.gc.rss / MiB,
    rssCompact: after.compact.rss / MiB,
    heapPeak: Math.max(0, ...during.map((s) => s.heapUsed / MiB)),
    heapAfter: after.gc.heapUsed / MiB,
    breakdown,
  } satisfies Measurement;
}

const cell = (xs: number[], digits = 0) => medianRange(xs, digits);
const mib = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? "-" : v.toFixed(0));

/** A server of the comparison: which, its label, extra environment. */
interface Variant {
  label: string;
  kind: "agentloop" | "floor";
  env: Record<string, string>;
}
/** V8's heap capped (old generation, and each young semi-space): what bounds the RSS under load. */
export const HEAP_CAP = "--max-old-space-size=256 --max-semi-space-size=16";
const VARIANTS: Variant[] = [
  { label: "agentloop serve", kind: "agentloop", env: {} },
  { label: "hand-written", kind: "floor", env: {} },
  {
    label: `agentloop serve, NODE_OPTIONS="${HEAP_CAP}"`,
    kind: "agentloop",
    env: { NODE_OPTIONS: HEAP_CAP },
  },
];

/** The section's memory paragraph: where agentloop serve's RSS was, and why. */
function explain(
  ours: Measurement[],
  fds: { start: number; end: number },
  floorPeak: number,
  cappedPeak: number,
  trimmed: number | undefined,
  latencyMs: number,
): string {
  const ended = ours.at(-1)?.breakdown;
  const heaps = ours.map((m) => m.heapAfter);
  const limit = Number(child(["-p", "require('v8').getHeapStatistics().heap_size_limit"])) / MiB;
  const peak = Math.max(...ours.map((m) => m.rssPeak));
  return `What holds the RSS: as the last load ended, ${
    ended
      ? `${mib(ended.v8Pages)} MiB of agentloop serve's RSS were V8's heap pages (anonymous 256 KiB pages at 256 KiB
boundaries in /proc/<pid>/smaps), ${mib(ended.otherAnonymous)} other anonymous memory (glibc's arenas: socket
buffers, V8's compiler zones; thread stacks) and ${mib(ended.files)} mapped files (the node binary)`
      : "(no /proc here to say)"
  }. After a full
GC the heap holds ${mib(Math.min(...heaps))}-${mib(Math.max(...heaps))} MiB whatever the number of requests served, and ${
    fds.end <= fds.start + 2
      ? `the open files
end where they started (${fds.start} → ${fds.end}, 10 s after the last request): nothing accumulates per request`
      : `**${fds.end - fds.start} more files
were open 10 s after the last request than before the first** (sockets held: to look into); otherwise nothing accumulates per request`
  } (per-request AbortControllers, request bodies, log lines, metrics or kept-alive upstream sockets
would show there). The pages are V8's, free
but kept: a full GC leaves the RSS where it was (${mib(Math.max(...ours.map((m) => m.rssAfterGc)))} MiB at most), V8's last-resort GC
gives them back (${mib(Math.max(...ours.map((m) => m.rssCompact)))} MiB at most). V8 sizes its heap for the allocation rate: a request's
objects live as long as the request (${2 * latencyMs} ms and more), survive young-generation collections, are
promoted and die in the old generation, which grows until a full collection, up to V8's limit
(${mib(limit)} MiB here, set from the machine's memory: a heavier load can take the RSS to GBs). V8's
memory reducer returns the pages once the process has been idle for a while, but not reliably (in
some runs of this section they stayed for 40 s). glibc's allocator kept ${mib(trimmed)} MiB that
\`malloc_trim\` returned: \`MALLOC_ARENA_MAX\` can gain no more. The hand-written server grows the same
way (peak ${mib(floorPeak)} MiB against ${mib(peak)}). The bound is a cap on V8's heap, its old generation
and its young one (each of the young generation's semi-spaces is 64 MiB at most by default here): with
\`NODE_OPTIONS="${HEAP_CAP}"\` the peak was ${mib(cappedPeak)} MiB, for the requests per second and
CPU per request in the first table. A cap must stay well above the live heap (the heap after GC, plus
what the requests in flight hold), or the process runs out of memory.`;
}

/** The "Server under load" section: `rounds` rounds of `seconds` per server and mode. */
export async function serverUnderLoad(
  seconds: number,
  rounds: number,
  connections: number,
  latencyMs = 50,
): Promise<Section> {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-server-"));
  const upstream = await startUpstream(latencyMs);
  const servers: Server[] = [];
  try {
    const env = { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-bench" };
    for (const v of VARIANTS) servers.push(await startServer(v.kind, dir, { ...env, ...v.env }, v.label));
    const fds = new Map(servers.map((server) => [server.name, descriptors(server.child.pid)]));
    for (const server of servers) await load(2, connections, [server.url]); // warm-up
    const start = new Map<string, { rss: number; fds: number }>();
    for (const server of servers)
      start.set(server.name, {
        rss: (await collect(server)).compact.rss / MiB,
        fds: fds.get(server.name) ?? -1,
      });
    const modes = ["non-streaming", "streaming"] as const;
    const results = new Map<string, Measurement[]>();
    /** Each server's measurements in the order they ran. */
    const history = new Map<string, Measurement[]>();
    const loadAverage = os.loadavg()[0] ?? 0;
    for (let round = 0; round < rounds; round++) {
      for (const mode of modes) {
        const order = round % 2 ? servers.toReversed() : servers;
        for (const server of order) {
          process.stderr.write(`server: ${server.name}, ${mode}, round ${round + 1}\n`);
          const m = await measure(server, seconds, connections, mode === "streaming");
          const key = `${server.name} ${mode}`;
          results.set(key, [...(results.get(key) ?? []), m]);
          history.set(server.name, [...(history.get(server.name) ?? []), m]);
        }
      }
    }
    // At the end, once kept-alive connections have timed out (about 5 s idle, upstream and client
    // alike): open files, then glibc's malloc_trim after a last-resort GC (the probe's next tick,
    // within 500 ms, has the RSS after it).
    await new Promise((r) => setTimeout(r, 10_000));
    const end = new Map<string, { fds: number; trimmed?: number }>();
    const trimmedFrom = new Map<string, number>();
    for (const server of servers) {
      end.set(server.name, { fds: descriptors(server.child.pid) });
      const rss = (await collect(server)).compact.rss;
      if (mallocTrim(server)) trimmedFrom.set(server.name, rss);
    }
    await new Promise((r) => setTimeout(r, 700));
    for (const [name, rss] of trimmedFrom) {
      const server = servers.find((x) => x.name === name) as Server;
      const e = end.get(name) as { fds: number; trimmed?: number };
      e.trimmed = Math.max(0, (rss - (memorySamples(server).at(-1)?.rss ?? rss)) / MiB);
    }

    const [ours, floor, capped] = servers.map((server) => server.name) as [string, string, string];
    const ratios = Object.fromEntries(
      modes.map((mode) => {
        const a = results.get(`${ours} ${mode}`) ?? [];
        const b = results.get(`${floor} ${mode}`) ?? [];
        return [mode, a.map((m, i) => m.rps / (b[i]?.rps ?? Number.NaN))];
      }),
    ) as Record<(typeof modes)[number], number[]>;
    const rows = modes.flatMap((mode) =>
      servers.map((server) => {
        const ms = results.get(`${server.name} ${mode}`) ?? [];
        const pick = (f: (m: Measurement) => number, digits = 0) => cell(ms.map(f), digits);
        return `| ${server.name} | ${mode} | ${pick((m) => m.rps)} | ${pick((m) => m.p50)} | ${pick((m) => m.p99)} | ${pick((m) => m.cpuMs, 2)} | ${ms.reduce((sum, m) => sum + m.failed, 0)} | ${pick((m) => m.rssPeak)} | ${pick((m) => m.heapPeak)} | ${pick((m) => m.heapAfter)} |`;
      }),
    );
    const where = (b: RssBreakdown | undefined) =>
      b ? `${mib(b.v8Pages)} / ${mib(b.otherAnonymous)} / ${mib(b.files)}` : "-";
    const peakOf = (name: string) => Math.max(...(history.get(name) ?? []).map((m) => m.rssPeak));
    const memoryRows = servers.map((server) => {
      const all = history.get(server.name) ?? [];
      const s = start.get(server.name);
      const e = end.get(server.name);
      return `| ${server.name} | ${all.reduce((sum, m) => sum + m.requests, 0).toLocaleString("en")} | ${mib(s?.rss)} | ${mib(peakOf(server.name))} | ${where(all.at(-1)?.breakdown)} | ${mib(Math.max(...all.map((m) => m.rssAfterGc)))} | ${mib(Math.max(...all.map((m) => m.rssCompact)))} | ${mib(e?.trimmed)} | ${s?.fds ?? "-"} → ${e?.fds ?? "-"} | ${all.map((m) => mib(m.heapAfter)).join(", ")} |`;
    });
    const mine = history.get(ours) ?? [];
    const heapGrowth = (mine.at(-1)?.heapAfter ?? 0) - (mine[0]?.heapAfter ?? 0);
    const rssStart = start.get(ours)?.rss ?? 0;
    const compact = Math.max(...mine.map((m) => m.rssCompact));
    const markdown = `### Server under load (bench/server.ts)

\`agentloop serve\` and a hand-written server (bench/server-floor.ts: node:http, the official \`openai\`
client, the same tools sent upstream, arguments validated with zod) each in its own process, on one
upstream in another (the fake OpenAI server answering after ${latencyMs} ms), loaded by autocannon in a
further one: ${connections} keep-alive connections, ${seconds} s per measurement, the servers in turn, ${rounds} rounds; median
[min-max] over the rounds. One request = one run of two upstream calls and one \`calculator\` call,
so ${2 * latencyMs} ms of it is the upstream's. Load average ${loadAverage.toFixed(1)} when it started.
Memory is read inside each server (bench/mem-probe.ts, every 500 ms): the peak RSS and heap during a
measurement, and the heap after it and a full GC; before each measurement V8's last-resort GC gives
free heap pages back, so each starts from the same state. The third server is \`agentloop serve\` with
V8's heap capped (\`NODE_OPTIONS="${HEAP_CAP}"\`).

| server | mode | requests/s | p50 ms | p99 ms | CPU ms per request | failed | RSS peak MiB | heap used peak MiB | heap after GC MiB |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${rows.join("\n")}

agentloop serve's requests per second over the hand-written server's, per round: non-streaming
${cell(ratios["non-streaming"], 2)}, streaming ${cell(ratios.streaming, 2)}.

Memory over the whole section (MiB): RSS at the start (after the warm-up and a last-resort GC), its
peak under load, where it was as the last load ended (/proc/<pid>/smaps), after a full GC and after a
last-resort GC at the end of a measurement (the largest of the measurements), what glibc's
\`malloc_trim(0)\` returned at the end (called through gdb: free memory its arenas kept), the open file
descriptors (sockets included) before the first request and 10 s after the last, and the heap after a full GC at the end of
each measurement in order (growth there would be a leak).

| server | requests | RSS at start | peak | V8 pages / other anonymous / files at the end of the load | after a full GC | after a last-resort GC | returned by malloc_trim | open files | heap after GC, each measurement |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |
${memoryRows.join("\n")}

${explain(mine, { start: start.get(ours)?.fds ?? -1, end: end.get(ours)?.fds ?? -1 }, peakOf(floor), peakOf(capped), end.get(ours)?.trimmed, latencyMs)}`;
    return {
      markdown,
      targets: [
        {
          target:
            "Server RSS under load: find what holds it, fix or bound it (heap after GC flat; the RSS V8's own once the load is over; a bound)",
          result: `V8's free heap pages: RSS ${mib(rssStart)} → ${mib(peakOf(ours))} MiB under load, ${mib(compact)} after V8's last-resort GC; heap after GC ${heapGrowth >= 0 ? "+" : ""}${heapGrowth.toFixed(0)} MiB over ${mine.reduce((sum, m) => sum + m.requests, 0).toLocaleString("en")} requests; bounded by \`NODE_OPTIONS="${HEAP_CAP}"\`: peak ${mib(peakOf(capped))} MiB`,
          met:
            heapGrowth < 10 &&
            compact <= rssStart + 48 &&
            peakOf(capped) < peakOf(ours) &&
            (end.get(ours)?.fds ?? 0) <= (start.get(ours)?.fds ?? 0) + 2,
        },
      ],
    };
  } finally {
    for (const server of servers) server.child.kill("SIGTERM");
    await Promise.all(servers.map((s) => s.exited));
    upstream.child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One long load on one server, memory every 5 s, then 10 s idle, a full GC, V8's last-resort GC and (with `trim`) malloc_trim. */
async function soak(
  kind: "agentloop" | "floor",
  seconds: number,
  connections: number,
  stream: boolean,
  extraEnv: Record<string, string>,
  trim: boolean,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-soak-"));
  const upstream = await startUpstream(50);
  const server = await startServer(kind, dir, {
    OPENAI_BASE_URL: upstream.url,
    OPENAI_API_KEY: "sk-bench",
    ...extraEnv,
  }).catch((error) => {
    upstream.child.kill("SIGTERM");
    throw error;
  });
  const show = (label: string, s: MemorySample) =>
    console.log(
      `${label.padEnd(14)} rss ${(s.rss / MiB).toFixed(0).padStart(5)}  heapTotal ${(s.heapTotal / MiB).toFixed(0).padStart(4)}  heapUsed ${(s.heapUsed / MiB).toFixed(0).padStart(4)}  external ${(s.external / MiB).toFixed(0).padStart(3)}  arrayBuffers ${(s.arrayBuffers / MiB).toFixed(0).padStart(3)}`,
    );
  try {
    console.log(
      `${kind}, ${connections} connections, ${seconds} s, ${stream ? "streaming" : "non-streaming"}, env ${JSON.stringify(extraEnv)}`,
    );
    show("start, gc", (await collect(server)).compact);
    const started = Date.now();
    const timer = setInterval(() => {
      const s = memorySamples(server).at(-1);
      if (s) show(`${((Date.now() - started) / 1000).toFixed(0)} s`, s);
    }, 5_000);
    const result = await load(seconds, connections, [server.url], { stream });
    clearInterval(timer);
    console.log(
      `${result.ok} requests, ${(result.ok / result.seconds).toFixed(0)}/s, p50 ${result.p50} ms, p99 ${result.p99} ms, failed ${result.non2xx + result.errors + result.timeouts}`,
    );
    const last = memorySamples(server).at(-1);
    if (last) show("end of load", last);
    await new Promise((r) => setTimeout(r, 10_000));
    show("idle 10 s", memorySamples(server).at(-1) as MemorySample);
    const collected = await collect(server);
    show("idle, gc", collected.gc);
    show("last-resort gc", collected.compact);
    if (trim) {
      console.log(mallocTrim(server) ? "malloc_trim(0) called" : "gdb could not call malloc_trim");
      await new Promise((r) => setTimeout(r, 1_000));
      show("after trim", memorySamples(server).at(-1) as MemorySample);
    }
  } finally {
    server.child.kill("SIGTERM");
    await server.exited;
    upstream.child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      seconds: { type: "string", default: "10" },
      rounds: { type: "string", default: "3" },
      connections: { type: "string", default: "100" },
      soak: { type: "string" },
      only: { type: "string", default: "agentloop" },
      stream: { type: "boolean", default: false },
      env: { type: "string", multiple: true, default: [] },
      trim: { type: "boolean", default: false },
    },
  });
  if (values.soak) {
    const env = Object.fromEntries(
      values.env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
    );
    await soak(
      values.only === "floor" ? "floor" : "agentloop",
      Number(values.soak),
      Number(values.connections),
      values.stream,
      env,
      values.trim,
    );
  } else {
    const { markdown, targets } = await serverUnderLoad(
      Number(values.seconds),
      Number(values.rounds),
      Number(values.connections),
    );
    console.log(
      `${markdown}\n\n${targets.map((t) => `${t.target}: ${t.result} (${t.met ? "met" : "missed"})`).join("\n")}`,
    );
  }
}
