// One chat turn on the terminal: the answer streamed as it comes, a spinner while the model
// thinks, tool calls and errors as progress lines, then the lines that say how the turn ended.
import type { RunHandle } from "../agent/handle.js";
import type { RunResult } from "../core/events.js";
import { approvalLine } from "./approval.js";
import { incompleteLine, progressRenderer, stopLine, summaryLine, timeLimitLine } from "./render.js";

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/** Where and how a turn is shown. */
export interface TurnView {
  write(text: string): void;
  /** Dims a note (when the output is a terminal). */
  dim(text: string): string;
  /** The output is a terminal: the spinner shows. */
  tty: boolean;
  /** `--verbose`: a summary line ends the turn. */
  verbose: boolean;
  /** The run's time limit, if any: a run aborted without `stopping` ran out of time. */
  timeLimitMs: number | undefined;
  /** The session the turn belongs to (named in the approval line). */
  sessionId: string | undefined;
}

/**
 * Runs the turn `begin` starts and shows it; `stopping` is the signal the person stops it with
 * (Ctrl+C). Resolves to the run's result.
 */
export async function renderTurn(
  begin: () => RunHandle,
  stopping: AbortSignal,
  view: TurnView,
): Promise<RunResult> {
  const { write, dim, tty, timeLimitMs } = view;
  const started = Date.now();
  const progress = progressRenderer((text) => write(`${text}\n`), tty);
  let spinner: NodeJS.Timeout | undefined;
  let frame = 0;
  const startSpinner = () => {
    if (!tty || spinner) return;
    spinner = setInterval(() => write(`\r${dim(`${SPINNER[frame++ % SPINNER.length]} thinking`)}`), 80);
  };
  const stopSpinner = () => {
    if (!spinner) return;
    clearInterval(spinner);
    spinner = undefined;
    write("\r\x1b[K");
  };
  let midLine = false;
  try {
    const run = begin();
    for await (const event of run) {
      if (event.type === "iteration_start") {
        if (event.depth === undefined) startSpinner();
        else progress(event);
      } else if (event.type === "message_delta") {
        if (event.depth !== undefined) continue; // a sub-agent's text is its call's result
        stopSpinner();
        write(event.text);
        midLine = !event.text.endsWith("\n");
      } else if (
        event.type === "tool_call" ||
        event.type === "tool_result" ||
        event.type === "error" ||
        event.type === "compaction" ||
        event.type === "approval_request"
      ) {
        stopSpinner();
        if (midLine) write("\n");
        midLine = false;
        progress(event);
      }
    }
    stopSpinner();
    const result = await run.result;
    if (midLine) write("\n");
    if (
      result.stopReason === "ask_question" ||
      result.stopReason === "task_completion" ||
      result.stopReason === "converse"
    ) {
      write(`${result.stopReason === "ask_question" ? "? " : ""}${result.text}\n`);
    }
    const timedOut = result.stopReason === "aborted" && timeLimitMs !== undefined && !stopping.aborted;
    const reason =
      result.stopReason === "approval_required"
        ? approvalLine(result.pendingApprovals ?? [], view.sessionId)
        : timedOut
          ? timeLimitLine(timeLimitMs)
          : stopLine(result.stopReason, result.iterations, result.error);
    if (reason && result.stopReason !== "ask_question")
      write(`${dim(`${reason.replace(/^agentloop: /, "(")})`)}\n`);
    const incomplete = incompleteLine(result);
    if (incomplete) write(`${dim(`${incomplete.replace(/^agentloop: /, "(")})`)}\n`);
    if (view.verbose)
      write(`${dim(`${summaryLine(result, Date.now() - started).replace(/^agentloop: /, "(")})`)}\n`);
    return result;
  } finally {
    stopSpinner();
  }
}
