import { errorMessage } from "../core/errors.js";
import type { AgentEvent } from "../core/events.js";
import { type MediaPart, nestedTooDeep, type ToolCall, tooDeepMessage, trimmed } from "../core/messages.js";
import { RunWaiters, Waiter } from "./awaited.js";
import { outcomeOf } from "./outcome.js";
import type { Tool, ToolContext, ToolProgress } from "./tool.js";

export { serialiseResult } from "./outcome.js";

/** A tool call after look-up, JSON parsing and validation (stage 1 of 3). */
export interface PreparedCall {
  index: number;
  call: ToolCall;
  /** The parsed arguments object ({} when they were not valid JSON). */
  arguments: Record<string, unknown>;
  tool?: Tool;
  /** The validated arguments, when preparation succeeded. */
  value?: unknown;
  /** Why the call cannot run; it becomes the error result. */
  error?: string;
  /** The arguments are not one JSON object (`error` says why): no provider may be sent them again. */
  malformed?: true;
}

/** Progress a running call reported. */
export interface CallProgress extends ToolProgress {
  type: "progress";
  index: number;
}

/** The outcome of one call (stage 3), reported as soon as it is known. */
export interface CallOutcome {
  type: "outcome";
  index: number;
  content: string;
  isError: boolean;
  durationMs: number;
  /** Whether this call ends the loop (a loop-breaking tool that ran). */
  breaksLoop: boolean;
  /** Images and audio of a `toolOutput` result, checked against `maxImageBytes`. */
  media?: MediaPart[];
  /** The call has no result yet: its sub-agent waits for a person's approvals (the tool returned `WAITS`). */
  waits?: true;
}

/** An event of a sub-agent's run that a call (`delegate_task`) hands to its own run's stream. */
interface CallEvent {
  type: "event";
  index: number;
  event: AgentEvent;
}

export interface ExecuteOptions {
  signal: AbortSignal;
  /** Most calls in flight at once; a `sequential` tool always runs alone. */
  concurrency: number;
  timeoutMs: number;
  maxResultChars: number;
  /** Largest image or audio part of a result; larger ones are replaced by a note. Default: no limit. */
  maxImageBytes?: number;
  /** Removes secrets from a result (and from progress messages) before anything else sees or cuts it. */
  redact?: (text: string) => string;
  /** The run's calls waiting on a promise; made by the first one. */
  waiters?: RunWaiters;
  /**
   * `signal` fires only through whoever runs the calls, who then calls `abortCalls`: the calls
   * need no abort listener (else one listener per run settles them).
   */
  ownSignal?: boolean;
  /** Traces each call (SPEC section 11); undefined when the run is not traced. */
  trace?: CallTracer | undefined;
}

/** Starts the span of each call (see tracing/run-trace.ts). Must not throw. */
export interface CallTracer {
  call(prepared: PreparedCall): CallSpan;
}

/** One call's span. Must not throw. */
export interface CallSpan {
  /** Runs the tool's `execute` with the call's span as the active context. */
  execute(tool: Tool, value: unknown, context: ToolContext): unknown;
  /** Ends the span with the call's outcome (`thrown`: what the tool threw, if it did). */
  end(outcome: CallOutcome, thrown: unknown): void;
}

/** Settles every pending call of `options` as aborted: for the owner of a signal of its own (`ownSignal`), after aborting it. */
export function abortCalls(options: ExecuteOptions): void {
  options.waiters?.abortAll();
}

/**
 * What the run gives a call beyond its `ToolContext`: the run (`ExecuteOptions`, the loop's `Run`)
 * and `forward`, which puts a sub-agent's event in the run's stream. Undefined for a context the
 * executor did not make (a tool called directly).
 */
export function callRun(
  context: ToolContext,
): { readonly run: ExecuteOptions; forward(event: AgentEvent): void } | undefined {
  return context instanceof CallContext ? context : undefined;
}

/**
 * Looks up, parses and validates one call. Never throws. Arguments that are not one JSON object
 * (see `readArguments`) are an error with `malformed` set, and `arguments` is then `{}`, so no
 * event carries them.
 */
export function prepareCall(call: ToolCall, index: number, tools: ReadonlyMap<string, Tool>): PreparedCall {
  const tool = tools.get(call.name);
  if (call.invalid !== undefined) return { index, call, arguments: {}, error: call.invalid };
  const read = readArguments(call);
  if (typeof read === "string") {
    return { index, call, arguments: {}, ...(tool && { tool }), error: read, malformed: true };
  }
  if (!tool) {
    const known = [...tools.keys()].join(", ") || "none";
    return { index, call, arguments: read, error: `Unknown tool '${call.name}'. Available tools: ${known}.` };
  }
  const checked = tool.validate(read);
  if (!checked.ok) {
    return {
      index,
      call,
      arguments: read,
      tool,
      error: `Invalid arguments for '${call.name}': ${checked.message}`,
    };
  }
  return { index, call, arguments: read, tool, value: checked.value };
}

