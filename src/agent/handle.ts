import { errorMessage } from "../core/errors.js";
import type { AgentEvent, RunResult } from "../core/events.js";
import type { RunState, StoppedState } from "../core/run-state.js";
import { abortCalls } from "../tools/execute.js";
import { runLoop } from "./loop.js";
import { readAnswer } from "./output.js";
import type { Run, Sink } from "./run.js";
import { stopOutcome } from "./state.js";

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };
const ignore = () => {};

/**
 * One run in progress: iterate it for its events (SPEC section 3), await `result` for its end,
 * or both. Awaiting `result` without iterating runs it to its end (the events still reach
 * `onEvent`). Leaving a `for await` early aborts the run. `state` is the run as a value, live.
 */
export class RunHandle<Output = string> implements AsyncIterableIterator<AgentEvent, undefined> {
  /** The run's loop; `next()` hands out its own promises (no hop of the handle's in between). */
  private loop: AsyncGenerator<AgentEvent, undefined> | undefined = undefined;
  /** What `result` returns, made when first read. */
  private ended: Promise<RunResult<Output>> | undefined = undefined;
  private iterating = false;
  private readonly outcome: Outcome<Output>;

  constructor(
    /** The run as a value: plain JSON, consistent at every event. */
    readonly state: RunState,
    private readonly run: Run,
    /** Aborts the run (its own controller); an object rather than a closure: one less per live run. */
    private readonly controller: { abort(): void },
    onEvent?: (event: AgentEvent) => void,
  ) {
    this.outcome = new Outcome(state, run, onEvent);
  }

  /**
   * Resolves when the run has stopped; rejects only if a checkpoint or the `context` threw. Read
   * before anyone iterates, it runs the run to its end by itself (events go to `onEvent` only).
   */
  get result(): Promise<RunResult<Output>> {
    if (this.ended) return this.ended;
    const outcome = this.outcome;
    if (!this.iterating) {
      outcome.drain();
      this.loop = runLoop(this.state, this.run, outcome);
      this.ended = this.loop.next().then(() => outcome.final as RunResult<Output>);
    } else if (outcome.final) this.ended = Promise.resolve(outcome.final);
    else if (outcome.failure) this.ended = Promise.reject(outcome.failure.error);
    else this.ended = new Promise((resolve, reject) => outcome.await(resolve, reject));
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
    if (this.outcome.drained) return Promise.resolve(DONE);
    this.loop ??= runLoop(this.state, this.run, this.outcome);
    return this.loop.next();
  }

  /** Leaving early aborts the run; it still ends (with `aborted`) and `result` resolves. */
  async return(): Promise<IteratorResult<AgentEvent, undefined>> {
    this.iterating = true;
    const outcome = this.outcome;
    if (outcome.final)
      outcome.resolve(); // left after its last event: the result is known
    else if (!outcome.failure && !outcome.drained) {
      this.controller.abort();
      // A signal of the run's own has no listener settling its pending tool calls.
      if (this.run.ownSignal) abortCalls(this.run);
      outcome.drain();
      this.loop ??= runLoop(this.state, this.run, outcome);
      // The rest of the run goes to `onEvent` only; a failure reaches `result`.
      await this.loop.next().catch(ignore);
    }
    return DONE;
  }
}

/** The handle's side of the loop: where events go, and how the run ended. */
class Outcome<Output> implements Sink {
  drained = false;
  quiet = false;
  /** The result, once the run has concluded (resolved when its last event goes out). */
  final: RunResult<Output> | undefined = undefined;
  failure: { error: unknown } | undefined = undefined;
  /** `onEvent` threw during this run (reported once). */
  private hookFailed = false;
  private waiting:
    | { resolve: (result: RunResult<Output>) => void; reject: (error: unknown) => void }
    | undefined = undefined;

  constructor(
    private readonly state: RunState,
    private readonly run: Run,
    private readonly onEvent: ((event: AgentEvent) => void) | undefined,
  ) {}

  drain(): void {
    this.drained = true;
    this.quiet = this.onEvent === undefined;
  }

  emit(event: AgentEvent): void {
    if (this.onEvent) {
      try {
        this.onEvent(event);
      } catch (error) {
        this.hookThrew(error, event);
      }
    }
    // `turn_complete` is the last event: the result is known as it goes out.
    if (event.type === "turn_complete") this.resolve();
  }

  /**
   * `onEvent` must not throw; when it does, the run goes on and the first such exception of the
   * run is reported as a process warning (`AgentloopWarning`), secrets redacted.
   */
  private hookThrew(error: unknown, event: AgentEvent): void {
    if (this.hookFailed) return;
    this.hookFailed = true;
    const message = `onEvent threw on the ${event.type} event of run ${event.runId}: ${errorMessage(error)}; the run went on (onEvent must not throw, so this is reported once per run).`;
    process.emitWarning(this.run.redact ? this.run.redact(message) : message, {
      type: "AgentloopWarning",
      code: "AGENTLOOP_ON_EVENT_THREW",
    });
  }

  await(resolve: (result: RunResult<Output>) => void, reject: (error: unknown) => void): void {
    this.waiting = { resolve, reject };
  }

  resolve(): void {
    if (this.final) this.waiting?.resolve(this.final);
  }

  failed(error: unknown): void {
    this.run.trace?.failed(error);
    this.failure = { error };
    this.waiting?.reject(error);
  }

  /** The run's result, once its last checkpoint is stored. */
  ended(s: StoppedState): void {
    this.run.trace?.ended(s);
    const result: RunResult<Output> = {
      runId: s.runId,
      state: s,
      output: this.output(),
      text: s.output,
      ...stopOutcome(s),
      iterations: s.iteration,
      messages: s.messages,
      usage: s.usage,
      steps: s.steps,
    };
    if (s.sessionId !== undefined) result.sessionId = s.sessionId;
    if (s.refusal !== undefined) result.refusal = s.refusal;
    const incomplete = s.steps.at(-1)?.incomplete;
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
