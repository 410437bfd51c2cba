// CLI start-up: `agentloop --help` and `--version` against a bare `node -e 0`, each the median
// of N runs in fresh processes. Commands load their modules on demand, so these should cost a
// plain Node start plus a few tens of milliseconds.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const BIN = fileURLToPath(new URL("../dist/cli/bin.js", import.meta.url));

function medianMs(args: string[], runs: number): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    spawnSync(process.execPath, args, { stdio: "ignore" });
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] ?? Number.NaN;
}

export function cliStart(runs: number): string {
  const bare = medianMs(["-e", "0"], runs);
  const rows = [
    ["`node -e 0`", bare],
    ["`agentloop --help`", medianMs([BIN, "--help"], runs)],
    ["`agentloop --version`", medianMs([BIN, "--version"], runs)],
  ] as const;
  return `### CLI start-up (bench/cli-start.ts; median of ${runs} runs, ms)\n\n| command | ms | over bare Node |\n| --- | ---: | ---: |\n${rows
    .map(
      ([name, ms]) =>
        `| ${name} | ${ms.toFixed(0)} | ${name.includes("node -e") ? "-" : `+${(ms - bare).toFixed(0)}`} |`,
    )
    .join("\n")}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(cliStart(Number(process.argv[2] ?? 20)));
