// The processes of the server benchmarks (bench/server.ts, bench/replicas.ts): the upstream,
// `agentloop serve` or the hand-written server with the memory probe, the load generator; and what
// /proc and gdb tell about a server's memory.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, openSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

/** Runs a bench script (or `node` with `args`) in a fresh process and returns its stdout. */
export function child(args: string[], timeoutMs = 600_000): string {
  return execFileSync(process.execPath, args, {
    encoding: "utf8",
    timeout: timeoutMs,
    killSignal: "SIGKILL",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 64 * 2 ** 20,
  });
}
const BIN = here("../dist/cli/bin.js");
export interface MemorySample {
  t: number;
  tag: "tick" | "gc" | "compact";
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

/**
 * Runs a full GC in the server (SIGUSR2 to its probe), then V8's last-resort GC: the samples after
 * each (`gc`: what the heap holds; `compact`: the RSS once V8 has given its free pages back).
 */
export async function collect(server: Server): Promise<{ gc: MemorySample; compact: MemorySample }> {
  const before = memorySamples(server).filter((s) => s.tag === "compact").length;
  server.child.kill("SIGUSR2");
  for (let waited = 0; waited < 10_000; waited += 50) {
    const samples = memorySamples(server);
    if (samples.filter((s) => s.tag === "compact").length > before) {
      const gc = samples.findLast((s) => s.tag === "gc") as MemorySample;
      return { gc, compact: samples.findLast((s) => s.tag === "compact") as MemorySample };
    }
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

/** Open file descriptors of a process (its sockets among them); -1 where /proc cannot tell. */
export function descriptors(pid: number | undefined): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return -1;
  }
}

/** Where a process's RSS is, in MiB, from /proc/<pid>/smaps (Linux). */
export interface RssBreakdown {
  /** Anonymous mappings of 256 KiB pages at 256 KiB boundaries: V8's heap pages. */
  v8Pages: number;
  /** Other anonymous memory: glibc's arenas (malloc: buffers, V8's compiler zones, ...), stacks. */
  otherAnonymous: number;
  /** Mapped files: the node binary, shared libraries. */
  files: number;
}

export function rssBreakdown(pid: number | undefined): RssBreakdown | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, "utf8");
  } catch {
    return undefined;
  }
  const kib = { v8Pages: 0, otherAnonymous: 0, files: 0 };
  let kind: keyof RssBreakdown = "otherAnonymous";
  for (const line of text.split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const start = Number.parseInt(head[1] as string, 16);
      const size = Number.parseInt(head[2] as string, 16) - start;
      const name = head[3] ?? "";
      const page = 256 * 1024;
      kind = name.startsWith("/")
        ? "files"
        : !name && start % page === 0 && size % page === 0
          ? "v8Pages"
          : "otherAnonymous";
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) kib[kind] += Number(rss[1]);
  }
  return { v8Pages: kib.v8Pages / 1024, otherAnonymous: kib.otherAnonymous / 1024, files: kib.files / 1024 };
}
