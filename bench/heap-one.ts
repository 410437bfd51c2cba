// The heap one run of N iterations holds, in a fresh process per case:
//   node --expose-gc bench/heap-one.ts <framework> <n>
// Prints {"held": bytes per iteration, "retained": bytes per iteration}:
// - held: live while the run is in progress, taken as the model is asked for its last reply
//   (everything the run keeps then: its history and state), after a full GC;
// - retained: still live after the run's result is dropped and a full GC (state the framework
//   keeps beyond a run; about 0 unless something leaks or caches per run).
// Held is against the heap with the runner set up (agent, tools, model), retained against the
// heap before it was (the runner is dropped too); both after a warm-up run whose result is
// already out of reach.
import { RUNNERS } from "./peers.ts";

const [name = "", n = "0"] = process.argv.slice(2);
const runner = RUNNERS[name];
const gc = (globalThis as { gc?: () => void }).gc;
if (!runner || !gc) throw new Error("usage: node --expose-gc bench/heap-one.ts <framework> <n>");
const N = Number(n);

const settle = () => new Promise((resolve) => setTimeout(resolve, 10));
const heap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

/**
 * Warms the framework up: lazily created module state and the JIT's optimised code (which lives in
 * the heap) are not the run's. One run when it takes over a second, else two at least, then up to
 * five within 1.5 s; nothing of them stays reachable.
 */
async function warmUp(): Promise<void> {
  const run = runner?.(N, false);
  const started = performance.now();
  await run?.();
  // A run of over a second is its own warm-up (1,000 iterations and more); shorter ones get more.
  if (performance.now() - started > 1_000) return;
  for (let i = 1; i < 5 && (i < 2 || performance.now() - started < 1_500); i++) await run?.();
}
await warmUp();

let held = Number.NaN;
/** One run with its own runner; only the result escapes, and the caller drops it. */
async function once(): Promise<unknown> {
  let baseline = 0;
  const run = (runner as NonNullable<typeof runner>)(N, false, () => {
    held = heap() - baseline;
  });
  baseline = heap();
  return run();
}
/** The heap after a full GC, the median of three readings a little apart (single readings vary by ~100 KB). */
async function steady(): Promise<number> {
  const readings: number[] = [];
  for (let i = 0; i < 3; i++) {
    await settle();
    readings.push(heap());
  }
  return readings.sort((a, b) => a - b)[1] as number;
}
const before = await steady();
let result: unknown = await once();
await settle();
const alive = result !== undefined;
result = undefined;
const retained = (await steady()) - before;
process.stdout.write(JSON.stringify({ held: held / N, retained: retained / N, alive }));
