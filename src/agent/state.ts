import { AgentloopError } from "../core/errors.js";
import type { PendingApproval, StopOutcome } from "../core/events.js";
import {
  type AssistantMessage,
  emptyUsage,
  type Message,
  type ToolCall,
  type ToolMessage,
  type UserMessage,
} from "../core/messages.js";
import { echoed } from "../core/redact.js";
import {
  type AwaitingAnswerState,
  type AwaitingApprovalState,
  type ChildRun,
  type FinalStopReason,
  RUN_STATE_VERSION,
  type RunState,
  type StoppedState,
} from "../core/run-state.js";
import { compactedLog } from "../memory/compaction.js";
import { askQuestion } from "../tools/builtin/loop-breaking.js";
import { repairReply } from "./repair.js";

export type {
  AwaitingApprovalState,
  FinalStopReason,
  RunState,
  StoppedState,
} from "../core/run-state.js";

/**
 * A fresh state for a run by the model `model` after `history` (not modified), its `input` appended
 * when given. Every field is there from
 * the start, undefined until set (JSON leaves those out): one object shape for every run, which
 * V8's optimised code can rely on even after all runs so far were collected.
 */
export function newRunState(
  runId: string,
  history: readonly Message[],
  sessionId?: string,
  input?: Message,
  model?: string,
): RunState {
  return {
    version: RUN_STATE_VERSION,
    runId,
    sessionId,
    model,
    status: "running",
    // concat and slice allocate the exact size; a spread or a push leaves room for 16 more.
    messages: input ? history.concat(input) : history.slice(),
    iteration: 0,
    usage: emptyUsage(),
    steps: [],
    output: "",
    refusal: undefined,
    stopReason: undefined,
    error: undefined,
    guards: {
      breaker: { signature: "", count: 0, description: "" },
      repetition: { signature: "", count: 0, name: "" },
    },
    allowedTools: [],
    pending: undefined,
    outputSchema: undefined,
    clientTools: undefined,
    children: undefined,
  };
}

/** The calls of the pending reply, in call order. */
export function pendingCalls(state: RunState): readonly ToolCall[] {
  if (!state.pending) return [];
  const message = state.messages[state.pending.assistant] as AssistantMessage | undefined;
  return message?.toolCalls ?? [];
}

/** Ids of the pending reply's calls that already have a result. */
export function answeredCalls(state: RunState): Set<string> {
  const done = new Set<string>();
  if (!state.pending) return done;
  for (let i = state.pending.assistant + 1; i < state.messages.length; i++) {
    const message = state.messages[i] as Message;
    if (message.role === "tool") done.add(message.toolCallId);
  }
  return done;
}

/** Puts the results after the pending reply in call order (in place), once all are in. */
export function sortResults(state: RunState): void {
  if (!state.pending) return;
  const calls = pendingCalls(state);
  const start = state.pending.assistant + 1;
  // Most replies finish in call order (one call, or sequential ones): nothing to move.
  let ordered = state.messages.length - start === calls.length;
  for (let i = 0; ordered && i < calls.length; i++) {
    const message = state.messages[start + i] as Message;
    ordered = message.role === "tool" && message.toolCallId === (calls[i] as ToolCall).id;
  }
  if (ordered) return;
  const order = new Map(calls.map((call, i) => [call.id, i]));
  const results = state.messages.slice(start);
  results.sort((a, b) => rank(a, order) - rank(b, order));
  state.messages.splice(start, results.length, ...results);
}

const rank = (message: Message, order: ReadonlyMap<string, number>) =>
  message.role === "tool" ? (order.get(message.toolCallId) ?? order.size) : order.size + 1;

/**
 * A stored log in the order a run wrote it (tool results in completion order) as the history
 * the run had: every finished reply's results in call order, and each reply repaired as the loop
 * takes replies now (`repairReply`: unique call ids, unreadable arguments marked `invalid`), so a
 * log an older version stored loads and continues. Returns a new array.
 */
export function inCallOrder(log: readonly Message[]): Message[] {
  const out = [...log];
  for (let i = 0; i < out.length; i++) {
    const message = out[i] as Message;
    if (message.role !== "assistant" || !message.toolCalls?.length) continue;
    let end = i + 1;
    while (end < out.length && (out[end] as Message).role === "tool") end++;
    repairReply(out, i, end);
    const calls = (out[i] as AssistantMessage).toolCalls as ToolCall[];
    const order = new Map(calls.map((call, k) => [call.id, k]));
    const block = out.slice(i + 1, end).sort((a, b) => rank(a, order) - rank(b, order));
    out.splice(i + 1, block.length, ...block);
    i = end - 1;
  }
  return out;
}

