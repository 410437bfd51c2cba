// Preloaded into a server under load (`node --expose-gc --import ./bench/mem-probe.ts ...`):
// appends `process.memoryUsage()` as a JSON line to the file named by AGENTLOOP_BENCH_MEMORY
// every AGENTLOOP_BENCH_MEMORY_MS (default 500), and on SIGUSR2 runs a full GC (when exposed)
// and appends a line tagged "gc": what the heap still holds once the garbage is gone.
import { appendFileSync } from "node:fs";

const file = process.env.AGENTLOOP_BENCH_MEMORY;
if (file) {
  const write = (tag: string) => {
    const m = process.memoryUsage();
    appendFileSync(file, `${JSON.stringify({ t: Date.now(), tag, ...m })}\n`);
  };
  setInterval(() => write("tick"), Number(process.env.AGENTLOOP_BENCH_MEMORY_MS ?? 500)).unref();
  process.on("SIGUSR2", () => {
    (globalThis as { gc?: () => void }).gc?.();
    write("gc");
  });
}
