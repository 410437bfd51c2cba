import { errorMessage } from "../core/errors.js";
import { checkMedia } from "../core/media.js";
import { type MediaPart, nestedTooDeep, type ToolCall, tooDeepMessage } from "../core/messages.js";
import { RunWaiters, Waiter } from "./awaited.js";
import { isToolOutput, type Tool, type ToolContext, type ToolProgress } from "./tool.js";

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
  /** Images and audio of a `toolOutput` result, checked against `maxMediaBytes`. */
  media?: MediaPart[];
}

export interface ExecuteOptions {
  signal: AbortSignal;
  /** Most calls in flight at once; a `sequential` tool always runs alone. */
  concurrency: number;
  timeoutMs: number;
  maxResultChars: number;
  /** Largest image or audio part of a result; larger ones are replaced by a note. Default: no limit. */
  maxMediaBytes?: number;
  /** Removes secrets from a result (and from progress messages) before anything else sees or cuts it. */
  redact?: (text: string) => string;
  /** The run's calls waiting on a promise; made by the first one. */
  waiters?: RunWaiters;
}

/**
 * Looks up, parses and validates one call. Never throws. Arguments nested deeper than
 * `MAX_ARGUMENT_DEPTH` (core/messages.ts) are an error, and `arguments` is then `{}`, so no event carries them.
 */
export function prepareCall(call: ToolCall, index: number, tools: ReadonlyMap<string, Tool>): PreparedCall {
  const tool = tools.get(call.name);
  if (call.invalid !== undefined) return { index, call, arguments: {}, error: call.invalid };
  // Checked on the text, before anything parses, validates or serialises the arguments.
  if (nestedTooDeep(call.arguments)) {
    return { index, call, arguments: {}, ...(tool && { tool }), error: tooDeepMessage(call.name) };
  }
  let parsed: unknown;
  try {
    parsed = call.arguments.trim() === "" ? {} : JSON.parse(call.arguments);
  } catch (error) {
    return {
      index,
      call,
      arguments: {},
      ...(tool && { tool }),
      error: `Invalid JSON in the arguments of '${call.name}': ${errorMessage(error)}. Send the arguments as one JSON object.`,
    };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return { index, call, arguments: {}, error: `The arguments of '${call.name}' must be a JSON object.` };
  }
  const args = parsed as Record<string, unknown>;
  if (!tool) {
    const known = [...tools.keys()].join(", ") || "none";
    return { index, call, arguments: args, error: `Unknown tool '${call.name}'. Available tools: ${known}.` };
  }
  const checked = tool.validate(args);
  if (!checked.ok) {
    return {
      index,
      call,
      arguments: args,
      tool,
      error: `Invalid arguments for '${call.name}': ${checked.message}`,
    };
  }
  return { index, call, arguments: args, tool, value: checked.value };
}

/** A progress report or an outcome, as `CallExecution.take` hands them out. */
export type CallUpdate = CallOutcome | CallProgress;

/**
 * Runs prepared calls concurrently (bounded) and hands out their progress reports and each
 * outcome as it completes: `take()` what is in, `wait()` when nothing is. Calls start at once, in
 * call order (a `sequential` tool alone); no call has a timer or an abort listener of its own
 * (see awaited.ts). Callers put results back in call order using `index`. Never throws: a throw,
 * a timeout or an abort becomes an error outcome, and an abort settles every pending call at once
 * even when a tool ignores its signal.
 */
export function executeCalls(calls: readonly PreparedCall[], options: ExecuteOptions): CallExecution {
  return new CallExecution(calls, options);
}

export class CallExecution {
  /** When the last outcome came in (`performance.now()`); the start time until then. */
  endedAt: number;
  private readonly queue: CallUpdate[] = [];
  private head = 0;
  /** Outcomes not yet taken. */
  private left: number;
  private started = 0;
  private running = 0;
  /** A `sequential` call is running: nothing else starts. */
  private alone = false;
  private pumping = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly calls: readonly PreparedCall[],
    private readonly options: ExecuteOptions,
  ) {
    this.left = calls.length;
    this.endedAt = performance.now();
    this.pump(this.endedAt);
  }

  /** True once every outcome has been taken. */
  get done(): boolean {
    return this.left === 0;
  }

  /** The oldest report not yet taken, or undefined while the calls still run (or all are done). */
  take(): CallUpdate | undefined {
    if (this.head === this.queue.length) return undefined;
    const update = this.queue[this.head] as CallUpdate;
    if (++this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
    if (update.type === "outcome") this.left--;
    return update;
  }

  /** Resolves when there is something to take. */
  wait(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.wake = resolve;
    });
  }

  private readonly report = (update: CallUpdate): void => {
    this.queue.push(update);
    const wake = this.wake;
    if (wake) {
      this.wake = undefined;
      wake();
    }
  };

  /** Starts calls in order while slots are free. A sync tool finishes inside, and the loop goes on. */
  private pump(now?: number): void {
    if (this.pumping) return;
    this.pumping = true;
    const { calls, options } = this;
    while (this.started < calls.length && !this.alone) {
      const prepared = calls[this.started] as PreparedCall;
      if (prepared.error !== undefined) {
        this.started++;
        this.report({
          type: "outcome",
          index: prepared.index,
          content: prepared.error,
          isError: true,
          durationMs: 0,
          breaksLoop: false,
        });
        continue;
      }
      const sequential = prepared.tool?.sequential === true;
      if (sequential ? this.running > 0 : this.running >= options.concurrency) break;
      this.started++;
      this.running++;
      if (sequential) this.alone = true;
      now ??= performance.now();
      runOne(prepared, options, this.report, now, (outcome, endedAt) => {
        this.running--;
        if (sequential) this.alone = false;
        this.endedAt = endedAt;
        this.report(outcome);
        this.pump();
      });
    }
    this.pumping = false;
  }
}

