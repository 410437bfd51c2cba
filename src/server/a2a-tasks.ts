import { type Message as A2AMessage, type Part, Role, type Task, TaskState } from "@a2a-js/sdk";
import type { ServerCallContext, TaskStore } from "@a2a-js/sdk/server";
import { checkRunState, inCallOrder, pendingApprovals } from "../agent/state.js";
import type { Message } from "../core/messages.js";
import type { RunState } from "../core/run-state.js";
import type { SessionStore, StoredSession } from "../store/types.js";
import { agentMessage, answerArtifact, dataPart, textPart } from "./a2a-parts.js";
import { ownedStore } from "./owners.js";

/**
 * A2A tasks as views of stored runs (SPEC section 14): a task is a run (its id the run's id), its
 * context the run's session. What a task says once it has settled (completed, failed, canceled,
 * input-required) is derived from the stored run, so it survives a restart and agrees with
 * `GET /v1/runs/{id}`; only a task in progress is held in memory, as the SDK writes it.
 */

/** The owner a call context carries: the client of a per-client key, else none. */
const ownerOf = (context: ServerCallContext): string | undefined => context.user?.userName || undefined;

/** The store as the caller sees it (its own sessions only, with per-client keys). */
export const storeFor = (store: SessionStore, context: ServerCallContext): SessionStore =>
  ownedStore(store, ownerOf(context));

/** The stored run of a task, as the caller sees it: its session and, when it is the session's last, its state. */
export async function storedRunOf(
  store: SessionStore,
  taskId: string,
): Promise<{ sessionId: string; session: StoredSession; state: RunState | undefined } | undefined> {
  const sessionId = await store.sessionOfRun(taskId);
  const session = sessionId === undefined ? undefined : await store.read(sessionId);
  if (sessionId === undefined || !session) return undefined;
  const last = session.lastRun;
  const state =
    last?.runId === taskId
      ? checkRunState({ ...(last.state as object), messages: inCallOrder(session.messages) })
      : undefined;
  return { sessionId, session, state };
}

/**
 * What a task waiting for input asks, as its status message: the question, or the calls that
 * wait for approval (text, and a data part `{"pendingApprovals": [...]}`) with how to decide.
 */
export function waitingParts(state: RunState): Part[] {
  if (state.status === "awaiting_answer") return [textPart(state.output)];
  if (state.status !== "awaiting_approval") return [];
  const calls = pendingApprovals(state);
  const list = calls.map((c) => `${c.name}(${JSON.stringify(c.arguments)}) [${c.id}]`).join(", ");
  return [
    textPart(
      `Waiting for approval: ${list}. Reply "approve" or "deny" (all of them), or send a data part {"approve": [ids] | "all", "deny": [ids] | "all"}.`,
    ),
    dataPart({ pendingApprovals: calls }),
  ];
}

/** Stop reasons that end a task as failed, with what the status message says. */
function failure(state: RunState): string | undefined {
  switch (state.stopReason) {
    case "final_answer":
    case "task_completion":
    case "converse":
    case "aborted":
    case "approval_required":
    case "ask_question":
    case undefined:
      return undefined;
    default:
      return state.error?.message
        ? `The run stopped (${state.stopReason}): ${state.error.message}`
        : `The run stopped (${state.stopReason}) before it had an answer.`;
  }
}

/** A task's state and status message from its run's state (`interrupted`: nobody runs it, its process died). */
function statusOf(
  taskId: string,
  state: RunState,
  interrupted: boolean,
): { state: TaskState; parts: Part[] } {
  switch (state.status) {
    case "awaiting_approval":
    case "awaiting_answer":
      return { state: TaskState.TASK_STATE_INPUT_REQUIRED, parts: waitingParts(state) };
    case "awaiting_tools":
      // Only a run started on /v1 with the client's own tools waits so; their results come back there.
      return {
        state: TaskState.TASK_STATE_INPUT_REQUIRED,
        parts: [
          textPart(
            "The run waits for the results of the client's own tools, sent on the API that started it.",
          ),
        ],
      };
    case "running":
      return {
        state: TaskState.TASK_STATE_WORKING,
        parts: interrupted
          ? [
              textPart(
                `The run was interrupted (its server stopped): POST /v1/runs/${taskId}/resume continues it, CancelTask ends it.`,
              ),
            ]
          : [],
      };
    case "completed": {
      if (state.stopReason === "aborted")
        return { state: TaskState.TASK_STATE_CANCELED, parts: [textPart("The task was cancelled.")] };
      const failed = failure(state);
      if (failed) return { state: TaskState.TASK_STATE_FAILED, parts: [textPart(failed)] };
      return { state: TaskState.TASK_STATE_COMPLETED, parts: [] };
    }
  }
}

