/**
 * The loop's guards against never-ending runs, as small state machines fed at fixed points:
 * after every tool outcome (in call order) and after every reply without a tool call.
 */

/**
 * Counts identical failures in a row: same tool, same arguments, same error message (and, in
 * explicit mode, replies without a tool call). Any successful tool call resets it.
 */
export class CircuitBreaker {
  private signature = "";
  private count = 0;
  private description = "";

  constructor(readonly threshold: number) {}

  /** Records a failure; returns true when it has now repeated `threshold` times in a row. */
  fail(signature: string, description: string): boolean {
    if (signature === this.signature) this.count++;
    else {
      this.signature = signature;
      this.count = 1;
    }
    // One short line, whatever the tool printed: it ends up in stop messages and on stderr.
    const flat = description.replace(/\s+/g, " ").trim();
    this.description = flat.length > 300 ? `${flat.slice(0, 299)}…` : flat;
    return this.count >= this.threshold;
  }

  /** Whether the last failures have reached the threshold. */
  get tripped(): boolean {
    return this.count >= this.threshold;
  }

  succeed(): void {
    this.signature = "";
    this.count = 0;
  }

  /** One line naming the repeated error, for the stop message. */
  get message(): string {
    return `The same error repeated ${this.count} times in a row: ${this.description}`;
  }
}

/** Counts calls of the same tool with identical arguments in a row, successful or not. */
export class RepetitionGuard {
  private signature = "";
  private count = 0;
  private name = "";

  constructor(readonly threshold: number) {}

  record(name: string, args: string): void {
    const signature = `${name}\u0000${args}`;
    if (signature === this.signature) this.count++;
    else {
      this.signature = signature;
      this.count = 1;
      this.name = name;
    }
  }

  /** The warning for the model when the streak has reached the threshold, else undefined. */
  warning(): string | undefined {
    if (this.count < this.threshold) return undefined;
    return (
      `Warning: you have made this exact call (${this.name} with the same arguments) ${this.count} times in a row. ` +
      "Repeating it will not give a different result: use the result you already have, try a different approach, or finish."
    );
  }
}