const NO_MEDIA: readonly MediaPart[] = [];

type Settle = (outcome: CallOutcome, endedAt: number) => void;

/**
 * Runs one call and settles it exactly once: at once when the tool returns a value (or throws).
 * Only a pending result waits against the timeout and the run's abort.
 */
function runOne(
  prepared: PreparedCall,
  options: ExecuteOptions,
  report: (update: CallProgress) => void,
  started: number,
  settle: Settle,
): void {
  const context = new CallContext(prepared, report, options.redact);
  let result: unknown;
  try {
    if (options.signal.aborted) throw new Error("The run was aborted.");
    result = (prepared.tool as Tool).execute(prepared.value, context);
  } catch (error) {
    finishCall(prepared, options, error, true, started, settle);
    return;
  }
  if (isThenable(result)) new AwaitedCall(result, prepared, options, context, started, settle);
  else finishCall(prepared, options, result, false, started, settle);
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
    private readonly report: (update: CallProgress) => void,
    private readonly redact: ((text: string) => string) | undefined,
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
      const { redact } = this;
      this.report({
        ...p,
        ...(redact && p.message !== undefined && { message: redact(p.message) }),
        type: "progress",
        index: this.prepared.index,
      });
    };
    return this.progress;
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
    private readonly options: ExecuteOptions,
    private readonly context: CallContext,
    private readonly started: number,
    private readonly settle: Settle,
  ) {
    super();
    Promise.resolve(result).then(
      (value) => this.finish(value, false),
      (error: unknown) => this.finish(error, true),
    );
    const tool = prepared.tool as Tool;
    options.waiters ??= new RunWaiters(options.signal);
    this.start(started, tool.timeoutMs ?? options.timeoutMs, options.waiters);
  }

  protected override expire(): void {
    const tool = this.prepared.tool as Tool;
    this.finish(
      new Error(`Tool '${tool.name}' timed out after ${tool.timeoutMs ?? this.options.timeoutMs} ms.`),
      true,
    );
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
    finishCall(this.prepared, this.options, value, failed, this.started, this.settle);
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function"
  );
}

function finishCall(
  prepared: PreparedCall,
  options: ExecuteOptions,
  value: unknown,
  failed: boolean,
  started: number,
  settle: Settle,
): void {
  const endedAt = performance.now();
  settle(outcomeOf(prepared, options, value, failed, Math.round(endedAt - started)), endedAt);
}

/** Stage 3: the result as the model will read it (serialised, redacted, cut), and whether it ends the loop. */
function outcomeOf(
  prepared: PreparedCall,
  options: ExecuteOptions,
  value: unknown,
  failed: boolean,
  durationMs: number,
): CallOutcome {
  const tool = prepared.tool as Tool;
  let content: string;
  let media: readonly MediaPart[] = NO_MEDIA;
  if (failed) content = errorMessage(value);
  else {
    if (isToolOutput(value)) media = value.media;
    content = serialiseResult(value);
  }
  const isError = failed;
  // Before truncation, so a secret cut at the limit cannot leave a visible prefix.
  if (options.redact) content = options.redact(content);
  content = truncate(content, options.maxResultChars);
  let sent: MediaPart[] | undefined;
  if (media.length > 0) {
    sent = [];
    for (let i = 0; i < media.length; i++) {
      const part = media[i] as MediaPart;
      const checked = checkMedia(part, options.maxMediaBytes ?? Number.POSITIVE_INFINITY);
      if ("part" in checked) sent.push(checked.part);
      else content += `\n[${part.type} ${i + 1} of this result not shown: ${checked.problem}]`;
    }
  }
  // A failed call never ends the loop unless a predicate says so: the model should retry.
  const breaks = tool.loopBreaking;
  const breaksLoop =
    typeof breaks === "function"
      ? safePredicate(() => breaks(prepared.value, { content, isError }))
      : breaks === true && !isError;
  const outcome: CallOutcome = {
    type: "outcome",
    index: prepared.index,
    content,
    isError,
    durationMs,
    breaksLoop,
  };
  if (sent?.length) outcome.media = sent;
  return outcome;
}

function safePredicate(predicate: () => boolean): boolean {
  try {
    return predicate() === true;
  } catch {
    return false;
  }
}

/** Strings pass through, a `toolOutput` gives its text; anything else becomes JSON (undefined becomes ""). */
export function serialiseResult(result: unknown): string {
  if (typeof result === "string") return result;
  if (isToolOutput(result)) return result.text;
  if (result === undefined) return "";
  try {
    return JSON.stringify(result) ?? String(result);
  } catch {
    return String(result);
  }
}

/** Cuts text beyond `max` characters and says so visibly. */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[truncated: showing ${max} of ${text.length} characters]`;
}