/** A stopped or waiting run's task state and status message. */
export const settledStatus = (taskId: string, state: RunState) => statusOf(taskId, state, false);

/**
 * The text of a task's `answer` artifact: the run's output when it completed with one, or what
 * it said before its calls waited for approval; none for a question (the status message asks it),
 * a failure or a cancellation.
 */
export function answerOf(state: RunState): string | undefined {
  if (state.output === "") return undefined;
  if (state.status === "awaiting_approval") return state.output;
  if (state.status !== "completed" || state.stopReason === "aborted" || failure(state)) return undefined;
  return state.output;
}

/** The task's history: the run's input, the agent's texts and the answers to its questions (other calls and results left out). */
function historyOf(taskId: string, contextId: string, messages: readonly Message[]): A2AMessage[] {
  let start = messages.length;
  while (start > 0 && (messages[start - 1] as Message).role !== "user") start--;
  start = Math.max(0, start - 1);
  const history: A2AMessage[] = [];
  for (let i = start; i < messages.length; i++) {
    const m = messages[i] as Message;
    // The answers to its questions are the user's; other tool results are not shown.
    const fromUser = m.role === "user" || (m.role === "tool" && m.name === "ask_question");
    if ((m.role === "tool" && !fromUser) || m.content === "") continue;
    const message = agentMessage(taskId, contextId, [textPart(m.content)], `${taskId}-${i}`);
    if (fromUser) message.role = Role.ROLE_USER;
    history.push(message);
  }
  return history;
}

/**
 * The task of a stored run. A run whose session has moved on to a later run (an earlier task of
 * the context) is only known to have ended: completed, its status message naming the later task.
 */
export function taskOf(
  taskId: string,
  stored: { sessionId: string; session: StoredSession; state: RunState | undefined },
): Task {
  const { sessionId: contextId, session, state } = stored;
  const timestamp = new Date(session.lastRun?.updatedAt ?? session.summary.updatedAt).toISOString();
  if (!state) {
    const later = session.lastRun?.runId;
    return {
      id: taskId,
      contextId,
      status: {
        state: TaskState.TASK_STATE_COMPLETED,
        message: agentMessage(taskId, contextId, [
          textPart(`This task has ended; its context has moved on to task ${later}.`),
        ]),
        timestamp,
      },
      artifacts: [],
      history: [],
      metadata: {},
    };
  }
  const interrupted = session.summary.status === "interrupted";
  const status = statusOf(taskId, state, interrupted);
  const answer = answerOf(state);
  return {
    id: taskId,
    contextId,
    status: {
      state: status.state,
      message:
        status.parts.length > 0
          ? agentMessage(taskId, contextId, status.parts, `${taskId}-status`)
          : undefined,
      timestamp,
    },
    artifacts: answer === undefined ? [] : [answerArtifact(answer)],
    history: historyOf(taskId, contextId, state.messages),
    metadata: {},
  };
}

/** States in which the SDK's copy of a task is kept: the run is in progress on this server. */
const LIVE = new Set<TaskState>([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]);

/**
 * The SDK's `TaskStore` over the session store: a task whose run is in progress on this server is
 * held in memory as the SDK saves it; any other is read from its stored run (`taskOf`), which
 * also replaces a copy the SDK left behind (a stream whose client left before the run's last
 * events). Scoped by the caller's owner: a task of another client is not found.
 */
export class RunTaskStore implements TaskStore {
  private readonly live = new Map<string, Task>();

  /** `running`: whether a run of the task is in progress on this server. */
  constructor(
    private readonly store: SessionStore,
    private readonly running: (taskId: string) => boolean,
  ) {}

  private key(taskId: string, context: ServerCallContext): string {
    return `${ownerOf(context) ?? ""}\n${taskId}`;
  }

  async save(task: Task, context: ServerCallContext): Promise<void> {
    const key = this.key(task.id, context);
    if (task.status && LIVE.has(task.status.state)) this.live.set(key, structuredClone(task));
    else this.live.delete(key);
  }

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    const key = this.key(taskId, context);
    const held = this.live.get(key);
    if (held && this.running(taskId)) return structuredClone(held);
    const stored = await storedRunOf(storeFor(this.store, context), taskId);
    if (!stored) return held && structuredClone(held); // a task whose run has not started yet
    this.live.delete(key);
    return taskOf(taskId, stored);
  }

  /** ListTasks is refused before it gets here (see a2a-engine.ts): the store lists sessions, not runs. */
  async list(): Promise<never> {
    throw new Error("ListTasks is not supported by this agent.");
  }
}
