import type { AgentEvent, AgentEventBody, IterationRecord } from "../core/events.js";
import type { AssistantMessage, Message } from "../core/messages.js";
import { addUsage } from "../core/messages.js";
import type { RunState } from "../core/run-state.js";
import {
  incompleteReason,
  type ModelError,
  type ModelEvent,
  type ModelReply,
  type ModelRequest,
} from "../models/adapter.js";
import { costOf } from "../models/pricing.js";
import { executeCalls, type PreparedCall } from "../tools/execute.js";
import {
  decide,
  finishIteration,
  mayAskPerson,
  openCalls,
  progressEvent,
  record,
  resultEvent,
  waitFor,
} from "./calls.js";
import { answerCorrection, CUT_OFF, cutOffCorrection, readAnswer, refusalMessage } from "./output.js";
import {
  type Budget,
  budgetWarning,
  EXPLICIT_CORRECTION,
  formatUsd,
  iterationWarning,
  systemPrompt,
} from "./prompt.js";
import { redactedStream, redactReply } from "./redact-reply.js";
import { uniqueIds } from "./repair.js";
import { CONTINUE, circuitBreaker, type Next, type Run, type Sink } from "./run.js";
import { closePending, stopOutcome } from "./state.js";
import { recordFailure } from "./stop.js";

const ABORTED: Next = { type: "stop", stopReason: "aborted" };
const FINAL_ANSWER: Next = { type: "stop", stopReason: "final_answer" };
const NO_EVENTS: readonly AgentEvent[] = [];
/** Any character but whitespace: a reply without one (and without calls or a refusal) is empty. */
const VISIBLE = /\S/;

/**
 * A run from its state to its stop: iterations of one model call and the tool calls it asks for
 * (first the calls a resumed state has pending), then its last events. Yields the events of SPEC
 * section 3, each after `sink.emit`, or when `sink.drained` only emits them. One generator for
 * the whole run: an event costs one hop to its reader, and a waiting run one suspended frame
 * (its locals few: the work is in plain functions). Mutates `state`, consistent at every event.
 */
export async function* runLoop(state: RunState, run: Run, sink: Sink): AsyncGenerator<AgentEvent, undefined> {
  // Few locals, one `event` for all: a waiting run keeps every register of this frame.
  const { checkpoint } = run;
  let next: Next = CONTINUE;
  let event: AgentEvent;
  let open: PreparedCall[] | undefined;
  // A clock reading no other code has run since (a drained run nobody listens to, between sync
  // steps), or -1: reused rather than read again.
  let clock = -1;
  try {
    // The input (or the decisions of a resumed run) is stored before the model is asked.
    if (checkpoint) await checkpoint(state);
    while (next === CONTINUE) {
      open = undefined;
      if (!state.pending) {
        const system = startIteration(state, run, clock);
        if (typeof system !== "string") {
          next = system;
          break;
        }
        if (!sink.quiet) {
          event = { type: "iteration_start", iteration: state.iteration, runId: state.runId };
          sink.emit(event);
          if (!sink.drained) yield event;
        }
        let request = requestFor(state, run, system);
        if (request instanceof Promise) request = await request;
        let reply: ModelReply | ModelError | undefined;
        for await (const update of modelStream(run, request, sink)) {
          if (update.type === "done" || update.type === "error") {
            reply = update.type === "done" ? update.message : update.error;
            continue;
          }
          if (sink.quiet) continue;
          event =
            update.type === "text_delta"
              ? { type: "message_delta", text: update.text, runId: state.runId }
              : { type: "thinking", text: update.text, runId: state.runId };
          sink.emit(event);
          if (!sink.drained) yield event;
        }
        clock = performance.now();
        const stop = takeReply(state, run, reply, clock);
        if (stop) {
          next = stop;
          break;
        }
        // The reply is stored before any of its calls starts (and before its event), so a crash
        // never asks the model again for it; its calls are prepared first, which marks those whose
        // arguments no provider would take back.
        if (state.pending) {
          open = openCalls(state, run);
          if (checkpoint) await checkpoint(state);
        }
        if (!sink.quiet) {
          event = messageEvent(state);
          sink.emit(event);
          if (!sink.drained) yield event;
        }
        if (!state.pending) {
          next = answered(state, run);
          if (next === CONTINUE && checkpoint) await checkpoint(state);
          clock = -1;
          continue;
        }
      }

      // The pending reply's calls: those without a result run (after approval where needed), each
      // result is appended and checkpointed the moment it completes, and once all are in they are
      // put in call order and the guards see them.
      open ??= openCalls(state, run);
      for (let i = 0; !sink.quiet && i < open.length; i++) {
        event = callEvent(open[i] as PreparedCall, state.runId);
        sink.emit(event);
        if (!sink.drained) yield event;
      }
      const asked = mayAskPerson(open, state) ? yield* decide(state, run, open, sink) : undefined;
      const quiet = sink.quiet && !checkpoint;
      const execution = executeCalls(asked ? asked.ready : open, run, quiet && !asked ? clock : -1);
      while (!execution.done) {
        const update = execution.take();
        if (!update) {
          await execution.wait();
          continue;
        }
        if (update.type === "outcome") {
          record(state, run, update);
          // Stored before anyone hears of it: an event never reports what a crash could still lose.
          if (checkpoint) await checkpoint(state);
        }
        if (sink.quiet) continue;
        event = update.type === "outcome" ? resultEvent(state, update) : progressEvent(state, update);
        sink.emit(event);
        if (!sink.drained) yield event;
      }
      clock = quiet && !execution.waited ? execution.endedAt : -1;
      if (run.signal.aborted) next = ABORTED;
      else {
        next = (asked && waitFor(state, asked)) || finishIteration(state, run, execution.endedAt);
        if (next === CONTINUE && checkpoint) await checkpoint(state);
      }
    }

    // Stopped or waiting: the run's last events, after its last checkpoint.
    conclude(state, run, next as Exclude<Next, { type: "continue" }>);
    if (checkpoint) await checkpoint(state);
    sink.ended();
    const last = sink.quiet ? NO_EVENTS : lastEvents(state);
    for (let i = 0; i < last.length; i++) {
      event = last[i] as AgentEvent;
      sink.emit(event);
      if (!sink.drained) yield event;
    }
  } catch (error) {
    sink.failed(error);
    throw error;
  }
}

