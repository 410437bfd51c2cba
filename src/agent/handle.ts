import type { AgentEvent, AgentEventBody, RunResult } from "../core/events.js";
import type { ToolMessage } from "../core/messages.js";
import type { RunState } from "../core/run-state.js";
import { advance } from "./loop.js";
import type { Next, Run } from "./run.js";
import { answeredCalls, pendingCalls, sortResults, waitingApprovals } from "./state.js";

type Step = AsyncGenerator<AgentEvent, Next>;
const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * One run in progress: iterate it for its events (SPEC section 3), await `result` for its end,
 * or both. Awaiting `result` without iterating runs it to its end (the events still reach
 * `onEvent`). Leaving a `for await` early aborts the run. `state` is the run as a value, live.
 */
export class RunHandle implements AsyncIterableIterator<AgentEvent, undefined> {
  private readonly ended: Promise<RunResult>;
  private resolve!: (result: RunResult) => void;
  private reject!: (error: unknown) => void;
  private step: Step | undefined;
  private readonly queue: AgentEvent[] = [];
  private finished = false;
  /** The result, once the run has concluded (resolved when its last event goes out). */
  private final: RunResult | undefined;
  private iterating = false;
  private started = false;
  private draining = false;

  constructor(
    /** The run as a value: plain JSON, consistent at every event. */
    readonly state: RunState,
    private readonly run: Run,
    private readonly abort: () => void,
    private readonly onEvent?: (event: AgentEvent) => void,
  ) {
    this.ended = new Promise<RunResult>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.ended.catch(() => {}); // a caller who only iterates sees the error there
  }

  /**
   * Resolves when the run has stopped; rejects only if a checkpoint or `onEvent` threw. Read
   * before anyone iterates, it runs the run to its end by itself (events go to `onEvent` only).
   */
  get result(): Promise<RunResult> {
    if (!this.iterating) this.drain();
    return this.ended;
  }

  get runId(): string {
    return this.state.runId;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<AgentEvent, undefined>> {
    this.iterating = true;
    return this.draining ? Promise.resolve(DONE) : this.pull();
  }

  /** Leaving early aborts the run; it still ends (with `aborted`) and `result` resolves. */
  async return(): Promise<IteratorResult<AgentEvent, undefined>> {
    if (this.final)
      this.resolve(this.final); // left after its last event: the result is known
    else if (!this.finished) {
      this.abort();
      this.drain();
      await this.ended.catch(() => {});
    }
    return DONE;
  }

  private drain(): void {
    if (this.draining || this.finished) return;
    this.draining = true;
    void (async () => {
      while (!(await this.pull()).done);
    })();
  }

  private async pull(): Promise<IteratorResult<AgentEvent, undefined>> {
    try {
      while (true) {
        const queued = this.queue.shift();
        if (queued) {
          this.onEvent?.(queued);
          // `turn_complete` is the last event: the result is known as it goes out.
          if (this.final && this.queue.length === 0) this.resolve(this.final);
          return { done: false, value: queued };
        }
        if (this.finished) return DONE;
        if (!this.step && !this.started) {
          // The input (or the decisions of a resumed run) is stored before the model is asked.
          this.started = true;
          await this.run.options.checkpoint?.(this.state);
        }
        this.step ??= advance(this.state, this.run);
        const next = await this.step.next();
        if (!next.done) {
          this.onEvent?.(next.value);
          return next;
        }
        this.step = undefined;
        if (next.value.type !== "continue") await this.conclude(next.value);
      }
    } catch (error) {
      this.finished = true;
      this.reject(error);
      throw error;
    }
  }

  /** The run stops or waits: its last events, its last checkpoint, its result. */
  private async conclude(next: Exclude<Next, { type: "continue" }>): Promise<void> {
    const s = this.state;
    const { runId } = s;
    if (next.type === "wait") {
      s.status = next.for === "approval" ? "awaiting_approval" : "awaiting_answer";
      s.stopReason = next.for === "approval" ? "approval_required" : "ask_question";
    } else {
      s.status = "completed";
      s.stopReason = next.stopReason;
      closePending(s);
      if (next.error) {
        const message = this.run.options.redact?.(next.error.message) ?? next.error.message;
        s.error = { message, code: next.error.code };
      }
    }
    const approvals =
      s.status === "awaiting_approval"
        ? waitingApprovals(s, (call) => call.name !== "ask_question")
        : undefined;
    const complete: AgentEventBody = {
      type: "turn_complete",
      stopReason: s.stopReason,
      iterations: s.iteration,
      output: s.output,
      usage: { ...s.usage },
      ...(approvals && { pendingApprovals: approvals }),
      ...(s.sessionId !== undefined && { sessionId: s.sessionId }),
    };
    if (s.error) this.queue.push({ type: "error", ...s.error, runId });
    this.queue.push({ ...complete, runId } as AgentEvent);
    await this.run.options.checkpoint?.(s);
    this.finished = true;
    const result: RunResult = {
      runId,
      state: s,
      output: s.output,
      stopReason: s.stopReason,
      iterations: s.iteration,
      messages: s.messages,
      usage: s.usage,
      steps: s.steps,
    };
    if (s.sessionId !== undefined) result.sessionId = s.sessionId;
    if (approvals) result.pendingApprovals = approvals;
    if (s.refusal !== undefined) result.refusal = s.refusal;
    if (s.error) result.error = s.error;
    this.final = result;
  }
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