/**
 * The history a stored log stands for: `inCallOrder`, then each compaction's summary in place of
 * the messages it replaced (the log keeps them). Returns a new array.
 */
export function historyOfLog(log: readonly Message[]): Message[] {
  return compactedLog(inCallOrder(log));
}

/** The calls waiting for a person's decision (call order), as `turn_complete` lists them. */
function waitingApprovals(state: RunState, needsDecision: (call: ToolCall) => boolean): PendingApproval[] {
  if (!state.pending) return [];
  const done = answeredCalls(state);
  const decided = new Set(state.pending.decisions.map((d) => d.id));
  return pendingCalls(state)
    .filter((call) => !done.has(call.id) && !decided.has(call.id) && needsDecision(call))
    .map((call) => ({ id: call.id, name: call.name, arguments: parseArguments(call.arguments) }));
}

/**
 * Whether a call is one of `ask_question`, the built-in tool whose result is the person's answer:
 * the run waits for it rather than for an approval (the one place its name is compared).
 */
export function isQuestion(call: { name: string }): boolean {
  return call.name === askQuestion.name;
}

/**
 * The calls a run waiting for approvals waits on (`turn_complete.pendingApprovals`), in call order:
 * its own, and in place of a call whose sub-agent waits, that child's (with `agent` and `runId`).
 */
export function pendingApprovals(state: AwaitingApprovalState): PendingApproval[] {
  return approvalsOf(state, undefined);
}

function approvalsOf(
  state: RunState,
  owners: Map<string, AwaitingApprovalState> | undefined,
): PendingApproval[] {
  const own = waitingApprovals(state, (call) => !isQuestion(call) && !isClientCall(state, call));
  if (!state.children) {
    if (owners) for (const call of own) owners.set(call.id, state as AwaitingApprovalState);
    return own;
  }
  const calls: PendingApproval[] = [];
  for (const call of own) {
    const child = waitingChild(state, call.id);
    if (!child) {
      owners?.set(call.id, state as AwaitingApprovalState);
      calls.push(call);
      continue;
    }
    const { agent, state: childState } = child;
    for (const c of approvalsOf(childState, owners))
      calls.push(c.agent === undefined ? { ...c, agent, runId: childState.runId } : c);
  }
  return calls;
}

/** The sub-agent of the pending reply's call `callId` that waits for approvals, if any. */
export function waitingChild(state: RunState, callId?: string): ChildRun | undefined {
  const { children, iteration } = state;
  if (!children) return undefined;
  for (let i = children.length - 1; i >= 0; i--) {
    const child = children[i] as ChildRun;
    if (child.iteration !== iteration) break;
    if (child.state.status === "awaiting_approval" && (callId === undefined || child.parentCallId === callId))
      return child;
  }
  return undefined;
}

/** Whether a call is of one of the caller's own tools (`clientTools`): the caller sends its result. */
export function isClientCall(state: RunState, call: { name: string }): boolean {
  return state.clientTools?.some((tool) => tool.name === call.name) === true;
}

/** How a stopped run stopped: its reason, with the calls it waits on when it waits for approvals. */
export function stopOutcome(state: StoppedState): StopOutcome {
  if (state.status === "awaiting_approval")
    return { stopReason: state.stopReason, pendingApprovals: pendingApprovals(state) };
  return { stopReason: state.stopReason };
}

/**
 * The run stops (`completed`, its open calls closed, `error` when it stopped on one) or waits for a
 * person (`approval` or `answer`) or for the caller's results (`tools`), its pending calls kept.
 */
export function conclude(
  state: RunState,
  end:
    | { stopReason: FinalStopReason; error?: { message: string; code: string } }
    | "approval"
    | "answer"
    | "tools",
): asserts state is StoppedState {
  const s = state;
  if (end === "tools") {
    s.status = "awaiting_tools";
    s.stopReason = "tool_calls";
  } else if (end === "approval") {
    s.status = "awaiting_approval";
    s.stopReason = "approval_required";
  } else if (end === "answer") {
    s.status = "awaiting_answer";
    s.stopReason = "ask_question";
  } else {
    s.status = "completed";
    s.stopReason = end.stopReason;
    closePending(s);
    if (end.error) s.error = end.error;
  }
}

/**
 * A waiting or interrupted run goes on: `running` again, with the model that now runs it. The
 * answer of a run that waits for one becomes the result of its `ask_question` call.
 */
export function reopen(state: RunState, model: string | undefined, answer: string | undefined): void {
  if (state.status === "awaiting_answer" && answer !== undefined) answerQuestion(state, answer);
  const s = state;
  s.status = "running";
  s.stopReason = undefined;
  s.error = undefined;
  s.model = model;
}