/**
 * A call's arguments as the object they must be, or why they are not one (the call's error
 * result, quoting the start of the text): invalid JSON (a call cut off at the token limit), JSON
 * that is not an object, nesting deeper than `MAX_ARGUMENT_DEPTH` (checked on the text, before
 * anything parses it), or a number too large for a double (`1e999`, which JSON.parse reads as
 * Infinity and other parsers refuse). Empty text is `{}`. Never throws.
 */
export function readArguments(call: ToolCall): Record<string, unknown> | string {
  const text = call.arguments;
  if (nestedTooDeep(text)) return tooDeepMessage(call.name);
  let parsed: unknown;
  try {
    parsed = trimmed(text) === "" ? {} : JSON.parse(text);
  } catch (error) {
    return `Invalid JSON in the arguments of '${call.name}' (${quote(text)}): ${errorMessage(error)}. Send the arguments as one JSON object.`;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return `The arguments of '${call.name}' must be a JSON object, not ${quote(text)}.`;
  }
  // Only a long run of digits or a 3-digit exponent can overflow: most texts never walk the value.
  if (OVERFLOW.test(text) && !allFinite(parsed)) {
    return `The arguments of '${call.name}' (${quote(text)}) hold a number too large to represent: send it as a string, or a smaller number.`;
  }
  return parsed as Record<string, unknown>;
}

// An exponent of 3+ digits or 309+ digits in a row: the only numbers that overflow a double.
const OVERFLOW = /[eE][+-]?\d{3}|\d{309}/;

/** Whether every number in `value` is finite. Iterative (its depth was checked on the text). */
function allFinite(value: unknown): boolean {
  const stack: unknown[] = [value];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (typeof node === "number" && !Number.isFinite(node)) return false;
    if (typeof node === "object" && node !== null) for (const child of Object.values(node)) stack.push(child);
  }
  return true;
}

/** The start of a text as a JSON string, for an error message. */
function quote(text: string): string {
  const max = 120;
  return text.length <= max
    ? JSON.stringify(text)
    : `${JSON.stringify(text.slice(0, max))}... (${text.length} characters)`;
}

/** A progress report, a sub-agent's event or an outcome, as `CallExecution.take` hands them out. */
export type CallUpdate = CallOutcome | CallProgress | CallEvent;

/**
 * Runs prepared calls concurrently (bounded) and hands out their progress reports and each
 * outcome as it completes: `take()` what is in, `wait()` when nothing is. Calls start at once, in
 * call order (a `sequential` tool alone); no call has a timer or an abort listener of its own
 * (see awaited.ts). Callers put results back in call order using `index`. Never throws: a throw,
 * a timeout or an abort becomes an error outcome, and an abort settles every pending call at once
 * even when a tool ignores its signal.
 */
export function executeCalls(
  calls: readonly PreparedCall[],
  options: ExecuteOptions,
  now = -1,
): CallExecution {
  return new CallExecution(calls, options, now >= 0 ? now : performance.now());
}

export class CallExecution {
  /** When the last outcome came in (`performance.now()`); the start time until then. */
  endedAt: number;
  /** The oldest update not yet taken; the later ones are in `more` (most batches never need it). */
  private first: CallUpdate | undefined = undefined;
  private more: CallUpdate[] | undefined = undefined;
  private head = 0;
  /** Outcomes not yet taken. */
  private left: number;
  private started = 0;
  private running = 0;
  /** A `sequential` call is running: nothing else starts. */
  private alone = false;
  private pumping = false;
  private wake: (() => void) | undefined = undefined;
  /** Whether anyone waited for an outcome (else all were in before the constructor returned). */
  waited = false;

  constructor(
    private readonly calls: readonly PreparedCall[],
    readonly options: ExecuteOptions,
    /** When the calls start (`performance.now()`). */
    now: number,
  ) {
    this.left = calls.length;
    this.endedAt = now;
    this.pump(now);
  }

  /** True once every outcome has been taken. */
  get done(): boolean {
    return this.left === 0;
  }

  /** The oldest report not yet taken, or undefined while the calls still run (or all are done). */
  take(): CallUpdate | undefined {
    const update = this.first;
    if (!update) return undefined;
    const { more } = this;
    if (more && this.head < more.length) {
      this.first = more[this.head++];
      if (this.head === more.length) {
        more.length = 0;
        this.head = 0;
      }
    } else this.first = undefined;
    if (update.type === "outcome") this.left--;
    return update;
  }

  /** Resolves when there is something to take. */
  wait(): Promise<void> {
    this.waited = true;
    return new Promise<void>((resolve) => {
      this.wake = resolve;
    });
  }

  /** @internal A call's progress or outcome, for `take()`. */
  report(update: CallUpdate): void {
    if (!this.first) this.first = update;
    else if (this.more) this.more.push(update);
    else this.more = [update];
    const wake = this.wake;
    if (wake) {
      this.wake = undefined;
      wake();
    }
  }

  /** @internal A call has its outcome: its slot frees and the next calls start. */
  settled(prepared: PreparedCall, outcome: CallOutcome, endedAt: number): void {
    this.running--;
    if (prepared.tool?.sequential === true) this.alone = false;
    this.endedAt = endedAt;
    this.report(outcome);
    this.pump();
  }

