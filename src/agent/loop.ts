import type { AgentEvent, IterationRecord } from "../core/events.js";
import type { AssistantMessage, Message, ToolCall } from "../core/messages.js";
import { addUsage } from "../core/messages.js";
import type { RunState } from "../core/run-state.js";
import { incompleteReason, type ModelError, type ModelReply, type ModelRequest } from "../models/adapter.js";
import { costOf } from "../models/pricing.js";
import { executeCalls } from "../tools/execute.js";
import { decide, finishIteration, mayAskPerson, openCalls, progressEvent, record, waitFor } from "./calls.js";
import { answerCorrection, CUT_OFF, cutOffCorrection, readAnswer, refusalMessage } from "./output.js";
import {
  type Budget,
  budgetWarning,
  EXPLICIT_CORRECTION,
  formatUsd,
  iterationWarning,
  systemPrompt,
} from "./prompt.js";
import { CONTINUE, circuitBreaker, type Next, type Run } from "./run.js";
import { pendingCalls } from "./state.js";

const ABORTED: Next = { type: "stop", stopReason: "aborted" };

/**
 * Advances the run by one iteration: one model call and the tool calls it asks for (or, when
 * the state has calls pending from an earlier reply, those calls). Yields the events of SPEC
 * section 3 and returns what comes next; given `emit`, hands each event to it instead, at the
 * same point, and yields nothing (a run drained by `run()` pays no generator hop per event).
 * Mutates `state`, which is consistent at every event.
 */
export async function* advance(
  state: RunState,
  run: Run,
  emit?: (event: AgentEvent) => void,
): AsyncGenerator<AgentEvent, Next> {
  const { signal, checkpoint } = run.options;
  const { runId } = state;
  if (!state.pending) {
    const { model, mode, maxIterations } = run.options;
    if (signal.aborted) return ABORTED;
    if (state.iteration >= maxIterations) return { type: "stop", stopReason: "max_iterations" };
    const started = performance.now();
    let warning: string | undefined;
    if (run.budgeted) {
      const { budget } = run.options;
      const spent = {
        tokens: state.usage.inputTokens + state.usage.outputTokens,
        costUsd: state.usage.costUsd ?? 0,
        elapsedMs: started - run.startedAt,
      };
      const over = budgetExceeded(budget, spent);
      if (over)
        return {
          type: "stop",
          stopReason: "budget_exceeded",
          error: { message: over, code: "budget_exceeded" },
        };
      warning = budgetWarning(budget, spent);
    }

    const iteration = ++state.iteration;
    run.iterationStartedAt = started;
    const begin: AgentEvent = { type: "iteration_start", iteration, runId };
    if (emit) emit(begin);
    else yield begin;
    const lastWarning = iterationWarning(iteration, maxIterations, mode);
    const system = warning || lastWarning ? systemPrompt(run.stable, lastWarning, warning) : run.stable;
    let reply: ModelReply | undefined;
    let failure: ModelError | undefined;
    const { context } = run.options;
    let messages: readonly Message[] | Promise<readonly Message[]> = context
      ? context.shape(state.messages, system, run.nativeTools, signal, run.contextMemo)
      : state.messages;
    if (messages instanceof Promise) messages = await messages;
    const request: ModelRequest = { system, messages, tools: run.nativeTools };
    if (run.requestOutput) request.output = run.requestOutput;
    for await (const event of model.stream(request, run.streamOptions)) {
      let delta: AgentEvent;
      if (event.type === "text_delta") delta = { type: "message_delta", text: event.text, runId };
      else if (event.type === "thinking_delta") delta = { type: "thinking", text: event.text, runId };
      else {
        if (event.type === "done") reply = event.message;
        else failure = event.error;
        continue;
      }
      if (emit) emit(delta);
      else yield delta;
    }
    const modelMs = performance.now() - started;
    if (signal.aborted || failure?.code === "aborted") return ABORTED;
    if (!reply) {
      const error = failure ?? {
        message: "The model stream ended without a reply.",
        code: "invalid_response",
      };
      return { type: "stop", stopReason: "model_error", error: { message: error.message, code: error.code } };
    }

    if (run.options.price) reply.usage.costUsd = costOf(reply.usage, run.options.price);
    addUsage(state.usage, reply.usage);
    const { content, toolCalls, refusal } = reply;
    const assistant: AssistantMessage = { role: "assistant", content };
    if (reply.thinking) assistant.thinking = reply.thinking;
    if (reply.thinkingSignature) assistant.thinkingSignature = reply.thinkingSignature;
    if (reply.providerData) assistant.providerData = reply.providerData;
    if (toolCalls.length > 0) assistant.toolCalls = toolCalls;
    state.messages.push(assistant);
    state.refusal = refusal;
    state.output = content || (refusal ?? "");
    const step: IterationRecord = {
      iteration,
      durationMs: modelMs,
      modelMs,
      finishReason: reply.finishReason,
      usage: reply.usage,
      toolCalls: toolCalls.length,
      toolErrors: 0,
    };
    const incomplete = incompleteReason(reply.finishReason);
    if (incomplete) step.incomplete = incomplete;
    state.steps.push(step);
    if (toolCalls.length > 0) {
      // The reply is stored before any of its calls starts (and before its event), so a crash
      // never asks the model again for it.
      state.pending = { assistant: state.messages.length - 1, decisions: [], breaking: [] };
      if (checkpoint) await checkpoint(state);
    }
    const said: AgentEvent =
      refusal === undefined
        ? { type: "message", content, runId }
        : { type: "message", content, refusal, runId };
    if (emit) emit(said);
    else yield said;
    if (toolCalls.length === 0) return answered(state, run, reply);
  }

  // The pending reply's calls: those without a result run (after approval where needed), each
  // result is appended and checkpointed the moment it completes, and once all are in they are
  // put in call order and the guards see them.
  const open = openCalls(state, run);
  for (const { call, arguments: args } of open) {
    const event: AgentEvent = { type: "tool_call", id: call.id, name: call.name, arguments: args, runId };
    if (emit) emit(event);
    else yield event;
  }
  const asked = mayAskPerson(open, state) ? yield* decide(state, run, open, emit) : undefined;
  const calls = pendingCalls(state);
  const execution = executeCalls(asked ? asked.ready : open, run.execution);
  while (!execution.done) {
    const update = execution.take();
    if (!update) {
      await execution.wait();
      continue;
    }
    const call = calls[update.index] as ToolCall;
    let event: AgentEvent;
    if (update.type === "progress") event = progressEvent(call, update, runId);
    else {
      event = record(state, run, call, update);
      // Stored before anyone hears of it: an event never reports what a crash could still lose.
      if (checkpoint) await checkpoint(state);
    }
    if (emit) emit(event);
    else yield event;
  }

  if (signal.aborted) return ABORTED;
  const waiting = asked && waitFor(state, asked);
  if (waiting) return waiting;
  const next = finishIteration(state, run, execution.endedAt);
  if (next === CONTINUE && checkpoint) await checkpoint(state);
  return next;
}

