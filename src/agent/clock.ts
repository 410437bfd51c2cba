/**
 * A run's clock. `now()` is `performance.now()`, except that a reading the loop `keep`s is handed
 * out once more instead of a fresh one: the loop keeps a reading only when no other code can run
 * before its next `now()` (a run nobody listens to, with no checkpoint, between steps that do not
 * wait), so the time has not moved. Why: a drained run reads the clock three times per iteration
 * (reply taken, calls started, next iteration started) and needs one; the reads are a visible share
 * of the loop's own cost in bench/loop-profile.ts (plain mode, `--only agentloop`, the floor is
 * under 1 µs per iteration).
 */
export class RunClock {
  private kept = -1;

  /** The time now (`performance.now()`); a kept reading is used once. */
  now(): number {
    const kept = this.kept;
    if (kept < 0) return performance.now();
    this.kept = -1;
    return kept;
  }

  /** `time` is still now at the next `now()`: nothing runs in between (else do not call this). */
  keep(time: number): void {
    this.kept = time;
  }

  /** Some code may run before the next `now()`: it reads the clock. */
  forget(): void {
    this.kept = -1;
  }
}
