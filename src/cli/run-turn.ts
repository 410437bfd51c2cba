// One run of `agentloop run`, from its first event to its last line: the event stream (`--json`)
// or the answer on stdout, progress and the stop's one line on stderr.
import type { RunHandle } from "../agent/handle.js";
import type { RunState } from "../agent/state.js";
import type { AgentEvent, RunResult } from "../core/events.js";
import { StoreError } from "../store/types.js";
import { approvalLine } from "./approval.js";
import type { CliFlags } from "./config.js";
import {
  incompleteLine,
  progressRenderer,
  stopLine,
  summaryLine,
  timeLimitLine,
  warningLine,
} from "./render.js";

export interface TurnOptions {
  flags: CliFlags;
  /** The run's time limit (`--timeout`), to name when it stopped the run. */
  timeLimitMs?: number | undefined;
  /** True when the command itself stopped the run (a signal, the session lost): not the time limit. */
  stoppedHere(): boolean;
  /** The error to report (a store failure as its one line) when the run failed (a checkpoint threw). */
  failure(error: unknown): unknown;
}

/** Runs `run` to its end, printing as `agentloop run` does; resolves to its result. */
export async function runTurn(run: RunHandle, options: TurnOptions): Promise<RunResult> {
  const { flags } = options;
  const started = Date.now();
  const showProgress = flags.verbose === true || (process.stderr.isTTY === true && !flags.json);
  const progress = showProgress
    ? progressRenderer((line) => process.stderr.write(`${line}\n`), process.stderr.isTTY === true)
    : undefined;
  let result: RunResult;
  try {
    for await (const event of run) {
      if (flags.json) await writeOut(`${JSON.stringify(event)}\n`);
      if (progress) progress(event);
      else if (event.type === "error" && !flags.json) {
        const warning = warningLine(event);
        if (warning) process.stderr.write(`${warning}\n`);
      }
    }
    result = await run.result;
  } catch (error) {
    const reported = options.failure(error);
    // The event stream ends as every run's does, even when the store failed under it.
    if (flags.json) await writeOut(failedEvents(run.state, error, reported));
    throw reported;
  }
  // With an output schema stdout carries the answer's JSON or nothing: no question, narration,
  // invalid answer or refusal (the stop line on stderr says what happened).
  const typed = result.state.outputSchema !== undefined;
  const toStdout = !typed || result.output !== undefined;
  // How to continue a run that waits for approvals goes to stderr even with --json.
  if (result.stopReason === "approval_required") {
    if (!flags.json && result.text !== "" && toStdout) await writeOut(`${result.text}\n`);
    process.stderr.write(`${approvalLine(result.pendingApprovals ?? [], result.sessionId)}\n`);
  } else if (!flags.json) {
    if (!toStdout) {
      if (result.stopReason === "ask_question") process.stderr.write(`${result.text}\n`);
    } else if (result.text !== "" || result.stopReason === "final_answer") await writeOut(`${result.text}\n`);
    const timedOut =
      result.stopReason === "aborted" && options.timeLimitMs !== undefined && !options.stoppedHere();
    const line = timedOut
      ? timeLimitLine(options.timeLimitMs as number)
      : stopLine(result.stopReason, result.iterations, result.error, result.sessionId);
    if (line) process.stderr.write(`${line}\n`);
  }
  const incomplete = incompleteLine(result);
  if (incomplete && !flags.json) process.stderr.write(`${incomplete}\n`);
  if (showProgress) process.stderr.write(`${summaryLine(result, Date.now() - started)}\n`);
  return result;
}

/**
 * The last events of a run that failed instead of stopping (its store failed, or a bug): an
 * `error`, then the one `turn_complete` every run ends with, `aborted`: the run stopped short of
 * its end (with a session, `--resume` continues it from its last stored checkpoint).
 */
function failedEvents(state: RunState, error: unknown, reported: unknown): string {
  const { runId } = state;
  const code =
    error instanceof StoreError
      ? error.code === "session_busy"
        ? "session_lost"
        : "store_unavailable"
      : "internal_error";
  const message = reported instanceof Error ? reported.message : String(reported);
  const events: AgentEvent[] = [
    { type: "error", message, code, runId },
    {
      type: "turn_complete",
      stopReason: "aborted",
      iterations: state.iteration,
      output: state.output,
      usage: { ...state.usage },
      ...(state.sessionId !== undefined && { sessionId: state.sessionId }),
      runId,
    },
  ];
  return events.map((event) => `${JSON.stringify(event)}\n`).join("");
}

/** Writes to stdout, waiting for a full pipe to drain. */
function writeOut(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once("drain", resolve);
  });
}
