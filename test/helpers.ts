import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/**
 * The package's bin, which runs the CLI bundle (dist/cli-bundle/, built by scripts/bundle-cli.mjs):
 * the suite tests what users run. dist/cli/main.js, the same CLI unbundled, works the same.
 */
export const CLI = fileURLToPath(new URL("../dist/cli/bin.js", import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built `agentloop` binary (the bundle, through the bin) with a clean environment plus `env`. */
export function runCli(
  args: string[],
  options: {
    env?: Record<string, string>;
    cwd?: string;
    input?: string;
    onSpawn?: (kill: (signal: NodeJS.Signals) => void) => void;
  } = {},
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: options.cwd ?? process.cwd(),
      env: { PATH: process.env.PATH ?? "", ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.input ?? "");
    options.onSpawn?.((signal) => child.kill(signal));
  });
}

/** An `onSpawn` for `runCli` that presses Ctrl+C (SIGINT) once the model server has received a request. */
export function interruptOnFirstRequest(server: { requests: readonly unknown[] }) {
  return (kill: (signal: NodeJS.Signals) => void) => {
    const poll = setInterval(() => {
      if (server.requests.length > 0) {
        clearInterval(poll);
        kill("SIGINT");
      }
    }, 10);
  };
}

/** Resolves once `check` returns a value other than undefined (checked every 10 ms). */
export function until<T>(check: () => T | undefined): Promise<T> {
  return new Promise((resolve) => {
    const tick = () => {
      const value = check();
      if (value === undefined) setTimeout(tick, 10);
      else resolve(value);
    };
    tick();
  });
}
