// What each part of the benchmark suite hands to bench/run.ts, which writes BENCHMARKS.md.

/** One row of BENCHMARKS.md's "Targets" table: the target as the issue states it, and what was measured. */
export interface TargetResult {
  target: string;
  /** The measured figures, e.g. "2.1x [1.8-2.6] at N = 1,000". */
  result: string;
  met: boolean;
  /** Names the profile and the closing note bench/missed.ts adds when the target is missed. */
  key?: string;
}

/** A section of BENCHMARKS.md: markdown starting with a `### ` heading, and the targets it checks. */
export interface Section {
  markdown: string;
  targets: TargetResult[];
}

/** The median of a sample. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Median and range of a sample, formatted "median [min-max]" with `unit` after each figure. */
export function medianRange(values: readonly number[], digits = 2, unit = ""): string {
  if (values.length === 0) return "-";
  const f = (v: number) => `${v.toFixed(digits)}${unit}`;
  return `${f(median(values))} [${f(Math.min(...values))}-${f(Math.max(...values))}]`;
}

/** bench/http-perf.ts's samples of one variant, µs per request; ratios and added µs against the floor run beside it. */
export interface HttpSamples {
  wall: number[];
  cpu: number[];
  wallRatio: number[];
  cpuRatio: number[];
  wallAdded: number[];
  cpuAdded: number[];
}
