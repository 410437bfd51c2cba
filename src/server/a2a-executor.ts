import { type Part, TaskState } from "@a2a-js/sdk";
import {
  AgentEvent,
  type AgentExecutionEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
  type ServerCallContext,
} from "@a2a-js/sdk/server";
import type { AnyAgent } from "../agent/agent.js";
import type { RunHandle } from "../agent/handle.js";
import { Session } from "../agent/session.js";
import { AgentloopError, errorMessage } from "../core/errors.js";
import type { AgentEvent as RunEvent } from "../core/events.js";
import type { RunState } from "../core/run-state.js";
import { type SessionStore, StoreError } from "../store/types.js";
import { agentMessage, answerArtifact, dataPart, decisionOf, textOf, textPart } from "./a2a-parts.js";
import { answerOf, settledStatus, storedRunOf, storeFor, taskOf, waitingParts } from "./a2a-tasks.js";
import type { EndpointDeps } from "./run-request.js";
import type { TrackedRun } from "./runs.js";
import { agentForRun, otherModel, storedRun } from "./sessions.js";

/**
 * The SDK's `AgentExecutor` over agentloop runs (SPEC section 14). A new task starts a run in the
 * session named by its context; a message on a task waiting for input continues its run (the
 * decisions of a waiting approval, or the answer to a question). The run's events become the
 * task's: text deltas update the `answer` artifact (replaced at each iteration's first delta,
 * whole at the end), tool calls and results are `working` status messages with a data part
 * (`{"toolCall": {id, name, arguments}}`, `{"toolResult": {id, name, isError, content}}`), and
 * the run's stop the task's final (or input-required) status. Runs are independent of the
 * connection that started them: only CancelTask (or the server's shutdown) aborts one.
 */

/** A run started for a task, followed by `follow`. */
interface Started {
  handle: RunHandle;
  run: TrackedRun;
  release: () => Promise<void>;
}

/** A task that ends (or goes on waiting) without a run: its state and what its status message says. */
interface Settled {
  state: TaskState;
  parts: Part[];
}

const settled = (state: TaskState, text: string, ...more: Part[]): Settled => ({
  state,
  parts: [textPart(text), ...more],
});

/** Nothing aborts a task's run but CancelTask and the server's shutdown (not its client leaving). */
const NEVER = new AbortController().signal;

/** Tool results in status messages are cut to this many characters. */
const MAX_RESULT_CHARS = 2_000;

const now = () => new Date().toISOString();

type TaskIds = Pick<RequestContext, "taskId" | "contextId">;

function statusEvent({ taskId, contextId }: TaskIds, state: TaskState, parts: Part[]): AgentExecutionEvent {
  const message = parts.length > 0 ? agentMessage(taskId, contextId, parts) : undefined;
  return AgentEvent.statusUpdate({
    taskId,
    contextId,
    status: { state, message, timestamp: now() },
    metadata: {},
  });
}

/** The `answer` artifact's update: appended to the text so far, or replacing it; `lastChunk` with the whole answer. */
function answerEvent(
  { taskId, contextId }: TaskIds,
  text: string,
  append: boolean,
  lastChunk: boolean,
): AgentExecutionEvent {
  const artifact = answerArtifact(text);
  return AgentEvent.artifactUpdate({ taskId, contextId, artifact, append, lastChunk, metadata: {} });
}

/**
 * The task's update for one event of its run, if any: a text delta updates the answer (`fresh`:
 * the iteration's first, which replaces the text of the iteration before), a tool call or result
 * is a `working` status with a data part. The run's end is the caller's (after its result).
 */
function updateOf(ids: TaskIds, event: RunEvent, fresh: boolean): AgentExecutionEvent | undefined {
  switch (event.type) {
    case "message_delta":
      return answerEvent(ids, event.text, !fresh, false);
    case "tool_call": {
      const { id, name, arguments: args } = event;
      const call = dataPart({ toolCall: { id, name, arguments: args } });
      return statusEvent(ids, TaskState.TASK_STATE_WORKING, [textPart(`Calling ${name}.`), call]);
    }
    case "tool_result": {
      const { id, name, isError, content } = event;
      const shown = content.length > MAX_RESULT_CHARS ? `${content.slice(0, MAX_RESULT_CHARS)}…` : content;
      const result = dataPart({ toolResult: { id, name, isError, content: shown } });
      const done = textPart(`${name} ${isError ? "failed" : "done"}.`);
      return statusEvent(ids, TaskState.TASK_STATE_WORKING, [done, result]);
    }
    default:
      return undefined;
  }
}

