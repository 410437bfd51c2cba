// CPU profiles for the benchmark's notes: self time by function, from a `node --cpu-prof` file or
// taken in this process around a piece of work (node:inspector).
import { Session } from "node:inspector/promises";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Module loading (type stripping included) and idle time: start-up of the profiled process, not the work measured. */
const STARTUP = /^(\(idle\) |\S+ node:internal\/(bootstrap|modules|deps\/amaro)\/)/;
/** The profiler's own frames (node:inspector's session), never the work measured. */
const PROFILER = /^\S+ node:inspector:/;

/**
 * Self time by function, heaviest first, `top` lines of "share%  function file:line" (paths from
 * the package's dist/ or node_modules/). With `skipStartup`, module loading and idle time are left
 * out and the shares are of the rest. With `byFile`, by file (native work by its name).
 */
export function selfTimes(
  profile: CpuProfile,
  top: number,
  { skipStartup = false, byFile = false } = {},
): string {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)?.callFrame;
    if (!frame) return;
    const where = frame.url.replace(/^file:\/\/.*?\/(dist|node_modules)\//, "$1/");
    const key = byFile
      ? where || frame.functionName
      : `${frame.functionName || "(anonymous)"} ${where}:${frame.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const kept = [...self].filter(([key]) => !PROFILER.test(key) && !(skipStartup && STARTUP.test(key)));
  const total = kept.reduce((sum, [, us]) => sum + us, 0);
  return kept
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([key, us]) => `${((us / total) * 100).toFixed(1).padStart(5)}%  ${key}`)
    .join("\n");
}

/** A CPU profile of this process while `work` runs (sampled every 250 µs). */
export async function profileWhile(work: () => Promise<void>): Promise<CpuProfile> {
  const session = new Session();
  session.connect();
  try {
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 250 });
    await session.post("Profiler.start");
    await work();
    const { profile } = await session.post("Profiler.stop");
    return profile as unknown as CpuProfile;
  } finally {
    session.disconnect();
  }
}

/** The share of the samples (idle left out) spent in functions whose file's URL `where` matches, as "12.3%". */
export function shareIn(profile: CpuProfile, where: RegExp): string {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  let busy = 0;
  let matched = 0;
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)?.callFrame;
    if (!frame || frame.functionName === "(idle)") return;
    const us = profile.timeDeltas[i] ?? 0;
    busy += us;
    if (where.test(frame.url)) matched += us;
  });
  return `${((matched / busy) * 100).toFixed(1)}%`;
}
