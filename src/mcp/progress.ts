import type { Progress } from "@modelcontextprotocol/sdk/types.js";
import type { ToolProgress } from "../tools/tool.js";

/** The least time between two progress reports of one call, so a flood stays a few events a second. */
const PROGRESS_INTERVAL_MS = 250;

/** What a call's progress notifications go through on their way to the tool's `onProgress`. */
export interface ProgressGate {
  /** Passes `progress` on, or holds it when the last report went out less than the interval ago. */
  report(progress: Progress): void;
  /**
   * The call ended: passes on what is held (unless `held` is `"drop"`, for a call whose result is
   * out already, e.g. timed out), then drops every later notification.
   */
  end(held?: "send" | "drop"): void;
}

/**
 * At most one report per `PROGRESS_INTERVAL_MS`, always the latest: a report held back goes out
 * when the interval is over (one timer per interval, none per notification), or at `end`, before
 * the call's result.
 */
export function progressGate(onProgress: (progress: ToolProgress) => void): ProgressGate {
  let sentAt = Number.NEGATIVE_INFINITY;
  let held: Progress | undefined;
  let timer: NodeJS.Timeout | undefined;
  let ended = false;
  const send = ({ progress, total, message }: Progress) => {
    sentAt = performance.now();
    held = undefined;
    onProgress({
      progress,
      ...(total !== undefined && { total }),
      ...(message !== undefined && { message }),
    });
  };
  const sendHeld = () => {
    timer = undefined;
    if (held) send(held);
  };
  return {
    report(progress) {
      if (ended) return;
      const wait = sentAt + PROGRESS_INTERVAL_MS - performance.now();
      if (wait <= 0) {
        send(progress);
        return;
      }
      held = progress;
      timer ??= setTimeout(sendHeld, wait).unref();
    },
    end(last = "send") {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      if (held && last === "send") send(held);
    },
  };
}
