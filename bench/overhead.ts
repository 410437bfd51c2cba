// Overhead per iteration in process, every framework interleaved in one process (bench/peers.ts),
// and the heap one run holds, each case in a fresh child (bench/heap-one.ts).
//
// Per mode (non-streaming, streaming) and N: every framework is set up and warmed up, then runs in
// rounds, each round taking every framework in turn (the order alternating), so a burst of load
// from elsewhere on a shared machine hits them alike. A sample is one or more runs after a full
// GC, costed in CPU time of the process (user + system, the GC's threads included): other
// processes stretch wall time, not this. Reported: µs per iteration, median [min-max] over the
// rounds, and per round the ratio of agentloop's sample to the hand-written loop's beside it.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { RUNNERS } from "./peers.ts";
import { median, medianRange } from "./section.ts";

const gc = (globalThis as { gc?: () => void }).gc;
export const MODES = ["non-streaming", "streaming"] as const;
export type Mode = (typeof MODES)[number];
export const FLOOR = "hand-written loop";

/** A framework's samples at one N (µs of CPU per iteration), or why it has none. */
export type Cell = { samples: number[]; single?: true } | { skipped: string };
export interface Overhead {
  sizes: number[];
  cells: Record<Mode, Record<string, Record<number, Cell>>>;
  /** agentloop's sample over the floor's, per round, by mode and N. */
  ratios: Record<Mode, Record<number, number[]>>;
  rounds: number;
}

/** One sample: `loops` runs, CPU µs per iteration. */
async function sample(run: () => Promise<unknown>, loops: number, n: number): Promise<number> {
  gc?.();
  // The GC's helper threads go on sweeping after gc() returns; their CPU is the previous sample's.
  await new Promise((resolve) => setTimeout(resolve, 20));
  const started = process.cpuUsage();
  for (let i = 0; i < loops; i++) await run();
  const { user, system } = process.cpuUsage(started);
  return (user + system) / (loops * n);
}

/** Wall ms and CPU µs of one run (a warm-up that also tells how many runs a sample needs). */
async function timed(run: () => Promise<unknown>): Promise<{ ms: number; cpu: number }> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await run();
  const used = process.cpuUsage(cpu);
  return { ms: performance.now() - started, cpu: used.user + used.system };
}

/**
 * `rounds` rounds per mode and N. A framework whose run is estimated (from its cost at the previous
 * N and how that grew) or found to take over `maxRunMs` is skipped at that N and the larger ones; a
 * slow one takes part in fewer rounds (at least 3), so that no cell takes much over 10 s.
 */
export async function measureOverhead(sizes: number[], rounds: number, maxRunMs: number): Promise<Overhead> {
  const result: Overhead = {
    sizes,
    cells: { "non-streaming": {}, streaming: {} },
    ratios: { "non-streaming": {}, streaming: {} },
    rounds,
  };
  for (const mode of MODES) {
    const last: Record<string, { us: number; growth: number }> = {};
    for (const name of Object.keys(RUNNERS)) result.cells[mode][name] = {};
    for (const n of sizes) {
      const active: { name: string; run: () => Promise<unknown>; loops: number; rounds: number }[] = [];
      for (const [name, runner] of Object.entries(RUNNERS)) {
        const cells = result.cells[mode][name] as Record<number, Cell>;
        if (Object.values(cells).some((c) => "skipped" in c)) {
          cells[n] = { skipped: "skipped" };
          continue;
        }
        // The estimate assumes the cost per iteration keeps growing, at least as the square root of
        // N's step (the Agents SDK's turns from quadratic only past N = 100).
        const before = last[name];
        const step = Math.sqrt(n / (sizes[sizes.indexOf(n) - 1] ?? n));
        const estimateMs = before ? (before.us * Math.max(before.growth, step) * n) / 1000 : 0;
        if (estimateMs > maxRunMs) {
          cells[n] = {
            skipped: Number.isFinite(estimateMs)
              ? `skipped (about ${(estimateMs / 1000).toFixed(0)} s a run)`
              : "skipped (too slow at the previous N)",
          };
          continue;
        }
        const run = runner(n, mode === "streaming");
        // Warm-up: the JIT settles within a few hundred ms of runs; a run of over a second is its own
        // warm-up. A first run over `maxRunMs` (the estimate missed a quadratic growth) is the cell's
        // only sample, and the framework stops at this N.
        let ms: number;
        try {
          const first = await timed(run);
          ms = first.ms;
          if (ms > maxRunMs) {
            cells[n] = { samples: [first.cpu / n], single: true };
            last[name] = { us: first.cpu / n, growth: Number.POSITIVE_INFINITY };
            process.stderr.write(`${mode} ${name} N=${n}: one run of ${(ms / 1000).toFixed(0)} s\n`);
            continue;
          }
          for (let spent = ms, i = 1; i < 50 && ms < 1_000 && (i < 2 || spent < 300); i++) {
            ms = (await timed(run)).ms;
            spent += ms;
          }
        } catch (error) {
          cells[n] = { skipped: `failed: ${(error as Error).message.split("\n")[0]}` };
          continue;
        }
        active.push({
          name,
          run,
          loops: Math.max(1, Math.round(20 / Math.max(ms, 0.01))),
          rounds: Math.max(3, Math.min(rounds, Math.floor(10_000 / Math.max(ms, 1)))),
        });
        cells[n] = { samples: [] };
      }
      const ratios: number[] = [];
      for (let round = 0; round < rounds; round++) {
        const order = round % 2 ? active.toReversed() : active;
        const got: Record<string, number> = {};
        for (const a of order) {
          if (round >= a.rounds) continue;
          got[a.name] = await sample(a.run, a.loops, n);
          ((result.cells[mode][a.name] as Record<number, Cell>)[n] as { samples: number[] }).samples.push(
            got[a.name] as number,
          );
        }
        const ours = got.agentloop;
        const floor = got[FLOOR];
        if (ours !== undefined && floor !== undefined) ratios.push(ours / floor);
      }
      result.ratios[mode][n] = ratios;
      for (const a of active) {
        const cell = (result.cells[mode][a.name] as Record<number, Cell>)[n] as { samples: number[] };
        const us = median(cell.samples);
        const before = last[a.name];
        last[a.name] = { us, growth: before ? Math.max(1, us / before.us) : 1 };
        process.stderr.write(`${mode} ${a.name} N=${n}: ${us.toFixed(2)} µs/iteration\n`);
      }
    }
  }
  return result;
}

