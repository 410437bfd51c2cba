/**
 * Tool calls whose result is a promise, held against their timeout and the run's abort without a
 * timer or an abort listener of their own (a few hundred nanoseconds and two allocations per
 * call): calls with the same timeout expire in the order they started, so one timer per timeout
 * length serves the whole process, and one listener per run settles all of its calls on abort.
 */

/** A pending call in the two lists: its timeout's (by deadline) and its run's. */
export abstract class Waiter {
  /** When it times out (`performance.now()` time). */
  at = 0;
  prevDue: Waiter | undefined = undefined;
  nextDue: Waiter | undefined = undefined;
  prevRun: Waiter | undefined = undefined;
  nextRun: Waiter | undefined = undefined;
  private due: Deadlines | undefined = undefined;
  private run: RunWaiters | undefined = undefined;

  /** The timeout passed: called once, after the waiter has left both lists. */
  protected abstract expire(): void;
  /** The run aborted: called once, after the waiter has left both lists. */
  protected abstract abort(reason: unknown): void;

  /**
   * Waits from `started` for `timeoutMs` (no timeout unless 0 < timeoutMs < 2^31, the longest a
   * Node timer waits) or for the run's abort, whichever comes first; `stop()` ends the wait.
   */
  protected start(started: number, timeoutMs: number, run: RunWaiters): void {
    // Aborted while the tool started: after the reaction of a promise that is already settled.
    if (run.signal.aborted) {
      queueMicrotask(() => this.abort(run.signal.reason));
      return;
    }
    run.add(this);
    this.run = run;
    if (timeoutMs > 0 && timeoutMs < 2 ** 31) {
      this.at = started + timeoutMs;
      this.due = deadlinesOf(timeoutMs);
      this.due.add(this);
    }
  }

  /** Leaves both lists (the call settled, timed out or was aborted). */
  protected stop(): void {
    this.due?.remove(this);
    this.due = undefined;
    this.run?.remove(this);
    this.run = undefined;
  }

  /** @internal */
  timedOut(): void {
    this.stop();
    this.expire();
  }

  /** @internal */
  aborted(reason: unknown): void {
    this.stop();
    this.abort(reason);
  }
}

/**
 * One run's pending calls: one abort listener for all of them, added with the first; none when
 * the run's owner calls `abortAll` after aborting (`needsListener` false).
 */
export class RunWaiters {
  private head: Waiter | undefined = undefined;

  constructor(
    readonly signal: AbortSignal,
    /** Whether the abort listener is still to be added (with the first call). */
    private needsListener: boolean,
  ) {}

  add(waiter: Waiter): void {
    if (this.needsListener) {
      // The run's signal is its own (or a composite made for it), so the listener goes with the run.
      this.needsListener = false;
      this.signal.addEventListener("abort", () => this.abortAll(), { once: true });
    }
    waiter.nextRun = this.head;
    if (this.head) this.head.prevRun = waiter;
    this.head = waiter;
  }

  remove(waiter: Waiter): void {
    if (waiter.prevRun) waiter.prevRun.nextRun = waiter.nextRun;
    else if (this.head === waiter) this.head = waiter.nextRun;
    if (waiter.nextRun) waiter.nextRun.prevRun = waiter.prevRun;
    waiter.prevRun = undefined;
    waiter.nextRun = undefined;
  }

  /** Settles every pending call with the signal's reason (it has fired). */
  abortAll(): void {
    const reason = this.signal.reason;
    while (this.head) this.head.aborted(reason);
  }
}

/** The pending calls of one timeout length, oldest first, and the one timer for the oldest. */
class Deadlines {
  private head: Waiter | undefined = undefined;
  private tail: Waiter | undefined = undefined;
  private timer: NodeJS.Timeout | undefined = undefined;
  private firing = false;

  constructor(private readonly ms: number) {}

  add(waiter: Waiter): void {
    const empty = this.head === undefined;
    waiter.prevDue = this.tail;
    if (this.tail) this.tail.nextDue = waiter;
    else this.head = waiter;
    this.tail = waiter;
    if (this.firing) return;
    // The timer stays while calls come and go; it only holds the process open while one waits.
    if (!this.timer) this.timer = setTimeout(this.fire, this.ms);
    else if (empty) this.timer.ref();
  }

  remove(waiter: Waiter): void {
    if (waiter.prevDue) waiter.prevDue.nextDue = waiter.nextDue;
    else this.head = waiter.nextDue;
    if (waiter.nextDue) waiter.nextDue.prevDue = waiter.prevDue;
    else this.tail = waiter.prevDue;
    waiter.prevDue = undefined;
    waiter.nextDue = undefined;
    if (this.head === undefined && this.timer) this.timer.unref();
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.firing = true;
    const now = performance.now();
    // Node's timers run on the event loop's clock, which may lag `performance.now()` by a little.
    while (this.head && this.head.at <= now + 1) this.head.timedOut();
    this.firing = false;
    if (this.head) this.timer = setTimeout(this.fire, Math.max(1, Math.ceil(this.head.at - now)));
  };
}

const byLength = new Map<number, Deadlines>();

function deadlinesOf(ms: number): Deadlines {
  let deadlines = byLength.get(ms);
  if (!deadlines) {
    deadlines = new Deadlines(ms);
    byLength.set(ms, deadlines);
  }
  return deadlines;
}
