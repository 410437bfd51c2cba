/**
 * The stages of one iteration, in the order `runLoop` runs them: begin, build the request, stream
 * the reply, take it, open its calls, ask a person where needed, record each outcome, decide.
 * Each takes the state and the run, changes the state, appends the events it produced to `out`
 * (undefined when nobody listens: then it makes none) and returns what the loop needs next.
 */

import type { AgentEvent, AgentEventBody, IterationRecord } from "../core/events.js";
import { isObject } from "../core/json.js";
import {
  type AssistantMessage,
  addUsage,
  type Message,
  type ToolCall,
  type ToolMessage,
  trimmed,
} from "../core/messages.js";
import type { FinalStopReason, PendingCalls, RunState, StoppedState } from "../core/run-state.js";
import {
  incompleteReason,
  type ModelError,
  type ModelEvent,
  type ModelReply,
  type ModelRequest,
} from "../models/adapter.js";
import { costOf } from "../models/pricing.js";
import type { Recorder } from "../record/recorder.js";
import type { CallOutcome, CallProgress, PreparedCall } from "../tools/execute.js";
import { answerCorrection, CUT_OFF, cutOffCorrection, readAnswer, refusalMessage } from "./output.js";
import {
  budgetExceeded,
  budgetWarning,
  EXPLICIT_CORRECTION,
  iterationWarning,
  systemPrompt,
} from "./prompt.js";
import { prepareKept, redactedStream, redactReply } from "./redact-reply.js";
import { uniqueIds } from "./repair.js";
import { CONTINUE, circuitBreaker, type Next, type Run, type Sink, type Stop } from "./run.js";
import { answeredCalls, isQuestion, pendingCalls, sortResults, stopOutcome, waitingChild } from "./state.js";
import { recordCall, recordFailure, recordSuccess, repetitionWarning, tripped } from "./stop.js";

/**
 * The events of the stage just run, in order, until the loop hands them out. One per run, reused:
 * emptying an array (`length = 0`) drops its backing store in V8, and the next push allocates
 * another (bench/loop-profile.ts, streaming: one per streamed delta).
 */
export class Events {
  private readonly items: AgentEvent[] = [];
  length = 0;

  push(event: AgentEvent): void {
    this.items[this.length++] = event;
  }

  /** The `i`-th event since the last `clear`. */
  at(i: number): AgentEvent {
    return this.items[i] as AgentEvent;
  }

  /** Empties it. The slots keep their last events until overwritten (a few, for one run's life). */
  clear(): void {
    this.length = 0;
  }
}

export const ABORTED: Stop = { type: "stop", stopReason: "aborted" };
const FINAL_ANSWER: Stop = { type: "stop", stopReason: "final_answer" };
/** Any character but whitespace: a reply without one (and without calls or a refusal) is empty. */
const VISIBLE = /\S/;

/**
 * Starts an iteration (its number, its start time, `iteration_start`) and returns its system prompt
 * (with the warnings near a limit); or what stops the run before it (an abort, the iteration
 * limit, a spent budget).
 */
