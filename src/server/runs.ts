/** One chat request's run, as the tracker sees it. */
export interface TrackedRun {
  /** Aborts when the client disconnects, when `abort()` is called, or on `RunTracker.abortAll()`. */
  readonly signal: AbortSignal;
  /** Whether `RunTracker.abortAll()` (the shutdown deadline) aborted the run, not its client. */
  readonly cut: boolean;
  abort(): void;
  /** Marks the run finished; idempotent. Must be called once the response is complete. */
  end(): void;
}

/** The abort reason of the runs cut at the shutdown deadline. */
const SHUTDOWN = new Error("The server is shutting down.");

/**
 * The runs in flight, so shutdown can wait for them (`idle`) and stop the stragglers
 * (`abortAll`).
 */
export class RunTracker {
  private readonly runs = new Set<AbortController>();
  private waiters: (() => void)[] = [];

  get size(): number {
    return this.runs.size;
  }

  /** Starts tracking a run; `clientSignal` is the request's (aborted when the client goes away). */
  start(clientSignal: AbortSignal): TrackedRun {
    const controller = new AbortController();
    const abort = () => controller.abort();
    if (clientSignal.aborted) abort();
    else clientSignal.addEventListener("abort", abort, { once: true });
    this.runs.add(controller);
    return {
      signal: controller.signal,
      get cut() {
        return controller.signal.reason === SHUTDOWN;
      },
      abort,
      end: () => {
        clientSignal.removeEventListener("abort", abort);
        if (!this.runs.delete(controller) || this.runs.size > 0) return;
        for (const resolve of this.waiters.splice(0)) resolve();
      },
    };
  }

  /** Resolves when no run is in flight. */
  idle(): Promise<void> {
    if (this.runs.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Aborts every run in flight (`cut` becomes true): each ends with `aborted` and its stream closes normally. */
  abortAll(): void {
    for (const controller of this.runs) controller.abort(SHUTDOWN);
  }
}
