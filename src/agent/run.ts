import type { AgentEvent, PendingApproval } from "../core/events.js";
import type { Redactor } from "../core/redact.js";
import type { FinalStopReason, RunState, StoppedState } from "../core/run-state.js";
import { type ContextMemo, type LoopContext, newContextMemo } from "../memory/prune.js";
import type { Model, ModelRequest, ToolChoice, ToolSpec } from "../models/adapter.js";
import type { AttemptObserver } from "../models/attempts.js";
import type { ModelPrice } from "../models/pricing.js";
import type { Recorder } from "../record/recorder.js";
import type { ExecuteOptions } from "../tools/execute.js";
import type { Tool } from "../tools/tool.js";
import type { RunTrace } from "../tracing/run-trace.js";
import { RunClock } from "./clock.js";
import type { LoopCompaction } from "./compact.js";
import type { TreeNode } from "./delegate.js";
import { OUTPUT_NAME, type OutputSpec, outputInstructions } from "./output.js";
import { type Budget, type Mode, stablePrompt, type ToolProtocol } from "./prompt.js";
import { breakerMessage } from "./stop.js";

/** A person's answer to `onApproval`: run it, decline it, or allow the tool for the rest of the run. */
export type ApprovalDecision = "approve" | "deny" | "always";

/** Everything the loop needs, fixed for a run. Defaults are applied by `Agent`. */
export interface LoopOptions {
  /** The model, already wrapped for the tool protocol. */
  model: Model;
  instructions: string;
  mode: Mode;
  toolProtocol: ToolProtocol;
  /** Tools in the order they are offered to the model (loop-breaking ones included). */
  tools: readonly Tool[];
  maxIterations: number;
  toolConcurrency: number;
  toolTimeoutMs: number;
  maxToolResultChars: number;
  /** Largest image or audio part of a tool result or an input (decoded bytes). */
  maxImageBytes: number;
  circuitBreakerThreshold: number;
  repetitionThreshold: number;
  /** Token and cost limits (the time limit arrives through `signal`); warnings at 80%. */
  budget: Budget;
  /** Shapes what is sent to fit the context window, and bounds each tool result; the history stays whole. */
  context?: LoopContext;
  /** Compaction by summary (SPEC section 13); off when undefined. Needs the built-in `context`. */
  compaction?: LoopCompaction;
  /**
   * The schema the answer must match: in natural mode a final answer that does not validate goes
   * back to the model (and counts toward the circuit breaker); in explicit mode it is the schema of
   * `task_completion`'s `result` (the tool is built for it by `Agent`).
   */
  output?: OutputSpec;
  /** The model's price, to count cost; required for a cost budget. */
  price?: ModelPrice;
  /**
   * Removes configured secrets from all the run keeps and tells: replies (text, refusals, tool
   * call arguments, unsigned thinking), streamed deltas, tool results, progress and error messages.
   */
  redact?: Redactor;
  /** The client tools' choice for the run's first model call, and `parallel_tool_calls` for all (set only with client tools). */
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  /** Asks a person about a call that needs approval; without it such calls wait in the state. */
  onApproval?: ((call: PendingApproval) => ApprovalDecision | Promise<ApprovalDecision>) | undefined;
}

/**
 * What comes after an iteration. Stopping is data: the loop never throws for model or tool
 * failures, it says why it stops.
 */
export type Next = { type: "continue" } | Stop;

/**
 * What ends the loop: the run stops for good, or waits (for approvals, the answer to `ask_question`
 * or the results of client tools' calls; the state says which calls).
 */
export type Stop =
  | { type: "stop"; stopReason: FinalStopReason; error?: { message: string; code: string } }
  | { type: "wait"; for: "approval" | "answer" | "tools" };

/**
 * A run's loop: its options and what is derived from them once. It is also what its tool calls
 * run with (`ExecuteOptions`): one object per live run rather than several.
 */
export interface Run extends ExecuteOptions {
  /** Shared by the runs of an agent that have nothing of their own. */
  options: LoopOptions;
  /** Aborts the run (its own controller, the caller's signal, the time limit). */
  signal: AbortSignal;
  /**
   * Called at every checkpoint (SPEC section 9): after the user's input, after a reply with tool
   * calls (before they start), after each tool result, after each iteration and at the stop. The
   * run waits for it, so a store can make each one durable. A throw ends the run (rejects).
   */
  checkpoint: ((state: RunState) => Promise<void>) | undefined;
  tools: ReadonlyMap<string, Tool>;
  nativeTools: readonly ToolSpec[];
  /** The `output` of every request: set in natural mode for a model with `structuredOutput`. */
  requestOutput: ModelRequest["output"];
  /**
   * What the next requests say of tool calls (client tools only; else undefined): `toolChoice`
   * for the next one alone, `parallelToolCalls` for all.
   */
  choice: Pick<ModelRequest, "toolChoice" | "parallelToolCalls"> | undefined;
  stable: string;
  /** Whether the budget has a limit (else nothing is counted against it). */
  budgeted: boolean;
  /** What every model call gets: built once (with the run's trace as `attempts` when it is traced). */
  streamOptions: { signal: AbortSignal; attempts?: AttemptObserver };
  /** The context manager's counts for this run's history. */
  contextMemo: ContextMemo;
  /**
   * By call id, the arguments as the model sent them of the calls kept with secrets redacted:
   * what those tools run with, in this process only (a run resumed from its state runs them with
   * the arguments as kept). Taken when the calls are prepared.
   */
  realArguments: Map<string, string> | undefined;
  /** The arguments of the last tool call the repetition guard saw in this process (see `recordCall`). */
  lastArguments: string | undefined;
  /** The run's clock (reuses a reading where the time cannot have moved). */
  clock: RunClock;
  startedAt: number;
  /** When the current iteration started in this process. */
  iterationStartedAt: number;
  /** The run's spans (SPEC section 11): set by `Agent` when something records them. */
  trace: RunTrace | undefined;
  /** Where its tool results are recorded (SPEC section 12): set by `Agent` for a recorded run. */
  recorder: Recorder | undefined;
  /** Its place in a delegation tree: set for an agent with sub-agents and for a sub-agent's run (delegate.ts). */
  tree: TreeNode | undefined;
}