export class RunExecutor implements AgentExecutor {
  /** The runs in progress on this server, by task id. */
  private readonly live = new Map<string, TrackedRun>();

  /** `deps.store`: where runs are kept (a memory store when the server has none). */
  constructor(private readonly deps: EndpointDeps & { store: SessionStore }) {}

  /** Whether a run of the task is in progress on this server. */
  readonly running = (taskId: string): boolean => this.live.has(taskId);

  execute = async (ctx: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const { taskId, contextId } = ctx;
    const status = (state: TaskState, parts: Part[] = []) => bus.publish(statusEvent(ctx, state, parts));
    const working = { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: now() };
    const task = ctx.task
      ? { ...ctx.task, status: working }
      : { id: taskId, contextId, status: working, artifacts: [], history: [ctx.userMessage], metadata: {} };
    bus.publish(AgentEvent.task(task));
    const store = storeFor(this.deps.store, ctx.context);
    let started: Started | Settled;
    try {
      started = ctx.task ? await this.continueRun(ctx, store) : await this.startRun(ctx, store);
    } catch (error) {
      started = settled(TaskState.TASK_STATE_FAILED, this.deps.redact(errorMessage(error)));
    }
    if (!("handle" in started)) {
      status(started.state, started.parts);
      return;
    }
    const { handle, run, release } = started;
    this.live.set(taskId, run);
    try {
      let fresh = true; // the next delta starts the iteration's text
      for await (const event of handle) {
        const update = updateOf(ctx, event, fresh);
        if (update) bus.publish(update);
        if (event.type === "iteration_start") fresh = true;
        else if (event.type === "message_delta") fresh = false;
      }
      const { state } = await handle.result;
      if (run.cut) {
        const note = `The server shut down during the run: it is interrupted, and POST /v1/runs/${taskId}/resume (or a server with --resume-orphans) continues it.`;
        status(TaskState.TASK_STATE_FAILED, [textPart(note)]);
        return;
      }
      const answer = answerOf(state);
      if (answer !== undefined) bus.publish(answerEvent(ctx, answer, false, true));
      const final = settledStatus(taskId, state);
      status(final.state, final.parts);
    } catch (error) {
      status(TaskState.TASK_STATE_FAILED, [textPart(this.deps.redact(errorMessage(error)))]);
    } finally {
      this.live.delete(taskId);
      run.end();
      await release();
    }
  };

  /** Aborts the task's run on this server; its `execute` then ends the task `canceled`. With no run here, the request handler records the cancellation itself. */
  cancelTask = async (taskId: string): Promise<void> => {
    this.live.get(taskId)?.abort();
  };

  /**
   * Ends the stored run of a task that no request runs (one waiting for input): its waiting calls
   * are denied (a question answered that the task was cancelled) and it stops `aborted`, so the
   * task reads `canceled` from then on. Returns why it cannot, if it cannot.
   */
  async closeStoredRun(taskId: string, context: ServerCallContext): Promise<string | undefined> {
    if (this.live.has(taskId)) return undefined;
    const store = storeFor(this.deps.store, context);
    const sessionId = await store.sessionOfRun(taskId);
    if (sessionId === undefined) return undefined;
    const session = await this.open(store, sessionId);
    if (typeof session === "string")
      return `Task ${taskId} is running on another server sharing the store: cancel it there.`;
    const last = session.lastRun;
    if (last?.runId !== taskId || last.status === "completed") {
      await session.release().catch(() => {});
      return undefined;
    }
    if (last.status === "running") {
      await session.release().catch(() => {});
      return `Task ${taskId} was interrupted (its server stopped): POST /v1/runs/${taskId}/resume continues it; it can be cancelled while it runs.`;
    }
    const [, agent] = this.agentFor(last) ?? this.first();
    const stop = new AbortController();
    stop.abort();
    try {
      const handle = agent.resume(last, {
        ...(last.status === "awaiting_approval"
          ? { deny: "all" as const }
          : { answer: "(No answer: the task was cancelled.)" }),
        signal: stop.signal,
        checkpoint: session.checkpoint,
      });
      await handle.result;
    } finally {
      await session.release().catch(() => {});
    }
    return undefined;
  }