export function begin(state: RunState, run: Run, out: Events | undefined): string | Stop {
  const { maxIterations, mode } = run.options;
  if (run.signal.aborted) return ABORTED;
  if (state.iteration >= maxIterations) return { type: "stop", stopReason: "max_iterations" };
  const started = run.clock.now();
  let warning: string | undefined;
  if (run.budgeted) {
    const { budget } = run.options;
    // A delegation tree has one budget: the top-level run's usage, which includes every child's.
    const usage = run.tree ? run.tree.usage : state.usage;
    const spent = {
      tokens: usage.inputTokens + usage.outputTokens,
      costUsd: usage.costUsd ?? 0,
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
  out?.push({ type: "iteration_start", iteration, runId: state.runId });
  const lastWarning = iterationWarning(iteration, maxIterations, mode);
  return warning || lastWarning ? systemPrompt(run.stable, lastWarning, warning) : run.stable;
}

/** The request of this iteration: the history shaped to fit the context window (which may mean a summary, later). */
export function requestFor(state: RunState, run: Run, system: string): ModelRequest | Promise<ModelRequest> {
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
  const request: ModelRequest = output ? { system, messages, tools, output } : { system, messages, tools };
  return run.choice ? chosen(request, run, run.choice) : request;
}

/** A request of a run with client tools: their `toolChoice` on the first only, `parallelToolCalls` on every one. */
function chosen(request: ModelRequest, run: Run, choice: NonNullable<Run["choice"]>): ModelRequest {
  const { toolChoice, parallelToolCalls } = choice;
  run.choice = parallelToolCalls === undefined ? undefined : { parallelToolCalls };
  return {
    ...request,
    ...(toolChoice !== undefined && { toolChoice }),
    ...(parallelToolCalls !== undefined && { parallelToolCalls }),
  };
}

/**
 * The model's stream for one request. With secrets to redact and someone listening, its deltas go
 * through `redactedStream` (each shows what cannot be the start of a secret; the rest follows);
 * otherwise the model's own stream, untouched per chunk.
 */
export function modelStream(run: Run, request: ModelRequest, sink: Sink): AsyncIterator<ModelEvent> {
  run.trace?.modelCall(request);
  const updates = run.options.model.stream(request, run.streamOptions);
  const { redact } = run.options;
  return (redact && !sink.quiet ? redactedStream(updates, redact) : updates)[Symbol.asyncIterator]();
}

/** One update of the model's stream: a delta becomes its event; the end (a reply or an error) is returned. */
export function streamed(
  update: ModelEvent,
  runId: string,
  out: Events | undefined,
): ModelReply | ModelError | undefined {
  if (update.type === "done") return update.message;
  if (update.type === "error") return update.error;
  out?.push(
    update.type === "text_delta"
      ? { type: "message_delta", text: update.text, runId }
      : { type: "thinking", text: update.text, runId },
  );
  return undefined;
}

/**
 * The model's reply, appended with its step record (and, when it has tool calls, as the pending
 * reply) and returned; or why the run stops instead (an abort, a failed model call).
 */
export function takeReply(
  state: RunState,
  run: Run,
  ended: ModelReply | ModelError | undefined,
  now: number,
): AssistantMessage | Stop {
  run.trace?.modelReturned(ended);
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
  // A sub-agent's model calls count for every run above it (their budget and `turn_complete.usage`).
  if (run.tree) for (const usage of run.tree.above) addUsage(usage, reply.usage);
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
  const step: IterationRecord = {
    iteration: state.iteration,
    durationMs: modelMs,
    modelMs,
    finishReason: reply.finishReason,
    usage: reply.usage,
    toolCalls: toolCalls.length,
    toolErrors: 0,
  };
  // Rare, so added only when set: a step that was not cut short has no `incomplete` key.
  const incomplete =
    incompleteReason(reply.finishReason) ??
    (toolCalls.length === 0 && refusal === undefined && !VISIBLE.test(content) ? "empty" : undefined);
  if (incomplete) step.incomplete = incomplete;
  state.steps.push(step);
  if (toolCalls.length > 0)
    state.pending = { assistant: state.messages.length - 1, decisions: [], breaking: [] };
  return assistant;
}

/** The `message` event of a reply `takeReply` took. */
export function messageEvent(message: AssistantMessage, state: RunState): AgentEvent {
  const { runId, refusal } = state;
  const { content } = message;
  return refusal === undefined
    ? { type: "message", content, runId }
    : { type: "message", content, refusal, runId };
}

/**
 * The pending reply's calls without a result (a resumed reply may have some: those never run
 * again), prepared, each announced by its `tool_call` event. A call whose arguments are not one
 * JSON object is marked `invalid` in the reply (with its error): the history then sends `{}` for
 * it, which every provider accepts, and its error result says what was wrong. The loop opens a
 * fresh reply's calls before storing it.
 */
export function openCalls(state: RunState, pending: PendingCalls, run: Run): PreparedCall[] {
  const calls = (state.messages[pending.assistant] as AssistantMessage).toolCalls as ToolCall[];
  // A fresh reply has no results yet.
  const done = state.messages.length > pending.assistant + 1 ? answeredCalls(state) : undefined;
  const open: PreparedCall[] = [];
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i] as ToolCall;
    if (done?.has(call.id)) continue;
    const prepared = prepareKept(call, i, run);
    if (prepared.malformed) calls[i] = prepared.call = { ...call, invalid: prepared.error as string };
    open.push(prepared);
  }
  return open;
}

/** The `tool_call` events of the calls `openCalls` opened. */
export function callEvents(open: readonly PreparedCall[], runId: string, out: Events | undefined): void {
  for (let i = 0; out && i < open.length; i++) {
    const { call, arguments: args } = open[i] as PreparedCall;
    out.push({ type: "tool_call", id: call.id, name: call.name, arguments: args, runId });
  }
}

/**
 * Whether any of the calls may need a person (an approval rule, or `ask_question`) or waits for the
 * caller (a client tool's). Calls no predicate.
 */