  /** Starts calls in order while slots are free. A sync tool finishes inside, and the loop goes on. */
  private pump(now?: number): void {
    if (this.pumping) return;
    this.pumping = true;
    const { calls, options } = this;
    while (this.started < calls.length && !this.alone) {
      const prepared = calls[this.started] as PreparedCall;
      if (prepared.error !== undefined) {
        this.started++;
        const outcome: CallOutcome = {
          type: "outcome",
          index: prepared.index,
          content: prepared.error,
          isError: true,
          durationMs: 0,
          breaksLoop: false,
        };
        options.trace?.call(prepared).end(outcome, undefined);
        this.report(outcome);
        continue;
      }
      const sequential = prepared.tool?.sequential === true;
      if (sequential ? this.running > 0 : this.running >= options.concurrency) break;
      this.started++;
      this.running++;
      if (sequential) this.alone = true;
      now ??= performance.now();
      runOne(prepared, this, now);
    }
    this.pumping = false;
  }
}

/**
 * Runs one call and settles it exactly once: at once when the tool returns a value (or throws).
 * Only a pending result waits against the timeout and the run's abort.
 */
function runOne(prepared: PreparedCall, execution: CallExecution, started: number): void {
  const { options } = execution;
  const context = new CallContext(prepared, execution);
  const span = options.trace?.call(prepared);
  let result: unknown;
  try {
    if (options.signal.aborted) throw new Error("The run was aborted.");
    const tool = prepared.tool as Tool;
    result = span ? span.execute(tool, prepared.value, context) : tool.execute(prepared.value, context);
  } catch (error) {
    finishCall(prepared, execution, error, true, started, span);
    return;
  }
  if (isThenable(result)) new AwaitedCall(result, prepared, execution, context, started, span);
  else finishCall(prepared, execution, result, false, started, span);
}

/**
 * What a tool's `execute` gets. Its signal and progress callback are made when first read: most
 * calls read neither (and a synchronous tool has nothing to cancel).
 */
class CallContext implements ToolContext {
  readonly toolCallId: string;
  private controller: AbortController | undefined = undefined;
  private progress: ((progress: ToolProgress) => void) | undefined = undefined;
  private cancelled = false;
  private reason: unknown = undefined;

  constructor(
    private readonly prepared: PreparedCall,
    private readonly execution: CallExecution,
  ) {
    this.toolCallId = prepared.call.id;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.cancelled) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  get onProgress(): (progress: ToolProgress) => void {
    this.progress ??= (p: ToolProgress) => {
      const { redact } = this.execution.options;
      this.execution.report({
        ...p,
        ...(redact && p.message !== undefined && { message: redact(p.message) }),
        type: "progress",
        index: this.prepared.index,
      });
    };
    return this.progress;
  }

  /** The options of the run the call belongs to (the loop's `Run`). */
  get run(): ExecuteOptions {
    return this.execution.options;
  }

  /** Hands a sub-agent's event to the run's stream, in order with this call's other updates. */
  forward(event: AgentEvent): void {
    this.execution.report({ type: "event", index: this.prepared.index, event });
  }

  /** Fires the signal (now, or when it is first read). */
  cancel(reason?: unknown): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}

/** A tool's promise, against its timeout and the run's abort. */
class AwaitedCall extends Waiter {
  private finished = false;

  constructor(
    result: PromiseLike<unknown>,
    private readonly prepared: PreparedCall,
    private readonly execution: CallExecution,
    private readonly context: CallContext,
    private readonly started: number,
    private readonly span: CallSpan | undefined,
  ) {
    super();
    Promise.resolve(result).then(
      (value) => this.finish(value, false),
      (error: unknown) => this.finish(error, true),
    );
    const tool = prepared.tool as Tool;
    const { options } = execution;
    options.waiters ??= new RunWaiters(options.signal, options.ownSignal !== true);
    this.start(started, tool.timeoutMs ?? options.timeoutMs, options.waiters);
  }

  protected override expire(): void {
    const tool = this.prepared.tool as Tool;
    const ms = tool.timeoutMs ?? this.execution.options.timeoutMs;
    this.finish(new Error(`Tool '${tool.name}' timed out after ${ms} ms.`), true);
    this.context.cancel();
  }

  protected override abort(reason: unknown): void {
    if (this.finished) return;
    this.context.cancel(reason);
    this.finish(new Error("The run was aborted."), true);
  }

  private finish(value: unknown, failed: boolean): void {
    if (this.finished) return;
    this.finished = true;
    this.stop();
    finishCall(this.prepared, this.execution, value, failed, this.started, this.span);
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function"
  );
}

function finishCall(
  prepared: PreparedCall,
  execution: CallExecution,
  value: unknown,
  failed: boolean,
  started: number,
  span: CallSpan | undefined,
): void {
  const endedAt = performance.now();
  const outcome = outcomeOf(prepared, execution.options, value, failed, Math.round(endedAt - started));
  span?.end(outcome, failed ? value : undefined);
  execution.settled(prepared, outcome, endedAt);
}