/**
 * A reply without tool calls: the answer (checked against the output schema), or in explicit mode
 * a correction. With a schema, a refusal ends the run (`model_error`, code "refusal": there is no
 * answer to give), and an answer cut short (the output token limit, a content filter) goes back
 * to the model saying so.
 */
async function answered(state: RunState, run: Run, reply: ModelReply): Promise<Next> {
  const { checkpoint, output } = run.options;
  if (run.options.mode === "natural") {
    if (!output) return { type: "stop", stopReason: "final_answer" };
    if (reply.refusal !== undefined) {
      // Final: asking again for the schema would not change the model's mind.
      state.output = reply.content;
      const error = { message: refusalMessage(reply.refusal), code: "refusal" };
      return { type: "stop", stopReason: "model_error", error };
    }
    const answer = readAnswer(output, reply.content);
    if (answer.ok) {
      state.output = answer.json;
      return { type: "stop", stopReason: "final_answer" };
    }
    const cut = incompleteReason(reply.finishReason);
    state.messages.push({
      role: "user",
      content: cut ? cutOffCorrection(cut) : answerCorrection(answer.message),
    });
    // Any invalid answer counts as the same error: a model that ignores the schema trips the breaker.
    const description = cut
      ? `the final answer ${CUT_OFF[cut]} (finish reason ${reply.finishReason}), so it is not complete JSON`
      : `the final answer does not match the output schema (${answer.message})`;
    if (run.breaker.fail("\u0000output_schema", description)) return circuitBreaker(run);
    if (checkpoint) await checkpoint(state);
    return CONTINUE;
  }
  state.messages.push({ role: "user", content: EXPLICIT_CORRECTION });
  if (run.breaker.fail("\u0000no_tool_call", "the reply had no tool call (explicit mode requires one)")) {
    return circuitBreaker(run);
  }
  if (checkpoint) await checkpoint(state);
  return CONTINUE;
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
