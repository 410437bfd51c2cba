// Measures one framework at one N in a process of its own, so a peer that runs out of memory
// (some keep a copy of the whole history per step) cannot take the suite down with it.
//   node --max-old-space-size=4096 bench/measure-one.ts <framework> <n> <plain|streaming>
import { RUNNERS } from "./peers.ts";

const [name = "", n = "0", mode = "plain"] = process.argv.slice(2);
const runner = RUNNERS[name];
if (!runner) throw new Error(`unknown framework ${name}`);
const run = runner(Number(n), mode === "streaming");
await run(); // warm-up
const started = performance.now();
await run();
process.stdout.write(JSON.stringify({ usPerIteration: ((performance.now() - started) * 1000) / Number(n) }));
