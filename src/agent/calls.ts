import type { AgentEvent, StopReason } from "../core/events.js";
import type { ToolCall, ToolMessage } from "../core/messages.js";
import type { RunState } from "../core/run-state.js";
import { executeCalls, type PreparedCall, prepareCall } from "../tools/execute.js";
import { CONTINUE, circuitBreaker, type Next, type Run } from "./run.js";
import { answeredCalls, pendingCalls, sortResults } from "./state.js";

/**
 * The pending reply's calls: those without a result run (after approval where needed), each
 * result is appended and checkpointed the moment it completes, and once all are in they are
 * put in call order and the guards see them. Calls waiting for a person or for the answer to
 * `ask_question` leave the run waiting.
 */
export async function* callTools(state: RunState, run: Run): AsyncGenerator<AgentEvent, Next> {
  const { signal, onApproval } = run.options;
  const { runId } = state;
  const pending = state.pending as NonNullable<RunState["pending"]>;
  const calls = pendingCalls(state);
  // A fresh reply has no results yet; a resumed one may have some (those calls never run again).
  const done = state.messages.length > pending.assistant + 1 ? answeredCalls(state) : undefined;
  const open: PreparedCall[] = [];
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i] as ToolCall;
    if (!done?.has(call.id)) open.push(prepareCall(call, i, run.tools));
  }
  for (const { call, arguments: args } of open) {
    yield { type: "tool_call", id: call.id, name: call.name, arguments: args, runId };
  }

  const ready: PreparedCall[] = [];
  let waitingApproval = false;
  let waitingAnswer = false;
  for (const prepared of open) {
    const { call, arguments: args } = prepared;
    if (awaitsAnswer(prepared)) {
      waitingAnswer = true;
      continue;
    }
    if (!needsApproval(prepared, state)) {
      ready.push(prepared);
      continue;
    }
    let decision = pending.decisions.find((d) => d.id === call.id);
    if (!decision) {
      yield { type: "approval_request", id: call.id, name: call.name, arguments: args, runId };
      if (!onApproval) {
        waitingApproval = true;
        continue;
      }
      const answer = await onApproval({ id: call.id, name: call.name, arguments: args });
      if (answer === "always") state.allowedTools.push(call.name);
      decision = { id: call.id, approved: answer !== "deny" };
      pending.decisions.push(decision);
    }
    if (decision.approved) ready.push(prepared);
    else yield await record(state, run, call, "The user declined this call: it was not run.", true, 0, false);
  }

  const execution = executeCalls(ready, {
    signal,
    concurrency: run.options.toolConcurrency,
    timeoutMs: run.options.toolTimeoutMs,
    maxResultChars: run.options.maxToolResultChars,
    ...(run.options.redact && { redact: run.options.redact }),
  });
  for await (const update of execution) {
    const { id, name } = calls[update.index] as ToolCall;
    if (update.type === "progress") {
      const { progress, total, message } = update;
      yield {
        type: "tool_progress",
        id,
        name,
        progress,
        ...(total !== undefined && { total }),
        ...(message && { message }),
        runId,
      };
      continue;
    }
    const content = run.options.context
      ? run.options.context.truncateToolResult(update.content)
      : update.content;
    const call = calls[update.index] as ToolCall;
    yield await record(state, run, call, content, update.isError, update.durationMs, update.breaksLoop);
  }

  if (signal.aborted) return { type: "stop", stopReason: "aborted" };
  if (waitingApproval) return { type: "wait", for: "approval" };
  if (waitingAnswer) {
    const question = open.find(awaitsAnswer);
    state.output = String(question?.arguments.question ?? "");
    return { type: "wait", for: "answer" };
  }
  return finishIteration(state, run);
}

/** Appends one call's result and checkpoints it; returns its event. */
async function record(
  state: RunState,
  run: Run,
  call: ToolCall,
  content: string,
  isError: boolean,
  durationMs: number,
  breaks: boolean,
): Promise<AgentEvent> {
  const message: ToolMessage = { role: "tool", toolCallId: call.id, name: call.name, content, isError };
  state.messages.push(message);
  if (breaks) state.pending?.breaking.push(call.id);
  // Stored before anyone hears of it: an event never reports what a crash could still lose.
  if (run.options.checkpoint) await run.options.checkpoint(state);
  return {
    type: "tool_result",
    id: call.id,
    name: call.name,
    content,
    isError,
    durationMs,
    runId: state.runId,
  };
}

/** All results are in: call order, the guards, and what the calls decided. */
async function finishIteration(state: RunState, run: Run): Promise<Next> {
  sortResults(state);
  const pending = state.pending as NonNullable<RunState["pending"]>;
  const calls = pendingCalls(state);
  const step = state.steps.at(-1);
  let breaking: ToolMessage | undefined;
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i] as ToolCall;
    const result = state.messages[pending.assistant + 1 + i] as ToolMessage;
    run.repetition.record(call.name, call.arguments.trim());
    if (result.isError) {
      if (step) step.toolErrors++;
      const description = `${call.name}(${call.arguments.trim()}) -> ${result.content}`;
      run.breaker.fail(`${call.name}\u0000${call.arguments.trim()}\u0000${result.content}`, description);
    } else run.breaker.succeed();
    if (!breaking && pending.breaking.includes(call.id)) breaking = result;
  }
  state.pending = undefined; // not `delete`: the state keeps one shape (V8 slows objects that lose properties)
  if (step) step.durationMs = performance.now() - run.iterationStartedAt;
  if (breaking) {
    state.output = breaking.content;
    return { type: "stop", stopReason: stopReasonOf(breaking.name) };
  }
  if (run.breaker.tripped) return circuitBreaker(run);
  const warning = run.repetition.warning();
  if (warning) state.messages.push({ role: "user", content: warning });
  if (run.options.checkpoint) await run.options.checkpoint(state);
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