/** The request of this iteration: the history shaped to fit the context window (which may mean a summary, later). */
/**
 * The model's stream for one request. With secrets to redact and someone listening, its deltas go
 * through `redactedStream` (each shows what cannot be the start of a secret; the rest follows);
 * otherwise the model's own stream, untouched per chunk.
 */
function modelStream(run: Run, request: ModelRequest, sink: Sink): AsyncIterable<ModelEvent> {
  const updates = run.options.model.stream(request, run.streamOptions);
  const { redact } = run.options;
  return redact && !sink.quiet ? redactedStream(updates, redact) : updates;
}

function requestFor(state: RunState, run: Run, system: string): ModelRequest | Promise<ModelRequest> {
  const { context } = run.options;
  const { signal } = run;
  // The prompt tokens reported for the previous request teach the context what the server adds to its count.
  const messages = context
    ? context.shape(
        state.messages,
        system,
        run.nativeTools,
        signal,
        run.contextMemo,
        state.steps.at(-1)?.usage.inputTokens,
      )
    : state.messages;
  if (messages instanceof Promise) return messages.then((shaped) => requestOf(run, system, shaped));
  return requestOf(run, system, messages);
}

function requestOf(run: Run, system: string, messages: readonly Message[]): ModelRequest {
  const tools = run.nativeTools;
  const output = run.requestOutput;
  return output ? { system, messages, tools, output } : { system, messages, tools };
}

function callEvent({ call, arguments: args }: PreparedCall, runId: string): AgentEvent {
  return { type: "tool_call", id: call.id, name: call.name, arguments: args, runId };
}

/** The run stops or waits: its state says why (open calls closed). */
function conclude(state: RunState, run: Run, next: Exclude<Next, { type: "continue" }>): void {
  const s = state;
  if (next.type === "wait") {
    s.status = next.for === "approval" ? "awaiting_approval" : "awaiting_answer";
    s.stopReason = next.for === "approval" ? "approval_required" : "ask_question";
  } else {
    s.status = "completed";
    s.stopReason = next.stopReason;
    closePending(s);
    if (next.error) {
      const message = run.options.redact?.text(next.error.message) ?? next.error.message;
      s.error = { message, code: next.error.code };
    }
  }
}

/** The events that end a run: `error` when it stopped on one, then `turn_complete`. */
function lastEvents(s: RunState): AgentEvent[] {
  const { runId } = s;
  const incomplete = s.steps.at(-1)?.incomplete;
  const body: AgentEventBody = {
    type: "turn_complete",
    ...stopOutcome(s),
    iterations: s.iteration,
    output: s.output,
    usage: { ...s.usage },
    ...(s.sessionId !== undefined && { sessionId: s.sessionId }),
    ...(incomplete && { incomplete }),
  };
  const complete = { ...body, runId } as AgentEvent;
  return s.error ? [{ type: "error", ...s.error, runId }, complete] : [complete];
}

/**
 * Starts an iteration: its number, its start time and its system prompt (with the warnings near
 * a limit); or what stops the run before it (an abort, the iteration limit, a spent budget).
 */
function startIteration(state: RunState, run: Run, clock: number): string | Next {
  const { maxIterations, mode } = run.options;
  if (run.signal.aborted) return ABORTED;
  if (state.iteration >= maxIterations) return { type: "stop", stopReason: "max_iterations" };
  const started = clock >= 0 ? clock : performance.now();
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
  const lastWarning = iterationWarning(iteration, maxIterations, mode);
  return warning || lastWarning ? systemPrompt(run.stable, lastWarning, warning) : run.stable;
}

