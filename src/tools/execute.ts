import { errorMessage } from "../core/errors.js";
import { nestedTooDeep, type ToolCall, tooDeepMessage } from "../core/messages.js";
import type { Tool, ToolProgress } from "./tool.js";

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
}

export interface ExecuteOptions {
  signal: AbortSignal;
  /** Most calls in flight at once; a `sequential` tool always runs alone. */
  concurrency: number;
  timeoutMs: number;
  maxResultChars: number;
  /** Removes secrets from a result (and from progress messages) before anything else sees or cuts it. */
  redact?: (text: string) => string;
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

/**
 * Runs prepared calls concurrently (bounded) and yields their progress reports and each
 * outcome as it completes.
 * Callers put results back in call order using `index`. Never throws: a throw, a timeout or
 * an abort becomes an error outcome, and an abort settles every pending call at once even
 * when a tool ignores its signal.
 */
export async function* executeCalls(
  calls: readonly PreparedCall[],
  options: ExecuteOptions,
): AsyncGenerator<CallOutcome | CallProgress> {
  const settled: (CallOutcome | CallProgress)[] = [];
  let wake: (() => void) | undefined;
  const report = (update: CallOutcome | CallProgress) => {
    settled.push(update);
    wake?.();
  };

  let running = 0;
  let slotFreed: (() => void) | undefined;
  const start = (prepared: PreparedCall) => {
    running++;
    const { redact } = options;
    const onProgress = (p: ToolProgress) =>
      report({
        ...p,
        ...(redact && p.message !== undefined && { message: redact(p.message) }),
        type: "progress",
        index: prepared.index,
      });
    void runOne(prepared, options, onProgress).then((outcome) => {
      running--;
      slotFreed?.();
      report(outcome);
    });
  };
  const waitForSlot = (limit: number) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (running <= limit) {
          slotFreed = undefined;
          resolve();
        } else slotFreed = check;
      };
      check();
    });

  // Scheduling runs beside the consumer so outcomes stream out while later calls wait.
  const scheduling = (async () => {
    for (const prepared of calls) {
      if (prepared.error !== undefined) {
        report({
          type: "outcome",
          index: prepared.index,
          content: prepared.error,
          isError: true,
          durationMs: 0,
          breaksLoop: false,
        });
        continue;
      }
      if (prepared.tool?.sequential) {
        await waitForSlot(0);
        start(prepared);
        await waitForSlot(0);
      } else {
        await waitForSlot(options.concurrency - 1);
        start(prepared);
      }
    }
  })();

  for (let done = 0; done < calls.length; ) {
    const update = settled.shift();
    if (update) {
      if (update.type === "outcome") done++;
      yield update;
      continue;
    }
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
    wake = undefined;
  }
  await scheduling;
}

async function runOne(
  prepared: PreparedCall,
  options: ExecuteOptions,
  onProgress: (progress: ToolProgress) => void,
): Promise<CallOutcome> {
  const tool = prepared.tool as Tool;
  const started = performance.now();
  const controller = new AbortController();
  const timeoutMs = tool.timeoutMs ?? options.timeoutMs;
  const onAbort = () => controller.abort(options.signal.reason);
  options.signal.addEventListener("abort", onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;

  let content: string;
  let isError = false;
  try {
    if (options.signal.aborted) throw new Error("The run was aborted.");
    const stopped = new Promise<never>((_, reject) => {
      if (timeoutMs > 0 && timeoutMs < 2 ** 31) {
        timer = setTimeout(() => {
          reject(new Error(`Tool '${tool.name}' timed out after ${timeoutMs} ms.`));
          controller.abort();
        }, timeoutMs);
      }
      controller.signal.addEventListener("abort", () => reject(new Error("The run was aborted.")), {
        once: true,
      });
    });
    const result = await Promise.race([
      Promise.resolve().then(() =>
        tool.execute(prepared.value, { signal: controller.signal, toolCallId: prepared.call.id, onProgress }),
      ),
      stopped,
    ]);
    content = serialiseResult(result);
  } catch (error) {
    content = errorMessage(error);
    isError = true;
  } finally {
    clearTimeout(timer);
    options.signal.removeEventListener("abort", onAbort);
  }
  // Before truncation, so a secret cut at the limit cannot leave a visible prefix.
  if (options.redact) content = options.redact(content);
  content = truncate(content, options.maxResultChars);
  // A failed call never ends the loop unless a predicate says so: the model should retry.
  const breaks = tool.loopBreaking;
  const breaksLoop =
    typeof breaks === "function"
      ? safePredicate(() => breaks(prepared.value, { content, isError }))
      : breaks === true && !isError;
  return {
    type: "outcome",
    index: prepared.index,
    content,
    isError,
    durationMs: Math.round(performance.now() - started),
    breaksLoop,
  };
}

function safePredicate(predicate: () => boolean): boolean {
  try {
    return predicate() === true;
  } catch {
    return false;
  }
}

/** Strings pass through; anything else becomes JSON (undefined becomes ""). */
export function serialiseResult(result: unknown): string {
  if (typeof result === "string") return result;
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
