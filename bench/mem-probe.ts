// Preloaded into a server under load (`node --expose-gc --import ./bench/mem-probe.ts ...`):
// appends `process.memoryUsage()` as a JSON line to the file named by AGENTLOOP_BENCH_MEMORY
// every AGENTLOOP_BENCH_MEMORY_MS (default 500). On SIGUSR2 (with --expose-gc): a full GC, a line
// tagged "gc" (what the heap still holds once the garbage is gone), then V8's last-resort GC (the
// one that also gives free heap pages back to the system, as its memory reducer does when idle)
// and a line tagged "compact".
import { appendFileSync } from "node:fs";

type Gc = (options?: { type: "major"; execution: "sync"; flavor: "last-resort" }) => void;
const file = process.env.AGENTLOOP_BENCH_MEMORY;
if (file) {
  const write = (tag: string) => {
    const m = process.memoryUsage();
    appendFileSync(file, `${JSON.stringify({ t: Date.now(), tag, ...m })}\n`);
  };
  setInterval(() => write("tick"), Number(process.env.AGENTLOOP_BENCH_MEMORY_MS ?? 500)).unref();
  process.on("SIGUSR2", () => {
    const gc = (globalThis as { gc?: Gc }).gc;
    if (!gc) return;
    gc();
    write("gc");
    gc({ type: "major", execution: "sync", flavor: "last-resort" });
    write("compact");
  });
}
