/**
 * What a server adds to our count of a request (a chat template wrapped around the messages and
 * the tool schemas, which no tokenizer of ours sees), learned per run from the prompt tokens the
 * server reports, and kept free in the run's next requests.
 */

/** One run's knowledge of its server's overhead (part of its `ContextMemo`). */
export interface Overhead {
  /** Our count of the last request shaped, until a reported count is compared with it; 0 after. */
  counted: number;
  /** Whether `counted` is only an upper bound (the request fit by one): what it shows is then a floor. */
  bounded: boolean;
  /** The tokens the server adds to our count of a request, as last learned; -1 until learned. */
  learned: number;
}

/**
 * The share of the budget a run keeps free until it learned the server's overhead: a margin
 * for the first requests.
 */
export const OVERHEAD_MARGIN = 0.05;

export const newOverhead = (): Overhead => ({ counted: 0, bounded: false, learned: -1 });

/** The tokens to keep free in the next request: the overhead learned, else `margin`. */
export const keptFree = (o: Overhead, margin: number): number => (o.learned < 0 ? margin : o.learned);

/** Notes our count of the request just shaped (`bounded`: an upper bound of it). */
export function noteCount(o: Overhead, tokens: number, bounded: boolean): void {
  o.counted = tokens;
  o.bounded = bounded;
}

/**
 * Compares the provider's count of the last shaped request (`reported`) with ours. Against an
 * exact count the difference is the overhead; against an upper bound (several times the count for
 * the estimate) only a floor, which may raise what is kept free but never lower it.
 */
export function learnOverhead(o: Overhead, reported: number | undefined, margin: number): void {
  if (reported === undefined || !(reported > 0) || o.counted === 0) return;
  const added = reported - o.counted;
  if (!o.bounded) o.learned = Math.max(0, added);
  else if (added > keptFree(o, margin)) o.learned = added;
  o.counted = 0;
}
