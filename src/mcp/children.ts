/**
 * A safety net for stdio servers: the pids of running children, terminated when this process
 * exits without closing them (e.g. `process.exit` after SIGINT). A clean shutdown closes each
 * toolset instead, which ends its children gracefully.
 */
const running = new Set<number>();

function terminateAll(): void {
  for (const pid of running) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // Already gone.
    }
  }
  running.clear();
}

export function trackChild(pid: number): void {
  if (running.size === 0) process.on("exit", terminateAll);
  running.add(pid);
}

export function untrackChild(pid: number): void {
  if (!running.delete(pid)) return;
  if (running.size === 0) process.off("exit", terminateAll);
}

/** Pids of the stdio servers still running in this process (for diagnostics and tests). */
export function runningChildPids(): number[] {
  return [...running];
}