  /** A new task: a run in the session of its context, which must not have another task in progress. */
  private async startRun(ctx: RequestContext, store: SessionStore): Promise<Started | Settled> {
    const { taskId, contextId } = ctx;
    const session = await this.open(store, contextId);
    if (typeof session === "string") return settled(TaskState.TASK_STATE_REJECTED, session);
    const last = session.lastRun;
    if (last && last.status !== "completed") {
      await session.release().catch(() => {});
      const why =
        last.status === "running"
          ? `task ${last.runId} in it was interrupted (POST /v1/runs/${last.runId}/resume continues it)`
          : `task ${last.runId} in it waits for input: reply on that task (message.taskId) or cancel it`;
      return settled(
        TaskState.TASK_STATE_REJECTED,
        `Context ${contextId} is not free: ${why}; or send the message without a contextId (a new context).`,
      );
    }
    const [, agent] = this.first();
    return this.started(session, (signal, checkpoint) =>
      agent.stream(textOf(ctx.userMessage), {
        runId: taskId,
        signal,
        history: session.messages,
        sessionId: session.id,
        checkpoint,
      }),
    );
  }

  /** A message on a task waiting for input: decisions on its waiting calls, or the answer to its question. */
  private async continueRun(ctx: RequestContext, store: SessionStore): Promise<Started | Settled> {
    const { taskId, userMessage } = ctx;
    const sessionId = await store.sessionOfRun(taskId);
    if (sessionId === undefined)
      return settled(TaskState.TASK_STATE_FAILED, `Task ${taskId} has no stored run.`);
    const session = await this.open(store, sessionId);
    if (typeof session === "string") {
      return settled(
        TaskState.TASK_STATE_INPUT_REQUIRED,
        `Task ${taskId} is busy: another request is continuing it. Try again once it answers.`,
      );
    }
    const last = session.lastRun;
    const refuse = async (why: Settled): Promise<Settled> => {
      await session.release().catch(() => {});
      return why;
    };
    if (
      last?.runId !== taskId ||
      (last.status !== "awaiting_approval" && last.status !== "awaiting_answer")
    ) {
      const stored = await storedRunOf(store, taskId);
      const task = stored && taskOf(taskId, stored);
      return refuse(
        settled(
          task?.status?.state ?? TaskState.TASK_STATE_FAILED,
          `Task ${taskId} is not waiting for input.`,
        ),
      );
    }
    const chosen = this.agentFor(last);
    if (!chosen)
      return refuse(settled(TaskState.TASK_STATE_INPUT_REQUIRED, `${otherModel(last, this.deps.agents)}.`));
    const [, agent] = chosen;
    let options: { approve?: readonly string[] | "all"; deny?: readonly string[] | "all"; answer?: string };
    if (last.status === "awaiting_approval") {
      const decision = decisionOf(userMessage);
      if (typeof decision === "string")
        return refuse(settled(TaskState.TASK_STATE_INPUT_REQUIRED, decision, ...waitingParts(last).slice(1)));
      options = decision;
    } else {
      const answer = textOf(userMessage).trim();
      if (answer === "")
        return refuse(
          settled(TaskState.TASK_STATE_INPUT_REQUIRED, `Send the answer as text. ${last.output}`),
        );
      options = { answer };
    }
    try {
      return await this.started(session, (signal, checkpoint) =>
        agent.resume(last, { ...options, signal, checkpoint }),
      );
    } catch (error) {
      // A decision on a call that does not wait: the message names the calls that do.
      if (error instanceof AgentloopError && error.code === "invalid_state")
        return settled(
          TaskState.TASK_STATE_INPUT_REQUIRED,
          this.deps.redact(error.message),
          ...waitingParts(last).slice(1),
        );
      throw error;
    }
  }

  /** Starts a tracked run in a taken session; the session is released if it cannot start. */
  private started(
    session: Session,
    start: (signal: AbortSignal, checkpoint: (state: RunState) => Promise<void>) => RunHandle,
  ): Started {
    const run = this.deps.runs.start(NEVER);
    const release = () => session.release().catch(() => {});
    try {
      return { handle: start(run.signal, storedRun(run, session)), run, release };
    } catch (error) {
      run.end();
      void release();
      throw error;
    }
  }

  /** Takes a session, or says why not (another request holds it, or its id is not one). */
  private async open(store: SessionStore, sessionId: string): Promise<Session | string> {
    try {
      return await Session.open(store, sessionId);
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      if (error.code === "session_busy")
        return `Context ${sessionId} is busy: another task in it is running. Wait for it to end, or send the message without a contextId (a new context).`;
      if (error.code === "invalid_session_id") return `contextId: ${error.message}.`;
      throw error;
    }
  }

  private first(): [string, AnyAgent] {
    const { agents, defaultModel } = this.deps;
    return [defaultModel, agents[defaultModel] as AnyAgent];
  }

  private agentFor(state: RunState): [string, AnyAgent] | undefined {
    return agentForRun(this.deps.agents, this.deps.defaultModel, state);
  }
}
