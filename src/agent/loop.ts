import type { AgentEvent } from "../core/events.js";
import type { AssistantMessage } from "../core/messages.js";
import { addUsage } from "../core/messages.js";
import type { RunState } from "../core/run-state.js";
import type { ModelError, ModelReply } from "../models/adapter.js";
import { costOf } from "../models/pricing.js";
import { callTools } from "./calls.js";
import {
  type Budget,
  budgetWarning,
  EXPLICIT_CORRECTION,
  formatUsd,
  iterationWarning,
  systemPrompt,
} from "./prompt.js";
import { CONTINUE, circuitBreaker, type Next, type Run } from "./run.js";

/**
 * Advances the run by one iteration: one model call and the tool calls it asks for (or, when
 * the state has calls pending from an earlier reply, those calls). Yields the events of SPEC
 * section 3 and returns what comes next. Mutates `state`, which is consistent at every yield.
 */
export async function* advance(state: RunState, run: Run): AsyncGenerator<AgentEvent, Next> {
  if (state.pending) return yield* callTools(state, run);
  const { model, signal, mode, maxIterations, budget, price, context } = run.options;
  const { runId } = state;
  if (signal.aborted) return { type: "stop", stopReason: "aborted" };
  if (state.iteration >= maxIterations) return { type: "stop", stopReason: "max_iterations" };
  const spent = {
    tokens: state.usage.inputTokens + state.usage.outputTokens,
    costUsd: state.usage.costUsd ?? 0,
    elapsedMs: performance.now() - run.startedAt,
  };
  const over = budgetExceeded(budget, spent);
  if (over)
    return { type: "stop", stopReason: "budget_exceeded", error: { message: over, code: "budget_exceeded" } };

  const iteration = ++state.iteration;
  const started = performance.now();
  run.iterationStartedAt = started;
  yield { type: "iteration_start", iteration, runId };
  const system = systemPrompt(
    run.stable,
    iterationWarning(iteration, maxIterations, mode),
    budgetWarning(budget, spent),
  );
  let reply: ModelReply | undefined;
  let failure: ModelError | undefined;
  const messages = context
    ? await context.fit(state.messages, system, run.nativeTools, signal)
    : state.messages;
  for await (const event of model.stream({ system, messages, tools: run.nativeTools }, { signal })) {
    if (event.type === "text_delta") yield { type: "message_delta", text: event.text, runId };
    else if (event.type === "thinking_delta") yield { type: "thinking", text: event.text, runId };
    else if (event.type === "done") reply = event.message;
    else failure = event.error;
  }
  const modelMs = performance.now() - started;
  if (signal.aborted || failure?.code === "aborted") return { type: "stop", stopReason: "aborted" };
  if (!reply) {
    const error = failure ?? { message: "The model stream ended without a reply.", code: "invalid_response" };
    return { type: "stop", stopReason: "model_error", error: { message: error.message, code: error.code } };
  }

  if (price) reply.usage.costUsd = costOf(reply.usage, price);
  addUsage(state.usage, reply.usage);
  const { content, toolCalls, refusal } = reply;
  const assistant: AssistantMessage = { role: "assistant", content };
  if (reply.thinking) assistant.thinking = reply.thinking;
  if (reply.thinkingSignature) assistant.thinkingSignature = reply.thinkingSignature;
  if (toolCalls.length > 0) assistant.toolCalls = toolCalls;
  state.messages.push(assistant);
  if (refusal === undefined) state.refusal = undefined;
  else state.refusal = refusal;
  state.output = content || (refusal ?? "");
  state.steps.push({
    iteration,
    durationMs: modelMs,
    modelMs,
    finishReason: reply.finishReason,
    usage: reply.usage,
    toolCalls: toolCalls.length,
    toolErrors: 0,
  });
  if (toolCalls.length > 0) {
    // The reply is stored before any of its calls starts (and before its event), so a crash
    // never asks the model again for it.
    state.pending = { assistant: state.messages.length - 1, decisions: [], breaking: [] };
    if (run.options.checkpoint) await run.options.checkpoint(state);
  }
  yield refusal === undefined
    ? { type: "message", content, runId }
    : { type: "message", content, refusal, runId };

  if (toolCalls.length === 0) {
    if (mode === "natural") return { type: "stop", stopReason: "final_answer" };
    state.messages.push({ role: "user", content: EXPLICIT_CORRECTION });
    if (run.breaker.fail("\u0000no_tool_call", "the reply had no tool call (explicit mode requires one)")) {
      return circuitBreaker(run);
    }
    if (run.options.checkpoint) await run.options.checkpoint(state);
    return CONTINUE;
  }
  return yield* callTools(state, run);
}

function budgetExceeded(budget: Budget, spent: { tokens: number; costUsd: number }): string | undefined {
  if (budget.maxTokens !== undefined && spent.tokens >= budget.maxTokens) {
    return `Token budget spent: ${spent.tokens} of ${budget.maxTokens} tokens.`;
  }
  if (budget.maxCostUsd !== undefined && spent.costUsd >= budget.maxCostUsd) {
    return `Cost budget spent: ${formatUsd(spent.costUsd)} of ${formatUsd(budget.maxCostUsd)}.`;
  }
  return undefined;
}
