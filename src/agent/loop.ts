import type { AgentEvent, IterationRecord, RunResult, StopReason } from "../core/events.js";
import { type AssistantMessage, addUsage, emptyUsage, type Message } from "../core/messages.js";
import type { ContextManager } from "../memory/prune.js";
import type { Model, ModelError, ModelReply, ToolSpec } from "../models/adapter.js";
import { costOf, type ModelPrice } from "../models/pricing.js";
import { type CallOutcome, executeCalls, type PreparedCall, prepareCall } from "../tools/execute.js";
import type { Tool } from "../tools/tool.js";
import {
  type Budget,
  budgetWarning,
  EXPLICIT_CORRECTION,
  formatUsd,
  iterationWarning,
  type Mode,
  stablePrompt,
  systemPrompt,
  type ToolProtocol,
} from "./prompt.js";
import { CircuitBreaker, RepetitionGuard } from "./stop.js";

/** Everything the loop needs, passed in. Defaults are applied by `Agent`. */
export interface LoopOptions {
  /** The model, already wrapped for the tool protocol. */
  model: Model;
  instructions: string;
  mode: Mode;
  toolProtocol: ToolProtocol;
  /** Tools in the order they are offered to the model (loop-breaking ones included). */
  tools: readonly Tool[];
  /** The conversation so far, ending with the new user message. The loop appends to it. */
  history: Message[];
  maxIterations: number;
  toolConcurrency: number;
  toolTimeoutMs: number;
  maxToolResultChars: number;
  circuitBreakerThreshold: number;
  repetitionThreshold: number;
  /** Token and cost limits (the time limit arrives through `signal`); warnings at 80%. */
  budget: Budget;
  /** Shapes what is sent to fit the context window, and bounds each tool result; the history stays whole. */
  context?: ContextManager;
  /** The model's price, to count cost; required for a cost budget. */
  price?: ModelPrice;
  /** Removes configured secrets from tool results, progress messages and error messages. */
  redact?: (text: string) => string;
  signal: AbortSignal;
}

/**
 * The agent loop: an explicit iteration of one model call, then the tool calls it asked for,
 * until a stop condition. Yields the events of SPEC section 3 and returns the run's result.
 * Never throws for model or tool failures: they end the run with a stop reason or become
 * error results the model reads.
 */
