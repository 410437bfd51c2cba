/**
 * The stages of a reply's tool calls around their execution (which `advance` drives): prepare the
 * open calls, ask a person where needed, record each outcome, and once all are in, put them in
 * call order and let the guards see them.
 */
import type { AgentEvent, StopReason } from "../core/events.js";
import { type AssistantMessage, type ToolCall, type ToolMessage, trimmed } from "../core/messages.js";
import type { PendingCalls, RunState } from "../core/run-state.js";
import type { CallOutcome, CallProgress, PreparedCall } from "../tools/execute.js";
import { prepareKept } from "./redact-reply.js";
import { CONTINUE, circuitBreaker, type Next, type Run, type Sink } from "./run.js";
import { answeredCalls, pendingCalls, sortResults } from "./state.js";
import { recordCall, recordFailure, recordSuccess, repetitionWarning, tripped } from "./stop.js";

/**
 * The pending reply's calls without a result (a resumed reply may have some: those never run
 * again), prepared. A call whose arguments are not one JSON object is marked `invalid` in the reply
 * (with its error): the history then sends `{}` for it, which every provider accepts, and its
 * error result says what was wrong. The loop prepares a fresh reply's calls before storing it.
 */
export function openCalls(state: RunState, run: Run): PreparedCall[] {
  const pending = state.pending as PendingCalls;
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

/** Whether any of the calls may need a person: an approval rule, or `ask_question`. Calls no predicate. */
export function mayAskPerson(open: readonly PreparedCall[], state: RunState): boolean {
  for (const prepared of open) {
    const tool = prepared.tool;
    if (awaitsAnswer(prepared)) return true;
    if ((tool?.needsApproval ?? tool?.annotations?.destructiveHint === true) && !prepared.error) {
      if (!state.allowedTools.includes(prepared.call.name)) return true;
    }
  }
  return false;
}

/** What asking decided: the calls to run now, and what the run waits for after them. */
export interface Asked {
  ready: PreparedCall[];
  /** Some calls wait for a person's decision (no `onApproval`). */
  approval: boolean;
  /** A valid `ask_question` call: the run waits for its answer. */
  question: PreparedCall | undefined;
}

/**
 * Approvals: a call that needs one and has no decision yet gets an `approval_request`, then
 * `onApproval` decides (or, without it, the call waits); a declined call gets its error result
 * at once. `ask_question` calls wait for the person's answer.
 */
export async function* decide(
  state: RunState,
  run: Run,
  open: readonly PreparedCall[],
  sink: Sink,
): AsyncGenerator<AgentEvent, Asked> {
  const { onApproval } = run.options;
  const { checkpoint } = run;
  const { runId } = state;
  const pending = state.pending as PendingCalls;
  const asked: Asked = { ready: [], approval: false, question: undefined };
  for (const prepared of open) {
    const { call, arguments: args } = prepared;
    if (awaitsAnswer(prepared)) {
      asked.question ??= prepared;
      continue;
    }
    if (!needsApproval(prepared, state)) {
      asked.ready.push(prepared);
      continue;
    }
    let decision = pending.decisions.find((d) => d.id === call.id);
    if (!decision) {
      const request: AgentEvent = {
        type: "approval_request",
        id: call.id,
        name: call.name,
        arguments: args,
        runId,
      };
      sink.emit(request);
      if (!sink.drained) yield request;
      if (!onApproval) {
        asked.approval = true;
        continue;
      }
      const answer = await onApproval({ id: call.id, name: call.name, arguments: args });
      if (answer === "always") state.allowedTools.push(call.name);
      decision = { id: call.id, approved: answer !== "deny" };
      pending.decisions.push(decision);
    }
    if (decision.approved) asked.ready.push(prepared);
    else {
      const content = "The user declined this call: it was not run.";
      const declined = outcome(prepared.index, content);
      record(state, run, declined);
      if (checkpoint) await checkpoint(state);
      const event = resultEvent(state, declined);
      sink.emit(event);
      if (!sink.drained) yield event;
    }
  }
  return asked;
}

function outcome(index: number, content: string): CallOutcome {
  return { type: "outcome", index, content, isError: true, durationMs: 0, breaksLoop: false };
}

/** After the calls ran: the run waits when a person must decide or answer, else undefined. */
export function waitFor(state: RunState, asked: Asked): Next | undefined {
  if (asked.approval) return { type: "wait", for: "approval" };
  if (!asked.question) return undefined;
  state.output = String(asked.question.arguments.question ?? "");
  return { type: "wait", for: "answer" };
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

/** Appends one call's result (cut to the context's limit). The caller checkpoints before its event. */
export function record(state: RunState, run: Run, outcome: CallOutcome): void {
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
}

/** The `tool_result` event of the result `record` appended last. */
export function resultEvent(state: RunState, outcome: CallOutcome): AgentEvent {
  const message = state.messages[state.messages.length - 1] as ToolMessage;
  return {
    type: "tool_result",
    id: message.toolCallId,
    name: message.name,
    content: message.content,
    isError: message.isError,
    durationMs: outcome.durationMs,
    runId: state.runId,
  };
}

/**
 * All results are in (the last at `endedAt`): call order, the guards, and what the calls decided.
 * The caller checkpoints a `CONTINUE`.
 */
export function finishIteration(state: RunState, run: Run, endedAt: number): Next {
  sortResults(state);
  const pending = state.pending as PendingCalls;
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

/** A valid `ask_question` call: its result is the person's answer, so it waits for one. */
function awaitsAnswer(prepared: PreparedCall): boolean {
  return prepared.call.name === "ask_question" && prepared.tool?.loopBreaking === true && !prepared.error;
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
function stopReasonOf(toolName: string): StopReason {
  return toolName === "converse" ? "converse" : "task_completion";
}