export function mayAskPerson(open: readonly PreparedCall[], state: RunState): boolean {
  for (const prepared of open) {
    const tool = prepared.tool;
    if (awaitsAnswer(prepared) || tool?.external === true) return true;
    if ((tool?.needsApproval ?? tool?.annotations?.destructiveHint === true) && !prepared.error) {
      if (!state.allowedTools.includes(prepared.call.name)) return true;
    }
  }
  return false;
}

/** What asking decided: the calls to run now, and what the run waits for after them. */
export interface Asked {
  /** The calls asked about, with the decisions taken on them. */
  pending: PendingCalls;
  ready: PreparedCall[];
  /** Some calls wait for a person's decision (no `onApproval`). */
  approval: boolean;
  /** A valid `ask_question` call: the run waits for its answer. */
  question: PreparedCall | undefined;
  /** Some calls are the caller's own tools' (`clientTools`): the run waits for their results. */
  client: boolean;
}

/**
 * Asks about one call: one that needs no person is `ready`; `ask_question` waits for its answer, a
 * client tool's call for its result;
 * one that needs an approval and has no decision yet gets an `approval_request`, then
 * `onApproval` decides ("ask": the loop awaits `approve`) or, without it, the call waits. Returns
 * false for a call declined before (the loop records its result with `decline`).
 */
export function ask(
  state: RunState,
  run: Run,
  prepared: PreparedCall,
  asked: Asked,
  out: Events | undefined,
): "ask" | boolean {
  if (awaitsAnswer(prepared)) {
    asked.question ??= prepared;
    return true;
  }
  // The caller runs it; one it could not be sent (arguments not one JSON object) gets its error result here.
  if (prepared.tool?.external === true && !prepared.error) {
    asked.client = true;
    return true;
  }
  if (!needsApproval(prepared, state)) {
    asked.ready.push(prepared);
    return true;
  }
  const { call, arguments: args } = prepared;
  const decision = asked.pending.decisions.find((d) => d.id === call.id);
  if (decision) {
    if (decision.approved) asked.ready.push(prepared);
    return decision.approved;
  }
  out?.push({ type: "approval_request", id: call.id, name: call.name, arguments: args, runId: state.runId });
  if (run.options.onApproval) return "ask";
  asked.approval = true;
  return true;
}

/** `onApproval`'s decision on a call `ask` announced, recorded; true when the call may run. */
export async function approve(
  state: RunState,
  run: Run,
  prepared: PreparedCall,
  asked: Asked,
): Promise<boolean> {
  const { call, arguments: args } = prepared;
  const { onApproval } = run.options;
  const answer = onApproval ? await onApproval({ id: call.id, name: call.name, arguments: args }) : "deny";
  if (answer === "always") state.allowedTools.push(call.name);
  const approved = answer !== "deny";
  asked.pending.decisions.push({ id: call.id, approved });
  return approved;
}

/** A declined call's error result, recorded. The caller checkpoints before its event. */
export function decline(state: RunState, run: Run, prepared: PreparedCall): ToolMessage {
  const content = "The user declined this call: it was not run.";
  return record(state, run, {
    type: "outcome",
    index: prepared.index,
    content,
    isError: true,
    durationMs: 0,
    breaksLoop: false,
  });
}

/** Appends one call's result (cut to the context's limit) and returns it. The caller checkpoints before its event. */
export function record(state: RunState, run: Run, outcome: CallOutcome): ToolMessage {
  const call = pendingCalls(state)[outcome.index] as ToolCall;
  const { context } = run.options;
  const content = context ? context.truncateToolResult(outcome.content) : outcome.content;
  const message: ToolMessage = {
    role: "tool",
    toolCallId: call.id,
    name: call.name,
    content,
    isError: outcome.isError,
  };
  if (outcome.media) message.media = outcome.media;
  state.messages.push(message);
  if (outcome.breaksLoop) state.pending?.breaking.push(call.id);
  if (run.recorder) recordTool(run.recorder, call, message);
  return message;
}

/** A recorded run's tool result (SPEC section 12), its arguments parsed as in `tool_call`. */
function recordTool(recorder: Recorder, call: ToolCall, message: ToolMessage): void {
  let args: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(call.arguments) as unknown;
    if (isObject(parsed)) args = parsed;
  } catch {}
  recorder.tool({
    id: call.id,
    name: call.name,
    arguments: args,
    content: message.content,
    isError: message.isError === true,
  });
}

/** The `tool_result` event of a result `record` returned. */
export function resultEvent(message: ToolMessage, durationMs: number, runId: string): AgentEvent {
  const { toolCallId: id, name, content, isError } = message;
  return { type: "tool_result", id, name, content, isError, durationMs, runId };
}

