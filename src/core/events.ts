import type { Message, Usage } from "./messages.js";
import type { RunState } from "./run-state.js";

/** Why a run ended (SPEC section 2). Every run ends with exactly one. */
export type StopReason =
  | "final_answer"
  | "task_completion"
  | "converse"
  | "ask_question"
  | "max_iterations"
  | "circuit_breaker"
  | "budget_exceeded"
  | "aborted"
  | "model_error"
  | "approval_required"
  /** The model called tools the caller runs itself (`RunOptions.clientTools`): the run waits for their results. */
  | "tool_calls";

/** A tool call waiting for a person's decision. */
export interface PendingApproval {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  /** A sub-agent's call (SPEC section 10): the agent's name, as its parent delegates to it. */
  agent?: string;
  /** A sub-agent's call: the id of the child run that made it. */
  runId?: string;
}

/**
 * How a run stopped, on `turn_complete` and `RunResult`: `pendingApprovals` is there exactly when
 * `stopReason` is `approval_required`, so checking the reason narrows it to a list.
 */
export type StopOutcome =
  | {
      stopReason: "approval_required";
      /** The calls waiting for a decision, in call order. */
      pendingApprovals: PendingApproval[];
    }
  | { stopReason: Exclude<StopReason, "approval_required">; pendingApprovals?: undefined };

/** The {@link StopOutcome} of a result or event alone: its reason, and its calls when it waits on some. */
export function stopOutcomeOf(from: StopOutcome): StopOutcome {
  return from.stopReason === "approval_required"
    ? { stopReason: from.stopReason, pendingApprovals: from.pendingApprovals }
    : { stopReason: from.stopReason };
}

/** The events of a run without the `runId` every one of them carries. */
export type AgentEventBody =
  | { type: "iteration_start"; iteration: number }
  | { type: "thinking"; text: string }
  | { type: "message_delta"; text: string }
  /** `refusal`: set when the model declined to answer (see `RunResult.refusal`). */
  | { type: "message"; content: string; refusal?: string }
  | { type: "tool_call"; id: string; name: string; arguments: Record<string, unknown> }
  | { type: "tool_progress"; id: string; name: string; progress: number; total?: number; message?: string }
  | { type: "tool_result"; id: string; name: string; content: string; isError: boolean; durationMs: number }
  | { type: "approval_request"; id: string; name: string; arguments: Record<string, unknown> }
  /**
   * The older history was replaced by one summary (SPEC section 13): `summarizedMessages` messages,
   * the request's tokens before and after by the agent's counter, and the summary call's `usage`
   * (already in the run's).
   */
  | {
      type: "compaction";
      summarizedMessages: number;
      tokensBefore: number;
      tokensAfter: number;
      usage: Usage;
    }
  | ({
      type: "turn_complete";
      iterations: number;
      output: string;
      usage: Usage;
      sessionId?: string;
      /** The run's OpenTelemetry trace id, when it is traced (SPEC section 11). */
      traceId?: string;
      /** Set when the last reply was cut short (see `RunResult.incomplete`). */
      incomplete?: "length" | "content_filter" | "empty";
    } & StopOutcome)
  | { type: "error"; message: string; code: string };

/**
 * Where a sub-agent's event comes from (SPEC section 10): set on every event of a child run (whose
 * `runId` is the child's), absent on the top-level run's own events.
 */
interface EventOrigin {
  /** The run that delegated: the child's parent. */
  parentRunId?: string;
  /** The id of the parent's call (`delegate_task` or an agent tool) that started the child. */
  parentCallId?: string;
  /** The sub-agent's name. */
  agent?: string;
  /** 1 for a child of the top-level run, 2 for its children, and so on. */
  depth?: number;
}

/** The events of a run (SPEC section 3). `type` and the listed fields are a public contract. */
export type AgentEvent = AgentEventBody & { runId: string } & EventOrigin;

export type AgentEventType = AgentEvent["type"];

/**
 * What `agent.run()` returns; `stream()` returns the same value when it finishes. `Output` is the
 * type of `output`: the answer text, or with an `outputSchema` the validated object (or undefined).
 * `stopReason` and `pendingApprovals` are a {@link StopOutcome}.
 */
export type RunResult<Output = string> = RunResultFields<Output> & StopOutcome;

/** The fields of every {@link RunResult}, whatever its stop reason. */
export interface RunResultFields<Output = string> {
  runId: string;
  /** Set when the run belongs to a session. */
  sessionId?: string;
  /**
   * The run as a value: pass it to `agent.resume()` to continue a run that waits for approvals
   * or an answer, or store it (it is plain JSON).
   */
  state: RunState;
  /**
   * The final answer, or the last assistant text for other stops (the question for `ask_question`).
   * With an `outputSchema`: the validated (and, for a zod schema, parsed) object when the run ended
   * with an answer (`final_answer`, `task_completion`), else `undefined`.
   */
  output: Output;
  /**
   * `output` as text, whatever the schema: the answer (with an `outputSchema`, the answer object as
   * compact JSON) or the last assistant text. What `turn_complete.output` carries.
   */
  text: string;
  /** Model calls made in this run. */
  iterations: number;
  /** The whole conversation, previous turns included; pass it back as `history` to continue. */
  messages: Message[];
  usage: Usage;
  /** One record per model call, for metrics. */
  steps: IterationRecord[];
  /**
   * Set when the model declined to answer (OpenAI `refusal`, Anthropic `stop_reason: "refusal"`):
   * the refusal text, which is then also the `output` when the reply had no other text. The stop
   * reason stays what the loop saw (usually `final_answer`); this field is how a caller tells a
   * refusal from an answer. With an `outputSchema` there is no answer to give: the run ends
   * `model_error` (error code "refusal", its message quoting the refusal) and `output` is
   * undefined. Only the last reply's refusal counts.
   */
  refusal?: string;
  /**
   * Set when the last reply was cut short (see `IterationRecord.incomplete`): an answer that ends
   * `final_answer` with it is truncated ("empty": there is none). With an `outputSchema` a cut-off
   * answer is not taken: the model is asked again, told it was cut off.
   */
  incomplete?: "length" | "content_filter" | "empty";
  /** Set when the run ended on an error (model_error, circuit_breaker, ...). */
  error?: { message: string; code: string };
}

/** What one iteration did and cost. */
export interface IterationRecord {
  iteration: number;
  /** Wall time of the whole iteration: the model call and its tool calls. */
  durationMs: number;
  /** Wall time of the model call alone, until its reply was complete. */
  modelMs: number;
  /** The provider's finish reason ("stop", "tool_calls", "length", ...). */
  finishReason: string;
  /**
   * Set when the reply was cut short: "length" (the model's output token limit) or
   * "content_filter" (the provider's filter), whatever the provider calls it; or "empty" when it
   * had nothing at all (no text but whitespace, no tool call, no refusal): an answer it ends is
   * no answer.
   */
  incomplete?: "length" | "content_filter" | "empty";
  usage: Usage;
  toolCalls: number;
  toolErrors: number;
}