export interface Heap {
  /** Bytes per iteration, or why missing. */
  held: number | string;
  retained: number | string;
}

/** The heap of one run of N iterations, in a fresh process (bench/heap-one.ts). */
export function heapOf(name: string, n: number, timeoutMs: number): Heap {
  const child = spawnSync(
    process.execPath,
    [
      "--expose-gc",
      // Bytecode of functions not run lately is dropped after a few GCs: it would read as the run freeing memory.
      "--no-flush-bytecode",
      "--max-old-space-size=4096",
      fileURLToPath(new URL("./heap-one.ts", import.meta.url)),
      name,
      String(n),
    ],
    { encoding: "utf8", timeout: timeoutMs, killSignal: "SIGKILL" },
  );
  try {
    const { held, retained } = JSON.parse(child.stdout) as { held: number; retained: number };
    return { held, retained };
  } catch {
    const why = /heap out of memory/.test(child.stderr)
      ? "out of memory (4 GB)"
      : child.signal
        ? "too slow"
        : "failed";
    return { held: why, retained: why };
  }
}

const fmtCell = (cell: Cell | undefined, digits: number) =>
  cell === undefined
    ? "-"
    : "skipped" in cell
      ? cell.skipped
      : cell.single
        ? `${cell.samples[0]?.toFixed(digits)} (one run)`
        : medianRange(cell.samples, digits);

/** The overhead tables, one per mode. */
export function overheadMarkdown(o: Overhead): string {
  const head = `| framework | ${o.sizes.map((n) => `N = ${n.toLocaleString("en")}`).join(" | ")} |\n| --- | ${o.sizes.map(() => "---:").join(" | ")} |`;
  return MODES.map((mode) => {
    const rows = Object.entries(o.cells[mode]).map(
      ([name, cells]) => `| ${name} | ${o.sizes.map((n) => fmtCell(cells[n], 2)).join(" | ")} |`,
    );
    const peers = Object.keys(o.cells[mode]).filter((name) => name !== "agentloop" && name !== FLOOR);
    const vs = (peer: string, n: number) => {
      const theirs = o.cells[mode][peer]?.[n];
      const ours = o.cells[mode].agentloop?.[n];
      if (!theirs || !ours || "skipped" in theirs || "skipped" in ours) return "-";
      return `${(median(theirs.samples) / median(ours.samples)).toFixed(0)}x`;
    };
    const ratioRows = [
      `| agentloop / hand-written (per round) | ${o.sizes.map((n) => medianRange(o.ratios[mode][n] ?? [], 2, "x")).join(" | ")} |`,
      ...peers.map((peer) => `| ${peer} / agentloop | ${o.sizes.map((n) => vs(peer, n)).join(" | ")} |`),
    ];
    return `### Overhead per iteration, ${mode} (µs of CPU, median [min-max] of ${o.rounds} rounds; lower is better)\n\n${head}\n${rows.join("\n")}\n${ratioRows.join("\n")}`;
  }).join("\n\n");
}

/** The heap table: held and retained bytes per iteration by framework and N. */
export function heapMarkdown(sizes: number[], heap: Record<string, Record<number, Heap>>): string {
  const fmt = (v: number | string | undefined) => (typeof v === "number" ? v.toFixed(0) : (v ?? "-"));
  const rows = Object.entries(heap).map(
    ([name, byN]) =>
      `| ${name} | ${sizes.map((n) => `${fmt(byN[n]?.held)} | ${fmt(byN[n]?.retained)}`).join(" | ")} |`,
  );
  return `### Heap of one run, per iteration (bytes; bench/heap-one.ts, each case in a fresh process)

"Held": live while the run is in progress, as the model is asked for its last reply, after a full
GC: the run's history and state. "Retained": still live once the run's result (and the agent) are
dropped and a full GC ran: what the framework keeps beyond a run. Both against a baseline taken
after a warm-up run whose result was already out of reach. A single reading varies by about
100 KB, i.e. ±100 bytes per iteration at N = 1,000 and ±10 at N = 10,000.

| framework | ${sizes.map((n) => `held, N = ${n.toLocaleString("en")} | retained, N = ${n.toLocaleString("en")}`).join(" | ")} |
| --- | ${sizes.map(() => "---: | ---:").join(" | ")} |
${rows.join("\n")}`;
}

/** Median µs per iteration by framework and N, for the chart (bench/svg.ts). */
export function chartData(o: Overhead, mode: Mode): Record<string, Record<string, number | undefined>> {
  return Object.fromEntries(
    Object.entries(o.cells[mode]).map(([name, cells]) => [
      name,
      Object.fromEntries(
        o.sizes.map((n) => {
          const cell = cells[n];
          return [n, cell && "samples" in cell ? median(cell.samples) : undefined];
        }),
      ),
    ]),
  );
}
