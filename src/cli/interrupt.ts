import { AgentloopError } from "../core/errors.js";
import { exitNow } from "./exit.js";
import { EXIT_CODES } from "./render.js";

/** Signals that stop a command like Ctrl+C. */
export const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/**
 * Runs `work` (starting the MCP servers) with a signal that Ctrl+C (or SIGTERM, SIGHUP) aborts,
 * so a sign-in waiting for the browser ends at once; a second signal exits at once. Rejects with
 * `AgentloopError("aborted")` (exit 130) when the signal came: `close` then releases what `work`
 * had already made.
 */
export async function interruptible<T>(
  work: (signal: AbortSignal) => Promise<T>,
  close: (made: T) => Promise<void>,
): Promise<T> {
  const controller = new AbortController();
  const onSignal = () => {
    if (controller.signal.aborted) exitNow(EXIT_CODES.aborted);
    controller.abort();
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  try {
    const made = await work(controller.signal);
    if (controller.signal.aborted) {
      await close(made);
      throw new AgentloopError("aborted", "cancelled.");
    }
    return made;
  } finally {
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
  }
}
