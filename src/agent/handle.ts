import type { AgentEvent, AgentEventBody, RunResult } from "../core/events.js";
import type { ToolMessage } from "../core/messages.js";
import type { RunState } from "../core/run-state.js";
import { advance } from "./loop.js";
import { readAnswer } from "./output.js";
import type { Next, Run } from "./run.js";
import { answeredCalls, pendingCalls, sortResults, waitingApprovals } from "./state.js";

type Step = AsyncGenerator<AgentEvent, Next>;
const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };
const ignore = () => {};

/**
 * One run in progress: iterate it for its events (SPEC section 3), await `result` for its end,
 * or both. Awaiting `result` without iterating runs it to its end (the events still reach
 * `onEvent`). Leaving a `for await` early aborts the run. `state` is the run as a value, live.
 */
export class RunHandle<Output = string> implements AsyncIterableIterator<AgentEvent, undefined> {
  private readonly ended: Promise<RunResult<Output>>;
  private resolve!: (result: RunResult<Output>) => void;
  private reject!: (error: unknown) => void;
  private step: Step | undefined;
  private readonly queue: AgentEvent[] = [];
  private finished = false;
  /** The result, once the run has concluded (resolved when its last event goes out). */
  private final: RunResult<Output> | undefined;
  private iterating = false;
  private started = false;
  private draining = false;

  constructor(
    /** The run as a value: plain JSON, consistent at every event. */
    readonly state: RunState,
    private readonly run: Run,
    /** Aborts the run (its own controller); an object rather than a closure: one less per live run. */
    private readonly controller: { abort(): void },
    private readonly onEvent?: (event: AgentEvent) => void,
  ) {
    this.ended = new Promise<RunResult<Output>>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  /**
   * Resolves when the run has stopped; rejects only if a checkpoint or `onEvent` threw. Read
   * before anyone iterates, it runs the run to its end by itself (events go to `onEvent` only).
   */
  get result(): Promise<RunResult<Output>> {
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
      this.controller.abort();
      this.drain();
      await this.ended.catch(() => {});
    }
    return DONE;
  }

  private drain(): void {
    if (this.draining || this.finished) return;
    this.draining = true;
    // Chained callbacks rather than an async function: a waiting run holds one callback, not a
    // suspended function (its context, promise and reaction). A failure reaches `result`.
    const next = (step: IteratorResult<AgentEvent, undefined>) => {
      if (!step.done) this.pull().then(next, ignore);
    };
    this.pull().then(next, ignore);
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
        // Drained (nobody iterates), events go straight to `onEvent`: no generator hop per event.
        this.step ??= advance(this.state, this.run, this.draining ? (this.onEvent ?? ignore) : undefined);
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
      this.ended.catch(ignore); // a caller who only iterates sees the error there
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
    const incomplete = s.steps.at(-1)?.incomplete;
    const complete: AgentEventBody = {
      type: "turn_complete",
      stopReason: s.stopReason,
      iterations: s.iteration,
      output: s.output,
      usage: { ...s.usage },
      ...(approvals && { pendingApprovals: approvals }),
      ...(s.sessionId !== undefined && { sessionId: s.sessionId }),
      ...(incomplete && { incomplete }),
    };
    if (s.error) this.queue.push({ type: "error", ...s.error, runId });
    this.queue.push({ ...complete, runId } as AgentEvent);
    await this.run.options.checkpoint?.(s);
    this.finished = true;
    const result: RunResult<Output> = {
      runId,
      state: s,
      output: this.output(),
      text: s.output,
      stopReason: s.stopReason,
      iterations: s.iteration,
      messages: s.messages,
      usage: s.usage,
      steps: s.steps,
    };
    if (s.sessionId !== undefined) result.sessionId = s.sessionId;
    if (approvals) result.pendingApprovals = approvals;
    if (s.refusal !== undefined) result.refusal = s.refusal;
    if (incomplete) result.incomplete = incomplete;
    if (s.error) result.error = s.error;
    this.final = result;
  }

  /** `result.output`: the text, or with an output schema the answer validated again (so a stored run's is too). */
  private output(): Output {
    const spec = this.run.options.output;
    const s = this.state;
    if (!spec) return s.output as Output;
    const answered = s.stopReason === "final_answer" || s.stopReason === "task_completion";
    const answer = answered ? readAnswer(spec, s.output) : undefined;
    return (answer?.ok ? answer.value : undefined) as Output;
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
