/**
 * The process trees of stdio servers. Outside Windows each server is started as the leader of
 * its own process group, so a signal reaches everything it started (`npx` -> `sh` -> `node`).
 *
 * A safety net too: the pids of running children, signalled when this process exits without
 * closing them (e.g. `process.exit` after SIGINT). A clean shutdown closes each toolset instead,
 * which ends its children gracefully and then forcibly.
 */
const running = new Set<number>();

const GROUPS = process.platform !== "win32";

/** Sends `signal` to the process tree led by `pid`. False when nothing of it is left. */
export function signalTree(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(GROUPS ? -pid : pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Whether children are started in their own process group (everywhere but Windows). */
export const ownProcessGroup = GROUPS;

function terminateAll(): void {
  for (const pid of running) signalTree(pid, "SIGTERM");
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
