import type { AgentEvent, RunResult, StopReason } from "../core/events.js";

/** CLI exit codes per stop reason (SPEC section 2). */
export const EXIT_CODES: Record<StopReason, number> = {
  final_answer: 0,
  task_completion: 0,
  converse: 0,
  ask_question: 6,
  max_iterations: 3,
  circuit_breaker: 4,
  budget_exceeded: 7,
  aborted: 130,
  model_error: 5,
  approval_required: 8,
  // Only a server's client sends tools of its own; a run waiting on them waits as one for approvals does.
  tool_calls: 8,
};

/** Exit code for bad usage and configuration errors. */
export const USAGE_ERROR = 2;

const preview = (text: string, max = 100) => {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

/**
 * Human progress on stderr: iterations, tool calls with their durations. Returns a
 * function to feed events into.
 */
export function progressRenderer(write: (line: string) => void, color: boolean): (event: AgentEvent) => void {
  const dim = (s: string) => (color ? `\x1b[2m${s}\x1b[22m` : s);
  const red = (s: string) => (color ? `\x1b[31m${s}\x1b[39m` : s);
  const green = (s: string) => (color ? `\x1b[32m${s}\x1b[39m` : s);
  return (event) => {
    // A sub-agent's work goes under the call that delegated it, indented by its depth, with its name.
    const depth = event.depth ?? 0;
    const pad = depth === 0 ? "" : `${"    ".repeat(depth)}${event.agent} `;
    switch (event.type) {
      case "iteration_start":
        write(dim(`${pad}· iteration ${event.iteration}`));
        break;
      case "tool_call":
        write(dim(`${pad}  → ${event.name} ${preview(JSON.stringify(event.arguments))}`));
        break;
      case "tool_result": {
        const mark = event.isError ? red("✗") : green("✓");
        write(`${pad}  ${mark} ${event.name} ${dim(`(${event.durationMs} ms)`)} ${preview(event.content)}`);
        break;
      }
      case "compaction":
        write(
          dim(
            `  ⇣ compacted: ${event.summarizedMessages} older messages → one summary (${event.tokensBefore} → ${event.tokensAfter} tokens)`,
          ),
        );
        break;
      case "error":
        write(red(`${pad}  ! ${event.message}`));
        break;
      default:
        break;
    }
  };
}

/** The stderr line of a non-fatal `error` event shown even without progress (a compaction that failed), or undefined. */
export function warningLine(event: AgentEvent): string | undefined {
  return event.type === "error" && event.code === "compaction_failed"
    ? `agentloop: warning: ${event.message}`
    : undefined;
}

/** "1 iteration", "3 iterations". */
const plural = (n: number, noun: string) => `${n} ${noun}${n === 1 ? "" : "s"}`;

/** The one stderr line that explains a stop other than a plain answer (`sessionId`: how to continue it). */
export function stopLine(
  stopReason: StopReason,
  iterations: number,
  error?: { message: string; code?: string },
  sessionId?: string,
): string | undefined {
  switch (stopReason) {
    case "final_answer":
    case "task_completion":
    case "converse":
      return undefined;
    case "ask_question":
      return sessionId === undefined
        ? 'agentloop: the agent asked a question (to answer it, run the task with --session <id>; the answer then goes in agentloop run --session <id> "<answer>")'
        : `agentloop: the agent asked a question: answer it with agentloop run --session ${sessionId} "<answer>"`;
    case "max_iterations":
      return `agentloop: stopped after ${plural(iterations, "iteration")} (max_iterations); raise --max-iterations to allow more`;
    case "aborted":
      return "agentloop: aborted";
    default: {
      // The budget may be wrong, or the history wants compaction (the message names --compact when it is off).
      const fix =
        error?.code === "context_length_exceeded"
          ? "; set --max-context-tokens to the model's context size (a local server's, e.g. llama-server --ctx-size) so the history is pruned to fit"
          : "";
      return `agentloop: ${stopReason}: ${error?.message ?? "the run stopped"}${fix}`;
    }
  }
}

/**
 * The stderr warning of an answer the model did not finish (its last reply was cut short: the
 * output token limit, a content filter), or undefined. Only for `final_answer`: other stops say
 * what happened in their own line.
 */
export function incompleteLine(
  result: Pick<RunResult<unknown>, "stopReason" | "incomplete" | "steps">,
): string | undefined {
  if (!result.incomplete || result.stopReason !== "final_answer") return undefined;
  const finish = result.steps.at(-1)?.finishReason ?? result.incomplete;
  if (result.incomplete === "empty")
    return `agentloop: warning: the model's reply was empty (finish reason ${finish}): there is no answer; try again, or check the model and its server`;
  return result.incomplete === "length"
    ? `agentloop: warning: the answer was cut off at the model's output token limit (finish reason ${finish}): it is incomplete; raise the model's output limit or ask for a shorter answer`
    : `agentloop: warning: the answer was stopped by the provider's content filter (finish reason ${finish}): it is incomplete`;
}

/** "40 ms", "5 s", "2.5 s", "2 min 30 s". */
function seconds(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 100) / 10;
  if (s < 60) return `${s} s`;
  const whole = Math.round(s);
  return `${Math.floor(whole / 60)} min${whole % 60 === 0 ? "" : ` ${whole % 60} s`}`;
}

/** The stderr line of a run the time limit stopped (in place of the "aborted" of a person's Ctrl+C). */
export const timeLimitLine = (limitMs: number) =>
  `agentloop: aborted: stopped after the ${limitMs / 1000} s time limit (--timeout); raise --timeout to allow more`;

/**
 * The closing line of a run with progress shown (`--verbose`, or stderr a terminal): how it
 * stopped, its iterations, tokens in and out, its duration, and its cost when the price is known.
 */
export function summaryLine(
  result: Pick<RunResult<unknown>, "stopReason" | "iterations" | "usage">,
  durationMs: number,
): string {
  const { usage } = result;
  const cost =
    usage.costUsd === undefined
      ? ""
      : ` · $${usage.costUsd === 0 ? "0" : usage.costUsd < 0.01 ? usage.costUsd.toPrecision(2) : usage.costUsd.toFixed(2)}`;
  return `agentloop: ${result.stopReason} · ${plural(result.iterations, "iteration")} · ${usage.inputTokens} tokens in, ${usage.outputTokens} out · ${seconds(durationMs)}${cost}`;
}