/**
 * The model's reply, appended with its step record (and, when it has tool calls, as the pending
 * reply); or why the run stops instead (an abort, a failed model call).
 */
function takeReply(
  state: RunState,
  run: Run,
  ended: ModelReply | ModelError | undefined,
  now: number,
): Next | undefined {
  const modelMs = now - run.iterationStartedAt;
  const reply = ended && "toolCalls" in ended ? ended : undefined;
  const failure = reply ? undefined : (ended as ModelError | undefined);
  if (run.signal.aborted || failure?.code === "aborted") return ABORTED;
  if (!reply) {
    const error = failure ?? {
      message: "The model stream ended without a reply.",
      code: "invalid_response",
    };
    return { type: "stop", stopReason: "model_error", error: { message: error.message, code: error.code } };
  }
  // Ids unique on arrival: approvals, results, resumes and the real arguments of a redacted call
  // find a call by its id.
  const unique = uniqueIds(reply.toolCalls);
  if (unique) reply.toolCalls = unique;
  if (run.options.redact) redactReply(reply, run.options.redact, run);
  if (run.options.price) reply.usage.costUsd = costOf(reply.usage, run.options.price);
  addUsage(state.usage, reply.usage);
  const { content, toolCalls, refusal } = reply;
  // Whole literals, not fields added one by one: object shapes V8 keeps for good.
  const assistant: AssistantMessage =
    toolCalls.length > 0 ? { role: "assistant", content, toolCalls } : { role: "assistant", content };
  if (reply.thinking) assistant.thinking = reply.thinking;
  if (reply.thinkingSignature) assistant.thinkingSignature = reply.thinkingSignature;
  if (reply.providerData) assistant.providerData = reply.providerData;
  state.messages.push(assistant);
  state.refusal = refusal;
  state.output = content || (refusal ?? "");
  state.steps.push({
    iteration: state.iteration,
    durationMs: modelMs,
    modelMs,
    finishReason: reply.finishReason,
    usage: reply.usage,
    toolCalls: toolCalls.length,
    toolErrors: 0,
  });
  // Rare, so added only when set: a step that was not cut short has no `incomplete` key.
  const incomplete =
    incompleteReason(reply.finishReason) ??
    (toolCalls.length === 0 && refusal === undefined && !VISIBLE.test(content) ? "empty" : undefined);
  if (incomplete) (state.steps[state.steps.length - 1] as IterationRecord).incomplete = incomplete;
  if (toolCalls.length > 0)
    state.pending = { assistant: state.messages.length - 1, decisions: [], breaking: [] };
  return undefined;
}

/** The `message` event of the reply just taken. */
function messageEvent(state: RunState): AgentEvent {
  const { runId, refusal } = state;
  const content = (state.messages[state.messages.length - 1] as AssistantMessage).content;
  return refusal === undefined
    ? { type: "message", content, runId }
    : { type: "message", content, refusal, runId };
}

/**
 * A reply without tool calls: the answer (checked against the output schema), or in explicit mode
 * a correction. With a schema, a refusal ends the run (`model_error`, code "refusal": there is no
 * answer to give), and an answer cut short (the output token limit, a content filter) goes back
 * to the model saying so. The caller checkpoints a `CONTINUE`.
 */
function answered(state: RunState, run: Run): Next {
  const { output, circuitBreakerThreshold } = run.options;
  const { breaker } = state.guards;
  if (run.options.mode === "natural") {
    if (!output) return FINAL_ANSWER;
    const reply = state.messages[state.messages.length - 1] as AssistantMessage;
    if (state.refusal !== undefined) {
      // Final: asking again for the schema would not change the model's mind.
      state.output = reply.content;
      const error = { message: refusalMessage(state.refusal), code: "refusal" };
      return { type: "stop", stopReason: "model_error", error };
    }
    const answer = readAnswer(output, state.output);
    if (answer.ok) {
      state.output = answer.json;
      return FINAL_ANSWER;
    }
    const { finishReason } = state.steps[state.steps.length - 1] as IterationRecord;
    const cut = incompleteReason(finishReason);
    state.messages.push({
      role: "user",
      content: cut ? cutOffCorrection(cut) : answerCorrection(answer.message),
    });
    // Any invalid answer counts as the same error: a model that ignores the schema trips the breaker.
    const description = cut
      ? `the final answer ${CUT_OFF[cut]} (finish reason ${finishReason}), so it is not complete JSON`
      : `the final answer does not match the output schema (${answer.message})`;
    if (recordFailure(breaker, circuitBreakerThreshold, "\u0000output_schema", description))
      return circuitBreaker(state);
    return CONTINUE;
  }
  state.messages.push({ role: "user", content: EXPLICIT_CORRECTION });
  const description = "the reply had no tool call (explicit mode requires one)";
  if (recordFailure(breaker, circuitBreakerThreshold, "\u0000no_tool_call", description))
    return circuitBreaker(state);
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
