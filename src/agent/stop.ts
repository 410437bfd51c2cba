/**
 * The loop's guards against never-ending runs, as small state machines fed at fixed points:
 * after every tool outcome (in call order) and after every reply without a tool call. Their
 * counters live in the run state (`GuardState`), so they survive a pause or a crash; these
 * functions only read and update them (a run holds no guard objects of its own).
 */
import type { GuardState } from "../core/run-state.js";

type Breaker = GuardState["breaker"];
type Repetition = GuardState["repetition"];

/**
 * The circuit breaker counts identical failures in a row: same tool, same arguments, same error
 * message (and, in explicit mode, replies without a tool call). Any successful tool call resets
 * it. Records a failure; returns true when it has now repeated `threshold` times in a row.
 */
export function recordFailure(
  s: Breaker,
  threshold: number,
  signature: string,
  description: string,
): boolean {
  if (signature === s.signature) s.count++;
  else {
    s.signature = signature;
    s.count = 1;
  }
  // One short line, whatever the tool printed: it ends up in stop messages and on stderr.
  const flat = description.replace(/\s+/g, " ").trim();
  s.description = flat.length > 300 ? `${flat.slice(0, 299)}…` : flat;
  return s.count >= threshold;
}

/** A successful tool call: the count of failures in a row starts over. */
export function recordSuccess(s: Breaker): void {
  s.signature = "";
  s.count = 0;
}

/** Whether the last failures have reached the threshold. */
export function tripped(s: Breaker, threshold: number): boolean {
  return s.count >= threshold;
}

/** One line naming the repeated error, for the stop message. */
export function breakerMessage(s: Breaker): string {
  return `The same error repeated ${s.count} times in a row: ${s.description}`;
}

/**
 * The repetition guard counts calls of the same tool with identical arguments in a row,
 * successful or not: the one place calls are compared. `last` is the arguments of the previous
 * call in this process when known, compared as they are (often the very same string: one
 * pointer compare); else the call is compared with the stored signature `name\0args` piece by
 * piece, building no string. bench/loop-profile.ts (streaming, `--cpu-prof`) shows this
 * function at twice its share when it always reads the signature.
 */
export function recordCall(s: Repetition, name: string, args: string, last: string | undefined): void {
  const same =
    s.name === name &&
    (last !== undefined
      ? last === args
      : s.signature.length === name.length + 1 + args.length &&
        s.signature.endsWith(args) &&
        s.signature.startsWith(name) &&
        s.signature.charCodeAt(name.length) === 0);
  if (same) s.count++;
  else {
    s.signature = `${name}\u0000${args}`;
    s.count = 1;
    s.name = name;
  }
}

/** The warning for the model when the streak has reached the threshold, else undefined. */
export function repetitionWarning(s: Repetition, threshold: number): string | undefined {
  const { count, name } = s;
  if (count < threshold) return undefined;
  return (
    `Warning: you have made this exact call (${name} with the same arguments) ${count} times in a row. ` +
    "Repeating it will not give a different result: use the result you already have, try a different approach, or finish."
  );
}
