// Heap retained by one run of N iterations, measured in a fresh process:
//   node --expose-gc bench/heap-one.ts <framework> <n>
import { RUNNERS } from "./peers.ts";

const [name = "", n = "0"] = process.argv.slice(2);
const runner = RUNNERS[name];
const gc = (globalThis as { gc?: () => void }).gc;
if (!runner || !gc) throw new Error("usage: node --expose-gc bench/heap-one.ts <framework> <n>");
const run = runner(Number(n), false);
await run(); // warm-up: lazily created module state is not growth
gc();
const before = process.memoryUsage().heapUsed;
const result = await run();
gc();
const after = process.memoryUsage().heapUsed;
process.stdout.write(
  JSON.stringify({ bytesPerIteration: (after - before) / Number(n), alive: result !== undefined }),
);