export async function* runLoop(options: LoopOptions): AsyncGenerator<AgentEvent, RunResult> {
  const { model, history, signal, mode, maxIterations, budget, price, context } = options;
  const startedAt = performance.now();
  const tools = new Map(options.tools.map((tool) => [tool.name, tool]));
  const specs: ToolSpec[] = options.tools.map(({ name, description, parameters }) => ({
    name,
    description,
    parameters,
  }));
  const stable = stablePrompt({ ...options, tools: specs });
  const nativeTools = options.toolProtocol === "native" ? specs : [];
  const breaker = new CircuitBreaker(options.circuitBreakerThreshold);
  const repetition = new RepetitionGuard(options.repetitionThreshold);
  const usage = emptyUsage();
  const steps: IterationRecord[] = [];
  let iterations = 0;
  let output = "";
  let refusal: string | undefined;

  function* finish(
    stopReason: StopReason,
    cause?: { message: string; code: string },
  ): Generator<AgentEvent, RunResult> {
    const error = cause && options.redact ? { ...cause, message: options.redact(cause.message) } : cause;
    if (error) yield { type: "error", message: error.message, code: error.code };
    yield { type: "turn_complete", stopReason, iterations, output, usage: { ...usage } };
    const result: RunResult = { output, stopReason, iterations, messages: history, usage, steps };
    if (refusal !== undefined) result.refusal = refusal;
    if (error) result.error = error;
    return result;
  }

  while (true) {
    if (signal.aborted) return yield* finish("aborted");
    if (iterations >= maxIterations) return yield* finish("max_iterations");
    const spent = {
      tokens: usage.inputTokens + usage.outputTokens,
      costUsd: usage.costUsd ?? 0,
      elapsedMs: 0,
    };
    if (budget.maxTokens !== undefined && spent.tokens >= budget.maxTokens) {
      const message = `Token budget spent: ${spent.tokens} of ${budget.maxTokens} tokens.`;
      return yield* finish("budget_exceeded", { message, code: "budget_exceeded" });
    }
    if (budget.maxCostUsd !== undefined && spent.costUsd >= budget.maxCostUsd) {
      const message = `Cost budget spent: ${formatUsd(spent.costUsd)} of ${formatUsd(budget.maxCostUsd)}.`;
      return yield* finish("budget_exceeded", { message, code: "budget_exceeded" });
    }
    spent.elapsedMs = performance.now() - startedAt;
    iterations++;
    const started = performance.now();
    yield { type: "iteration_start", iteration: iterations };

    const system = systemPrompt(
      stable,
      iterationWarning(iterations, maxIterations, mode),
      budgetWarning(budget, spent),
    );
    let reply: ModelReply | undefined;
    let failure: ModelError | undefined;
    const messages = context ? await context.fit(history, system, nativeTools, signal) : history;
    for await (const event of model.stream({ system, messages, tools: nativeTools }, { signal })) {
      if (event.type === "text_delta") yield { type: "message_delta", text: event.text };
      else if (event.type === "thinking_delta") yield { type: "thinking", text: event.text };
      else if (event.type === "done") reply = event.message;
      else failure = event.error;
    }
    const modelMs = performance.now() - started;
    if (signal.aborted || failure?.code === "aborted") return yield* finish("aborted");
    if (!reply) {
      const { message, code } = failure ?? {
        message: "The model stream ended without a reply.",
        code: "invalid_response",
      };
      return yield* finish("model_error", { message, code });
    }

    if (price) reply.usage.costUsd = costOf(reply.usage, price);
    addUsage(usage, reply.usage);
    const { content, toolCalls } = reply;
    const assistant: AssistantMessage = { role: "assistant", content };
    if (reply.thinking) assistant.thinking = reply.thinking;
    if (reply.thinkingSignature) assistant.thinkingSignature = reply.thinkingSignature;
    if (toolCalls.length > 0) assistant.toolCalls = toolCalls;
    history.push(assistant);
    refusal = reply.refusal;
    output = content || (refusal ?? "");
    yield refusal === undefined ? { type: "message", content } : { type: "message", content, refusal };
    const step: IterationRecord = {
      iteration: iterations,
      durationMs: modelMs,
      modelMs,
      finishReason: reply.finishReason,
      usage: reply.usage,
      toolCalls: toolCalls.length,
      toolErrors: 0,
    };
    steps.push(step);

    if (toolCalls.length === 0) {
      if (mode === "natural") return yield* finish("final_answer");
      history.push({ role: "user", content: EXPLICIT_CORRECTION });
      if (breaker.fail("\u0000no_tool_call", "the reply had no tool call (explicit mode requires one)")) {
        return yield* finish("circuit_breaker", { message: breaker.message, code: "circuit_breaker" });
      }
      continue;
    }

    const prepared: PreparedCall[] = toolCalls.map((call, index) => prepareCall(call, index, tools));
    for (const { call, arguments: args } of prepared) {
      yield { type: "tool_call", id: call.id, name: call.name, arguments: args };
    }
    const outcomes: CallOutcome[] = new Array(prepared.length);
    const execution = executeCalls(prepared, {
      signal,
      concurrency: options.toolConcurrency,
      timeoutMs: options.toolTimeoutMs,
      maxResultChars: options.maxToolResultChars,
      ...(options.redact && { redact: options.redact }),
    });
    for await (const update of execution) {
      const { id, name } = toolCalls[update.index] as (typeof toolCalls)[number];
      if (update.type === "progress") {
        const { progress, total, message } = update;
        yield {
          type: "tool_progress",
          id,
          name,
          progress,
          ...(total !== undefined && { total }),
          ...(message && { message }),
        };
        continue;
      }
      if (context) update.content = context.truncateToolResult(update.content);
      outcomes[update.index] = update;
      const { content, isError, durationMs } = update;
      yield { type: "tool_result", id, name, content, isError, durationMs };
    }

    // Results go back in call order, whatever order they finished in; the guards see them in that order too.
    let breaking: CallOutcome | undefined;
    for (const outcome of outcomes) {
      const call = toolCalls[outcome.index] as (typeof toolCalls)[number];
      history.push({
        role: "tool",
        toolCallId: call.id,
        name: call.name,
        content: outcome.content,
        isError: outcome.isError,
      });
      repetition.record(call.name, call.arguments.trim());
      if (outcome.isError) {
        step.toolErrors++;
        const description = `${call.name}(${call.arguments.trim()}) -> ${outcome.content}`;
        breaker.fail(`${call.name}\u0000${call.arguments.trim()}\u0000${outcome.content}`, description);
      } else breaker.succeed();
      if (outcome.breaksLoop && !breaking) breaking = outcome;
    }
    step.durationMs = performance.now() - started;

    if (signal.aborted) return yield* finish("aborted");
    if (breaking) {
      output = breaking.content;
      return yield* finish(stopReasonOf(toolCalls[breaking.index]?.name));
    }
    if (breaker.tripped)
      return yield* finish("circuit_breaker", { message: breaker.message, code: "circuit_breaker" });
    const warning = repetition.warning();
    if (warning) history.push({ role: "user", content: warning });
  }
}

/** Built-in loop-breaking tools stop with their own reason; other loop-breaking tools count as task completion. */
function stopReasonOf(toolName: string | undefined): StopReason {
  return toolName === "ask_question" || toolName === "converse" ? toolName : "task_completion";
}
