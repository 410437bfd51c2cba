// The server under load, from outside: `agentloop serve` (the CLI, in its own process) and a
// hand-written server (bench/server-floor.ts, node:http + the official `openai` client) on the
// same upstream (bench/upstream.ts: the fake OpenAI server, 50 ms per answer, in its own process),
// loaded by autocannon in a third process (bench/load.ts). One request = one run: a chat
// completion whose model calls `calculator` once and then answers (two upstream calls, one tool
// call), non-streaming and streaming. The two servers take turns, round by round.
//
// Memory comes from inside each server (bench/mem-probe.ts, preloaded with --import):
// process.memoryUsage() every 500 ms, and a full GC once the load is over (what the heap still
// holds). CPU comes from /proc (bench/cpu.ts).
//
//   npm run build && node bench/server.ts [--seconds 10] [--rounds 3] [--connections 100]
//   node bench/server.ts --soak 120 [--only agentloop] [--env MALLOC_ARENA_MAX=2] [--trim]
//     (one long load, memory printed every 5 s, then 10 s idle, a GC, and with --trim glibc's
//     malloc_trim(0) called in the server through gdb: where the RSS is held)
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import os, { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { cpuSeconds } from "./cpu.ts";
import { medianRange, type Section } from "./section.ts";

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const BIN = here("../dist/cli/bin.js");
const MiB = 2 ** 20;

export interface MemorySample {
  t: number;
  tag: "tick" | "gc";
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

export interface Server {
  name: string;
  child: ChildProcess;
  url: string;
  memoryFile: string;
  exited: Promise<unknown>;
}

/** Starts `agentloop serve` ("agentloop") or the hand-written server ("floor") with the memory probe. */
export async function startServer(
  kind: "agentloop" | "floor",
  dir: string,
  env: Record<string, string>,
  name: string = kind,
): Promise<Server> {
  const file = name.replace(/\W+/g, "-");
  const log = join(dir, `${file}.log`);
  const memoryFile = join(dir, `${file}.memory.jsonl`);
  const script = kind === "agentloop" ? [BIN, "serve", "--port", "0"] : [here("./server-floor.ts")];
  const child = spawn(process.execPath, ["--expose-gc", "--import", here("./mem-probe.ts"), ...script], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", ...env, AGENTLOOP_BENCH_MEMORY: memoryFile },
    stdio: ["ignore", "ignore", openSync(log, "w")],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  for (let waited = 0; waited < 30_000; waited += 50) {
    const match = existsSync(log) && /serving \S+ on (http:\/\/\S+) /.exec(readFileSync(log, "utf8"));
    if (match) return { name, child, url: match[1] as string, memoryFile, exited };
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGKILL");
  throw new Error(`${kind} server did not start: ${readFileSync(log, "utf8").trim()}`);
}

export async function startUpstream(latencyMs: number): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [here("./upstream.ts"), String(latencyMs)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  for await (const line of lines) return { child, url: line.trim() };
  throw new Error("the upstream fake server did not start");
}

/** The server's memory samples so far (from its probe's file). */
export function memorySamples(server: Server): MemorySample[] {
  if (!existsSync(server.memoryFile)) return [];
  return readFileSync(server.memoryFile, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as MemorySample);
}

/** Runs a full GC in the server (SIGUSR2 to its probe) and returns the sample it writes then. */
export async function collect(server: Server): Promise<MemorySample> {
  const before = memorySamples(server).filter((s) => s.tag === "gc").length;
  server.child.kill("SIGUSR2");
  for (let waited = 0; waited < 10_000; waited += 50) {
    const gcs = memorySamples(server).filter((s) => s.tag === "gc");
    if (gcs.length > before) return gcs.at(-1) as MemorySample;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${server.name}: no GC sample`);
}

/** glibc's malloc_trim(0) in the server, through gdb (the free memory glibc's arenas keep, given back). */
export function mallocTrim(server: Server): boolean {
  try {
    execFileSync(
      "gdb",
      ["-p", String(server.child.pid), "-batch", "-ex", "call (int) malloc_trim(0)", "-ex", "detach"],
      { stdio: "ignore", timeout: 60_000 },
    );
    return true;
  } catch {
    return false;
  }
}

export interface Load {
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  seconds: number;
  p50: number;
  p99: number;
  cpuSeconds: number;
}

/** bench/load.ts for `seconds` on `urls`; `onStart` is called as its load starts. */
export function load(
  seconds: number,
  connections: number,
  urls: string[],
  { stream = false, onStart = () => {} }: { stream?: boolean; onStart?: () => void } = {},
): Promise<Load> {
  const child = spawn(
    process.execPath,
    [here("./load.ts"), String(seconds), String(connections), ...(stream ? ["--stream"] : []), ...urls],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout });
  return new Promise((resolve, reject) => {
    lines.on("line", (line) => (line === "started" ? onStart() : resolve(JSON.parse(line) as Load)));
    child.once("close", (code) => reject(new Error(`bench/load.ts exited with ${code}`)));
  });
}

interface Measurement {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  failed: number;
  /** Server CPU ms per request. */
  cpuMs: number;
  /** MiB: RSS before the load, its peak during it, after the load and a full GC; heap peak and after GC. */
  rssBefore: number;
  rssPeak: number;
  rssAfter: number;
  heapPeak: number;
  heapAfter: number;
}

async function measure(server: Server, seconds: number, connections: number, stream: boolean) {
  const rssBefore = (await collect(server)).rss / MiB;
  const from = Date.now();
  let cpu = cpuSeconds(server.child.pid ?? 0);
  const result = await load(seconds, connections, [server.url], {
    stream,
    onStart: () => {
      cpu = cpuSeconds(server.child.pid ?? 0);
    },
  });
  const used = cpuSeconds(server.child.pid ?? 0) - cpu;
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
    rssAfter: after.rss / MiB,
    heapPeak: Math.max(0, ...during.map((s) => s.heapUsed / MiB)),
    heapAfter: after.heapUsed / MiB,
  } satisfies Measurement;
}

const cell = (xs: number[], digits = 0) => medianRange(xs, digits);

/** A server of the comparison: which, its label, extra environment. */
interface Variant {
  label: string;
  kind: "agentloop" | "floor";
  env: Record<string, string>;
}
/** V8's old generation capped: what bounds the RSS under load (see the section's text). */
export const HEAP_CAP = "--max-old-space-size=256";
const VARIANTS: Variant[] = [
  { label: "agentloop serve", kind: "agentloop", env: {} },
  { label: "hand-written", kind: "floor", env: {} },
  { label: `agentloop serve, NODE_OPTIONS=${HEAP_CAP}`, kind: "agentloop", env: { NODE_OPTIONS: HEAP_CAP } },
];

/** After the load: RSS once idle (V8's memory reducer gives heap pages back), and what glibc's malloc_trim returns. */
async function idle(
  server: Server,
  rssStart: number,
): Promise<{ rss: number; seconds: number; trimmed?: number }> {
  const started = Date.now();
  let rss = (await collect(server)).rss / MiB;
  while (rss > rssStart + 48 && Date.now() - started < 40_000) {
    await new Promise((r) => setTimeout(r, 2_000));
    rss = (memorySamples(server).at(-1)?.rss ?? 0) / MiB;
  }
  const seconds = (Date.now() - started) / 1000;
  if (!mallocTrim(server)) return { rss, seconds };
  await new Promise((r) => setTimeout(r, 600));
  return { rss, seconds, trimmed: rss - (memorySamples(server).at(-1)?.rss ?? 0) / MiB };
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
    const rssStart = new Map<string, number>();
    for (const server of servers) rssStart.set(server.name, (await collect(server)).rss / MiB);
    for (const server of servers) await load(2, connections, [server.url]); // warm-up
    const modes = ["non-streaming", "streaming"] as const;
    const results = new Map<string, Measurement[]>();
    const served = new Map<string, number>();
    const loadAverage = os.loadavg()[0] ?? 0;
    for (let round = 0; round < rounds; round++) {
      for (const mode of modes) {
        const order = round % 2 ? servers.toReversed() : servers;
        for (const server of order) {
          process.stderr.write(`server: ${server.name}, ${mode}, round ${round + 1}\n`);
          const key = `${server.name} ${mode}`;
          const m = await measure(server, seconds, connections, mode === "streaming");
          results.set(key, [...(results.get(key) ?? []), m]);
          served.set(server.name, (served.get(server.name) ?? 0) + m.requests);
        }
      }
    }
    const idled = new Map<string, Awaited<ReturnType<typeof idle>>>();
    for (const server of servers) idled.set(server.name, await idle(server, rssStart.get(server.name) ?? 0));

    const [ours, floor] = servers.map((server) => server.name) as [string, string];
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
    const memoryRows = servers.map((server) => {
      const all = modes.flatMap((mode) => results.get(`${server.name} ${mode}`) ?? []);
      const i = idled.get(server.name);
      const heapAfter = all.map((m) => m.heapAfter);
      return `| ${server.name} | ${(served.get(server.name) ?? 0).toLocaleString("en")} | ${(rssStart.get(server.name) ?? 0).toFixed(0)} | ${Math.max(...all.map((m) => m.rssPeak)).toFixed(0)} | ${i ? `${i.rss.toFixed(0)} (${i.seconds.toFixed(0)} s)` : "-"} | ${i?.trimmed === undefined ? "-" : i.trimmed.toFixed(0)} | ${heapAfter.map((h) => h.toFixed(0)).join(", ")} |`;
    });
    const mine = modes.flatMap((mode) => results.get(`${ours} ${mode}`) ?? []);
    const heapGrowth = (mine.at(-1)?.heapAfter ?? 0) - (mine[0]?.heapAfter ?? 0);
    const ourIdle = idled.get(ours);
    const start = rssStart.get(ours) ?? 0;
    const markdown = `### Server under load (bench/server.ts)

\`agentloop serve\` and a hand-written server (bench/server-floor.ts: node:http, the official \`openai\`
client, the same tools sent upstream, arguments validated with zod) each in its own process, on one
upstream in another (the fake OpenAI server answering after ${latencyMs} ms), loaded by autocannon in a
further one: ${connections} keep-alive connections, ${seconds} s per measurement, the servers in turn, ${rounds} rounds; median
[min-max] over the rounds. One request = one run of two upstream calls and one \`calculator\` call,
so ${2 * latencyMs} ms of it is the upstream's. Load average ${loadAverage.toFixed(1)} when it started.
Memory is read inside each server (bench/mem-probe.ts, every 500 ms): the peak RSS and heap during a
measurement, and the heap after it and a full GC. The third server is \`agentloop serve\` with V8's old
generation capped (\`NODE_OPTIONS=${HEAP_CAP}\`).

| server | mode | requests/s | p50 ms | p99 ms | CPU ms per request | failed | RSS peak MiB | heap used peak MiB | heap after GC MiB |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${rows.join("\n")}

agentloop serve's requests per second over the hand-written server's, per round: non-streaming
${cell(ratios["non-streaming"], 2)}, streaming ${cell(ratios.streaming, 2)}.

Memory over the whole section: RSS at start (after a GC), its peak under load, once idle (after a GC,
waiting up to 40 s for V8's memory reducer to give heap pages back, until within 48 MiB of the start),
what glibc then returned on \`malloc_trim(0)\` (called through gdb; free memory its arenas kept), and the
heap after a full GC at the end of each measurement, in order (growth there would be a leak).

| server | requests served | RSS MiB at start | peak | idle (after) | returned by malloc_trim | heap after GC, MiB, each measurement |
| --- | ---: | ---: | ---: | ---: | ---: | --- |
${memoryRows.join("\n")}`;
    return {
      markdown,
      targets: [
        {
          target:
            "Server RSS under load: found what holds it, and bounded (heap after GC flat across the section; RSS back near its start once idle)",
          result: `heap after GC ${heapGrowth >= 0 ? "+" : ""}${heapGrowth.toFixed(0)} MiB over ${(served.get(ours) ?? 0).toLocaleString("en")} requests; RSS ${start.toFixed(0)} → ${Math.max(...mine.map((m) => m.rssPeak)).toFixed(0)} under load → ${ourIdle?.rss.toFixed(0) ?? "-"} MiB idle`,
          met: heapGrowth < 10 && ourIdle !== undefined && ourIdle.rss <= start + 48,
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

/** One long load on one server, memory every 5 s, then idle, a GC and (with `trim`) malloc_trim. */
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
    show("start, gc", await collect(server));
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
    show("idle, gc", await collect(server));
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
