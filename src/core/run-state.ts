import type { IterationRecord, StopReason } from "./events.js";
import type { Message, Usage } from "./messages.js";

/** The version of the `RunState` shape; a stored state of another version is refused. */
export const RUN_STATE_VERSION = 1;

/**
 * Where a run stands: `running` (or interrupted: its process died while it ran), waiting for
 * approvals, for the answer to `ask_question` or for the results of the caller's own tools
 * (`clientTools`), or `completed`.
 */
export type RunStatus = "running" | "awaiting_approval" | "awaiting_answer" | "awaiting_tools" | "completed";

/**
 * A run as a plain, JSON-serialisable value, typed by its `status`: a waiting run has the calls
 * it waits on (`pending`) and the reason it waits; a completed one its stop reason and no open
 * calls. The loop (`runLoop`) changes it stage by stage; store it at any checkpoint and
 * `Agent.resume()` continues it, in this process or another. Nothing in it is a class, a
 * function or a cycle.
 */
export type RunState =
  | RunningState
  | AwaitingApprovalState
  | AwaitingAnswerState
  | AwaitingToolsState
  | CompletedState;

/** A run that has not stopped: `running`, or interrupted (its process died while it ran). */
interface RunningState extends RunStateFields {
  status: "running";
  stopReason?: undefined;
  /** The last reply's tool calls while some still lack a result. */
  pending?: PendingCalls;
}

/** A run that waits for decisions on its pending calls that need approval. */
export interface AwaitingApprovalState extends RunStateFields {
  status: "awaiting_approval";
  stopReason: "approval_required";
  pending: PendingCalls;
}

/** A run that waits for the answer to its pending `ask_question` call. */
export interface AwaitingAnswerState extends RunStateFields {
  status: "awaiting_answer";
  stopReason: "ask_question";
  pending: PendingCalls;
}

/** A run that waits for the results of its pending calls of the caller's own tools (`clientTools`). */
export interface AwaitingToolsState extends RunStateFields {
  status: "awaiting_tools";
  stopReason: "tool_calls";
  pending: PendingCalls;
}

/** A run that stopped for good: every call has its result. */
interface CompletedState extends RunStateFields {
  status: "completed";
  stopReason: FinalStopReason;
  pending?: undefined;
}

/** A run that stopped or waits: what `turn_complete` and a `RunResult` describe. */
export type StoppedState = Exclude<RunState, RunningState>;

/** Why a run stopped for good (not waiting). */
export type FinalStopReason = Exclude<StopReason, "approval_required" | "ask_question" | "tool_calls">;

/** What every run state has, whatever its `status` (its `stopReason` and `pending` depend on it). */
interface RunStateFields {
  version: typeof RUN_STATE_VERSION;
  runId: string;
  sessionId?: string;
  /**
   * The id of the model that runs it (set when it starts and each time it is resumed), so that
   * whoever resumes it can tell whether its own model is the one the run was started with.
   */
  model?: string;
  /**
   * The whole conversation: earlier turns, this run's input, and every message since. The
   * results of the last reply's tool calls follow its assistant message in the order they
   * completed, and are put in call order once the last one is in.
   */
  messages: Message[];
  /** Model calls made in this run. */
  iteration: number;
  usage: Usage;
  /** One record per model call. */
  steps: IterationRecord[];
  /** The last assistant text (or the loop-breaking tool's result, or the question asked). */
  output: string;
  refusal?: string;
  error?: { message: string; code: string };
  guards: GuardState;
  /** Tools the person allowed for the rest of the run (`a` at the prompt). */
  allowedTools: string[];
  /**
   * The JSON Schema the answer must match (the agent's `outputSchema`), kept so a run resumed by an
   * agent given no schema (e.g. `agentloop run --session <id> --approve all`) still validates it.
   */
  outputSchema?: Record<string, unknown>;
  /**
   * Tools the caller runs itself (a server's client), offered beside the agent's own: a call of one
   * pauses the run (`awaiting_tools`) until the caller sends its result. Kept so the run goes on
   * offering them when it is continued.
   */
  clientTools?: ClientTool[];
  /**
   * The W3C `traceparent` of the run's first traced `invoke_agent` span (SPEC section 11): a run
   * resumed from this state, in any process, continues that trace.
   */
  traceparent?: string;
  /**
   * The sub-agents' runs this run started (SPEC section 10), in the order they started, each with
   * its whole state: stored with this run, so a finished child is never run again and a waiting or
   * interrupted one continues where it stopped. Absent until the run delegates.
   */
  children?: ChildRun[];
}

/** A tool the caller of a run executes itself: what the model is told of it. */
export interface ClientTool {
  /** Matches `^[a-zA-Z0-9_-]{1,64}$`, and is none of the agent's own tools. */
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

/** A sub-agent's run, kept in its parent's state. */
export interface ChildRun {
  /** The sub-agent's name, as the parent delegates to it. */
  agent: string;
  parentRunId: string;
  /** The id of the parent's call that started it. */
  parentCallId: string;
  /** The parent's iteration that made that call (call ids may repeat across iterations). */
  iteration: number;
  /** 1 for a child of the top-level run. */
  depth: number;
  state: RunState;
}

export interface GuardState {
  breaker: { signature: string; count: number; description: string };
  repetition: { signature: string; count: number; name: string };
}

export interface PendingCalls {
  /** Index in `messages` of the assistant message whose `toolCalls` these are. */
  assistant: number;
  /** Decisions on calls that need approval, in the order they were taken. */
  decisions: { id: string; approved: boolean }[];
  /** Ids of the calls whose result ends the loop (a loop-breaking tool that ran). */
  breaking: string[];
}