export function progressEvent(state: RunState, update: CallProgress): AgentEvent {
  const call = pendingCalls(state)[update.index] as ToolCall;
  const { runId } = state;
  const { progress, total, message } = update;
  return {
    type: "tool_progress",
    id: call.id,
    name: call.name,
    progress,
    ...(total !== undefined && { total }),
    ...(message && { message }),
    runId,
  };
}

/**
 * What follows a reply: for one without calls, its answer is checked; for one with calls, once
 * they are done (the last at `endedAt`), the run waits for a person (`asked`: what asking decided,
 * undefined when nobody was asked), or their results go in call order and the guards see them.
 * The run stops, waits or continues; the caller checkpoints a `CONTINUE`.
 */
export function decide(state: RunState, run: Run, asked: Asked | undefined, endedAt: number): Next {
  if (!state.pending) return answered(state, run);
  if (run.signal.aborted) return ABORTED;
  if (asked?.approval || (state.children && waitingChild(state))) return { type: "wait", for: "approval" };
  if (asked?.question) {
    state.output = String(asked.question.arguments.question ?? "");
    return { type: "wait", for: "answer" };
  }
  if (asked?.client) return { type: "wait", for: "tools" };
  return callsDone(state, state.pending, run, endedAt);
}

/**
 * A reply without tool calls: the answer (checked against the output schema), or in explicit mode
 * a correction. With a schema, a refusal ends the run (`model_error`, code "refusal": there is no
 * answer to give), and an answer cut short (the output token limit, a content filter) goes back
 * to the model saying so.
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

/** All results are in (the last at `endedAt`): call order, the guards, and what the calls decided. */
function callsDone(state: RunState, pending: PendingCalls, run: Run, endedAt: number): Next {
  sortResults(state);
  const calls = pendingCalls(state);
  const step = state.steps.at(-1);
  const { breaker, repetition } = state.guards;
  const { circuitBreakerThreshold } = run.options;
  let breaking: ToolMessage | undefined;
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i] as ToolCall;
    const result = state.messages[pending.assistant + 1 + i] as ToolMessage;
    const args = trimmed(call.arguments);
    recordCall(repetition, call.name, args, run.lastArguments);
    run.lastArguments = args;
    if (result.isError) {
      if (step) step.toolErrors++;
      const description = `${call.name}(${args}) -> ${result.content}`;
      recordFailure(
        breaker,
        circuitBreakerThreshold,
        `${call.name}\u0000${args}\u0000${result.content}`,
        description,
      );
    } else recordSuccess(breaker);
    if (!breaking && pending.breaking.length > 0 && pending.breaking.includes(call.id)) breaking = result;
  }
  state.pending = undefined; // not `delete`: the state keeps one shape (V8 slows objects that lose properties)
  if (step) step.durationMs = endedAt - run.iterationStartedAt;
  if (breaking) {
    state.output = breaking.content;
    return { type: "stop", stopReason: stopReasonOf(breaking.name) };
  }
  if (tripped(breaker, circuitBreakerThreshold)) return circuitBreaker(state);
  const warning = repetitionWarning(repetition, run.options.repetitionThreshold);
  if (warning) state.messages.push({ role: "user", content: warning });
  return CONTINUE;
}

/** The events that end a run: `error` when it stopped on one, then `turn_complete` (with `traceId` when traced). */
export function lastEvents(s: StoppedState, out: Events, traceId: string | undefined): void {
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
    ...(traceId !== undefined && { traceId }),
  };
  if (s.error) out.push({ type: "error", ...s.error, runId });
  out.push({ ...body, runId } as AgentEvent);
}

/** A valid `ask_question` call: its result is the person's answer, so it waits for one. */
function awaitsAnswer(prepared: PreparedCall): boolean {
  return isQuestion(prepared.call) && prepared.tool?.loopBreaking === true && !prepared.error;
}

function needsApproval(prepared: PreparedCall, state: RunState): boolean {
  const tool = prepared.tool;
  // A tool's own rule (even `false`) wins over its source's hint.
  const rule = tool?.needsApproval ?? tool?.annotations?.destructiveHint === true;
  if (!rule || prepared.error || state.allowedTools.includes(prepared.call.name)) return false;
  if (rule === true) return true;
  try {
    return rule(prepared.value) !== false;
  } catch {
    return true; // when in doubt, ask
  }
}

/** Built-in loop-breaking tools stop with their own reason; other loop-breaking tools count as task completion. */
function stopReasonOf(toolName: string): FinalStopReason {
  return toolName === "converse" ? "converse" : "task_completion";
}