function answerQuestion(state: AwaitingAnswerState, answer: string): void {
  const done = answeredCalls(state);
  const call = pendingCalls(state).find((c) => isQuestion(c) && !done.has(c.id));
  if (call)
    state.messages.push({
      role: "tool",
      toolCallId: call.id,
      name: call.name,
      content: answer,
      isError: false,
    });
}

/**
 * A fresh state after `history`, with `input` appended. A history that ends with calls left open
 * (a run that waited): the input answers an `ask_question` among them, and the others are closed
 * as not run; with a question answered the run goes on from those calls, else the input follows.
 */
export function afterHistory(
  runId: string,
  history: readonly Message[],
  input: UserMessage,
  sessionId: string | undefined,
  model: string | undefined,
): RunState {
  let last = history.length - 1;
  while (history[last]?.role === "tool") last--;
  const reply = history[last];
  const waits = reply?.role === "assistant" && reply.toolCalls?.length;
  // The input goes in with the history (an array of the right size) unless calls are closed first.
  const state = newRunState(runId, history, sessionId, waits ? undefined : input, model);
  if (reply?.role !== "assistant" || !reply.toolCalls?.length) return state;
  state.pending = { assistant: last, decisions: [], breaking: [] };
  const done = answeredCalls(state);
  const open = reply.toolCalls.filter((call) => !done.has(call.id));
  const question = open.find(isQuestion);
  for (const call of open) {
    const content = call === question ? input.content : "This call was not run.";
    state.messages.push({ role: "tool", toolCallId: call.id, name: call.name, content, isError: !question });
  }
  if (question) return state;
  sortResults(state);
  state.pending = undefined; // not `delete`: the state keeps one shape (V8 slows objects that lose properties)
  state.messages.push(input);
  return state;
}

/**
 * A run that stops with calls still open (aborted, or stopped mid-reply) gives each an error
 * result, so the conversation stays valid to continue: every call has its result.
 */
function closePending(state: RunState): void {
  if (!state.pending) return;
  const done = answeredCalls(state);
  for (const call of pendingCalls(state)) {
    if (done.has(call.id)) continue;
    const result: ToolMessage = {
      role: "tool",
      toolCallId: call.id,
      name: call.name,
      content: "The run stopped before this call finished: it did not complete.",
      isError: true,
    };
    state.messages.push(result);
  }
  sortResults(state);
  state.pending = undefined; // not `delete`: the state keeps one shape (V8 slows objects that lose properties)
}

/** Arguments for display and events: the parsed object, or `{}` when they are not one. */
function parseArguments(text: string): Record<string, unknown> {
  try {
    const value: unknown = text.trim() === "" ? {} : JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

/**
 * Checks that `value` is a run state this version can continue (a stored or returned one).
 * @throws AgentloopError("invalid_state") naming what is wrong.
 */
export function checkRunState(value: unknown): RunState {
  const state = value as Partial<RunState> | null;
  if (typeof state !== "object" || state === null || !Array.isArray(state.messages)) {
    throw new AgentloopError(
      "invalid_state",
      "Not a run state: pass the `state` of a RunResult or a stored run.",
    );
  }
  if (state.version !== RUN_STATE_VERSION) {
    throw new AgentloopError(
      "invalid_state",
      `This run state has version ${String(state.version)}; this agentloop continues version ${RUN_STATE_VERSION}.`,
    );
  }
  return state as RunState;
}

/**
 * Records decisions on the calls a run waits on for approval (ids, or "all"; a call both approved
 * and denied is denied).
 * @throws AgentloopError("invalid_state") naming the waiting calls, for an id that is not one.
 */
export function recordDecisions(
  state: AwaitingApprovalState,
  approved: readonly string[] | "all" | undefined,
  denied: readonly string[] | "all" | undefined,
): void {
  // Whose each waiting call is: this run's, or a waiting sub-agent's (which records it).
  const owners = new Map<string, AwaitingApprovalState>();
  const waiting = approvalsOf(state, owners);
  const ids = new Set(waiting.map((call) => call.id));
  const list = (given: readonly string[] | "all" | undefined) =>
    given === "all" ? [...ids] : [...(given ?? [])];
  const approve = list(approved);
  const deny = list(denied);
  for (const id of [...approve, ...deny]) {
    if (!ids.has(id)) {
      const names = waiting.map((call) => `${call.id} (${call.name})`).join(", ") || "none";
      throw new AgentloopError(
        "invalid_state",
        `No call '${echoed(id)}' waits for approval; waiting: ${names}.`,
      );
    }
  }
  const refused = new Set(deny);
  const decide = (id: string, approved: boolean) =>
    (owners.get(id) ?? state).pending.decisions.push({ id, approved });
  for (const id of approve) if (!refused.has(id)) decide(id, true);
  for (const id of deny) decide(id, false);
}