/**
 * What a run derives from its tool list, shared by every run of the same list (an agent with a
 * fixed list passes the same array to all its runs): thousands of live runs hold one copy, and
 * the context manager counts the tool schemas once.
 */
const derived = new WeakMap<
  readonly Tool[],
  { specs: readonly ToolSpec[]; byName: ReadonlyMap<string, Tool> }
>();

function toolsOf(tools: readonly Tool[]): { specs: readonly ToolSpec[]; byName: ReadonlyMap<string, Tool> } {
  let found = derived.get(tools);
  if (!found) {
    const specs = tools.map(({ name, description, parameters }) => ({ name, description, parameters }));
    found = { specs, byName: new Map(tools.map((tool) => [tool.name, tool])) };
    derived.set(tools, found);
  }
  return found;
}

/** What a run derives from its options: made once per options object (shared by an agent's runs). */
interface Derived {
  tools: ReadonlyMap<string, Tool>;
  nativeTools: readonly ToolSpec[];
  requestOutput: ModelRequest["output"];
  stable: string;
  budgeted: boolean;
}

const derivedOf = new WeakMap<LoopOptions, Derived>();

function derive(options: LoopOptions): Derived {
  let found = derivedOf.get(options);
  if (found) return found;
  const { specs, byName } = toolsOf(options.tools);
  const answerSchema = options.mode === "natural" ? options.output : undefined;
  const native = answerSchema !== undefined && options.model.structuredOutput === true;
  const { instructions, mode, toolProtocol } = options;
  let stable = stablePrompt({ instructions, mode, toolProtocol, tools: specs });
  if (answerSchema && !native)
    stable = [stable, outputInstructions(answerSchema)].filter(Boolean).join("\n\n");
  found = {
    tools: byName,
    nativeTools: options.toolProtocol === "native" ? specs : [],
    requestOutput: native ? { name: OUTPUT_NAME, schema: answerSchema.jsonSchema } : undefined,
    stable,
    budgeted: Object.values(options.budget).some((limit) => limit !== undefined),
  };
  derivedOf.set(options, found);
  return found;
}

/** The system prompt (without a run's warnings) and native tool list of every request with `options`. */
export function fixedPart(options: LoopOptions): { system: string; tools: readonly ToolSpec[] } {
  const { stable, nativeTools } = derive(options);
  return { system: stable, tools: nativeTools };
}

/**
 * The loop of one run. `ownSignal`: `signal` fires only through the run's handle, which then
 * settles the pending tool calls itself (`abortCalls`), so they need no abort listener.
 */
export function startRun(
  options: LoopOptions,
  signal: AbortSignal,
  checkpoint: ((state: RunState) => Promise<void>) | undefined,
  ownSignal = false,
): Run {
  const { tools, nativeTools, requestOutput, stable, budgeted } = derive(options);
  const clock = new RunClock();
  const now = clock.now();
  return {
    options,
    signal,
    checkpoint,
    tools,
    nativeTools,
    requestOutput,
    choice:
      options.toolChoice !== undefined || options.parallelToolCalls !== undefined
        ? { toolChoice: options.toolChoice, parallelToolCalls: options.parallelToolCalls }
        : undefined,
    stable,
    budgeted,
    streamOptions: { signal },
    concurrency: options.toolConcurrency,
    timeoutMs: options.toolTimeoutMs,
    maxResultChars: options.maxToolResultChars,
    maxImageBytes: options.maxImageBytes,
    redact: options.redact?.text,
    waiters: undefined,
    ownSignal,
    contextMemo: newContextMemo(),
    realArguments: undefined,
    lastArguments: undefined,
    clock,
    startedAt: now,
    iterationStartedAt: now,
    trace: undefined,
    recorder: undefined,
    tree: undefined,
  };
}

/** Where a run's events go besides being yielded. */
export interface Sink {
  /** Sees every event at the point it happens (`onEvent`). */
  emit(event: AgentEvent): void;
  /** Nobody iterates: events are only emitted, and one `next()` runs the run to its end. */
  readonly drained: boolean;
  /** Drained, and `emit` passes events to nobody: the loop need not make them. */
  readonly quiet: boolean;
  /** The run stopped or waits, its state final and stored: called before its last events go out. */
  ended(state: StoppedState): void;
  /** A checkpoint or `emit` threw: the run is over (the error goes on to the reader). */
  failed(error: unknown): void;
}

export const CONTINUE: Next = { type: "continue" };

export function circuitBreaker(state: RunState): Stop {
  return {
    type: "stop",
    stopReason: "circuit_breaker",
    error: { message: breakerMessage(state.guards.breaker), code: "circuit_breaker" },
  };
}
